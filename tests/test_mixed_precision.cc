// The mixed_bfloat16 policy where no GPU is needed: layers made under it keep float32 weights and compute in
// bfloat16, their Keras configs carry the policy both ways, their weights files are plain float32, the cast
// op rounds as the CPU's bfloat16 does, the CPU trains under it, and layers may carry their own policy.
// (Training under the policy on a GPU: test_cuda_training.cc.)
#include <systolic/systolic.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "ops/cpu/onednn.h"
#include "test_util.h"

using namespace systolic;

namespace {
struct PolicyGuard {  // every test leaves the default policy behind
  ~PolicyGuard() { mixed_precision::set_global_policy("float32"); }
};
}  // namespace

TEST(MixedPrecision, LayersMadeUnderThePolicyComputeInBfloat16WithFloat32Weights) {
  PolicyGuard guard;
  EXPECT_EQ(mixed_precision::global_policy(), "float32");
  auto plain = layers::Dense(4);
  mixed_precision::set_global_policy("mixed_bfloat16");
  EXPECT_EQ(mixed_precision::global_policy(), "mixed_bfloat16");
  auto mixed = layers::Dense(4);
  EXPECT_EQ(plain->compute_dtype(), DType::float32);
  EXPECT_EQ(mixed->compute_dtype(), DType::bfloat16);
  EXPECT_EQ(mixed->dtype(), DType::float32);
  EXPECT_EQ(mixed->dtype_policy(), "mixed_bfloat16");
  auto out = mixed(layers::Input({3}));
  EXPECT_EQ(out.dtype(), DType::bfloat16);
  EXPECT_EQ(mixed->weights()[0].value.dtype(), DType::float32);
  std::string e = systolic::testing::error_of([] { mixed_precision::set_global_policy("mixed_float16"); });
  EXPECT_NE(e.find("mixed_float16"), std::string::npos) << e;
}

TEST(MixedPrecision, SeedCnnKeepsItsParametersAndCarriesThePolicyInItsConfig) {
  PolicyGuard guard;
  clear_session();
  mixed_precision::set_global_policy("mixed_bfloat16");
  Model m = models::seed_cnn({32, 32, 3}, 10);
  mixed_precision::set_global_policy("float32");
  EXPECT_EQ(m.count_params(), 1676982);
  EXPECT_EQ(m.trainable_parameters().dtype(), DType::float32);
  auto config = nlohmann::json::parse(m.to_json());
  int with_policy = 0;
  for (auto& l : config["config"]["layers"]) {
    auto& d = l["config"]["dtype"];
    if (l["class_name"] == "InputLayer") {
      EXPECT_EQ(d, "float32");
    } else {
      EXPECT_EQ(d["class_name"], "Policy") << l.dump();
      EXPECT_EQ(d["config"]["name"], "mixed_bfloat16") << l.dump();
      ++with_policy;
    }
  }
  EXPECT_EQ(with_policy, 14);  // every layer but the input
  // Read back under the default policy: each layer takes the policy its config names.
  Model back = model_from_json(m.to_json());
  for (auto& l : back.layers()) {
    if (!l->is_input_layer()) {
      EXPECT_EQ(l->compute_dtype(), DType::bfloat16) << l->name();
    }
  }
  EXPECT_EQ(back.outputs()[0].dtype(), DType::bfloat16);
  EXPECT_EQ(back.to_json(), m.to_json());
}

TEST(MixedPrecision, WeightsFilesHoldTheFloat32Weights) {
  PolicyGuard guard;
  clear_session();
  mixed_precision::set_global_policy("mixed_bfloat16");
  Model mixed = models::seed_cnn({16, 16, 3}, 10);
  mixed_precision::set_global_policy("float32");
  systolic::testing::TempDir dir;
  mixed.save_weights(dir.file("w.h5"));
  clear_session();
  Model plain = models::seed_cnn({16, 16, 3}, 10);
  plain.load_weights(dir.file("w.h5"));
  EXPECT_EQ(plain.trainable_parameters().to_doubles(), mixed.trainable_parameters().to_doubles());
}

namespace {
// The seed CNN on 16x16 images (dropout off), compiled with SGD; made under `policy`, weights from seed 5.
Model small_cnn(const std::string& policy) {
  clear_session();
  set_random_seed(5);
  mixed_precision::PolicyScope scope(policy);
  Model m = models::seed_cnn({16, 16, 3}, 10, {.dropout = false});
  m.compile(optimizers::SGD(0.05), "sparse_categorical_crossentropy", {"accuracy"});
  return m;
}
}  // namespace

// The CPU trains under mixed_bfloat16 (bfloat16 widened around each float32 op: ops/cpu/bf16_emulation.h):
// the float32 master weights move as the float32 model's do, to bfloat16's precision, and stay float32.
TEST(MixedPrecision, TrainsOnTheCpuAsFloat32DoesToBfloat16Precision) {
  PolicyGuard guard;
  Tensor x = systolic::testing::random_tensor({32, 16, 16, 3}, 3, DType::float32, 0, 1);
  Tensor y = systolic::testing::random_tensor({32}, 4, DType::int32, 0, 9);
  Model plain = small_cnn("float32"), mixed = small_cnn("mixed_bfloat16");
  ASSERT_EQ(plain.trainable_parameters().to_doubles(), mixed.trainable_parameters().to_doubles());
  // One step of SGD: w0 - w is 0.05 times the gradient. bfloat16 rounds every activation and gradient (about
  // 0.4 % each), and the differences compound layer by layer from the output back: the last layer's gradient
  // agrees to a fraction of a percent, the first convolutions' to about 20 % (seen: 0.5 % and 19 %; sums
  // that cancel, batch norm's beta, more), the whole to about 10 %.
  auto w0 = plain.trainable_parameters().to_doubles();
  double first_plain = plain.train_on_batch(x, y)[0], first_mixed = mixed.train_on_batch(x, y)[0];
  EXPECT_NEAR(first_mixed, first_plain, 1e-2 * first_plain);
  EXPECT_EQ(mixed.trainable_parameters().dtype(), DType::float32);
  auto wp = plain.trainable_parameters().to_doubles(), wm = mixed.trainable_parameters().to_doubles();
  std::vector<double> dp(wp.size()), dm(wm.size());
  for (std::size_t i = 0; i < wp.size(); ++i) dp[i] = wp[i] - w0[i], dm[i] = wm[i] - w0[i];
  double err = systolic::testing::relative_l2_error(dm, dp);
  EXPECT_LT(err, 0.2);
  EXPECT_GT(err, 1e-6);
  const std::size_t last = std::size_t(mixed.layers().back()->count_params());  // the last Dense's weights
  std::vector<double> lm(dm.end() - std::ptrdiff_t(last), dm.end()),
      lp(dp.end() - std::ptrdiff_t(last), dp.end());
  EXPECT_LT(systolic::testing::relative_l2_error(lm, lp), 1e-2);
  // Further steps lower the loss as float32's do.
  double last_plain = 0, last_mixed = 0;
  for (int step = 0; step < 4; ++step) {
    last_plain = plain.train_on_batch(x, y)[0];
    last_mixed = mixed.train_on_batch(x, y)[0];
  }
  EXPECT_LT(last_mixed, first_mixed);
  EXPECT_NEAR(last_mixed, last_plain, 5e-2 * last_plain);
  Tensor p = mixed.predict(x);
  EXPECT_EQ(p.dtype(), DType::float32);
  EXPECT_LT(systolic::testing::normalised_max_error(p, plain.predict(x)), 5e-2);
}

// A bfloat16 op on the CPU computes what float32 computes on the bfloat16 inputs, rounded once to bfloat16: bit for
// bit where the CPU widens bfloat16 to float32 around its float32 kernels (bf16_emulation.h); within one bfloat16
// rounding where oneDNN's native bfloat16 kernels run (AVX-512 BF16, AMX), whose float32 sums add in their own order.
// CTest runs this test twice on such a CPU, the second time with ONEDNN_MAX_CPU_ISA=AVX512_CORE, which makes the CPU
// widen (tests/CMakeLists.txt).
TEST(MixedPrecision, CpuBfloat16OpsRoundTheFloat32ResultOfRoundedInputs) {
  Tensor x = systolic::testing::random_tensor({2, 6, 6, 4}, 1, DType::float32, -1, 1);
  Tensor w = systolic::testing::random_tensor({3, 3, 4, 5}, 2, DType::float32, -1, 1);
  Tensor b = systolic::testing::random_tensor({5}, 3, DType::float32, -1, 1);
  Tensor xh = x.to(DType::bfloat16), wh = w.to(DType::bfloat16), yh({2, 4, 4, 5}, DType::bfloat16);
  ops::conv2d_forward(xh, wh, b, yh, {});  // bias float32, as mixed precision keeps it
  Tensor y({2, 4, 4, 5}, DType::float32);
  ops::conv2d_forward(xh.to(DType::float32), wh.to(DType::float32), b, y, {});
  Tensor want = y.to(DType::bfloat16);
  ASSERT_EQ(yh.nbytes(), want.nbytes());
  // An accumulating argument (dw +=) keeps what it held: the float32 weight gradient of bfloat16 data.
  Tensor dy = systolic::testing::random_tensor({2, 4, 4, 5}, 4, DType::float32, -1, 1);
  Tensor dw = Tensor::full({3, 3, 4, 5}, 0.5, DType::float32), dw_ref = dw.clone(), none;
  Tensor dyh = dy.to(DType::bfloat16);
  ops::conv2d_backward(xh, wh, dyh, none, dw, none, {});
  ops::conv2d_backward(xh.to(DType::float32), wh.to(DType::float32), dyh.to(DType::float32), none, dw_ref,
                       none, {});
  if (!ops::onednn::runs_bf16()) {
    EXPECT_EQ(std::memcmp(yh.raw_data(), want.raw_data(), yh.nbytes()), 0);
    EXPECT_EQ(dw.to_doubles(), dw_ref.to_doubles());
    return;
  }
  auto got = yh.to_doubles(), exact = y.to_doubles();
  double largest = 0;
  for (double v : exact) largest = std::max(largest, std::abs(v));
  for (std::size_t i = 0; i < got.size(); ++i)
    EXPECT_LE(std::abs(got[i] - exact[i]), std::abs(exact[i]) * 0x1p-8 + 1e-6 * largest) << "y[" << i << "]";
  EXPECT_LT(systolic::testing::max_abs_diff(dw, dw_ref), 1e-5 * 8);  // sums of 32 products of values below 1
}

// Under a mixed policy the layers compute with bfloat16 copies of the float32 weights, frozen ones included; weights
// loaded after compile (the usual fine-tuning order: build, freeze, compile, load) reach those copies too.
TEST(MixedPrecision, WeightsLoadedIntoFrozenLayersAfterCompileAreTheOnesComputedWith) {
  PolicyGuard guard;
  systolic::testing::TempDir dir;
  auto build = [](bool mixed) {
    clear_session();
    set_random_seed(mixed ? 1 : 2);  // different initial weights: the file below must replace them
    mixed_precision::PolicyScope scope(mixed ? "mixed_bfloat16" : "float32");
    auto in = layers::Input({6});
    auto h = layers::Dense(8, {.activation = "tanh", .name = "base"})(in);
    Model m(in, layers::Dense(3, {.name = "head"})(h));
    m.get_layer("base")->set_trainable(false);
    m.compile("adam", "mean_squared_error");
    return m;
  };
  Model plain = build(false);
  const std::string path = dir.file("w.weights.h5");
  plain.save_weights(path);
  Model mixed = build(true);
  mixed.load_weights(path);
  Tensor x = systolic::testing::random_tensor({4, 6}, 3, DType::float32, -1, 1);
  Tensor want = plain.predict(x), got = mixed.predict(x);
  EXPECT_LT(systolic::testing::normalised_max_error(got, want), 2e-2);
}

// Layer-level policies (Keras's Dense(..., dtype="float32") under mixed_bfloat16, its advice for the last layer):
// each layer computes in its own dtype, inputs are autocast to it and gradients cast back, also where a tensor
// feeds layers of both dtypes.
TEST(MixedPrecision, LayersOfAModelMayHaveTheirOwnPolicy) {
  PolicyGuard guard;
  auto build = [](bool mixed) {
    clear_session();
    set_random_seed(11);
    auto in = layers::Input({6});
    SymbolicTensor h, a, bh, out;
    {
      mixed_precision::PolicyScope scope(mixed ? "mixed_bfloat16" : "float32");
      h = layers::Dense(8, {.activation = "relu"})(in);
      a = layers::Dense(8, {.activation = "tanh"})(h);
    }
    {
      mixed_precision::PolicyScope scope("float32");
      bh = layers::Dense(8)(h);  // h feeds a bfloat16 and a float32 layer
      out = layers::Dense(3, {.activation = "softmax"})(layers::Add()({a, bh}));
    }
    Model m(in, out);
    m.compile(optimizers::SGD(1.0), "sparse_categorical_crossentropy");
    return m;
  };
  Model plain = build(false), mixed = build(true);
  EXPECT_EQ(mixed.outputs()[0].dtype(), DType::float32);
  EXPECT_EQ(mixed.layers()[1]->dtype_policy(), "mixed_bfloat16");
  EXPECT_EQ(mixed.layers()[3]->dtype_policy(), "float32");
  ASSERT_EQ(plain.trainable_parameters().to_doubles(), mixed.trainable_parameters().to_doubles());
  Tensor x = systolic::testing::random_tensor({16, 6}, 7, DType::float32, -1, 1);
  Tensor y = systolic::testing::random_tensor({16}, 8, DType::int32, 0, 2);
  EXPECT_LT(systolic::testing::normalised_max_error(mixed.predict(x), plain.predict(x)), 2e-2);
  auto w0 = plain.trainable_parameters().to_doubles();
  plain.train_on_batch(x, y);
  mixed.train_on_batch(x, y);
  auto wp = plain.trainable_parameters().to_doubles(), wm = mixed.trainable_parameters().to_doubles();
  std::vector<double> gp(wp.size()), gm(wm.size());
  for (std::size_t i = 0; i < wp.size(); ++i)
    gp[i] = w0[i] - wp[i], gm[i] = w0[i] - wm[i];  // SGD(1): the gradients
  EXPECT_LT(systolic::testing::relative_l2_error(gm, gp), 3e-2);
  // The saved config names each layer's policy; the model comes back with them.
  Model back = model_from_json(mixed.to_json());
  EXPECT_EQ(back.layers()[1]->compute_dtype(), DType::bfloat16);
  EXPECT_EQ(back.layers()[3]->compute_dtype(), DType::float32);
  EXPECT_EQ(back.outputs()[0].dtype(), DType::float32);
}

TEST(MixedPrecision, CastRoundsToNearestEvenAsTheHostBfloat16) {
  Tensor src = systolic::testing::random_tensor({1000}, 9, DType::float32, -1e3, 1e3);
  Tensor half({1000}, DType::bfloat16), back({1000}, DType::float32);
  ops::cast(src, half);
  ops::cast(half, back);
  const float* s = src.data<float>();
  const float* b = back.data<float>();
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(b[i], static_cast<float>(bfloat16(s[i]))) << i;
  Tensor bytes({1000}, DType::uint8), ints({1000}, DType::int32);
  EXPECT_NE(systolic::testing::error_of([&] { ops::cast(src, bytes); }).find("cast: dst is uint8"),
            std::string::npos);
  EXPECT_NE(systolic::testing::error_of([&] { ops::cast(ints, back); }).find("cast: src is int32"),
            std::string::npos);
}

// A model Keras 3 saved under mixed_bfloat16 with a float32 softmax last (its mixed-precision guide's advice), as
// .keras and .h5 (tests/reference/mixed_policy.py): each layer comes back with its policy, the CPU predicts what
// Keras's bfloat16 predicted (to bfloat16's precision), and the files systolic writes keep the policies.
TEST(MixedPrecision, KerasModelsWithAFloat32LastLayerLoadAndPredict) {
  PolicyGuard guard;
  const std::string dir = systolic::testing::source_dir() + "/tests/fixtures/mixed_policy/";
  auto manifest = nlohmann::json::parse(systolic::testing::read_text(dir + "manifest.json"));
  Shape in_shape(manifest["input_shape"].get<std::vector<std::int64_t>>());
  Shape out_shape(manifest["output_shape"].get<std::vector<std::int64_t>>());
  Tensor x = systolic::testing::read_floats(dir + "mixed.inputs.bin", in_shape);
  Tensor want = systolic::testing::read_floats(dir + "mixed.predictions.bin", out_shape);
  systolic::testing::TempDir tmp;
  for (const char* file : {"mixed.keras", "mixed.h5"}) {
    SCOPED_TRACE(file);
    clear_session();
    Model m = load_model(dir + file);
    for (auto& l : m.layers()) {
      if (l->is_input_layer()) continue;
      EXPECT_EQ(l->dtype_policy(), manifest["policies"][l->name()].get<std::string>()) << l->name();
    }
    EXPECT_EQ(m.outputs()[0].dtype(), DType::float32);
    Tensor got = m.predict(x);
    double err = systolic::testing::normalised_max_error(got, want);
    std::printf("%s: normalised max error against Keras's bfloat16 predict %.3g\n", file, err);
    EXPECT_LT(err, 2e-2);
    // Saved by systolic and loaded again: the same policies and the same predictions.
    m.save(tmp.file(std::string("back.") + (std::string(file).ends_with(".keras") ? "keras" : "h5")));
    clear_session();
    Model back =
        load_model(tmp.file(std::string("back.") + (std::string(file).ends_with(".keras") ? "keras" : "h5")));
    EXPECT_EQ(back.get_layer("predictions")->compute_dtype(), DType::float32);
    EXPECT_EQ(back.get_layer("dense")->compute_dtype(), DType::bfloat16);
    EXPECT_EQ(back.predict(x).to_doubles(), got.to_doubles());
  }
}
