// SimpleRNN, LSTM and GRU beyond the Keras fixtures (tests/test_conv_layers.cc predicts Keras's one-layer models;
// the keras_training "recurrent" case trains on from Keras's Adam state): the weights' initial values, Keras 3's
// weights-file layout (the cell's variables under cell/vars), what the layers refuse, and a training step on XLA as
// on the CPU; a GRU learning a real time series; dropout and recurrent_dropout as Keras 3's cells apply them.
#include <gmock/gmock.h>
#include <omp.h>
#include <systolic/systolic.h>

#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>

#include "io/hdf5.h"
#include "layers/config.h"
#include "layers/recurrent.h"
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

struct Float64Scope {
  Float64Scope() { set_floatx(DType::float64); }
  ~Float64Scope() { set_floatx(DType::float32); }
};

double sigmoid(double v) {
  return 1 / (1 + std::exp(-v));
}

// Keras 3's SimpleRNNCell, LSTMCell and GRUCell (reset_after) with dropout, written out in plain loops: gate g's
// input product reads x times input mask g (or the one mask), its recurrent product h times state mask g (Keras's
// implementation 1); GRU's z * h_prev reads h unmasked. Weights as Keras keeps them; masks empty: none. The outputs
// of every step [N, T, u].
std::vector<double> keras_cells(ops::RnnCell cell, const std::vector<double>& x, std::int64_t N,
                                std::int64_t T, std::int64_t F, std::int64_t u, const std::vector<double>& K,
                                const std::vector<double>& U, const std::vector<double>& b,
                                const std::vector<double>& in_masks, std::int64_t in_count,
                                const std::vector<double>& state_masks, bool reset_after = true) {
  const std::int64_t G = cell == ops::RnnCell::lstm ? 4 : cell == ops::RnnCell::gru ? 3 : 1, W = G * u;
  std::vector<double> out(N * T * u);
  for (std::int64_t n = 0; n < N; ++n) {
    std::vector<double> h(u, 0.0), c(u, 0.0);
    for (std::int64_t t = 0; t < T; ++t) {
      std::vector<double> xp(W), hp(W);
      for (std::int64_t g = 0; g < G; ++g)
        for (std::int64_t j = 0; j < u; ++j) {
          const std::int64_t col = g * u + j, mi = in_count == 1 ? 0 : g;
          double sx = b.empty() ? 0.0 : b[col],
                 sh = cell == ops::RnnCell::gru && reset_after && !b.empty() ? b[W + col] : 0.0;
          for (std::int64_t f = 0; f < F; ++f)
            sx += x[(n * T + t) * F + f] * (in_masks.empty() ? 1.0 : in_masks[(mi * N + n) * F + f]) *
                  K[f * W + col];
          for (std::int64_t k = 0; k < u; ++k)
            sh += h[k] * (state_masks.empty() ? 1.0 : state_masks[(g * N + n) * u + k]) * U[k * W + col];
          xp[col] = sx, hp[col] = sh;
        }
      std::vector<double> next(u);
      for (std::int64_t j = 0; j < u; ++j) {
        if (cell == ops::RnnCell::simple) {
          next[j] = std::tanh(xp[j] + hp[j]);
        } else if (cell == ops::RnnCell::lstm) {
          const double i = sigmoid(xp[j] + hp[j]), f = sigmoid(xp[u + j] + hp[u + j]),
                       cc = std::tanh(xp[2 * u + j] + hp[2 * u + j]),
                       o = sigmoid(xp[3 * u + j] + hp[3 * u + j]);
          c[j] = f * c[j] + i * cc;
          next[j] = o * std::tanh(c[j]);
        } else if (reset_after) {
          const double z = sigmoid(xp[j] + hp[j]), r = sigmoid(xp[u + j] + hp[u + j]),
                       hh = std::tanh(xp[2 * u + j] + r * hp[2 * u + j]);
          next[j] = z * h[j] + (1 - z) * hh;
        } else {  // the candidate's recurrent product reads r * h (times its mask)
          const double z = sigmoid(xp[j] + hp[j]);
          double rec = 0;
          for (std::int64_t k = 0; k < u; ++k)
            rec += sigmoid(xp[u + k] + hp[u + k]) * h[k] *
                   (state_masks.empty() ? 1.0 : state_masks[(2 * N + n) * u + k]) * U[k * W + 2 * u + j];
          next[j] = z * h[j] + (1 - z) * std::tanh(xp[2 * u + j] + rec);
        }
      }
      h = next;
      for (std::int64_t j = 0; j < u; ++j) out[(n * T + t) * u + j] = h[j];
    }
  }
  return out;
}

// Two epochs of make()'s model (inputs (6, 2), two classes) on 16 random sequences drawn with data_seed: on xla:cpu
// as one compiled step, its weights within 1e-5 of the CPU's; with check_trained, each of the CPU's weights moved.
void expect_xla_trains_as_cpu(const std::function<Model()>& make, std::uint64_t data_seed,
                              bool check_trained) {
  Tensor x = systolic::testing::random_tensor({16, 6, 2}, data_seed);
  std::vector<float> labels(16);
  for (int i = 0; i < 16; ++i) labels[i] = float(i % 2);
  Tensor y = Tensor::from_vector(labels, {16});
  FitOptions o{.batch_size = 8, .epochs = 2, .verbose = 0, .shuffle = false};
  Model cpu = make();
  auto initial = cpu.get_weights();
  cpu.fit(x, y, o);
  Model xla = to_accelerator(make(), distribute::OneDeviceStrategy(systolic::testing::xla_cpu()));
  xla.fit(x, y, o);
  EXPECT_EQ(xla.step_mode(), "graph") << xla.step_mode_reason();
  auto a = cpu.get_weights(), b = xla.get_weights();
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t k = 0; k < a.size(); ++k) {
    EXPECT_LT(systolic::testing::normalised_max_error(b[k].to(Device::cpu()), a[k]), 1e-5) << k;
    if (check_trained) EXPECT_NE(a[k].to_doubles(), initial[k].to_doubles()) << k;
  }
}

}  // namespace

// dropout and recurrent_dropout while training: the layer's outputs are Keras's cells' (implementation 1: a mask per
// gate, for the input too, once recurrent_dropout is set; one input mask with dropout alone) under the masks it
// drew, which hold 0 or 1/(1 - rate), are the same at every step, differ from gate to gate and from training step
// to training step, and come back for the same step. At inference nothing is dropped.
TEST(Recurrent, DropoutMasksAsKerasCellsApplyThem) {
  Float64Scope f64;
  const std::int64_t N = 3, T = 4, F = 5, u = 3;
  struct Case {
    const char* what;
    ops::RnnCell cell;
    layers::RecurrentOptions o;
    std::int64_t in_count, state_count;
  };
  const std::vector<Case> cases = {
      {"LSTM both", ops::RnnCell::lstm, {.dropout = 0.3, .recurrent_dropout = 0.4, .seed = 5}, 4, 4},
      {"GRU both", ops::RnnCell::gru, {.dropout = 0.5, .recurrent_dropout = 0.25, .seed = 6}, 3, 3},
      {"GRU input alone", ops::RnnCell::gru, {.dropout = 0.5, .seed = 7}, 1, 0},
      {"LSTM state alone", ops::RnnCell::lstm, {.recurrent_dropout = 0.5, .seed = 8}, 0, 4},
      {"SimpleRNN both", ops::RnnCell::simple, {.dropout = 0.4, .recurrent_dropout = 0.4, .seed = 9}, 1, 1},
      {"GRU reset_after=False both",
       ops::RnnCell::gru,
       {.reset_after = false, .dropout = 0.3, .recurrent_dropout = 0.3, .seed = 10},
       3,
       3},
      {"GRU reset_after=False input alone",
       ops::RnnCell::gru,
       {.reset_after = false, .dropout = 0.3, .seed = 11},
       1,
       0},
      {"GRU reset_after=False, no dropout", ops::RnnCell::gru, {.reset_after = false}, 0, 0},
  };
  Tensor x = systolic::testing::random_tensor({N, T, F}, 21, DType::float64);
  for (const Case& k : cases) {
    SCOPED_TRACE(k.what);
    layers::RecurrentOptions o = k.o;
    o.return_sequences = true;
    LayerRef layer = k.cell == ops::RnnCell::lstm  ? layers::LSTM(int(u), o)
                     : k.cell == ops::RnnCell::gru ? layers::GRU(int(u), o)
                                                   : layers::SimpleRNN(int(u), o);
    layer(layers::Input({T, F}, {.dtype = DType::float64}));
    auto& w = layer->weights();
    const auto K = w[0].value.to_doubles(), U = w[1].value.to_doubles(), b = w[2].value.to_doubles();
    TrainingStep step;
    auto run = [&](double at, bool training) {
      step.counter = Tensor::from_vector(std::vector<double>{at}, {1});
      LayerCall c;
      c.inputs = {x};
      c.output = Tensor({N, T, u}, DType::float64);
      c.training = training ? &step : nullptr;
      layer->call_forward(c);
      return c;
    };
    LayerCall c = run(3, true);
    const Tensor &im = c.saved[layers::kRecurrentInputMasks], &sm = c.saved[layers::kRecurrentStateMasks];
    ASSERT_EQ(im.defined(), k.in_count > 0);
    ASSERT_EQ(sm.defined(), k.state_count > 0);
    std::vector<double> in_masks, state_masks;
    if (im.defined()) {
      EXPECT_EQ(im.shape(), (Shape{k.in_count, N, F}));
      in_masks = im.to_doubles();
    }
    if (sm.defined()) {
      EXPECT_EQ(sm.shape(), (Shape{k.state_count, N, u}));
      state_masks = sm.to_doubles();
    }
    for (auto* masks : {&in_masks, &state_masks}) {
      const double rate = masks == &in_masks ? o.dropout : o.recurrent_dropout;
      std::size_t dropped = 0;
      for (double v : *masks) {
        EXPECT_TRUE(v == 0 || std::abs(v - 1 / (1 - rate)) < 1e-12) << v;
        dropped += v == 0;
      }
      if (!masks->empty()) {
        EXPECT_GT(dropped, 0u);
        EXPECT_LT(dropped, masks->size());
      }
    }
    if (k.in_count > 1)  // each gate its own mask
      EXPECT_NE(std::vector<double>(in_masks.begin(), in_masks.begin() + N * F),
                std::vector<double>(in_masks.begin() + N * F, in_masks.begin() + 2 * N * F));
    auto want = keras_cells(k.cell, x.to_doubles(), N, T, F, u, K, U, b, in_masks, k.in_count, state_masks,
                            o.reset_after);
    auto got = c.output.to_doubles();
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << i;
    // The same step draws the same masks; another step others.
    EXPECT_EQ(run(3, true).output.to_doubles(), got);
    if (k.in_count + k.state_count > 0) EXPECT_NE(run(4, true).output.to_doubles(), got);
    // Inference drops nothing.
    auto plain = keras_cells(k.cell, x.to_doubles(), N, T, F, u, K, U, b, {}, 0, {}, o.reset_after);
    auto inference = run(3, false).output.to_doubles();
    for (std::size_t i = 0; i < plain.size(); ++i) EXPECT_NEAR(inference[i], plain[i], 1e-12) << i;
  }
}

// dropout in the configs both ways (Keras clamps rates to [0, 1]; seed kept), and a tf.keras config's
// implementation 1, which draws an input mask per gate.
TEST(Recurrent, DropoutConfigs) {
  nlohmann::ordered_json c = {
      {"name", "l"}, {"units", 3}, {"dropout", 1.5}, {"recurrent_dropout", -0.5}, {"seed", 42}};
  auto l = layers::layer_from_config("LSTM", c);
  nlohmann::ordered_json back;
  l->get_config(back);
  EXPECT_EQ(back["dropout"], 1.0);
  EXPECT_EQ(back["recurrent_dropout"], 0.0);
  EXPECT_EQ(back["seed"], 42);
  c = {{"name", "g"}, {"units", 2}, {"dropout", 0.5}, {"implementation", 1}};
  auto g = layers::layer_from_config("GRU", c);
  EXPECT_TRUE(layers::recurrent_spec_of(*g)->gate_masks);
  c = {{"name", "g"}, {"units", 2}, {"dropout", 0.5}, {"implementation", 2}};
  EXPECT_FALSE(layers::recurrent_spec_of(*layers::layer_from_config("GRU", c))->gate_masks);
}

// A Bidirectional GRU with dropout and recurrent_dropout over an LSTM with them trains on xla:cpu as on the CPU:
// the same masks (Philox on both) and the same products, step for step.
TEST(Recurrent, DropoutTrainsOnXlaAsOnTheCpu) {
  SYSTOLIC_REQUIRE_XLA();
  auto make = [] {
    set_random_seed(13);
    auto in = layers::Input({6, 2});
    // Seeds given: to_accelerator copies the model through its config, where a layer without one draws anew.
    auto x =
        layers::LSTM(4, {.dropout = 0.2, .recurrent_dropout = 0.3, .seed = 1, .return_sequences = true})(in);
    x = layers::Bidirectional(layers::GRU(3, {.dropout = 0.25, .recurrent_dropout = 0.2, .seed = 2}))(x);
    x = layers::RepeatVector(3)(x);
    // GRU without reset_after (its gates' products apart) with dropout too.
    x = layers::GRU(3, {.reset_after = false, .dropout = 0.2, .recurrent_dropout = 0.2, .seed = 4})(x);
    Model m(in, layers::Dense(2, {.activation = "softmax"})(x), "rnn_dropout");
    m.compile(optimizers::Adam(0.01), "sparse_categorical_crossentropy", {"accuracy"});
    return m;
  };
  expect_xla_trains_as_cpu(make, 15, true);
}

// On the CPU with two threads a Bidirectional runs its two directions at once (each on one thread): predictions,
// a training epoch (dropout and a mask included) and the weights it leaves equal those of the runs in turn (one
// thread).
TEST(Recurrent, BidirectionalDirectionsAtOnceEqualInTurn) {
  auto make = [] {
    set_random_seed(17);
    auto in = layers::Input({7});
    auto x = layers::Embedding(12, 4, {.mask_zero = true})(in);
    x = layers::Bidirectional(
        layers::LSTM(5, {.dropout = 0.2, .recurrent_dropout = 0.2, .seed = 3, .return_sequences = true}))(x);
    x = layers::Bidirectional(layers::GRU(3), {.merge_mode = "sum"})(x);
    Model m(in, layers::Dense(2, {.activation = "softmax"})(x), "bi");
    m.compile(optimizers::Adam(0.01), "sparse_categorical_crossentropy");
    return m;
  };
  std::vector<float> ids, labels;
  for (int i = 0; i < 24; ++i) {
    for (int t = 0; t < 7; ++t) ids.push_back(t < 3 + i % 4 ? float((i * 7 + t * 3) % 11 + 1) : 0.0f);
    labels.push_back(float(i % 2));
  }
  Tensor x = Tensor::from_vector(ids, {24, 7}), y = Tensor::from_vector(labels, {24});
  const int threads = omp_get_max_threads();
  auto run = [&](int n) {
    omp_set_num_threads(n);
    Model m = make();
    auto p = m.predict(x).to_doubles();
    m.fit(x, y, {.batch_size = 8, .epochs = 1, .verbose = 0, .shuffle = false});
    std::vector<double> w;
    for (const Tensor& t : m.get_weights())
      for (double v : t.to_doubles()) w.push_back(v);
    omp_set_num_threads(threads);
    return std::make_pair(p, w);
  };
  auto [p1, w1] = run(1);
  auto [p2, w2] = run(2);
  ASSERT_EQ(p1.size(), p2.size());
  for (std::size_t i = 0; i < p1.size(); ++i) EXPECT_NEAR(p1[i], p2[i], 1e-6) << i;
  ASSERT_EQ(w1.size(), w2.size());
  for (std::size_t i = 0; i < w1.size(); ++i) EXPECT_NEAR(w1[i], w2[i], 1e-5) << i;
}

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
  expect_xla_trains_as_cpu(make, 5, false);
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
