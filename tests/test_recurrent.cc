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
  nlohmann::ordered_json c = {{"name", "l"}, {"units", 3}, {"time_major", true}};
  EXPECT_THAT(error_of([&] { layers::layer_from_config("SimpleRNN", c); }), HasSubstr("time_major"));
  c = {{"name", "l"}};
  EXPECT_THAT(error_of([&] { layers::layer_from_config("LSTM", c); }), HasSubstr("units"));
}

// return_state: [output, h, (c)] from call_all, the states after the last step (with a mask, after the last step
// that counts); initial_state: zeros give what no states give, others change the result; the shapes are checked.
TEST(Recurrent, StatesInAndOut) {
  auto in = layers::Input({5, 3});
  auto lstm = layers::LSTM(4, {.return_sequences = true, .return_state = true});
  auto outs = lstm.call_all({in});
  ASSERT_EQ(outs.size(), 3u);
  EXPECT_EQ(outs[0].shape(), Shape({5, 4}));
  EXPECT_EQ(outs[1].shape(), Shape({4}));
  EXPECT_EQ(outs[2].shape(), Shape({4}));
  EXPECT_EQ(layers::GRU(2, {.return_state = true}).call_all({in}).size(), 2u);
  EXPECT_EQ(layers::SimpleRNN(2).call_all({in}).size(), 1u);
  Model m(std::vector<SymbolicTensor>{in}, outs, "states");
  Tensor x = systolic::testing::random_tensor({3, 5, 3}, 4);
  auto y = m.predict_outputs(x);
  ASSERT_EQ(y.size(), 3u);
  auto seq = y[0].to_doubles(), h = y[1].to_doubles();
  for (int n = 0; n < 3; ++n)
    for (int j = 0; j < 4; ++j) EXPECT_EQ(h[n * 4 + j], seq[(n * 5 + 4) * 4 + j]) << n << " " << j;
  // The same layer from zero initial states, and from others.
  auto h0 = layers::Input({4}), c0 = layers::Input({4});
  auto again = lstm.call_all({in, h0, c0});
  Model from(std::vector<SymbolicTensor>{in, h0, c0}, again, "from");
  Tensor zeros = Tensor::zeros({3, 4}), ones = Tensor::full({3, 4}, 0.5);
  auto z = from.predict_outputs({x, zeros, zeros}), o = from.predict_outputs({x, ones, zeros});
  for (std::size_t k = 0; k < 3; ++k) EXPECT_EQ(z[k].to_doubles(), y[k].to_doubles()) << k;
  EXPECT_NE(o[2].to_doubles(), y[2].to_doubles());
  EXPECT_THAT(error_of([&] {
                lstm.call_all({in, h0});
              }),
              HasSubstr("initial_state takes 2 state(s) (h, c), got 1"));
  EXPECT_THAT(error_of([&] {
                lstm.call_all({in, layers::Input({3}), c0});
              }),
              HasSubstr("an initial state has shape (None, 4), got (None, 3)"));
  EXPECT_THAT(error_of([&] { lstm.call_all({in, h0, c0, c0}); }), HasSubstr("takes 1 to 3 inputs, got 4"));
  // Masked steps carry the state: the final states of zero-padded series are those of the unpadded ones.
  auto min = layers::Input({5, 3});
  auto gru = layers::GRU(3, {.return_state = true});
  Model masked(min, gru.call_all({layers::Masking()(min)})[1], "masked");
  auto sin = layers::Input({3, 3});
  Model shorter(sin, layers::GRU(3, {.return_state = true}).call_all({sin})[1], "shorter");
  shorter.set_weights(masked.get_weights());
  Tensor padded = Tensor::zeros({2, 5, 3}), cut = systolic::testing::random_tensor({2, 3, 3}, 5);
  for (int n = 0; n < 2; ++n)
    for (int t = 0; t < 3; ++t)
      for (int f = 0; f < 3; ++f)
        padded.data<float>()[(n * 5 + t) * 3 + f] = cut.data<float>()[(n * 3 + t) * 3 + f];
  EXPECT_LT(systolic::testing::normalised_max_error(masked.predict(padded), shorter.predict(cut)), 1e-6);
}

// A model of states written as Keras writes one: Keras 3's initial_state call argument, tf.keras's inputs listed
// with the sequences, the outputs' tensor indices; read back, it predicts the same. Bidirectional's merge_mode None
// is written as null.
TEST(Recurrent, StatesModelConfigsBothWays) {
  auto in = layers::Input({4, 2});
  auto a = layers::LSTM(3, {.return_state = true, .name = "enc"}).call_all({in});
  auto b = layers::GRU(3, {.return_sequences = true, .name = "dec"})({in, a[1]});
  auto bi =
      layers::Bidirectional(layers::SimpleRNN(2, {.return_state = true}), {.merge_mode = "", .name = "bi"})
          .call_all({b});
  Model m(std::vector<SymbolicTensor>{in}, {layers::Dense(2, {.name = "head"})(b), a[2], bi[1], bi[3]}, "m");
  Tensor x = systolic::testing::random_tensor({2, 4, 2}, 6);
  auto want = m.predict_outputs(x);
  for (auto target : {KerasTarget::keras3, KerasTarget::tf_keras}) {
    auto j = nlohmann::json::parse(m.to_json(-1, target));
    nlohmann::json dec, layers_by_name;
    for (auto& l : j["config"]["layers"]) layers_by_name[l["name"].get<std::string>()] = l;
    dec = layers_by_name["dec"]["inbound_nodes"][0];
    if (target == KerasTarget::keras3) {
      EXPECT_EQ(dec["kwargs"]["initial_state"][0]["config"]["keras_history"], nlohmann::json({"enc", 0, 1}));
    } else {
      EXPECT_EQ(dec[1], nlohmann::json({"enc", 0, 1, nlohmann::json::object()}));
    }
    EXPECT_TRUE(layers_by_name["bi"]["config"]["merge_mode"].is_null());
    EXPECT_EQ(j["config"]["output_layers"][1], nlohmann::json({"enc", 0, 2}));
    EXPECT_EQ(j["config"]["output_layers"][3], nlohmann::json({"bi", 0, 3}));
    Model back = model_from_json(m.to_json(-1, target));
    back.set_weights(m.get_weights());
    auto got = back.predict_outputs(x);
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t k = 0; k < got.size(); ++k) EXPECT_EQ(got[k].to_doubles(), want[k].to_doubles()) << k;
  }
  EXPECT_THAT(m.summary_string(), HasSubstr("enc (LSTM)                      [(None, 3), (None, 3"));
  // A reference to an output the call does not have, and initial states that are not a list: named.
  auto bad = nlohmann::json::parse(m.to_json());
  bad["config"]["output_layers"][1] = nlohmann::json({"enc", 0, 5});
  EXPECT_THAT(error_of([&] { model_from_json(bad.dump()); }),
              HasSubstr("output_layers takes output 5 of 'enc' node 0, which has 3 output(s)"));
  bad = nlohmann::json::parse(m.to_json());
  for (auto& l : bad["config"]["layers"])
    if (l["name"] == "dec") l["inbound_nodes"][0]["kwargs"]["initial_state"] = 3;
  EXPECT_THAT(error_of([&] { model_from_json(bad.dump()); }), HasSubstr("call argument 'initial_state'=3"));
  EXPECT_THAT(m.summary_string(), HasSubstr("enc[0][1]"));
}

// Keras 3 runs every step of an RNN given initial states (no mask reaches it); tf.keras skips the masked ones. The
// tf.keras form of such a call is refused both ways rather than read with Keras 3's meaning.
TEST(Recurrent, InitialStatesWithAMaskFollowKeras3) {
  auto in = layers::Input({4, 2}, {.name = "x"});
  auto h0 = layers::Input({3}, {.name = "h0"});
  auto y = layers::GRU(3, {.name = "gru"})({layers::Masking({.name = "masking"})(in), h0});
  Model m(std::vector<SymbolicTensor>{in, h0}, {y}, "m");
  EXPECT_THAT(error_of([&] { m.to_json(-1, KerasTarget::tf_keras); }),
              HasSubstr("layer 'gru' (GRU) is given initial states and a masked input: tf.keras skips"));
  auto j = nlohmann::json::parse(m.to_json(-1, KerasTarget::keras3));
  EXPECT_NO_THROW(model_from_json(j.dump()));
  for (auto& l : j["config"]["layers"])
    if (l["name"] == "gru")
      l["inbound_nodes"] = nlohmann::json::parse(R"([[["masking", 0, 0, {}], ["h0", 0, 0, {}]]])");
  EXPECT_THAT(error_of([&] { model_from_json(j.dump()); }),
              HasSubstr("tf.keras skips the masked steps there"));
  // Keras 3: the padded steps run, as if nothing were masked (the same layer without Masking gives the same).
  Model unmasked(std::vector<SymbolicTensor>{in, h0}, {m.get_layer("gru").call_all({in, h0})[0]}, "unmasked");
  Tensor x = systolic::testing::random_tensor({2, 4, 2}, 8), h = systolic::testing::random_tensor({2, 3}, 9);
  for (int f = 0; f < 4; ++f) x.data<float>()[6 + f] = 0;  // the first series' last two steps are padding
  EXPECT_EQ(m.predict({x, h}).to_doubles(), unmasked.predict({x, h}).to_doubles());
}

// A nested model whose outputs are an LSTM's final states (keras-io's seq2seq encoder) called inside another, and the
// same under mixed_bfloat16 (the states in bfloat16, a float32 input state autocast): the caller predicts as the
// nested model's own layers do, and trains.
TEST(Recurrent, StatesThroughANestedModelAndMixedPrecision) {
  for (const char* policy : {"float32", "mixed_bfloat16"}) {
    SCOPED_TRACE(policy);
    mixed_precision::set_global_policy(policy);
    set_random_seed(6);
    auto ein = layers::Input({5, 3});
    auto enc = layers::LSTM(4, {.return_state = true}).call_all({ein});
    Model encoder(std::vector<SymbolicTensor>{ein}, {enc[1], enc[2]}, "encoder");
    auto in = layers::Input({5, 3}), din = layers::Input({4, 2});
    auto states = encoder.call({in});
    auto dec = layers::LSTM(4, {.return_sequences = true})({din, states[0], states[1]});
    Model m(std::vector<SymbolicTensor>{in, din}, {layers::Dense(2, {.activation = "softmax"})(dec)},
            "seq2seq");
    mixed_precision::set_global_policy("float32");
    Tensor x = systolic::testing::random_tensor({4, 5, 3}, 10),
           d = systolic::testing::random_tensor({4, 4, 2}, 11);
    auto got = m.predict_outputs({x, d});
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].shape(), Shape({4, 4, 2}));
    auto s = encoder.predict_outputs(x);
    ASSERT_EQ(s.size(), 2u);
    EXPECT_NE(s[0].to_doubles(), s[1].to_doubles());  // h and c
    m.compile(optimizers::Adam(0.01), "mse");
    Tensor y = Tensor::zeros({4, 4, 2});
    auto before = m.get_weights()[0].to_doubles();  // the encoder's kernel: trained through the states alone
    m.fit({x, d}, y, {.batch_size = 4, .epochs = 1, .verbose = 0});
    EXPECT_NE(m.get_weights()[0].to_doubles(), before);
  }
}

// stateful: each call starts from the states the last one ended with, so a series fed in two halves gives what the
// whole series gives; reset_states goes back to zeros; another batch size is refused; the config keeps stateful and
// the Input's batch size.
TEST(Recurrent, StatefulCarriesStatesAcrossCalls) {
  auto in = layers::Input({3, 2}, {.batch_size = 2});
  Model half(in, layers::GRU(4, {.return_sequences = true, .stateful = true})(in), "half");
  auto whole_in = layers::Input({6, 2});
  Model whole(whole_in, layers::GRU(4, {.return_sequences = true})(whole_in), "whole");
  whole.set_weights(half.get_weights());
  Tensor x = systolic::testing::random_tensor({2, 6, 2}, 7), first({2, 3, 2}), second({2, 3, 2});
  for (int n = 0; n < 2; ++n)
    for (int i = 0; i < 6; ++i) {
      first.data<float>()[n * 6 + i] = x.data<float>()[n * 12 + i];
      second.data<float>()[n * 6 + i] = x.data<float>()[n * 12 + 6 + i];
    }
  auto y = whole.predict(x).to_doubles();
  auto y1 = half.predict(first).to_doubles(), y2 = half.predict(second).to_doubles();
  for (int n = 0; n < 2; ++n)
    for (int i = 0; i < 12; ++i) {
      EXPECT_NEAR(y1[n * 12 + i], y[n * 24 + i], 1e-6);
      EXPECT_NEAR(y2[n * 12 + i], y[n * 24 + 12 + i], 1e-6);
    }
  EXPECT_NE(half.predict(first).to_doubles(), y1);  // from the second half's states
  half.reset_states();
  EXPECT_EQ(half.predict(first).to_doubles(), y1);
  EXPECT_THAT(error_of([&] {
                half.predict(systolic::testing::random_tensor({3, 3, 2}, 8));
              }),
              HasSubstr("is stateful and keeps states for batches of 2, but got a batch of 3"));
  auto j = nlohmann::json::parse(half.to_json());
  EXPECT_EQ(j["config"]["layers"][0]["config"]["batch_input_shape"], nlohmann::json({2, 3, 2}));
  EXPECT_EQ(j["config"]["layers"][1]["config"]["stateful"], true);
  Model back = model_from_json(half.to_json());
  back.set_weights(half.get_weights());
  EXPECT_EQ(back.predict(first).to_doubles(), y1);
  EXPECT_EQ(back.predict(second).to_doubles(), y2);
  // Bidirectional of a stateful GRU: each direction keeps its own states, so its forward run over the halves gives
  // what the whole series gives (the backward run's states carry on too: the stateful_bidirectional fixture checks
  // them against Keras); reset_states resets both.
  auto bin = layers::Input({3, 2}, {.batch_size = 2});
  auto runs =
      layers::Bidirectional(layers::GRU(4, {.return_sequences = true, .stateful = true}), {.merge_mode = ""})
          .call_all({bin});
  Model bi(bin, runs[0], "bi");
  auto w = half.get_weights(), copy = w;
  w.insert(w.end(), copy.begin(), copy.end());  // the backward layer's too
  bi.set_weights(w);
  auto b1 = bi.predict(first).to_doubles(), b2 = bi.predict(second).to_doubles();
  for (int n = 0; n < 2; ++n)
    for (int i = 0; i < 12; ++i) {
      EXPECT_NEAR(b1[n * 12 + i], y[n * 24 + i], 1e-6);
      EXPECT_NEAR(b2[n * 12 + i], y[n * 24 + 12 + i], 1e-6);
    }
  bi.reset_states();
  EXPECT_EQ(bi.predict(first).to_doubles(), b1);
  EXPECT_THAT(error_of([] {
                layers::Bidirectional(layers::LSTM(2, {.stateful = true}),
                                      {.backward_layer = layers::LSTM(2, {.go_backwards = true})});
              }),
              HasSubstr("must agree on stateful"));
}

// A stateful Bidirectional GRU and LSTM train on xla:cpu as on the CPU: their states carry from batch to batch inside
// the recorded step.
TEST(Recurrent, StatefulTrainsOnXlaAsOnTheCpu) {
  SYSTOLIC_REQUIRE_XLA();
  auto make = [] {
    set_random_seed(5);
    auto in = layers::Input({6, 2}, {.batch_size = 8});
    auto x = layers::Bidirectional(layers::GRU(3, {.return_sequences = true, .stateful = true}))(in);
    x = layers::LSTM(4, {.stateful = true})(x);
    Model m(in, layers::Dense(2, {.activation = "softmax"})(x), "rnn");
    m.compile(optimizers::Adam(0.01), "sparse_categorical_crossentropy", {"accuracy"});
    return m;
  };
  expect_xla_trains_as_cpu(make, 7, true);
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

// States in and out on xla:cpu: an LSTM's final states start a GRU and feed the head (its sequences unused).
TEST(Recurrent, StatesTrainOnXlaAsOnTheCpu) {
  SYSTOLIC_REQUIRE_XLA();
  auto make = [] {
    set_random_seed(4);
    auto in = layers::Input({6, 2});
    auto s = layers::LSTM(4, {.return_sequences = true, .return_state = true}).call_all({in});
    auto g = layers::GRU(4)({in, s[1]});
    auto x = layers::Concatenate()({g, s[2]});
    Model m(in, layers::Dense(2, {.activation = "softmax"})(x), "rnn");
    m.compile(optimizers::Adam(0.01), "sparse_categorical_crossentropy", {"accuracy"});
    return m;
  };
  expect_xla_trains_as_cpu(make, 6, true);
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

// The whole recurrence as one op (oneDNN's RNN primitives on the CPU) and the steps one by one (which run whenever
// a mask reaches the layer): a Masking layer whose mask keeps every step sends the same model down the steps. Both
// predict and train alike, for every cell, both directions, sequences out, and Bidirectional.
TEST(Recurrent, WholeSequenceOpEqualsTheSteps) {
  using layers::RecurrentOptions;
  const std::vector<std::pair<std::string, std::function<LayerRef()>>> cases{
      {"SimpleRNN", [] { return layers::SimpleRNN(5); }},
      {"SimpleRNN relu backwards",
       [] {
         return layers::SimpleRNN(5, {.activation = "relu", .return_sequences = true, .go_backwards = true});
       }},
      {"LSTM", [] { return layers::LSTM(6, {.return_sequences = true}); }},
      {"LSTM backwards", [] { return layers::LSTM(6, {.go_backwards = true}); }},
      {"LSTM backwards sequences",
       [] { return layers::LSTM(6, {.return_sequences = true, .go_backwards = true}); }},
      {"GRU", [] { return layers::GRU(4); }},
      {"GRU reset_after=False",
       [] { return layers::GRU(4, {.reset_after = false, .return_sequences = true}); }},
      {"GRU input dropout", [] { return layers::GRU(4, {.dropout = 0.3, .seed = 5}); }},
      {"Bidirectional LSTM",
       [] { return layers::Bidirectional(layers::LSTM(3, {.return_sequences = true})); }},
  };
  Tensor x = systolic::testing::random_tensor({16, 6, 3}, 41);
  std::vector<float> labels(16);
  for (int i = 0; i < 16; ++i) labels[i] = float(i % 2);
  Tensor y = Tensor::from_vector(labels, {16});
  for (const auto& [name, make_layer] : cases) {
    SCOPED_TRACE(name);
    auto make = [&, make_layer = make_layer](bool masked) {
      set_random_seed(23);
      auto in = layers::Input({6, 3});
      auto h = masked ? layers::Masking({.mask_value = -99})(in) : in;
      h = make_layer()(h);
      Model m(in, layers::Dense(2, {.activation = "softmax"})(layers::Flatten()(h)), "m");
      m.compile(optimizers::Adam(0.02), "sparse_categorical_crossentropy");
      return m;
    };
    Model whole = make(false), steps = make(true);
    steps.set_weights(whole.get_weights());
    EXPECT_LT(systolic::testing::normalised_max_error(whole.predict(x), steps.predict(x)), 1e-5);
    const FitOptions o{.batch_size = 8, .epochs = 2, .verbose = 0, .shuffle = false};
    whole.fit(x, y, o);
    steps.fit(x, y, o);
    auto a = whole.get_weights(), b = steps.get_weights();
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t k = 0; k < a.size(); ++k)
      EXPECT_LT(systolic::testing::normalised_max_error(a[k], b[k]), 1e-5) << k;
  }
}
