// TimeDistributed beyond the Keras fixtures (tests/test_conv_layers.cc) and the finite differences
// (tests/test_gradients.cc): the wrapped layer's values at every step, training through the wrapper's weights,
// masks, refusals, a .keras round trip and xla:cpu.
#include <gmock/gmock.h>
#include <systolic/systolic.h>

#include "test_util.h"
#include "xla_test_util.h"

using namespace systolic;
using systolic::testing::error_of;
using systolic::testing::TempDir;
using ::testing::HasSubstr;

namespace {

Model wrapped_dense() {
  auto in = layers::Input({5, 3});
  return Model(in, layers::TimeDistributed(layers::Dense(4, {.activation = "relu"}))(in), "wrapped");
}

Tensor steps_input() {
  std::vector<float> v(2 * 5 * 3);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = float(std::sin(0.7 * double(i)));
  return Tensor::from_vector(v, {2, 5, 3});
}

}  // namespace

// Each step's output is the wrapped Dense's output for that step alone.
TEST(TimeDistributed, EveryStepAsTheWrappedLayer) {
  Model m = wrapped_dense();
  auto in = layers::Input({3});
  Model dense(in, layers::Dense(4, {.activation = "relu"})(in), "dense");
  dense.set_weights(m.get_weights());
  ASSERT_EQ(m.layers()[1]->weights().size(), 2u);
  EXPECT_EQ(m.layers()[1]->weights()[0].name, "kernel");
  EXPECT_EQ(m.count_params(), 3 * 4 + 4);
  Tensor x = steps_input();
  auto a = m.predict(x).to_doubles(), b = dense.predict(x.reshape({10, 3})).to_doubles();
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_FLOAT_EQ(a[i], b[i]) << i;
}

// fit updates the wrapper's weights (the wrapped layer's gradients land in them); a .keras file keeps them.
TEST(TimeDistributed, TrainsAndRoundTrips) {
  set_random_seed(3);
  Model m = wrapped_dense();
  m.compile(optimizers::Adam(0.01), "mse");
  Tensor x = steps_input(), y = Tensor::full({2, 5, 4}, 0.5);
  auto before = m.get_weights()[0].to_doubles();
  auto h = m.fit(x, y, {.batch_size = 2, .epochs = 20, .verbose = 0});
  auto after = m.get_weights()[0].to_doubles();
  EXPECT_NE(before, after);
  EXPECT_LT(h.history.at("loss").back(), h.history.at("loss").front());
  TempDir tmp;
  m.save(tmp.file("m.keras"));
  Model back = load_model(tmp.file("m.keras"));
  EXPECT_EQ(back.layers()[1]->class_name(), "TimeDistributed");
  auto a = m.predict(x).to_doubles(), b = back.predict(x).to_doubles();
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_FLOAT_EQ(a[i], b[i]) << i;
}

// A (N, T) mask passes through TimeDistributed(Dense) as through Dense; a wrapped layer that would read it refuses.
TEST(TimeDistributed, MasksAndRefusals) {
  auto in = layers::Input({6});
  auto x = layers::Embedding(10, 3, {.mask_zero = true})(in);
  x = layers::LSTM(4, {.return_sequences = true})(x);
  x = layers::TimeDistributed(layers::Dense(2))(x);
  x = layers::LSTM(2)(x);  // skips the padded steps only if the mask came through
  Model padded(in, x, "masked");
  auto in2 = layers::Input({3});
  auto y = layers::Embedding(10, 3, {.mask_zero = true})(in2);
  y = layers::LSTM(4, {.return_sequences = true})(y);
  y = layers::TimeDistributed(layers::Dense(2))(y);
  Model short_one(in2, layers::LSTM(2)(y), "short");
  short_one.set_weights(padded.get_weights());
  Tensor ids = Tensor::from_vector(std::vector<float>{4, 2, 7, 0, 0, 0}, {1, 6});
  Tensor cut = Tensor::from_vector(std::vector<float>{4, 2, 7}, {1, 3});
  auto a = padded.predict(ids).to_doubles(), b = short_one.predict(cut).to_doubles();
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6) << i;

  auto in3 = layers::Input({6});
  auto z = layers::Embedding(10, 3, {.mask_zero = true})(in3);
  auto td = layers::TimeDistributed(layers::Reshape({3, 1}));
  EXPECT_THAT(error_of([&] { Model(in3, td(z), "refused"); }), HasSubstr("TimeDistributed(Reshape)"));
  EXPECT_THAT(error_of([] { layers::TimeDistributed(layers::BatchNormalization()); }),
              HasSubstr("normalises each step's batch apart"));
  auto flat = layers::Input({4});
  EXPECT_THAT(error_of([&] { layers::TimeDistributed(layers::Dense(2))(flat); }),
              HasSubstr("at least 2 dimensions"));
}

// The model copied to xla:cpu (through its config) predicts what the CPU predicts.
TEST(TimeDistributed, RunsOnXla) {
  SYSTOLIC_REQUIRE_XLA();
  auto in = layers::Input({3, 6, 5, 2});
  auto x = layers::TimeDistributed(layers::Conv2D(3, {3, 3}, {.padding = "same", .activation = "tanh"}))(in);
  x = layers::TimeDistributed(layers::GlobalAveragePooling2D())(x);
  x = layers::LSTM(2)(x);
  Model cpu(in, x, "frames");
  Model xla = to_accelerator(cpu, distribute::OneDeviceStrategy(systolic::testing::xla_cpu()));
  std::vector<float> v(2 * 3 * 6 * 5 * 2);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = float(std::cos(0.3 * double(i)));
  Tensor frames = Tensor::from_vector(v, {2, 3, 6, 5, 2});
  auto a = cpu.predict(frames).to_doubles(), b = xla.predict(frames).to_doubles();
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5) << i;
}
