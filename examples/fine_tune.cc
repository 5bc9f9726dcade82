// Keras's transfer-learning guide (keras.io/guides/transfer_learning) on real data: a MobileNetV2 base without
// its top, loaded from a Keras .h5 file, frozen; a new head trained on 160 CIFAR-10 images and evaluated on 40;
// then the top of the base unfrozen and the whole model trained again at a learning rate of 1e-5; saved as .h5.
//
//   fine_tune [images folder] [base.h5] [output.h5] [epochs]
//
// images folder: N.png files with a labels.csv ("file,label", CIFAR-10 class names), default
// ../shared/data/cifar10-sample beside the checkout; when it is absent the example says so and exits 0.
// base.h5: default tests/fixtures/fine_tune/base.h5 (tests/reference/fine_tune_base.py: an untrained MobileNetV2,
// alpha 0.35, 32x32, written by Keras 3; no ImageNet weights, so the numbers show the mechanics, not the gains of
// a pretrained base). output.h5: default fine_tune.h5. epochs: per phase, default 5.
#include "fine_tune.h"

#include <cstdio>
#include <filesystem>
#include <string>

namespace sy = systolic;

#ifndef SYSTOLIC_SOURCE_DIR
#define SYSTOLIC_SOURCE_DIR "."
#endif

namespace {

void report(const char* phase, const sy::History& h, const std::vector<double>& test) {
  for (std::size_t e = 0; e < h.epoch.size(); ++e)
    std::printf("  %s epoch %zu: loss %.4f accuracy %.4f\n", phase, e + 1, h["loss"][e],
                h["sparse_categorical_accuracy"][e]);
  std::printf("%s: test loss %.4f, test accuracy %.4f\n", phase, test[0], test[1]);
}

}  // namespace

int main(int argc, char** argv) try {
  namespace fs = std::filesystem;
  std::string source = SYSTOLIC_SOURCE_DIR;
  std::string folder = argc > 1 ? argv[1] : "";
  if (folder.empty()) {
    const char* shared = std::getenv("SYSTOLIC_SHARED_DATA");
    folder = shared ? std::string(shared) + "/cifar10-sample"
                    : (fs::path(source).parent_path() / "shared" / "data" / "cifar10-sample").string();
  }
  std::string base_path = argc > 2 ? argv[2] : source + "/tests/fixtures/fine_tune/base.h5";
  std::string out_path = argc > 3 ? argv[3] : "fine_tune.h5";
  int epochs = argc > 4 ? std::stoi(argv[4]) : 5;
  if (!fs::exists(fs::path(folder) / "labels.csv")) {
    std::printf(
        "fine_tune: no images at %s (labels.csv and N.png files); pass the folder as the first "
        "argument. Nothing to do.\n",
        folder.c_str());
    return 0;
  }

  sy::set_random_seed(1337);
  auto data = fine_tune::load_labelled_folder(folder);
  std::int64_t n = data.x.shape()[0], n_train = n * 4 / 5;
  auto x_train = data.x.slice(0, n_train), y_train = data.y.slice(0, n_train);
  auto x_test = data.x.slice(n_train, n), y_test = data.y.slice(n_train, n);
  std::printf("%lld training images, %lld test images from %s\n", static_cast<long long>(n_train),
              static_cast<long long>(n - n_train), folder.c_str());

  // 1. The base, without its top, frozen.
  auto base = sy::load_model(base_path, {.compile = false});
  base.set_trainable(false);
  // 2. A new model on top of it (the base runs in inference mode: training=false).
  auto model = fine_tune::new_head_on(base);
  fine_tune::compile(model, 1e-3);
  model.summary();
  auto before = model.evaluate(x_test, y_test, {.verbose = 0});
  std::printf("untrained head: test loss %.4f, test accuracy %.4f\n", before[0], before[1]);
  // 3. Train the head.
  auto h1 = model.fit(x_train, y_train, {.batch_size = 32, .epochs = epochs, .verbose = 0});
  report("frozen base", h1, model.evaluate(x_test, y_test, {.verbose = 0}));
  // 4. Fine-tune: unfreeze the top of the base, recompile with a low learning rate, train again.
  fine_tune::unfreeze_top(base, 12);
  fine_tune::compile(model, 1e-5);
  std::printf("fine-tuning %lld of %lld parameters\n",
              static_cast<long long>(model.trainable_parameters().numel()),
              static_cast<long long>(model.count_params()));
  auto h2 = model.fit(x_train, y_train, {.batch_size = 32, .epochs = epochs, .verbose = 0});
  report("fine-tuned", h2, model.evaluate(x_test, y_test, {.verbose = 0}));
  model.save(out_path);
  std::printf("saved %s\n", out_path.c_str());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "fine_tune: error: %s\n", e.what());
  return 1;
}
