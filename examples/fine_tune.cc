// Keras's transfer-learning guide (keras.io/guides/transfer_learning) on data that ships offline (Fashion-MNIST):
// a CNN pretrained on classes 0-4 and its base saved as a .keras file; the base loaded, frozen, and a new head
// trained on 3 images of each of classes 5-9; the top block of the base unfrozen and fine-tuned at a low learning
// rate; and, to compare, the same architecture trained from scratch on the same 15 images. The steps are in
// fine_tune.h (tests/test_fine_tune.cc runs them too); README, "Transfer learning", shows a run.
//
//   fine_tune [--base fine_tune_base.keras] [--per-class 5] [--seed 1337] [--data DIR]
//
// --base: where step 1 saves the pretrained base (the current folder by default); --per-class: task B's training
// images of each class; --data: a folder with Fashion-MNIST's four IDX .gz files (default: systolic's cache, else
// Debian's dataset-fashion-mnist in /usr/share/datasets/fashion-mnist, else Keras's download address).
#include "fine_tune.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

namespace sy = systolic;

int main(int argc, char** argv) try {
  fine_tune::Settings s;
  std::string data_dir;
  CLI::App app{"Keras's transfer-learning guide on Fashion-MNIST: pretrain, freeze, new head, fine-tune"};
  app.add_option("--base", s.base_path, "where the pretrained base is saved (.keras)")->capture_default_str();
  app.add_option("--per-class", s.per_class, "task B training images of each class")
      ->capture_default_str()
      ->check(CLI::Range(1, 6000));
  app.add_option("--seed", s.seed, "sy::set_random_seed, and the draw of the samples")->capture_default_str();
  app.add_option("--data", data_dir, "folder with Fashion-MNIST's IDX .gz files");
  CLI11_PARSE(app, argc, argv);

  auto data = sy::datasets::fashion_mnist::load_data(data_dir);
  s.log = stdout;
  auto f = fine_tune::run(data, s).figures;
  std::printf(
      "Task B test accuracy: untrained head %.4f, frozen base %.4f, fine-tuned %.4f, from scratch %.4f\n"
      "Fine-tuned minus from scratch: %+.4f\n",
      f.untrained_head, f.frozen_base, f.fine_tuned, f.from_scratch, f.fine_tuned - f.from_scratch);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "fine_tune: error: %s\n", e.what());
  return 1;
}
