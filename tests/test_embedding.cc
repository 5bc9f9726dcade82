// Embedding beyond the Keras fixtures (tests/test_conv_layers.cc predicts Keras's one-layer models; the keras_training
// "text" case trains on from Keras's SGD state, and "masked_text" with mask_zero; tests/test_masks.cc): what it
// refuses, ids out of range, and ids above bfloat16's exact integers under mixed precision (Keras's autocast=False).
// (tests/test_masks.cc trains the masked_text fixture's Embedding on XLA as on the CPU.)
#include <gmock/gmock.h>
#include <systolic/systolic.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "layers/config.h"
#include "test_util.h"

using namespace systolic;
using systolic::testing::error_of;
using ::testing::HasSubstr;

namespace {

Model one_layer(int input_dim, int output_dim, Shape ids, const std::string& name = "m") {
  auto in = layers::Input(ids);
  return Model(in, layers::Embedding(input_dim, output_dim)(in), name);
}

}  // namespace

TEST(Embedding, RefusesWhatItDoesNotDoByName) {
  EXPECT_THAT(error_of([] { layers::Embedding(0, 4); }),
              HasSubstr("input_dim must be a positive integer, got 0"));
  EXPECT_THAT(error_of([] { layers::Embedding(3, -1); }), HasSubstr("output_dim must be a positive integer"));
  nlohmann::ordered_json c = {{"name", "e"}, {"output_dim", 4}};
  EXPECT_THAT(error_of([&] { layers::layer_from_config("Embedding", c); }), HasSubstr("input_dim"));
  c = {{"name", "e"}, {"input_dim", 10}, {"output_dim", 4}, {"lora_rank", 2}};
  EXPECT_THAT(error_of([&] { layers::layer_from_config("Embedding", c); }), HasSubstr("lora_rank"));
  // tf.keras's input_length is read and has no effect (the model's input gives the length).
  c = {{"name", "e"}, {"input_dim", 10}, {"output_dim", 4}, {"input_length", 7}};
  auto e = layers::layer_from_config("Embedding", c);
  EXPECT_EQ((*e)(layers::Input({7})).shape(), (Shape{7, 4}));
}

// Keras's default initializer is "uniform" (RandomUniform(-0.05, 0.05)); the output gathers the table's rows.
TEST(Embedding, GathersRowsOfTheTable) {
  Model m = one_layer(6, 3, {4});
  const Tensor table = m.get_weights()[0];
  EXPECT_EQ(table.shape(), (Shape{6, 3}));
  for (double v : table.to_doubles()) EXPECT_LE(std::abs(v), 0.05);
  Tensor ids = Tensor::from_vector(std::vector<float>{5, 0, 2.9f, 5, 1, 1, 0.2f, 3}, {2, 4});
  Tensor y = m.predict(ids);
  ASSERT_EQ(y.shape(), (Shape{2, 4, 3}));
  const std::vector<int> rows = {5, 0, 2, 5, 1, 1, 0, 3};
  auto t = table.to_doubles(), got = y.to_doubles();
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 3; ++j) EXPECT_EQ(got[i * 3 + j], t[rows[i] * 3 + j]) << i;
}

TEST(Embedding, AnIdOutOfRangeIsAnError) {
  Model m = one_layer(5, 2, {3});
  for (float bad : {5.0f, -1.0f, std::numeric_limits<float>::quiet_NaN(), 1e10f}) {
    Tensor ids = Tensor::from_vector(std::vector<float>{0, bad, 1}, {1, 3});
    EXPECT_THAT(error_of([&] { m.predict(ids); }), HasSubstr("out of range [0, 5)")) << bad;
  }
}

// Under mixed_bfloat16 the ids reach the layer in float32 (bfloat16 holds integers exactly only up to 256), and the
// output is the table's rows rounded to bfloat16, as Keras's cast of the gathered rows gives.
TEST(Embedding, MixedPrecisionKeepsIdsExact) {
  mixed_precision::set_global_policy("mixed_bfloat16");
  auto in = layers::Input({3});
  auto e = layers::Embedding(1000, 2);
  Model m(in, e(in), "mixed");
  mixed_precision::set_global_policy("float32");
  EXPECT_EQ(e->compute_dtype(), DType::bfloat16);
  EXPECT_EQ(e->dtype(), DType::float32);
  auto table = e->weights()[0].value.to_doubles();
  Tensor ids = Tensor::from_vector(std::vector<float>{257, 999, 513}, {1, 3});
  auto got = m.predict(ids).to(DType::float32).to_doubles();
  const int rows[] = {257, 999, 513};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j) {
      float want = static_cast<float>(bfloat16(static_cast<float>(table[rows[i] * 2 + j])));
      EXPECT_EQ(got[i * 2 + j], want) << i;
    }
}
