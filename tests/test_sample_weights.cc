// Keras's sample_weight and class_weight in fit and evaluate, against real Keras (tests/fixtures/sample_weights,
// written by tests/reference/sample_weights.py with Keras 3.15): each case's compiled model (.keras, before
// training) is fitted as Keras fitted it (class weights with validation_split, sample weights with validation data
// of their own, sample weights split by validation_split, one-hot labels' class weights, a weight per step of
// per-step labels: Keras's temporal sample weights), and its History, weights
// and weighted and unweighted evaluate match Keras's. Then what Keras 3's weighting means, on the CPU: the loss is
// sum(w * loss) / batch size, metrics are not weighted, and replicas and device batches weigh alike.
#include <gmock/gmock.h>
#include <systolic/systolic.h>

#include <nlohmann/json.hpp>

#include "json_fixture.h"
#include "keras_compare.h"
#include "test_util.h"
#include "xla_test_util.h"

using namespace systolic;
using json = nlohmann::json;
using ::testing::HasSubstr;

namespace {

std::string fixture(const std::string& name) {
  return systolic::testing::source_dir() + "/tests/fixtures/sample_weights/" + name;
}

const json& expected() {
  return systolic::testing::json_fixture("sample_weights/expected.json");
}

void expect_scores(Model& m, const std::vector<double>& scores, const json& keras) {
  systolic::testing::expect_scores_as_keras(m, scores, keras, 2e-4, /*relative=*/true);
}

using systolic::testing::flat_weights;

// The case's fit as Keras ran it (FitOptions from the fixture's record and arrays).
FitOptions fit_options(const json& record, std::map<std::string, Tensor>& a) {
  FitOptions o{.batch_size = record["batch_size"].get<std::int64_t>(),
               .epochs = record["epochs"].get<int>(),
               .verbose = 0,
               .validation_split = record.value("validation_split", 0.0),
               .shuffle = false};
  if (a.count("xv")) o.validation_data = ValidationData{a["xv"], a["yv"], a["wv"]};
  if (a.count("w")) o.sample_weight = a["w"];
  if (record.contains("class_weight"))
    for (auto& [k, v] : record["class_weight"].items()) o.class_weight[std::stoi(k)] = v.get<double>();
  return o;
}

class SampleWeights : public ::testing::TestWithParam<std::string> {};

}  // namespace

TEST_P(SampleWeights, FitAndEvaluateAsKeras) {
  const std::string name = GetParam();
  const json& want = expected()[name];
  auto a = npy::load_npz(fixture(name + ".npz"));
  Model m = load_model(fixture(name + ".keras"));
  ASSERT_TRUE(m.compiled());
  History h = m.fit(a["x"], a["y"], fit_options(want["fit"], a));
  const json& keras = want["history"];
  EXPECT_EQ(h.keys.size(), keras.size()) << keras.dump();
  for (auto& [key, values] : keras.items()) {
    const auto& ours = h[key];
    ASSERT_EQ(ours.size(), values.size()) << key;
    for (std::size_t e = 0; e < ours.size(); ++e)
      EXPECT_NEAR(ours[e], values[e].get<double>(), 2e-4 * std::max(1.0, std::abs(ours[e])))
          << key << " epoch " << e + 1;
  }
  auto got = flat_weights(m);
  auto theirs = want["weights_after_fit"].get<std::vector<double>>();
  ASSERT_EQ(got.size(), theirs.size());
  EXPECT_LT(
      systolic::testing::normalised_max_error(Tensor::from_vector(got, {std::int64_t(got.size())}),
                                              Tensor::from_vector(theirs, {std::int64_t(theirs.size())})),
      1e-4);
  expect_scores(m, m.evaluate(a["xs"], a["ys"], {.batch_size = 8, .verbose = 0, .sample_weight = a["ws"]}),
                want["evaluate_weighted"]);
  expect_scores(m, m.evaluate(a["xs"], a["ys"], {.batch_size = 8, .verbose = 0}), want["evaluate"]);
}

INSTANTIATE_TEST_SUITE_P(Cases, SampleWeights,
                         ::testing::Values("sparse_class_weight", "binary_sample_weight",
                                           "regression_sample_weight", "onehot_class_weight",
                                           "weighted_metrics_sparse", "weighted_metrics_binary",
                                           "weighted_metrics_confusion", "temporal_sample_weight"));

// Keras's weighted_metrics: compile_config keeps them (a .keras file written by Keras reads back, and systolic
// writes them as Keras does); a metric that takes no sample weights is refused there by name.
TEST(WeightedMetrics, KeptInKerasFilesAndRefusedWhereUnweighable) {
  Model m = load_model(fixture("weighted_metrics_sparse.keras"));
  EXPECT_EQ(m.metrics_names(),
            (std::vector<std::string>{"loss", "accuracy", "sparse_categorical_crossentropy",
                                      "sparse_top_k_categorical_accuracy", "weighted_accuracy"}));
  systolic::testing::TempDir dir;
  m.save(dir.file("again.keras"));
  Model back = load_model(dir.file("again.keras"));
  EXPECT_EQ(back.metrics_names(), m.metrics_names());
  auto a = npy::load_npz(fixture("weighted_metrics_sparse.npz"));
  EXPECT_EQ(back.evaluate(a["xs"], a["ys"], {.verbose = 0, .sample_weight = a["ws"]}),
            m.evaluate(a["xs"], a["ys"], {.verbose = 0, .sample_weight = a["ws"]}));
  // Keras's metrics all take sample weights; a metric of the user's own that takes none is refused by name.
  struct Unweighable : metrics::Metric {
    std::string name() const override { return "mine"; }
    std::string class_name() const override { return "Mine"; }
    std::unique_ptr<Metric> clone() const override { return std::make_unique<Unweighable>(*this); }
    bool sparse_labels() const override { return false; }
    void update(const Tensor& output, const Tensor&, Tensor& state) const override {
      ops::add_sum(output, state);
    }
  };
  auto in = layers::Input({4});
  Model c(in, layers::Dense(1, {.activation = "sigmoid"})(in));
  EXPECT_THAT(
      systolic::testing::error_of([&] {
        c.compile(optimizers::SGD(0.1), "binary_crossentropy", {}, {"accuracy", "auc", Unweighable()});
      }),
      ::testing::HasSubstr("weighted_metrics: mine (Mine) takes no sample weights"));
}

// R2Score in weighted_metrics: evaluate's value, over batches, is the metric's of the whole data with the weights
// (its Keras formula with weights: tests/fixtures/metrics/thresholds.json), the weights' sum its count.
TEST(WeightedMetrics, R2ScoreWeighsTheSamples) {
  set_random_seed(11);
  auto in = layers::Input({3});
  Model m(in, layers::Dense(2)(in));
  m.compile(optimizers::SGD(0.1), "mse", {"r2_score"}, {"r2_score"});
  EXPECT_EQ(m.metrics_names(), (std::vector<std::string>{"loss", "r2_score", "weighted_r2_score"}));
  Tensor x = systolic::testing::random_tensor({29, 3}, 12);
  Tensor y = systolic::testing::random_tensor({29, 2}, 13);
  std::vector<float> w(29);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = float(i % 4) * 0.5f;
  Tensor weights = Tensor::from_vector(w, {29});
  auto scores = m.evaluate(x, y, {.batch_size = 8, .verbose = 0, .sample_weight = weights});
  Tensor pred = m.predict(x, {.verbose = 0});
  metrics::R2Score r2;
  r2.build(Shape{2});
  Tensor state = Tensor::zeros({r2.state_size()}, DType::float64);
  r2.update(pred, y, state);
  EXPECT_NEAR(scores[1], r2.value(state.data<double>(), 29), 1e-6);
  state = Tensor::zeros({r2.state_size()}, DType::float64);
  r2.update_weighted(pred, y, weights, state);
  double sum = 0;
  for (float v : w) sum += v;
  EXPECT_NEAR(scores[2], r2.value(state.data<double>(), sum), 1e-6);
  EXPECT_GT(std::abs(scores[2] - scores[1]), 1e-4);  // the weights change it
}

namespace {

// A small softmax classifier of 4 features and 3 classes (float64, or float32 for replicas and XLA), compiled with
// SGD.
Model classifier(std::uint64_t seed, DType dtype = DType::float64) {
  set_floatx(dtype);
  set_random_seed(seed);
  clear_session();
  auto in = layers::Input({4});
  auto h = layers::Dense(5, {.activation = "tanh"})(in);
  auto out = layers::Dense(3, {.activation = "softmax"})(h);
  Model m(in, out);
  m.compile(optimizers::SGD(0.1), "sparse_categorical_crossentropy", {"accuracy"});
  set_floatx(DType::float32);
  return m;
}

struct Data {
  Tensor x, y, w;
};
Data data(std::int64_t n, DType dtype = DType::float64) {
  Tensor x = systolic::testing::random_tensor({n, 4}, 5, dtype, -1, 1);
  std::vector<std::int32_t> y(static_cast<std::size_t>(n));
  std::vector<double> w(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    y[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i % 3);
    w[static_cast<std::size_t>(i)] = i % 5 == 0 ? 0.0 : 0.25 * double(i % 7);
  }
  return {x, Tensor::from_vector(y, {n}), Tensor::from_vector(w, {n}).to(dtype)};
}

}  // namespace

// Keras 3: the batch's loss is sum(w * loss) / batch size, so weights of 2 double the loss and the gradient of
// weights of 1, and weights of 0 leave the samples' contributions out (but not their count); accuracy is not
// weighted.
TEST(SampleWeightRules, TheLossCountsEachSampleItsWeight) {
  Data d = data(12);
  Model m = classifier(1);
  const auto plain = m.evaluate(d.x, d.y, {.batch_size = 5, .verbose = 0});
  const auto twice =
      m.evaluate(d.x, d.y, {.batch_size = 5, .verbose = 0, .sample_weight = Tensor::full({12}, 2.0)});
  EXPECT_NEAR(twice[0], 2 * plain[0], 1e-12);
  EXPECT_EQ(twice[1], plain[1]);  // accuracy
  // Only the samples of weight 1: the loss of those samples alone, times their share of the count.
  std::vector<double> one(12, 0.0);
  one[4] = one[7] = 1.0;
  const auto some =
      m.evaluate(d.x, d.y, {.batch_size = 5, .verbose = 0, .sample_weight = Tensor::from_vector(one, {12})});
  Tensor x2({2, 4}, DType::float64), y2({2}, DType::int32);
  ops::gather_rows(d.x, std::vector<std::int64_t>{4, 7}, x2);
  ops::gather_rows(d.y, std::vector<std::int64_t>{4, 7}, y2);
  const auto alone = m.evaluate(x2, y2, {.batch_size = 5, .verbose = 0});
  EXPECT_NEAR(some[0], alone[0] * 2.0 / 12.0, 1e-12);
  // Weights given as (N, 1) integers are the same weights.
  const auto ints =
      m.evaluate(d.x, d.y,
                 {.batch_size = 5,
                  .verbose = 0,
                  .sample_weight = Tensor::from_vector(std::vector<std::int32_t>(12, 2), {12, 1})});
  EXPECT_NEAR(ints[0], twice[0], 1e-12);
}

// The same weighted fit on the host pipeline, on device batches (the GPU path's logic on the CPU) and on two
// replicas gives the same weights, and class_weight is sample_weight of each label's class's weight.
TEST(SampleWeightRules, EveryWayOfBatchingWeighsAlike) {
  const DType f32 = DType::float32;
  Data d = data(24, f32);
  FitOptions o{.batch_size = 6, .epochs = 2, .verbose = 0, .shuffle = true, .sample_weight = d.w};
  Model host = classifier(2, f32);
  host.fit(d.x, d.y, o);
  Model device = classifier(2, f32);
  o.batches = FitOptions::Batches::on_device;
  device.fit(d.x, d.y, o);
  EXPECT_EQ(flat_weights(host), flat_weights(device));

  Model replicas = to_accelerator(classifier(2, f32), distribute::MirroredStrategy::cpu(2));
  o.batches = FitOptions::Batches::automatic;
  replicas.fit(d.x, d.y, o);
  auto a = flat_weights(host), b = flat_weights(replicas);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6) << i;

  // class_weight {0: 0.5, 2: 3} is these sample weights (class 1 weighs 1).
  std::vector<double> cw(24);
  for (std::size_t i = 0; i < cw.size(); ++i) cw[i] = i % 3 == 0 ? 0.5 : i % 3 == 2 ? 3.0 : 1.0;
  Model by_class = classifier(3, f32), by_sample = classifier(3, f32);
  FitOptions c{
      .batch_size = 6, .epochs = 1, .verbose = 0, .shuffle = false, .class_weight = {{0, 0.5}, {2, 3.0}}};
  by_class.fit(d.x, d.y, c);
  c.class_weight.clear();
  c.sample_weight = Tensor::from_vector(cw, {24}).to(f32);
  by_sample.fit(d.x, d.y, c);
  EXPECT_EQ(flat_weights(by_class), flat_weights(by_sample));
  // An unweighted fit after weighted ones is unweighted again (the recorded step is remade).
  Model again = classifier(4, f32), fresh = classifier(4, f32);
  again.fit(d.x, d.y, o);
  again.set_weights(fresh.get_weights());
  FitOptions plain{.batch_size = 6, .epochs = 1, .verbose = 0, .shuffle = false};
  again.fit(d.x, d.y, plain);
  fresh.fit(d.x, d.y, plain);
  EXPECT_EQ(flat_weights(again), flat_weights(fresh));
}

TEST(SampleWeightRules, BadWeightsAreRefusedByName) {
  Data d = data(12);
  Model m = classifier(5);
  auto fit = [&](FitOptions o) { m.fit(d.x, d.y, o); };
  EXPECT_THAT(
      systolic::testing::error_of([&] { fit({.verbose = 0, .sample_weight = Tensor::full({11}, 1.0)}); }),
      HasSubstr("fit: sample_weight has shape (11,); it takes one weight per sample: (12,)"));
  EXPECT_THAT(systolic::testing::error_of([&] {
                fit({.verbose = 0, .sample_weight = Tensor::full({12, 2}, 1.0)});
              }),
              HasSubstr("fit: sample_weight has shape (12, 2)"));
  EXPECT_THAT(systolic::testing::error_of([&] {
                fit({.verbose = 0, .sample_weight = Tensor::full({12}, 1.0), .class_weight = {{0, 2.0}}});
              }),
              HasSubstr("sample_weight and class_weight cannot be given together"));
  EXPECT_THAT(systolic::testing::error_of(
                  [&] { m.evaluate(d.x, d.y, {.verbose = 0, .sample_weight = Tensor::full({3}, 1.0)}); }),
              HasSubstr("evaluate: sample_weight has shape (3,)"));
  // An output (T, C) takes a weight per step too (Keras's temporal sample weights), of its steps' shape.
  auto in = layers::Input({4, 2});
  Model seq(in, layers::Dense(3, {.activation = "softmax"})(layers::GRU(2, {.return_sequences = true})(in)));
  seq.compile(optimizers::SGD(0.1), "sparse_categorical_crossentropy");
  const Tensor x = Tensor::full({6, 4, 2}, 0.5), y = Tensor::full({6, 4}, 1.0);
  EXPECT_NO_THROW(seq.fit(x, y, {.verbose = 0, .sample_weight = Tensor::full({6, 4}, 2.0)}));
  EXPECT_THAT(systolic::testing::error_of([&] {
                seq.fit(x, y, {.verbose = 0, .sample_weight = Tensor::full({6, 3}, 1.0)});
              }),
              HasSubstr("it takes one weight per sample: (6,), or one per row of the outputs: (6, 4)"));
}

// On XLA (the CPU plugin) a weighted fit is one compiled program per batch size, as an unweighted one, and gives
// the CPU's weights; on two XLA replicas (one SPMD program) too.
TEST(SampleWeightRules, XlaWeighsAsTheCpu) {
  SYSTOLIC_REQUIRE_XLA();
  const DType f32 = DType::float32;
  Data d = data(24, f32);
  FitOptions o{.batch_size = 8, .epochs = 2, .verbose = 0, .shuffle = false, .sample_weight = d.w};
  Model cpu = classifier(6, f32);
  cpu.fit(d.x, d.y, o);
  Model one = to_accelerator(classifier(6, f32), distribute::OneDeviceStrategy(systolic::testing::xla_cpu()));
  one.fit(d.x, d.y, o);
  EXPECT_EQ(one.step_mode(), "graph") << one.step_mode_reason();
  Model two = to_accelerator(
      classifier(6, f32),
      distribute::MirroredStrategy({systolic::testing::xla_cpu(0), systolic::testing::xla_cpu(1)}));
  two.fit(d.x, d.y, o);
  const auto want = flat_weights(cpu);
  for (Model* m : {&one, &two}) {
    auto got = flat_weights(*m);
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << i;
  }
}
