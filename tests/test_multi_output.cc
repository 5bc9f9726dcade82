// Models of several inputs and outputs in compile, fit, evaluate and predict, against real Keras
// (tests/fixtures/multi_output, written by tests/reference/multi_output.py with Keras 3.15): each case's .keras
// file (compiled with a dict or list of losses, loss weights and per-output metrics, or one loss for two
// outputs; more_of_keras: row losses, IoU, rates, multi-label AUC, top-k precision, Lamb with a loss scale
// factor) loads with Keras's compile settings, evaluates as Keras did (each output's loss, the weighted total,
// "<output>_<metric>" logs, Keras's evaluate list order), fits on (from Keras's Adam state for two_outputs) to
// Keras's History and weights, and predicts Keras's outputs. Then the rules on the CPU: the gradient of the
// weighted sum of the outputs' losses (finite differences, also through an output that feeds another layer),
// every way of batching (host, device batches, replicas, XLA) giving one answer, the files written back, and
// the errors.
#include <gmock/gmock.h>
#include <systolic/systolic.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "json_fixture.h"
#include "keras_compare.h"
#include "multi_output_fixture.h"
#include "saving/keras_zip.h"
#include "test_util.h"
#include "xla_test_util.h"

using namespace systolic;
using json = nlohmann::json;
using ::testing::HasSubstr;

namespace {

std::string fixture(const std::string& name) {
  return systolic::testing::source_dir() + "/tests/fixtures/multi_output/" + name;
}

const json& expected() {
  return systolic::testing::json_fixture("multi_output/expected.json");
}

using systolic::testing::fit_as_keras;
using systolic::testing::NpzArrays;

Arrays arrays(const NpzArrays& a, const json& names) {
  return systolic::testing::npz_arrays(a, names);
}

// evaluate's list against Keras's dict (by metrics_names) and Keras's list (the same order).
void expect_scores(Model& m, const std::vector<double>& scores, const json& keras_dict,
                   const json* keras_list = nullptr) {
  systolic::testing::expect_scores_as_keras(m, scores, keras_dict, 2e-4, /*relative=*/true);
  const auto names = m.metrics_names();
  if (keras_list) {
    ASSERT_EQ(keras_list->size(), scores.size());
    for (std::size_t i = 0; i < scores.size(); ++i)
      EXPECT_NEAR(scores[i], (*keras_list)[i].get<double>(), 2e-4 * std::max(1.0, std::abs(scores[i])))
          << "evaluate()[" << i << "] (" << names[i] << ")";
  }
}

using systolic::testing::flat_weights;

void expect_weights(const Model& m, const json& keras) {
  auto got = flat_weights(m);
  auto theirs = keras.get<std::vector<double>>();
  ASSERT_EQ(got.size(), theirs.size());
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - theirs[i]));
  EXPECT_LT(worst, 1e-4);
}

void expect_history(const History& h, const json& keras) {
  EXPECT_EQ(h.keys.size(), keras.size()) << keras.dump();
  for (auto& [key, values] : keras.items()) {
    ASSERT_TRUE(h.history.count(key)) << key;
    const auto& ours = h[key];
    ASSERT_EQ(ours.size(), values.size()) << key;
    for (std::size_t e = 0; e < ours.size(); ++e)
      EXPECT_NEAR(ours[e], values[e].get<double>(), 2e-4 * std::max(1.0, std::abs(ours[e])))
          << key << " epoch " << e + 1;
  }
}

class MultiOutputKeras : public ::testing::TestWithParam<std::string> {};

}  // namespace

TEST_P(MultiOutputKeras, LoadsFitsAndEvaluatesAsKeras) {
  const std::string name = GetParam();
  const json& want = expected()[name];
  auto a = npy::load_npz(fixture(name + ".npz"));
  Model m = load_model(fixture(name + ".keras"));
  ASSERT_TRUE(m.compiled());
  EXPECT_EQ(m.output_names(), want["output_names"].get<std::vector<std::string>>());
  const Arrays xs = arrays(a, want["test"]["x"]), ys = arrays(a, want["test"]["y"]);
  if (want.contains("evaluate_saved")) {  // the saved state: Keras's evaluate before fitting on
    expect_scores(m, m.evaluate(xs, ys, {.batch_size = 8, .verbose = 0}), want["evaluate_saved"],
                  &want["evaluate_saved_list"]);
    expect_scores(m, m.evaluate(xs, ys, {.batch_size = 8, .verbose = 0, .sample_weight = a["ws"]}),
                  want["evaluate_saved_weighted"]);
  }
  expect_history(fit_as_keras(m, a, want["fit"]), want["history"]);
  expect_weights(m, want["weights_after_fit"]);
  expect_scores(m, m.evaluate(xs, ys, {.batch_size = 8, .verbose = 0}), want["evaluate"],
                &want["evaluate_list"]);
  if (want.contains("evaluate_weighted"))
    expect_scores(m, m.evaluate(xs, ys, {.batch_size = 8, .verbose = 0, .sample_weight = a["ws"]}),
                  want["evaluate_weighted"]);
  if (want.contains("predict")) {
    Arrays in = xs.slice(0, 4);
    std::vector<Tensor> out = m.predict_outputs(in, {.batch_size = 8});
    const auto names = m.output_names();
    ASSERT_EQ(out.size(), names.size());
    for (std::size_t i = 0; i < out.size(); ++i) {
      auto theirs = want["predict"][names[i]].get<std::vector<double>>();
      auto ours = out[i].to_doubles();
      ASSERT_EQ(ours.size(), theirs.size()) << names[i];
      for (std::size_t k = 0; k < ours.size(); ++k) EXPECT_NEAR(ours[k], theirs[k], 1e-4) << names[i] << k;
    }
  }

  // Saved and loaded back, the model keeps its compile settings: the same evaluate, and the same settings
  // written again.
  systolic::testing::TempDir dir;
  const std::string path = dir.file(name + ".keras");
  m.save(path);
  Model back = load_model(path);
  expect_scores(back, back.evaluate(xs, ys, {.batch_size = 8, .verbose = 0}), want["evaluate"],
                &want["evaluate_list"]);
  EXPECT_EQ(back.metrics_names(), m.metrics_names());
}

INSTANTIATE_TEST_SUITE_P(Cases, MultiOutputKeras,
                         ::testing::Values("two_outputs", "two_inputs", "list_losses", "shared_loss",
                                           "more_of_keras"));

// What systolic writes for compile's settings is what Keras wrote for the same compile (dicts by output name; a
// loss by its function's name, which Keras reads as it reads the alias it wrote: "mse").
TEST(MultiOutputFiles, CompileConfigAsKerasWritesIt) {
  const json& want = expected()["two_outputs"]["compile_config"];
  Model m = load_model(fixture("two_outputs.keras"));
  systolic::testing::TempDir dir;
  m.save(dir.file("m.keras"));
  const json cc =
      json::parse(keras_io::read_keras_archive_file(dir.file("m.keras")).config["compile_config"].dump());
  for (const char* key : {"loss_weights", "metrics"}) EXPECT_EQ(cc[key], want[key]) << key;
  ASSERT_EQ(cc["loss"].size(), want["loss"].size());
  for (auto& [output, loss] : want["loss"].items())
    EXPECT_EQ(cc["loss"][output], losses::get(loss.get<std::string>())->name()) << output;
}

namespace {

// inputs a (3) and b (2) -> concatenated -> Dense(4, tanh) "trunk" -> "probs" Dense(3, softmax), which also
// feeds "score" Dense(1) (an output that another layer reads), float64 unless said.
Model branching(std::uint64_t seed, DType dtype = DType::float64) {
  set_floatx(dtype);
  set_random_seed(seed);
  clear_session();
  auto a = layers::Input({3}, {.name = "a"});
  auto b = layers::Input({2}, {.name = "b"});
  auto joined = layers::Concatenate()({a, b});
  auto trunk = layers::Dense(4, {.activation = "tanh", .name = "trunk"})(joined);
  auto probs = layers::Dense(3, {.activation = "softmax", .name = "probs"})(trunk);
  auto score = layers::Dense(1, {.name = "score"})(probs);
  Model m({a, b}, {probs, score});
  set_floatx(DType::float32);
  return m;
}

void compile_branching(Model& m, const optimizers::Optimizer& opt) {
  m.compile(opt, {{.output = "score", .loss = "mse", .loss_weight = 0.25, .metrics = {"mae"}},
                  {.output = "probs", .loss = "sparse_categorical_crossentropy", .metrics = {"accuracy"}}});
}

struct Data {
  Arrays x, y;
  Tensor w;
};
Data data(std::int64_t n, DType dtype = DType::float64) {
  Tensor xa = systolic::testing::random_tensor({n, 3}, 11, dtype, -1, 1);
  Tensor xb = systolic::testing::random_tensor({n, 2}, 12, dtype, -1, 1);
  Tensor score = systolic::testing::random_tensor({n, 1}, 13, dtype, -1, 1);
  std::vector<std::int32_t> cls(static_cast<std::size_t>(n));
  std::vector<double> w(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    cls[static_cast<std::size_t>(i)] = static_cast<std::int32_t>((i * 7) % 3);
    w[static_cast<std::size_t>(i)] = 0.5 + 0.25 * double(i % 4);
  }
  return {{xa, xb}, {Tensor::from_vector(cls, {n}), score}, Tensor::from_vector(w, {n}).to(dtype)};
}

}  // namespace

// The gradient a step takes is the gradient of the weighted sum of the outputs' losses: one SGD step of rate 1
// moves each weight by minus the finite-difference derivative of evaluate's loss, here through an output
// ("probs", a softmax under a crossentropy) that also feeds the other output's layer.
TEST(MultiOutputRules, StepFollowsTheWeightedSumOfTheLosses) {
  Data d = data(6);
  Model m = branching(1);
  compile_branching(m, optimizers::SGD(1.0));
  const std::vector<Tensor> w0 = m.get_weights();
  auto loss_at = [&](const std::vector<Tensor>& w) {
    m.set_weights(w);
    return m.evaluate(d.x, d.y, {.batch_size = 6, .verbose = 0, .sample_weight = d.w})[0];
  };
  std::vector<Tensor> numeric;
  const double eps = 1e-6;
  for (std::size_t k = 0; k < w0.size(); ++k) {
    std::vector<double> g(static_cast<std::size_t>(w0[k].numel()));
    for (std::size_t i = 0; i < g.size(); ++i) {
      auto w = w0;
      for (double sign : {1.0, -1.0}) {
        std::vector<double> v = w0[k].to_doubles();
        v[i] += sign * eps;
        w[k] = Tensor::from_vector(v, w0[k].shape());
        g[i] += sign * loss_at(w) / (2 * eps);
      }
    }
    numeric.push_back(Tensor::from_vector(g, w0[k].shape()));
  }
  m.set_weights(w0);
  m.fit(d.x, d.y, {.batch_size = 6, .epochs = 1, .verbose = 0, .shuffle = false, .sample_weight = d.w});
  const std::vector<Tensor> w1 = m.get_weights();
  for (std::size_t k = 0; k < w0.size(); ++k) {
    auto before = w0[k].to_doubles(), after = w1[k].to_doubles(), g = numeric[k].to_doubles();
    for (std::size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(before[i] - after[i], g[i], 1e-7) << k << " " << i;
  }
}

// Each output's loss is logged unweighted as "<output>_loss"; "loss" is their weighted sum; metrics are named
// "<output>_<metric>"; evaluate lists the losses first, then the rest sorted (Keras's order).
TEST(MultiOutputRules, LogsAndTheirOrder) {
  Data d = data(10);
  Model m = branching(2);
  compile_branching(m, optimizers::SGD(0.1));
  EXPECT_EQ(m.metrics_names(),
            (std::vector<std::string>{"loss", "probs_loss", "score_loss", "probs_accuracy", "score_mae"}));
  auto v = m.evaluate(d.x, d.y, {.batch_size = 4, .verbose = 0});
  ASSERT_EQ(v.size(), 5u);
  EXPECT_NEAR(v[0], v[1] + 0.25 * v[2], 1e-12);
  History h = m.fit(d.x, d.y, {.batch_size = 4, .epochs = 1, .verbose = 0, .validation_split = 0.2});
  EXPECT_EQ(h.keys, (std::vector<std::string>{"loss", "probs_accuracy", "score_mae", "probs_loss",
                                              "score_loss", "val_loss", "val_probs_accuracy", "val_score_mae",
                                              "val_probs_loss", "val_score_loss"}));
  // One loss on one of two outputs: no per-output loss logs, and labels for the other are still given.
  Model one = branching(2);
  one.compile(optimizers::SGD(0.1), {{.output = "probs", .loss = "sparse_categorical_crossentropy"},
                                     {.output = "score", .metrics = {"mse"}}});
  EXPECT_EQ(one.metrics_names(), (std::vector<std::string>{"loss", "score_mse"}));
  auto w = one.evaluate(d.x, d.y, {.batch_size = 4, .verbose = 0});
  EXPECT_NEAR(w[0], v[1], 1e-12);  // the same weights (seeded alike) and data: probs's loss alone
  EXPECT_NEAR(w[1], v[2], 1e-12);  // the unweighted mse of score, as a metric
}

// Host batches under replicas (gathered per array), device batches, one replica and XLA all train alike.
TEST(MultiOutputRules, EveryWayOfBatchingTrainsAlike) {
  const DType f32 = DType::float32;
  Data d = data(24, f32);
  FitOptions o{.batch_size = 8, .epochs = 2, .verbose = 0, .shuffle = true, .sample_weight = d.w};
  auto make = [&](std::uint64_t seed) {
    Model m = branching(seed, f32);
    compile_branching(m, optimizers::Adam(0.01));
    return m;
  };
  Model host = make(4);
  host.fit(d.x, d.y, o);
  const auto want = flat_weights(host);
  auto expect_close = [&](const Model& m, double tol, const char* what) {
    auto got = flat_weights(m);
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << what << " " << i;
  };
  Model replicas = to_accelerator(make(4), distribute::MirroredStrategy::cpu(2));
  replicas.fit(d.x, d.y, o);
  expect_close(replicas, 1e-5, "two replicas");
  auto ev = host.evaluate(d.x, d.y, {.batch_size = 8, .verbose = 0});
  auto ev2 = replicas.evaluate(d.x, d.y, {.batch_size = 8, .verbose = 0});
  ASSERT_EQ(ev.size(), ev2.size());
  for (std::size_t i = 0; i < ev.size(); ++i) EXPECT_NEAR(ev[i], ev2[i], 1e-5) << i;
  auto p = host.predict_outputs(d.x), p2 = replicas.predict_outputs(d.x);
  ASSERT_EQ(p.size(), 2u);
  ASSERT_EQ(p2.size(), 2u);
  for (std::size_t k = 0; k < 2; ++k) {
    auto a = p[k].to_doubles(), b = p2[k].to_doubles();
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5);
  }
  // train_on_batch: one step, evaluate's values of the batch.
  Model once = make(5);
  auto logs = once.train_on_batch(d.x.slice(0, 8), d.y.slice(0, 8));
  EXPECT_EQ(logs.size(), once.metrics_names().size());
}

TEST(MultiOutputRules, XlaTrainsAsTheCpu) {
  SYSTOLIC_REQUIRE_XLA();
  const DType f32 = DType::float32;
  Data d = data(24, f32);
  FitOptions o{.batch_size = 8, .epochs = 2, .verbose = 0, .shuffle = false, .sample_weight = d.w};
  auto make = [&] {
    Model m = branching(6, f32);
    compile_branching(m, optimizers::Adam(0.01));
    return m;
  };
  Model cpu = make();
  cpu.fit(d.x, d.y, o);
  Model xla = to_accelerator(make(), distribute::OneDeviceStrategy(systolic::testing::xla_cpu()));
  xla.fit(d.x, d.y, o);
  EXPECT_EQ(xla.step_mode(), "graph") << xla.step_mode_reason();
  const auto want = flat_weights(cpu), got = flat_weights(xla);
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
}

TEST(MultiOutputRules, MistakesAreRefusedByName) {
  Data d = data(6);
  Model m = branching(7);
  auto error = [](auto&& f) { return systolic::testing::error_of(f); };
  EXPECT_THAT(error([&] {
                m.compile(optimizers::SGD(0.1), {{.output = "nope", .loss = "mse"}, OutputCompile{}});
              }),
              HasSubstr("has no output 'nope' (its outputs: probs, score)"));
  EXPECT_THAT(error([&] {
                m.compile(optimizers::SGD(0.1), {{.output = "score", .loss = "mse"}, {.output = "score"}});
              }),
              HasSubstr("output 'score' of model"));
  EXPECT_THAT(error([&] { m.compile(optimizers::SGD(0.1), {{.loss = "mse"}}); }),
              HasSubstr("has 2 outputs (probs, score), compile got 1"));
  EXPECT_THAT(error([&] { m.compile(optimizers::SGD(0.1), std::vector<OutputCompile>(2)); }),
              HasSubstr("needs a loss on at least one output"));
  EXPECT_THAT(error([&] { m.compile(optimizers::SGD(0.1), "mse", {"mae"}); }),
              HasSubstr("give its metrics one per output"));
  compile_branching(m, optimizers::SGD(0.1));
  EXPECT_THAT(error([&] { m.fit(d.x[0], d.y, {.verbose = 0}); }), HasSubstr("takes 2 input arrays, x has 1"));
  EXPECT_THAT(error([&] { m.fit(d.x, d.y[0], {.verbose = 0}); }),
              HasSubstr("has 2 outputs, y has 1 label array"));
  EXPECT_THAT(error([&] {
                m.fit(d.x, Arrays{Tensor::zeros({6, 2}), d.y[1]}, {.verbose = 0});
              }),
              HasSubstr("takes one integer label per sample, y[0] (output 'probs') has shape (6, 2)"));
  EXPECT_THAT(
      error([&] {
        m.fit(d.x, Arrays{d.y[0], Tensor::zeros({6, 2})}, {.verbose = 0});
      }),
      HasSubstr("y[1] (output 'score') has samples of shape (2,); the model's output 'score' is (1,)"));
  EXPECT_THAT(error([&] {
                m.fit(Arrays{d.x[0], d.x[0]}, d.y, {.verbose = 0});
              }),
              HasSubstr("x[1] (input 'b') has samples of shape (3,); model 'model' takes (2,)"));
  EXPECT_THAT(error([&] {
                m.fit(Arrays{d.x[0], d.x[1].slice(0, 5)}, d.y, {.verbose = 0});
              }),
              HasSubstr("x[1] (input 'b') has 5 samples, x[0] has 6"));
  EXPECT_THAT(error([&] {
                m.fit(d.x, d.y, {.verbose = 0, .class_weight = {{0, 2.0}}});
              }),
              HasSubstr("class_weight is not supported for models with several outputs"));
  EXPECT_THAT(error([&] { m.predict(d.x); }), HasSubstr("has 2 outputs; predict_outputs returns each"));
}
