// Keras's transfer-learning workflow (examples/fine_tune.cc) on the CIFAR-10 sample, quickly: a MobileNetV2 base
// written by Keras 3 (tests/reference/fine_tune_base.py, tests/fixtures/fine_tune) loaded without its top and
// frozen, a new head trained, the top of the base unfrozen and trained at 1e-5, the model saved and reloaded.
#include <systolic/systolic.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../examples/fine_tune.h"
#include "io/hdf5.h"
#include "test_util.h"

using namespace systolic;
using systolic::testing::bit_identical;
using systolic::testing::max_abs_diff;
using systolic::testing::read_floats;
using systolic::testing::read_text;
using systolic::testing::shared_data_dir;
using systolic::testing::source_dir;
using systolic::testing::TempDir;

namespace {

std::string fixtures() {
  return source_dir() + "/tests/fixtures/fine_tune";
}

// Every weight of every layer (trainable or not: BN moving statistics included), as copies, with their names.
std::vector<std::pair<std::string, Tensor>> snapshot(const std::vector<LayerRef>& layers) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (auto& l : layers)
    for (auto& w : l->weights()) out.emplace_back(l->name() + "/" + w.name, w.value.clone());
  return out;
}

std::string sample_folder() {
  std::string data = shared_data_dir();
  return data.empty() ? "" : data + "/cifar10-sample";
}

}  // namespace

TEST(FineTune, BaseFromKeras3FilePredictsAsKeras) {
  auto manifest = nlohmann::json::parse(read_text(fixtures() + "/manifest.json"));
  auto base = load_model(fixtures() + "/base.h5", {.compile = false});
  EXPECT_EQ(static_cast<std::int64_t>(base.layers().size()), manifest["layers"].get<std::int64_t>());
  EXPECT_EQ(base.count_params(), manifest["params"].get<std::int64_t>());
  Tensor x = read_floats(fixtures() + "/inputs.bin", {4, 32, 32, 3});
  Tensor want = read_floats(fixtures() + "/predictions.bin", {4, 1, 1, 112});
  // The fixture's predictions are for pixels / 127.5 - 1, what the example's Rescaling layer feeds the base.
  auto xv = x.data<float>();
  Tensor scaled(x.shape());
  for (std::int64_t i = 0; i < x.numel(); ++i) scaled.data<float>()[i] = xv[i] / 127.5f - 1.0f;
  EXPECT_LT(max_abs_diff(base.predict(scaled), want), 1e-4);
}

TEST(FineTune, FrozenBaseThenFineTunedTopOnTheCifarSample) {
  std::string folder = sample_folder();
  if (folder.empty()) GTEST_SKIP() << "../shared/data (cifar10-sample) is absent";
  set_random_seed(1337);
  auto data = fine_tune::load_labelled_folder(folder);
  ASSERT_EQ(data.x.shape(), Shape({200, 32, 32, 3}));
  auto x_train = data.x.slice(0, 160), y_train = data.y.slice(0, 160);
  auto x_test = data.x.slice(160, 200), y_test = data.y.slice(160, 200);

  auto base = load_model(fixtures() + "/base.h5", {.compile = false});
  auto loaded = snapshot(base.layers());
  base.set_trainable(false);
  auto model = fine_tune::new_head_on(base);
  fine_tune::compile(model, 1e-3);
  EXPECT_EQ(model.trainable_parameters().numel(), model.get_layer("logits")->count_params());

  // Phase 1: the head learns, the base (BN moving statistics included) stays bit-identical.
  auto before = model.evaluate(x_train, y_train, {.verbose = 0});
  model.fit(x_train, y_train, {.batch_size = 32, .epochs = 2, .verbose = 0});
  auto after = model.evaluate(x_train, y_train, {.verbose = 0});
  EXPECT_LT(after[0], before[0]) << "training loss of the head";
  auto frozen = snapshot(base.layers());
  ASSERT_EQ(frozen.size(), loaded.size());
  int moving = 0;
  for (std::size_t i = 0; i < frozen.size(); ++i) {
    EXPECT_TRUE(bit_identical(frozen[i].second, loaded[i].second)) << frozen[i].first;
    moving += frozen[i].first.find("moving_") != std::string::npos;
  }
  EXPECT_GT(moving, 0);

  // Phase 2: the top 12 layers of the base train at 1e-5; the rest stay as loaded; BN stays in inference mode
  // (the base is called with training=false), so its moving statistics do not move.
  fine_tune::unfreeze_top(base, 12);
  fine_tune::compile(model, 1e-5);
  auto layers = base.layers();
  std::vector<LayerRef> bottom(layers.begin(), layers.end() - 12), top(layers.end() - 12, layers.end());
  std::int64_t top_trainable = 0;
  for (auto& l : top) top_trainable += l->count_trainable_params();
  EXPECT_GT(top_trainable, 0);
  EXPECT_EQ(model.trainable_parameters().numel(), top_trainable + model.get_layer("logits")->count_params());
  auto top_before = snapshot(top);
  model.fit(x_train, y_train, {.batch_size = 32, .epochs = 1, .verbose = 0});
  auto bottom_now = snapshot(bottom);
  for (std::size_t i = 0; i < bottom_now.size(); ++i)
    EXPECT_TRUE(bit_identical(bottom_now[i].second, loaded[i].second)) << bottom_now[i].first;
  auto top_now = snapshot(top);
  int changed = 0;
  for (std::size_t i = 0; i < top_now.size(); ++i) {
    bool same = bit_identical(top_now[i].second, top_before[i].second);
    if (top_now[i].first.find("moving_") != std::string::npos)
      EXPECT_TRUE(same) << top_now[i].first;
    else
      changed += !same;
  }
  EXPECT_GT(changed, 0);

  // The saved model reloads in systolic and predicts the same.
  TempDir dir;
  auto path = (dir.path() / "fine_tuned.h5").string();
  model.save(path);
  // Keras's legacy order for the nested base (trainable_weights + non_trainable_weights): the unfrozen top's
  // trainable weights first, then the moving statistics and the frozen layers' weights (Keras 3 loads by order;
  // tests/reference/fine_tune_check.py checks the file with Keras itself).
  {
    auto names =
        hdf5::read_file(path).group("model_weights/mobilenetv2_base").string_list_attribute("weight_names");
    std::vector<std::string> want_first;
    for (auto& l : top)
      for (auto& w : l->weights())
        if (w.trainable) want_first.push_back(l->name() + "/" + w.name + ":0");
    ASSERT_GE(names.size(), want_first.size());
    EXPECT_EQ(std::vector<std::string>(names.begin(),
                                       names.begin() + static_cast<std::ptrdiff_t>(want_first.size())),
              want_first);
    EXPECT_EQ(names.back(), layers.back()->name() + "/moving_variance:0");
  }
  auto back = load_model(path);
  EXPECT_LT(max_abs_diff(back.predict(x_test), model.predict(x_test)), 1e-6);
  EXPECT_NEAR(back.evaluate(x_test, y_test, {.verbose = 0})[0],
              model.evaluate(x_test, y_test, {.verbose = 0})[0], 1e-6);
}

TEST(FineTune, ExampleLoaderNamesTheMissingFolder) {
  TempDir dir;
  std::string msg =
      systolic::testing::error_of([&] { fine_tune::load_labelled_folder(dir.path().string()); });
  EXPECT_NE(msg.find("labels.csv"), std::string::npos) << msg;
}
