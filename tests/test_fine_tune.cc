// Keras's transfer-learning guide as examples/fine_tune.cc runs it (the steps are in examples/fine_tune.h): a base
// pretrained on Fashion-MNIST's classes 0-4 and saved as .keras, loaded, frozen, a new head trained on 3 images of
// each of classes 5-9, the top block unfrozen and fine-tuned at 1e-4, and the same model trained from scratch on
// the same images (the example's settings: about 35 s on 2 cores). And a headless base as Keras writes one (a
// MobileNetV2 without its top, tests/reference/fine_tune_base.py) predicting as Keras does.
#include <systolic/systolic.h>

#include <nlohmann/json.hpp>
#include <set>

#include "../examples/fine_tune.h"
#include "test_util.h"

using namespace systolic;
using systolic::testing::bit_identical;
using systolic::testing::fashion_mnist_installed;
using systolic::testing::kFashionMnistDir;
using systolic::testing::max_abs_diff;
using systolic::testing::read_floats;
using systolic::testing::read_text;
using systolic::testing::source_dir;
using systolic::testing::TempDir;

namespace {

// Every weight of every layer of the base (trainable or not: BN moving statistics included), by name.
std::map<std::string, Tensor> weights_of(const Model& base) {
  std::map<std::string, Tensor> out;
  for (auto& l : base.layers())
    for (auto& w : l->weights()) out[l->name() + "/" + w.name] = w.value.clone();
  return out;
}

}  // namespace

TEST(FineTune, BaseFromKeras3FilePredictsAsKeras) {
  // A pretrained base as a user's arrives: a Keras 3 .h5 file of MobileNetV2(alpha 0.35, include_top=False),
  // cut after block_16_project_BN, with Keras's predictions for four inputs.
  std::string fixtures = source_dir() + "/tests/fixtures/fine_tune";
  auto manifest = nlohmann::json::parse(read_text(fixtures + "/manifest.json"));
  auto base = load_model(fixtures + "/base.h5", {.compile = false});
  EXPECT_EQ(static_cast<std::int64_t>(base.layers().size()), manifest["layers"].get<std::int64_t>());
  EXPECT_EQ(base.count_params(), manifest["params"].get<std::int64_t>());
  Tensor x = read_floats(fixtures + "/inputs.bin", {4, 32, 32, 3});
  Tensor want = read_floats(fixtures + "/predictions.bin", {4, 1, 1, 112});
  // The fixture's predictions are for pixels / 127.5 - 1, MobileNetV2's preprocessing.
  Tensor scaled(x.shape());
  for (std::int64_t i = 0; i < x.numel(); ++i) scaled.data<float>()[i] = x.data<float>()[i] / 127.5f - 1.0f;
  EXPECT_LT(max_abs_diff(base.predict(scaled), want), 1e-4);
}

TEST(FineTune, SelectClassesRelabelsAndDrawsPerClassRepeatably) {
  datasets::Split split{Tensor({20, 28, 28}, DType::uint8), Tensor({20}, DType::uint8)};
  for (int i = 0; i < 20; ++i) {
    split.y.data<std::uint8_t>()[i] = static_cast<std::uint8_t>(i % 5 + 3);  // labels 3 4 5 6 7 3 4 5 6 7 ...
    std::fill_n(split.x.data<std::uint8_t>() + i * 784, 784, static_cast<std::uint8_t>(i));
  }
  auto all = fine_tune::select_classes(split, {7, 5});
  ASSERT_EQ(all.x.shape(), Shape({8, 28, 28, 1}));
  EXPECT_EQ(all.y.to_doubles(),
            (std::vector<double>{1, 0, 1, 0, 1, 0, 1, 0}));  // rows 2 (5), 4 (7), 7 (5), ...
  EXPECT_EQ(all.x.data<std::uint8_t>()[784 + 5], 4);
  EXPECT_EQ(all.x.data<std::uint8_t>()[3 * 784], 9);

  auto a = fine_tune::select_classes(split, {3, 4, 5}, 2, 11),
       b = fine_tune::select_classes(split, {3, 4, 5}, 2, 11);
  ASSERT_EQ(a.y.numel(), 6);
  EXPECT_TRUE(bit_identical(a.x, b.x));
  std::set<int> rows;
  std::vector<int> per_class(3, 0);
  for (int k = 0; k < 6; ++k) {
    int row = a.x.data<std::uint8_t>()[k * 784];
    rows.insert(row);
    EXPECT_EQ(a.y.data<std::int32_t>()[k], row % 5) << row;  // label 3 + j -> j
    ++per_class[static_cast<std::size_t>(row % 5)];
  }
  EXPECT_EQ(rows.size(), 6u);  // drawn without replacement
  EXPECT_EQ(per_class, (std::vector<int>{2, 2, 2}));
  bool differs = false;  // another seed draws other rows (4 choose 2 per class: some seed among 5 differs)
  for (std::uint64_t seed = 12; seed < 17; ++seed)
    differs = differs || !bit_identical(a.x, fine_tune::select_classes(split, {3, 4, 5}, 2, seed).x);
  EXPECT_TRUE(differs);
}

TEST(FineTune, PretrainedBaseBeatsTrainingFromScratchOnFewImages) {
  if (!fashion_mnist_installed())
    GTEST_SKIP() << "Debian's dataset-fashion-mnist is not installed (" << kFashionMnistDir << ")";
  TempDir dir;
  fine_tune::Settings s;  // the example's
  s.base_path = (dir.path() / "base.keras").string();
  auto data = datasets::fashion_mnist::load_data(kFashionMnistDir);
  auto m = fine_tune::run(data, s);
  auto& f = m.figures;

  // The file holds the pretrained base: Keras's zip, loaded back it predicts as the base did.
  ASSERT_TRUE(is_keras_zip(s.base_path));
  auto file = load_model(s.base_path, {.compile = false});
  Tensor x = data.test.x.slice(0, 64).reshape({64, 28, 28, 1});
  EXPECT_LT(max_abs_diff(file.predict(x), m.base.predict(x)), 1e-6);

  // Freezing as Keras does it: the layers below the unfrozen top block are as the file has them after both
  // phases; the top block's kernels and BN gamma moved, but its BN layers, run with training=false, kept their
  // moving statistics.
  auto was = weights_of(file), now = weights_of(m.loaded);
  ASSERT_EQ(was.size(), now.size());
  for (const char* name : {"conv1/kernel", "conv2/bias", "bn3/moving_mean", "bn4/moving_variance"})
    EXPECT_TRUE(bit_identical(now.at(name), was.at(name))) << name;
  for (const char* name : {"conv3/kernel", "conv4/kernel", "bn4/gamma"})
    EXPECT_FALSE(bit_identical(now.at(name), was.at(name))) << name;
  EXPECT_FALSE(m.loaded.get_layer("conv2")->trainable());
  EXPECT_TRUE(m.loaded.get_layer("conv3")->trainable());

  // What the example claims, with a margin measured over seeds (examples/fine_tune --seed; README, "Transfer
  // learning"): with 3 images of each class, the fine-tuned model is clearly above the untrained head and above
  // the same model trained from scratch, and the latter is not short of training: it fits its images.
  EXPECT_GT(f.pretrained, 0.85);
  EXPECT_GT(f.fine_tuned - f.untrained_head, 0.4);
  EXPECT_GT(f.fine_tuned - f.from_scratch, 0.02);
  EXPECT_GT(f.from_scratch_train, 0.99);
  EXPECT_GT(f.fine_tuned_train, 0.99);
}
