// The mixed_bfloat16 policy where no GPU is needed: layers made under it keep float32 weights and compute in
// bfloat16, their Keras configs carry the policy both ways, their weights files are plain float32, the cast
// op rounds as the CPU's bfloat16 does, and training on the CPU is refused clearly. (Training under the
// policy on a GPU: test_cuda_training.cc.)
#include <systolic/systolic.h>

#include <nlohmann/json.hpp>

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

TEST(MixedPrecision, TrainingOnTheCpuIsRefusedClearly) {
  PolicyGuard guard;
  clear_session();
  mixed_precision::set_global_policy("mixed_bfloat16");
  Model m = models::seed_cnn({16, 16, 3}, 10);
  Tensor x = Tensor::zeros({4, 16, 16, 3}, DType::uint8), y = Tensor::zeros({4}, DType::uint8);
  std::string e = systolic::testing::error_of([&] { m.fit(x, y, {.batch_size = 2, .verbose = 0}); });
  EXPECT_NE(e.find("needs a GPU"), std::string::npos) << e;
  e = systolic::testing::error_of([&] { m.predict(x); });
  EXPECT_NE(e.find("mixed_bfloat16"), std::string::npos) << e;
}

TEST(MixedPrecision, OneModelOnePolicy) {
  PolicyGuard guard;
  clear_session();
  auto in = layers::Input({4});
  auto x = layers::Dense(3)(in);
  mixed_precision::set_global_policy("mixed_bfloat16");
  auto out = layers::Dense(2)(x);
  std::string e = systolic::testing::error_of([&] { Model(in, out); });
  EXPECT_NE(e.find("one policy per model"), std::string::npos) << e;
}

TEST(MixedPrecision, CastRoundsToNearestEvenAsTheHostBfloat16) {
  Tensor src = systolic::testing::random_tensor({1000}, 9, DType::float32, -1e3, 1e3);
  Tensor half({1000}, DType::bfloat16), back({1000}, DType::float32);
  ops::cast(src, half);
  ops::cast(half, back);
  const float* s = src.data<float>();
  const float* b = back.data<float>();
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(b[i], static_cast<float>(bfloat16(s[i]))) << i;
  Tensor ints({1000}, DType::int32);
  EXPECT_NE(systolic::testing::error_of([&] { ops::cast(src, ints); }).find("cast: dst is int32"),
            std::string::npos);
}
