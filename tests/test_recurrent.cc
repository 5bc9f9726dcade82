// SimpleRNN, LSTM and GRU beyond the Keras fixtures (tests/test_conv_layers.cc predicts Keras's one-layer models;
// the keras_training "recurrent" case trains on from Keras's Adam state): the weights' initial values, Keras 3's
// weights-file layout (the cell's variables under cell/vars), what the layers refuse, and a training step on XLA as
// on the CPU; and a GRU learning a real time series.
#include <gmock/gmock.h>
#include <systolic/systolic.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "io/hdf5.h"
#include "layers/config.h"
#include "test_util.h"
#include "xla_test_util.h"

using namespace systolic;
using systolic::testing::error_of;
using ::testing::HasSubstr;

namespace {

Model lstm_model(const layers::RecurrentOptions& o = {}) {
  auto in = layers::Input({5, 3});
  auto x = layers::LSTM(4, o)(in);
  return Model(in, layers::Dense(2)(x), "m");
}

}  // namespace

// Keras's names and shapes; the LSTM's bias starts with the forget gate's block at 1 (unit_forget_bias), GRU's is
// (2, 3 units).
TEST(Recurrent, WeightsAsKerasMakesThem) {
  Model m = lstm_model();
  auto& w = m.layers()[1]->weights();
  ASSERT_EQ(w.size(), 3u);
  EXPECT_EQ(w[0].name, "lstm_cell/kernel");
  EXPECT_EQ(w[0].value.shape(), (Shape{3, 16}));
  EXPECT_EQ(w[1].name, "lstm_cell/recurrent_kernel");
  EXPECT_EQ(w[1].value.shape(), (Shape{4, 16}));
  EXPECT_EQ(w[2].name, "lstm_cell/bias");
  auto b = w[2].value.to_doubles();
  for (int i = 0; i < 16; ++i) EXPECT_EQ(b[i], i >= 4 && i < 8 ? 1.0 : 0.0) << i;
  // The recurrent kernel is orthogonal: U U^T = I (4 x 16: orthonormal rows).
  auto u = w[1].value.to_doubles();
  for (int r = 0; r < 4; ++r)
    for (int s = 0; s < 4; ++s) {
      double dot = 0;
      for (int k = 0; k < 16; ++k) dot += u[r * 16 + k] * u[s * 16 + k];
      EXPECT_NEAR(dot, r == s ? 1.0 : 0.0, 1e-5);
    }
  auto in = layers::Input({5, 3});
  auto g = layers::GRU(2);
  Model gm(in, g(in), "g");
  EXPECT_EQ(g->weights()[2].name, "gru_cell/bias");
  EXPECT_EQ(g->weights()[2].value.shape(), (Shape{2, 6}));
}

// Keras 3's .weights.h5 keeps an RNN's variables under layers/<key>/cell/vars (and an empty layers/<key>/vars), as
// Keras writes them; systolic reads its own file back.
TEST(Recurrent, Keras3WeightsFileKeepsTheCellsVariables) {
  systolic::testing::TempDir dir;
  Model m = lstm_model();
  m.save_weights(dir.file("m.weights.h5"));
  auto root = hdf5::read_file(dir.file("m.weights.h5"));
  ASSERT_TRUE(root.has_group("layers/lstm/cell/vars"));
  EXPECT_EQ(root.group("layers/lstm/cell/vars").children(), (std::vector<std::string>{"0", "1", "2"}));
  ASSERT_TRUE(root.has_group("layers/lstm/vars"));
  EXPECT_TRUE(root.group("layers/lstm/vars").children().empty());
  Model back = lstm_model();
  back.load_weights(dir.file("m.weights.h5"));
  for (std::size_t k = 0; k < m.get_weights().size(); ++k)
    EXPECT_EQ(back.get_weights()[k].to_doubles(), m.get_weights()[k].to_doubles());
}

TEST(Recurrent, RefusesWhatItDoesNotDoByName) {
  EXPECT_THAT(error_of([] { layers::GRU(3, {.reset_after = false}); }), HasSubstr("reset_after=False"));
  EXPECT_THAT(error_of([] { layers::LSTM(3, {.dropout = 0.2}); }), HasSubstr("dropout"));
  EXPECT_THAT(error_of([] { layers::LSTM(3, {.activation = "softmax"}); }), HasSubstr("softmax"));
  EXPECT_THAT(error_of([] { layers::LSTM(0); }), HasSubstr("units must be positive"));
  EXPECT_THAT(error_of([] { layers::LSTM(3)(layers::Input({5})); }), HasSubstr("expects sequences"));
  nlohmann::ordered_json c = {{"name", "l"}, {"units", 3}, {"return_state", true}};
  EXPECT_THAT(error_of([&] { layers::layer_from_config("LSTM", c); }), HasSubstr("return_state"));
  c = {{"name", "l"}, {"units", 3}, {"stateful", true}};
  EXPECT_THAT(error_of([&] { layers::layer_from_config("GRU", c); }), HasSubstr("stateful"));
  c = {{"name", "l"}, {"units", 3}, {"time_major", true}};
  EXPECT_THAT(error_of([&] { layers::layer_from_config("SimpleRNN", c); }), HasSubstr("time_major"));
  c = {{"name", "l"}};
  EXPECT_THAT(error_of([&] { layers::layer_from_config("LSTM", c); }), HasSubstr("units"));
}

// A GRU over an LSTM's sequences trained two epochs on xla:cpu as on the CPU (the steps' ops in one compiled step).
TEST(Recurrent, TrainsOnXlaAsOnTheCpu) {
  SYSTOLIC_REQUIRE_XLA();
  auto make = [] {
    set_random_seed(3);
    auto in = layers::Input({6, 2});
    auto x = layers::LSTM(4, {.return_sequences = true})(in);
    x = layers::GRU(3, {.go_backwards = true})(x);
    Model m(in, layers::Dense(2, {.activation = "softmax"})(x), "rnn");
    m.compile(optimizers::Adam(0.01), "sparse_categorical_crossentropy", {"accuracy"});
    return m;
  };
  Tensor x = systolic::testing::random_tensor({16, 6, 2}, 5);
  std::vector<float> labels(16);
  for (int i = 0; i < 16; ++i) labels[i] = float(i % 2);
  Tensor y = Tensor::from_vector(labels, {16});
  FitOptions o{.batch_size = 8, .epochs = 2, .verbose = 0, .shuffle = false};
  Model cpu = make();
  cpu.fit(x, y, o);
  Model xla = to_accelerator(make(), distribute::OneDeviceStrategy(systolic::testing::xla_cpu()));
  xla.fit(x, y, o);
  EXPECT_EQ(xla.step_mode(), "graph") << xla.step_mode_reason();
  auto a = cpu.get_weights(), b = xla.get_weights();
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t k = 0; k < a.size(); ++k)
    EXPECT_LT(systolic::testing::normalised_max_error(b[k].to(Device::cpu()), a[k]), 1e-5) << k;
}

// Real data (the UCR archive's ItalyPowerDemand, tests/fixtures/series): a small GRU learns to tell winter days from
// summer ones by their hourly demand, well above the 50% of a guess on the 1029 test days.
TEST(Recurrent, LearnsARealTimeSeries) {
  auto d =
      datasets::load("npz:" + systolic::testing::source_dir() + "/tests/fixtures/series/italy_power.npz");
  ASSERT_EQ(d.train.x.shape(), (Shape{67, 24, 1}));
  ASSERT_EQ(d.test.x.shape(), (Shape{1029, 24, 1}));
  set_random_seed(11);
  auto in = layers::Input({24, 1});
  auto x = layers::GRU(16)(in);
  Model m(in, layers::Dense(2, {.activation = "softmax"})(x), "italy");
  m.compile(optimizers::Adam(0.01), "sparse_categorical_crossentropy", {"accuracy"});
  m.fit(d.train.x, d.train.y, {.batch_size = 8, .epochs = 30, .verbose = 0});
  auto scores = m.evaluate(d.test.x, d.test.y, {.batch_size = 128, .verbose = 0});
  std::printf("ItalyPowerDemand: test accuracy %.4f\n", scores[1]);
  EXPECT_GT(scores[1], 0.85);
}

// Under mixed_bfloat16 the recurrent layers compute in bfloat16 (the CPU rounds each op's inputs and outputs, as
// its other ops do) with float32 weights: the predictions of a float32 copy within bfloat16's rounding, and a
// training step runs.
TEST(Recurrent, RunsUnderMixedBfloat16) {
  auto make = [](const std::string& policy) {
    mixed_precision::set_global_policy(policy);
    set_random_seed(4);
    auto in = layers::Input({6, 3});
    auto x = layers::Bidirectional(layers::LSTM(4, {.return_sequences = true}))(in);
    x = layers::GRU(3)(x);
    Model m(in, layers::Dense(2, {.activation = "softmax"})(x), "mixed");
    mixed_precision::set_global_policy("float32");
    return m;
  };
  Model mixed = make("mixed_bfloat16"), plain = make("float32");
  plain.set_weights(mixed.get_weights());
  EXPECT_EQ(mixed.layers()[1]->compute_dtype(), DType::bfloat16);
  Tensor x = systolic::testing::random_tensor({4, 6, 3}, 9);
  EXPECT_LT(systolic::testing::normalised_max_error(mixed.predict(x).to(DType::float32), plain.predict(x)),
            2e-2);
  mixed.compile(optimizers::Adam(0.01), "sparse_categorical_crossentropy");
  Tensor y = Tensor::from_vector(std::vector<float>{0, 1, 1, 0}, {4});
  auto before = mixed.get_weights()[0].to_doubles();
  mixed.fit(x, y, {.batch_size = 4, .epochs = 1, .verbose = 0});
  EXPECT_NE(mixed.get_weights()[0].to_doubles(), before);
}
