// End to end on a GPU (label gpu; skips visibly without one): the seed CNN trained on real Fashion-MNIST
// lands in the CPU's accuracy band (also under mixed_bfloat16), its steps are replayed from a CUDA graph
// without device allocations, the graph gives the eager steps' weights, and weights saved from the GPU
// predict the same on the CPU; a learning rate that changes (a schedule, a callback) reaches the replayed graph;
// an attention model (MultiHeadAttention with a causal mask, GroupedQueryAttention, dropout of the probabilities)
// trains from replayed steps as on the CPU.
#include <systolic/systolic.h>

#include "gpu_test_util.h"
#include "model/model_state.h"

#if SYSTOLIC_HAS_CUDA
#include "core/cuda/runtime.h"
#endif

using namespace systolic;
using systolic::testing::gpu;

namespace {

struct Split {
  Tensor x, y;
};
struct Fashion {
  Split train, test;
};

Fashion fashion(std::int64_t n_train, std::int64_t n_test) {
  auto d = datasets::fashion_mnist::load_data();
  return {{d.train.x.slice(0, n_train).reshape({n_train, 28, 28, 1}), d.train.y.slice(0, n_train)},
          {d.test.x.slice(0, n_test).reshape({n_test, 28, 28, 1}), d.test.y.slice(0, n_test)}};
}

// Op determinism on for one test (system.h): with cuDNN's fastest algorithms, some of which add partial sums
// with atomics, two runs of the same steps differ in their last bits, and Adam, which divides each update by
// the gradient's own scale, carries those differences into weights with tiny gradients at full step size.
struct DeterministicOps {
  bool was = op_determinism_enabled();
  DeterministicOps() { enable_op_determinism(true); }
  ~DeterministicOps() { enable_op_determinism(was); }
};

#define REQUIRE_FASHION()                            \
  if (!systolic::testing::fashion_mnist_installed()) \
  GTEST_SKIP() << "Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)"

}  // namespace

TEST(CudaTraining, SeedCnnOnFashionMnistLandsInTheCpuBand) {
  SYSTOLIC_REQUIRE_GPU();
  REQUIRE_FASHION();
  Fashion d = fashion(4096, 2000);
  FitOptions fit{.batch_size = 128, .epochs = 2, .verbose = 2};
  set_random_seed(1);
  clear_session();
  Model cpu = models::seed_cnn({28, 28, 1}, 10);
  cpu.fit(d.train.x, d.train.y, fit);
  double cpu_acc = cpu.evaluate(d.test.x, d.test.y, {.batch_size = 256, .verbose = 0})[1];

  set_random_seed(1);
  clear_session();
  Model g = to_accelerator(models::seed_cnn({28, 28, 1}, 10), distribute::OneDeviceStrategy(gpu()));
  EXPECT_EQ(g.device(), gpu());
  auto history = g.fit(d.train.x, d.train.y, fit);
  EXPECT_EQ(g.step_mode(), "graph") << g.step_mode_reason();
  double gpu_acc = g.evaluate(d.test.x, d.test.y, {.batch_size = 256, .verbose = 0})[1];
  std::printf("test accuracy after 2 epochs: cpu %.4f, gpu %.4f\n", cpu_acc, gpu_acc);
  EXPECT_LT(history["loss"][1], history["loss"][0]);
  EXPECT_GT(gpu_acc, 0.70);
  EXPECT_NEAR(gpu_acc, cpu_acc, 0.05);
}

TEST(CudaTraining, WeightsSavedFromTheGpuPredictTheSameOnTheCpu) {
  SYSTOLIC_REQUIRE_GPU();
  REQUIRE_FASHION();
  Fashion d = fashion(1024, 200);
  set_random_seed(2);
  clear_session();
  Model g = to_accelerator(models::seed_cnn({28, 28, 1}, 10), distribute::OneDeviceStrategy(gpu()));
  g.fit(d.train.x, d.train.y, {.batch_size = 128, .epochs = 1, .verbose = 0});
  systolic::testing::TempDir dir;
  std::string path = dir.file("gpu_weights.h5");
  g.save_weights(path);
  Tensor on_gpu = g.predict(d.test.x, {.batch_size = 64});
  clear_session();
  Model cpu = models::seed_cnn({28, 28, 1}, 10);
  cpu.load_weights(path);
  Tensor on_cpu = cpu.predict(d.test.x, {.batch_size = 64});
  // The GPU's convolutions and dense layers use TF32 (10-bit mantissas, as TensorFlow's default), the CPU float32:
  // the predictions differ by TF32's rounding (1.01e-4 on an H200, 2026-11-27), not by wrongly carried weights,
  // which would differ by far more.
  EXPECT_LT(systolic::testing::normalised_max_error(on_gpu, on_cpu), 1e-3);
}

TEST(CudaTraining, GraphReplaysGiveTheEagerStepsWeights) {
  SYSTOLIC_REQUIRE_GPU();
  REQUIRE_FASHION();
  Fashion d = fashion(1000, 10);  // 7 full batches of 128 and a last one of 104
  DeterministicOps deterministic;
  auto run = [&](bool graph) {
    set_random_seed(3);
    clear_session();
    Model m = to_accelerator(models::seed_cnn({28, 28, 1}, 10), distribute::OneDeviceStrategy(gpu()));
    FitOptions o{.batch_size = 128, .epochs = 2, .verbose = 0};
    o.step_graph = graph;
    m.fit(d.train.x, d.train.y, o);
    EXPECT_EQ(m.step_mode(), graph ? "graph" : "eager") << m.step_mode_reason();
    EXPECT_EQ(m.optimizer().iterations(), 16);
    return m.trainable_parameters().to_doubles();
  };
  auto eager = run(false), replayed = run(true);
  ASSERT_EQ(eager.size(), replayed.size());
  double worst = 0;
  for (std::size_t i = 0; i < eager.size(); ++i) worst = std::max(worst, std::abs(eager[i] - replayed[i]));
  std::printf("largest weight difference, eager vs replayed steps: %g\n", worst);
  EXPECT_EQ(worst, 0.0) << "with deterministic ops the replayed graph runs the eager step's kernels";
}

TEST(CudaTraining, ScheduledAndCallbackRatesReachTheReplayedGraph) {
  // The learning rate lives on the device: a schedule's rate changing at every step, and rates a callback sets
  // between epochs (LearningRateScheduler, ReduceLROnPlateau), reach the steps replayed from one recording (the
  // graph is recorded once per fit, not once per rate), and the weights are the eager steps'.
  SYSTOLIC_REQUIRE_GPU();
  REQUIRE_FASHION();
  Fashion d = fashion(1000, 10);  // 7 full batches of 128 and a last one of 104
  DeterministicOps deterministic;
  auto run = [&](bool graph, bool scheduled) {
    set_random_seed(3);
    clear_session();
    Model cpu = models::seed_cnn({28, 28, 1}, 10);
    optimizers::Adam adam(1e-3);
    if (scheduled) adam.set_learning_rate_schedule(optimizers::schedules::ExponentialDecay(1e-3, 3, 0.7));
    cpu.compile(adam, "sparse_categorical_crossentropy", {"accuracy"});
    Model m = to_accelerator(cpu, distribute::OneDeviceStrategy(gpu()));
    FitOptions o{.batch_size = 128, .epochs = 3, .verbose = 0};
    o.step_graph = graph;
    if (!scheduled)
      o.callbacks = {std::make_shared<callbacks::LearningRateScheduler>(
                         [](int epoch, double lr) { return epoch == 0 ? lr : lr * 0.3; }),
                     std::make_shared<callbacks::ReduceLROnPlateau>(callbacks::ReduceLROnPlateauOptions{
                         .monitor = "loss", .factor = 0.5, .patience = 0, .min_delta = 10.0})};
    History h = m.fit(d.train.x, d.train.y, o);
    EXPECT_EQ(m.step_mode(), graph ? "graph" : "eager") << m.step_mode_reason();
    if (graph) {
      EXPECT_EQ(ModelInternals::state(m)->train_function.recordings(), 1);
    }
    EXPECT_EQ(m.optimizer().iterations(), 24);
    if (!scheduled) {
      EXPECT_NE(h["learning_rate"][2], h["learning_rate"][0]);
    }
    return m.trainable_parameters().to_doubles();
  };
  for (bool scheduled : {true, false}) {
    SCOPED_TRACE(scheduled ? "ExponentialDecay" : "LearningRateScheduler and ReduceLROnPlateau");
    auto eager = run(false, scheduled), replayed = run(true, scheduled);
    ASSERT_EQ(eager.size(), replayed.size());
    double worst = 0;
    for (std::size_t i = 0; i < eager.size(); ++i) worst = std::max(worst, std::abs(eager[i] - replayed[i]));
    std::printf("largest weight difference, eager vs replayed steps: %g\n", worst);
    EXPECT_EQ(worst, 0.0) << "with deterministic ops the replayed graph runs the eager step's kernels";
  }
}

TEST(CudaTraining, ASteadyEpochMakesNoDeviceAllocations) {
  SYSTOLIC_REQUIRE_GPU();
  REQUIRE_FASHION();
#if SYSTOLIC_HAS_CUDA
  Fashion d = fashion(2048, 10);
  set_random_seed(4);
  clear_session();
  Model m = to_accelerator(models::seed_cnn({28, 28, 1}, 10), distribute::OneDeviceStrategy(gpu()));
  FitOptions o{.batch_size = 256, .epochs = 1, .verbose = 0};
  m.fit(d.train.x, d.train.y, o);                           // warm-up: buffers, algorithms, capture
  Tensor x = d.train.x.to(gpu()), y = d.train.y.to(gpu());  // data already on the device: no upload either
  auto before = cuda::allocator(0).stats();
  m.fit(x, y, o);
  auto after = cuda::allocator(0).stats();
  EXPECT_EQ(after.raw_allocations, before.raw_allocations) << "cudaMalloc was called during a steady epoch";
#endif
}

TEST(CudaTraining, MixedBfloat16SeedCnnLearnsLikeFloat32) {
  SYSTOLIC_REQUIRE_GPU();
  REQUIRE_FASHION();
  Fashion d = fashion(4096, 2000);
  FitOptions fit{.batch_size = 128, .epochs = 2, .verbose = 2};
  auto train = [&](const char* policy) {
    set_random_seed(5);
    clear_session();
    mixed_precision::set_global_policy(policy);
    Model m = models::seed_cnn({28, 28, 1}, 10);
    mixed_precision::set_global_policy("float32");
    Model g = to_accelerator(m, distribute::OneDeviceStrategy(gpu()));
    g.fit(d.train.x, d.train.y, fit);
    EXPECT_EQ(g.step_mode(), "graph") << policy << ": " << g.step_mode_reason();
    Tensor p = g.predict(d.test.x.slice(0, 10));
    EXPECT_EQ(p.dtype(), DType::float32);
    return g.evaluate(d.test.x, d.test.y, {.batch_size = 256, .verbose = 0})[1];
  };
  double f32 = train("float32"), bf16 = train("mixed_bfloat16");
  std::printf("test accuracy after 2 epochs: float32 %.4f, mixed_bfloat16 %.4f\n", f32, bf16);
  EXPECT_GT(bf16, 0.70);
  EXPECT_NEAR(bf16, f32, 0.05);
}

TEST(CudaTraining, CastMatchesTheCpu) {
  SYSTOLIC_REQUIRE_GPU();
  Tensor src = systolic::testing::random_tensor({100003}, 12, DType::float32, -1e4, 1e4);
  Tensor half_cpu({100003}, DType::bfloat16);
  ops::cast(src, half_cpu);
  Tensor src_gpu = src.to(gpu()), half_gpu = systolic::testing::poisoned_gpu({100003}, DType::bfloat16);
  ops::cast(src_gpu, half_gpu);
  Tensor back = systolic::testing::poisoned_gpu({100003}, DType::float32);
  ops::cast(half_gpu, back);
  EXPECT_EQ(half_gpu.to_doubles(), half_cpu.to_doubles());
  EXPECT_EQ(back.to_doubles(), half_cpu.to_doubles());
}

// The additive score on CUDA inside a model (attention_kernels.cu's score and gradient kernels): AdditiveAttention
// with its per-feature scale, causal, with dropout, then Attention(score_mode="concat") with use_scale over it (its
// scalar weights' gradients from the op's dscore_weights), as on the CPU.
TEST(CudaTraining, AdditiveAttentionTrainsAsOnTheCpu) {
  SYSTOLIC_REQUIRE_GPU();
  Tensor x = systolic::testing::random_tensor({70, 12, 6}, 8);
  Tensor y({70}, DType::int32);
  for (std::int64_t i = 0; i < 70; ++i) y.data<std::int32_t>()[i] = static_cast<std::int32_t>(i % 3);
  auto train = [&](Device device) {
    clear_session();
    set_random_seed(5);
    auto in = layers::Input({12, 6});
    auto h = layers::AdditiveAttention({.dropout = 0.1, .use_causal_mask = true})({in, in});
    h = layers::Attention({.use_scale = true, .score_mode = "concat"})({h, in});
    h = layers::GlobalAveragePooling1D()(h);
    Model cpu_model(in, layers::Dense(3, {.activation = "softmax"})(h));
    cpu_model.compile(optimizers::SGD(0.05), "sparse_categorical_crossentropy");
    Model m = to_accelerator(cpu_model, distribute::OneDeviceStrategy(device));
    m.fit(x, y, {.batch_size = 16, .epochs = 2, .verbose = 0, .shuffle = false});
    return m.get_weights();
  };
  auto w_cpu = train(Device::cpu()), w_gpu = train(gpu());
  ASSERT_EQ(w_cpu.size(), w_gpu.size());
  for (std::size_t i = 0; i < w_cpu.size(); ++i)
    EXPECT_LT(systolic::testing::max_abs_diff(w_cpu[i], w_gpu[i].to(Device::cpu())), 2e-3) << "weight " << i;
}

// The attention op on CUDA inside a model: causal mask and dropout on the probabilities (the same Philox bits as the
// CPU's), grouped key/value heads, full batches replayed from the captured step, the last smaller one eager. SGD keeps the GPU's TF32
// projections' rounding at its size in the weights (Adam would scale tiny gradients' differences up to full steps).
TEST(CudaTraining, AttentionTrainsAsOnTheCpu) {
  SYSTOLIC_REQUIRE_GPU();
  Tensor x = systolic::testing::random_tensor({70, 12, 6}, 7);
  Tensor y({70}, DType::int32);
  for (std::int64_t i = 0; i < 70; ++i) y.data<std::int32_t>()[i] = static_cast<std::int32_t>(i % 3);
  auto train = [&](Device device) {
    clear_session();
    set_random_seed(4);
    auto in = layers::Input({12, 6});
    auto h = layers::MultiHeadAttention(4, 8, {.dropout = 0.1, .use_causal_mask = true})({in, in});
    h = layers::GroupedQueryAttention(4, 4, 2, {.dropout = 0.1})({h, h});
    h = layers::LayerNormalization()(h);
    h = layers::GlobalAveragePooling1D()(h);
    Model cpu_model(in, layers::Dense(3, {.activation = "softmax"})(h));
    cpu_model.compile(optimizers::SGD(0.05), "sparse_categorical_crossentropy");
    Model m = to_accelerator(cpu_model, distribute::OneDeviceStrategy(device));
    History hist = m.fit(x, y, {.batch_size = 16, .epochs = 2, .verbose = 0, .shuffle = false});
    if (device.is_cuda()) {
      EXPECT_EQ(m.step_mode(), "graph") << m.step_mode_reason();
    }
    std::printf("%s: loss %.6f, %.6f\n", device.str().c_str(), hist.history.at("loss")[0],
                hist.history.at("loss")[1]);
    return m.get_weights();
  };
  auto w_cpu = train(Device::cpu()), w_gpu = train(gpu());
  ASSERT_EQ(w_cpu.size(), w_gpu.size());
  for (std::size_t i = 0; i < w_cpu.size(); ++i)
    EXPECT_LT(systolic::testing::max_abs_diff(w_cpu[i], w_gpu[i].to(Device::cpu())), 2e-3) << "weight " << i;
}
