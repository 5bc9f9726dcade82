// fit's on-device batch path (the one GPUs use: data set copied to the device once, batches gathered from a
// device index tensor, step graph where supported) run with CPU ops, against the threaded host pipeline: the
// same weights, bit for bit, so the GPU path's bookkeeping (order, partial last batch, step counter, dropout
// masks) is right.
#include <systolic/systolic.h>

#include "test_util.h"

using namespace systolic;

namespace {

Model small_cnn() {
  auto in = layers::Input({8, 8, 3});
  auto x = layers::BatchNormalization()(in);
  x = layers::Conv2D(6, {3, 3}, {.padding = "same", .activation = "relu"})(x);
  x = layers::MaxPooling2D({2, 2})(x);
  x = layers::Dropout(0.25)(x);
  x = layers::Flatten()(x);
  x = layers::Dense(16, {.activation = "relu"})(x);
  x = layers::Dropout(0.5)(x);
  auto out = layers::Dense(5, {.activation = "softmax"})(x);
  Model m(in, out);
  m.compile(optimizers::Adam(0.01), "sparse_categorical_crossentropy", {"sparse_categorical_accuracy"});
  return m;
}

struct Data {
  Tensor x, y;
};

Data random_images(std::int64_t n, std::uint64_t seed) {
  Generator g(seed);
  Data d{Tensor({n, 8, 8, 3}, DType::uint8), Tensor({n}, DType::uint8)};
  for (std::int64_t i = 0; i < d.x.numel(); ++i)
    d.x.data<std::uint8_t>()[i] = std::uint8_t(g.next_u32() & 255);
  for (std::int64_t i = 0; i < n; ++i) d.y.data<std::uint8_t>()[i] = std::uint8_t(g.next_u32() % 5);
  return d;
}

struct TrainingRun {
  History history;
  std::vector<double> weights;
  std::vector<double> scores;
  std::string mode;
};

TrainingRun train(FitOptions::Batches batches, const Augmentation& augmentation = {}) {
  set_random_seed(7);
  clear_session();
  Model m = small_cnn();
  Data d = random_images(200, 3);  // 200 = 6 batches of 32 + a last batch of 8
  FitOptions o{.batch_size = 32, .epochs = 3, .verbose = 0, .validation_split = 0.1};
  o.batches = batches;
  o.augmentation = augmentation;
  TrainingRun r;
  r.history = m.fit(d.x, d.y, o);
  r.weights = m.trainable_parameters().to_doubles();
  r.scores = m.evaluate(d.x, d.y, {.batch_size = 64, .verbose = 0});
  r.mode = m.step_mode();
  return r;
}

}  // namespace

TEST(DeviceBatches, SameWeightsAsTheHostPipeline) {
  TrainingRun host = train(FitOptions::Batches::host_pipeline);
  TrainingRun device = train(FitOptions::Batches::on_device);
  EXPECT_EQ(host.mode, "host");
  ASSERT_EQ(host.weights.size(), device.weights.size());
  EXPECT_EQ(host.weights, device.weights);
  for (auto& k : host.history.keys) EXPECT_EQ(host.history[k], device.history[k]) << k;
  EXPECT_EQ(host.scores, device.scores);
  // It trained: the weights moved and a different seed gives different weights.
  EXPECT_NE(host.history["loss"][0], host.history["loss"][2]);
}

TEST(DeviceBatches, SameWeightsAsTheHostPipelineWithAugmentation) {
  // Shifts (bilinear, fill nearest) and flips: the device path augments gathered batches with the augment_images
  // op, the pipeline each image on its threads; both draw sample k's numbers from Philox at (epoch seed, k).
  Augmentation a{.width_shift_range = 0.2, .height_shift_range = 2.0, .horizontal_flip = true};
  TrainingRun host = train(FitOptions::Batches::host_pipeline, a);
  TrainingRun device = train(FitOptions::Batches::on_device, a);
  ASSERT_EQ(host.weights.size(), device.weights.size());
  EXPECT_EQ(host.weights, device.weights);
  EXPECT_EQ(host.history["loss"], device.history["loss"]);
  TrainingRun plain = train(FitOptions::Batches::on_device);
  EXPECT_NE(plain.weights, device.weights);  // the augmentation changed the batches
}

TEST(DeviceBatches, ModelToAnAbsentDeviceIsAClearError) {
  clear_session();
  Model m = small_cnn();
  EXPECT_EQ(m.device(), Device::cpu());
  m.to(Device::cpu());  // a no-op
  if (device_available(Device::cuda(0)))
    GTEST_SKIP() << "this machine has a GPU: the error path cannot be shown";
  std::string e = systolic::testing::error_of([&] { m.to(Device::cuda(0)); });
  EXPECT_NE(e.find("cuda:0 is not available"), std::string::npos) << e;
}

TEST(ToAccelerator, CopiesTheModelWhichThenTrainsIndependently) {
  set_random_seed(11);
  clear_session();
  Model cpu = small_cnn();
  Data d = random_images(64, 5);
  cpu.fit(d.x, d.y, {.batch_size = 32, .epochs = 1, .verbose = 0});  // optimizer state to copy
  auto before = cpu.trainable_parameters().to_doubles();
  Model accel = to_accelerator(cpu, distribute::OneDeviceStrategy(Device::cpu()));
  EXPECT_EQ(accel.device(), Device::cpu());
  EXPECT_EQ(accel.count_params(), cpu.count_params());
  EXPECT_EQ(accel.predict(d.x).to_doubles(), cpu.predict(d.x).to_doubles());
  EXPECT_EQ(accel.optimizer().iterations(), cpu.optimizer().iterations());
  EXPECT_EQ(accel.optimizer().slot("m").to_doubles(), cpu.optimizer().slot("m").to_doubles());
  EXPECT_FALSE(accel.optimizer().slot("m").shares_storage_with(cpu.optimizer().slot("m")));
  accel.fit(d.x, d.y, {.batch_size = 32, .epochs = 1, .verbose = 0});
  EXPECT_EQ(cpu.trainable_parameters().to_doubles(), before);    // the CPU model is untouched
  EXPECT_NE(accel.trainable_parameters().to_doubles(), before);  // the copy trained
  // Two replicas (issue 6 lifted the one-replica limit): each starts as a copy of the CPU model.
  Model mirrored = to_accelerator(cpu, distribute::MirroredStrategy::cpu(2));
  // Within float rounding: each replica runs half the batch on its own threads, and oneDNN's blocking
  // depends on the batch and the thread count.
  EXPECT_LT(systolic::testing::normalised_max_error(mirrored.predict(d.x), cpu.predict(d.x)), 1e-6);
}
