// The XLA backend end to end on the CPU plugin (xla:cpu through PJRT; label cpu, skips visibly without the
// plugin, which scripts/setup fetches): fit's step traced into one XLA program, compiled once and run for every full
// batch, gives the CPU backend's weights and losses; the last, partial batch of an epoch runs op by op.
#include <gtest/gtest.h>
#include <systolic/systolic.h>

#include <cmath>
#include <cstdio>

#include "core/xla/trace.h"
#include "model/model_state.h"
#include "small_model.h"
#include "test_util.h"
#include "xla_test_util.h"

using namespace systolic;
using systolic::testing::xla_cpu;

namespace {

struct Data {
  Tensor x, y;
};

// n samples of small_model's input, with integer labels of its 4 classes.
Data small_data(std::int64_t n) {
  Data d{systolic::testing::random_tensor({n, 6, 6, 2}, 11), Tensor({n}, DType::int32)};
  auto* y = d.y.data<std::int32_t>();
  for (std::int64_t i = 0; i < n; ++i) y[i] = static_cast<std::int32_t>((i * 7 + 3) % 4);
  return d;
}

double largest_difference(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

}  // namespace

TEST(XlaTraining, SgdStepsOfASmallModelMatchTheCpu) {
  SYSTOLIC_REQUIRE_XLA();
  Data d = small_data(28);  // 3 full batches of 8 and a last one of 4, per epoch
  auto train = [&](Device device, History* history) {
    clear_session();
    Model cpu_model = systolic::testing::small_model(1);
    cpu_model.compile(optimizers::SGD(0.1, 0.9), "sparse_categorical_crossentropy", {"accuracy"});
    Model m = to_accelerator(cpu_model, distribute::OneDeviceStrategy(device));
    FitOptions o{.batch_size = 8, .epochs = 2, .verbose = 0, .shuffle = false};
    *history = m.fit(d.x, d.y, o);
    EXPECT_EQ(m.optimizer().iterations(), 8);
    if (device.is_xla()) {
      EXPECT_EQ(m.step_mode(), "graph") << m.step_mode_reason();
    }
    return m.get_weights();
  };
  History on_cpu, on_xla;
  auto before = xla::compile_stats();
  auto w_cpu = train(Device::cpu(), &on_cpu);
  auto w_xla = train(xla_cpu(), &on_xla);
  auto after = xla::compile_stats();
  std::printf("XLA programs compiled: %lld in %.2f s (%lld from the cache)\n",
              static_cast<long long>(after.compiles - before.compiles), after.seconds - before.seconds,
              static_cast<long long>(after.hits - before.hits));
  ASSERT_EQ(w_cpu.size(), w_xla.size());
  for (std::size_t i = 0; i < w_cpu.size(); ++i) {
    double worst = largest_difference(w_cpu[i].to_doubles(), w_xla[i].to(Device::cpu()).to_doubles());
    EXPECT_LT(worst, 1e-4) << "weight " << i;
  }
  for (const char* key : {"loss", "accuracy"}) {
    ASSERT_EQ(on_cpu.history.at(key).size(), 2u);
    for (int e = 0; e < 2; ++e)
      EXPECT_NEAR(on_cpu.history.at(key)[e], on_xla.history.at(key)[e], 1e-5) << key << " epoch " << e;
  }
}

// The check: 3 SGD steps of the seed CNN (conv, batch norm, pooling, dropout) on xla:cpu give the oneDNN
// backend's weights within 1e-4: the same initial weights, the same batches, the same dropout masks (Philox,
// written in the program's integer ops, keyed by the step counter the program reads).
TEST(XlaTraining, ThreeSgdStepsOfTheSeedCnnMatchOneDnn) {
  SYSTOLIC_REQUIRE_XLA();
  const std::int64_t n = 48;
  Tensor x = systolic::testing::random_tensor({n, 32, 32, 3}, 5, DType::float32, 0.0, 1.0);
  Tensor y({n}, DType::int32);
  for (std::int64_t i = 0; i < n; ++i)
    y.data<std::int32_t>()[i] = static_cast<std::int32_t>((i * 3 + 1) % 10);
  auto train = [&](Device device) {
    clear_session();
    set_random_seed(7);
    Model cpu_model = models::seed_cnn({32, 32, 3}, 10);
    cpu_model.compile(optimizers::SGD(0.01), "sparse_categorical_crossentropy", {"accuracy"});
    Model m = to_accelerator(cpu_model, distribute::OneDeviceStrategy(device));
    History h = m.fit(x, y, {.batch_size = 16, .epochs = 1, .verbose = 0, .shuffle = false});
    EXPECT_EQ(m.optimizer().iterations(), 3);
    if (device.is_xla()) {
      EXPECT_EQ(m.step_mode(), "graph") << m.step_mode_reason();
    }
    return std::make_pair(m.get_weights(), h.history.at("loss")[0]);
  };
  auto [w_cpu, loss_cpu] = train(Device::cpu());
  auto [w_xla, loss_xla] = train(xla_cpu());
  ASSERT_EQ(w_cpu.size(), w_xla.size());
  double worst = 0;
  for (std::size_t i = 0; i < w_cpu.size(); ++i)
    worst = std::max(worst, largest_difference(w_cpu[i].to_doubles(), w_xla[i].to_doubles()));
  std::printf("seed CNN, 3 SGD steps: largest weight difference xla:cpu vs oneDNN %g, loss %.7f vs %.7f\n",
              worst, loss_xla, loss_cpu);
  EXPECT_LT(worst, 1e-4);
  EXPECT_NEAR(loss_cpu, loss_xla, 1e-5);
}

// evaluate and predict run as programs of their own, one per batch size (the last, smaller batch is another):
// they give the CPU's losses, metrics and outputs.
TEST(XlaInference, EvaluateAndPredictMatchTheCpu) {
  SYSTOLIC_REQUIRE_XLA();
  Data d = small_data(21);  // batches of 8, 8 and 5
  clear_session();
  Model cpu_model = systolic::testing::small_model(2);
  cpu_model.compile(optimizers::Adam(), "sparse_categorical_crossentropy", {"accuracy"});
  Model m = to_accelerator(cpu_model, distribute::OneDeviceStrategy(xla_cpu()));
  auto before = xla::compile_stats();
  auto on_xla = m.evaluate(d.x, d.y, {.batch_size = 8, .verbose = 0});
  auto again = m.evaluate(d.x, d.y, {.batch_size = 8, .verbose = 0});
  auto mid = xla::compile_stats();
  auto on_cpu = cpu_model.evaluate(d.x, d.y, {.batch_size = 8, .verbose = 0});
  ASSERT_EQ(on_xla.size(), on_cpu.size());
  for (std::size_t i = 0; i < on_cpu.size(); ++i) {
    EXPECT_NEAR(on_xla[i], on_cpu[i], 1e-5) << i;
    EXPECT_EQ(on_xla[i], again[i]) << i;
  }
  Tensor p_xla = m.predict(d.x, {.batch_size = 8, .verbose = 0});
  Tensor p_cpu = cpu_model.predict(d.x, {.batch_size = 8, .verbose = 0});
  EXPECT_LT(largest_difference(p_xla.to_doubles(), p_cpu.to_doubles()), 1e-5);
  auto after = xla::compile_stats();
  std::printf("evaluate twice: %lld programs compiled; predict: %lld\n",
              static_cast<long long>(mid.compiles - before.compiles),
              static_cast<long long>(after.compiles - mid.compiles));
}

namespace {

// A small convolutional model with batch normalisation (and, with `dropout`, a Dropout layer) for the replica
// tests: input (8, 8, 3), 5 classes.
// conv_bias false: the convolution has no bias, whose gradient batch norm cancels (Adam would scale its rounding
// noise, which differs between backends, to steps of the learning rate).
Model replica_model(bool dropout, bool conv_bias = true) {
  namespace L = layers;
  set_random_seed(3);
  auto in = L::Input({8, 8, 3});
  auto x = L::Conv2D(4, {3, 3}, {.padding = "same", .use_bias = conv_bias})(in);
  x = L::BatchNormalization()(x);
  x = L::Activation("relu")(x);
  x = L::MaxPooling2D()(x);
  x = L::Flatten()(x);
  if (dropout) x = L::Dropout(0.3)(x);
  auto out = L::Dense(5, {.activation = "softmax"})(x);
  return Model(in, out);
}

struct Trained {
  std::vector<Tensor> weights;  // on the host
  History history;
  std::string step_mode;
};

// fit on (x, y) under `strategy`: batches of `batch`, 2 epochs, no shuffling, SGD with momentum.
Trained train_replicas(bool dropout, const distribute::Strategy& strategy, const Tensor& x, const Tensor& y,
                       std::int64_t batch) {
  clear_session();
  Model cpu_model = replica_model(dropout);
  cpu_model.compile(optimizers::SGD(0.05, 0.9), "sparse_categorical_crossentropy", {"accuracy"});
  Model m = to_accelerator(cpu_model, strategy);
  Trained t;
  t.history = m.fit(x, y, {.batch_size = batch, .epochs = 2, .verbose = 0, .shuffle = false});
  t.step_mode = m.step_mode();
  for (auto& w : m.get_weights()) t.weights.push_back(w.to(Device::cpu()));
  return t;
}

void expect_same_training(const Trained& a, const Trained& b, const char* what) {
  ASSERT_EQ(a.weights.size(), b.weights.size());
  double worst = 0;
  for (std::size_t i = 0; i < a.weights.size(); ++i)
    worst = std::max(worst, largest_difference(a.weights[i].to_doubles(), b.weights[i].to_doubles()));
  std::printf("%s: largest difference of the weights (moving statistics included) %g\n", what, worst);
  EXPECT_LT(worst, 1e-4) << what;
  for (int e = 0; e < 2; ++e)
    EXPECT_NEAR(a.history.history.at("loss")[e], b.history.history.at("loss")[e], 1e-5)
        << what << " epoch " << e;
}

std::vector<Device> xla_devices(int n) {
  std::vector<Device> d;
  for (int i = 0; i < n; ++i) d.push_back(xla_cpu(i));
  return d;
}

Data replica_data(std::int64_t n) {
  Data d{systolic::testing::random_tensor({n, 8, 8, 3}, 21), Tensor({n}, DType::int32)};
  for (std::int64_t i = 0; i < n; ++i)
    d.y.data<std::int32_t>()[i] = static_cast<std::int32_t>((i * 5 + 2) % 5);
  return d;
}

}  // namespace

// The check: 8 replicas on xla:cpu with synchronised batch norm (one SPMD program: the gradients and the
// batch statistics summed by all_reduce inside it) train as 1 replica does on the whole batch, within 1e-4. Each
// epoch has 2 full batches of 64 (8 per replica: the program) and a last one of 12, whose shards differ in size (1
// or 2 rows: op by op, the sums through the host).
TEST(XlaReplicas, EightReplicasWithSynchronisedBatchNormEqualOneReplica) {
  SYSTOLIC_REQUIRE_XLA();
  Data d = replica_data(140);
  auto before = xla::compile_stats();
  Trained one = train_replicas(false, distribute::OneDeviceStrategy(xla_cpu()), d.x, d.y, 64);
  Trained eight = train_replicas(
      false, distribute::MirroredStrategy(xla_devices(8), {.sync_batch_norm = true}), d.x, d.y, 64);
  auto after = xla::compile_stats();
  std::printf("XLA programs compiled: %lld in %.2f s\n",
              static_cast<long long>(after.compiles - before.compiles), after.seconds - before.seconds);
  EXPECT_EQ(eight.step_mode, "graph");
  expect_same_training(one, eight, "8 xla:cpu replicas with synchronised batch norm vs 1");
}

// gradient_accumulation_steps on xla:cpu: the steps that only accumulate their gradients and those that update are
// two XLA programs (one device's, and 8 replicas' SPMD programs), and train as the CPU does within 1e-4 (Adam every 2
// batches, with the weights' moving average after every batch).
TEST(XlaTraining, GradientAccumulationStepsAreTwoPrograms) {
  SYSTOLIC_REQUIRE_XLA();
  Data d = replica_data(128);
  auto train = [&](const distribute::Strategy& strategy, int recordings) {
    clear_session();
    Model cpu_model = replica_model(false, /*conv_bias=*/false);
    optimizers::Adam adam(0.01);
    adam.set_gradient_accumulation_steps(2);
    adam.set_ema(true, 0.9);
    cpu_model.compile(adam, "sparse_categorical_crossentropy");
    Model m = to_accelerator(cpu_model, strategy);
    Trained t;
    t.history = m.fit(d.x, d.y, {.batch_size = 32, .epochs = 2, .verbose = 0, .shuffle = false});
    t.step_mode = m.step_mode();
    EXPECT_EQ(m.optimizer().iterations(), 8);
    if (recordings) {
      EXPECT_EQ(ModelInternals::state(m)->train_function.recordings(), recordings);
    }
    for (auto& w : m.get_weights()) t.weights.push_back(w.to(Device::cpu()));
    return t;
  };
  Trained cpu = train(distribute::OneDeviceStrategy(Device::cpu()), 0);
  Trained one = train(distribute::OneDeviceStrategy(xla_cpu()), 2);
  Trained eight = train(distribute::MirroredStrategy(xla_devices(8), {.sync_batch_norm = true}), 0);
  EXPECT_EQ(one.step_mode, "graph") << "one xla:cpu device";
  EXPECT_EQ(eight.step_mode, "graph") << "8 xla:cpu replicas";
  expect_same_training(cpu, one, "gradient accumulation: xla:cpu vs the CPU");
  expect_same_training(cpu, eight, "gradient accumulation: 8 xla:cpu replicas vs the CPU");
}

// Without synchronised batch norm each replica normalises its own shard and draws its own dropout masks (the seed
// of replica r, a value of the SPMD program: stablehlo.replica_id): 8 replicas on xla:cpu train as 8 CPU replicas
// (threads, the oneDNN backend) do, within 1e-4.
TEST(XlaReplicas, EightReplicasWithDropoutEqualEightCpuReplicas) {
  SYSTOLIC_REQUIRE_XLA();
  Data d = replica_data(128);
  Trained cpu = train_replicas(true, distribute::MirroredStrategy::cpu(8), d.x, d.y, 64);
  Trained xla = train_replicas(true, distribute::MirroredStrategy(xla_devices(8)), d.x, d.y, 64);
  EXPECT_EQ(xla.step_mode, "graph");
  expect_same_training(cpu, xla, "8 xla:cpu replicas vs 8 CPU replicas, dropout per replica");
}

// An array a program reads and writes is donated (its argument aliases its result: tf.aliasing_output), so XLA
// updates it in place: once the program ran, the plugin has deleted the buffer the array held before, and the
// array holds the result. An array only read keeps its buffer.
TEST(XlaTrace, ArraysReadAndWrittenAreDonated) {
  SYSTOLIC_REQUIRE_XLA();
  auto a = std::make_shared<xla::Array>(XlaPlatform::cpu, 0, DType::float32, 4);
  auto b = std::make_shared<xla::Array>(XlaPlatform::cpu, 0, DType::float32, 4);
  const float one[4] = {1, 2, 3, 4};
  a->write_bytes(0, one, sizeof one);
  b->write_bytes(0, one, sizeof one);
  std::shared_ptr<xla::Recorded> program;
  {
    xla::Trace t;
    xla::Value va = t.read(a, 0, {4}), vb = t.read(b, 0, {4});
    t.write(a, 0, t.builder().add(va, vb));
    program = t.finish();
  }
  EXPECT_NE(program->text().find("%arg0: tensor<4xf32> {tf.aliasing_output = 0 : i32}"), std::string::npos)
      << program->text();
  EXPECT_NE(program->text().find("%arg1: tensor<4xf32>)"), std::string::npos) << program->text();
  auto a_before = a->buffer(), b_before = b->buffer();
  ASSERT_TRUE(program->run());
  EXPECT_TRUE(a_before->deleted()) << "the written array's old buffer was not donated";
  EXPECT_FALSE(b_before->deleted());
  EXPECT_EQ(b->buffer(), b_before);
  float got[4];
  a->read_bytes(0, got, sizeof got);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(got[i], 2 * one[i]);
  ASSERT_TRUE(program->run());  // again, on the donated result
  a->read_bytes(0, got, sizeof got);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(got[i], 3 * one[i]);
}
