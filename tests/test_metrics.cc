// Keras's top-k accuracies against real Keras (tests/fixtures/metrics/top_k.json, written by
// tests/reference/metrics.py with Keras 3.15): SparseTopKCategoricalAccuracy and TopKCategoricalAccuracy (k = 5),
// accumulated over two batches, on predictions with many ties (TensorFlow's in_top_k counts every class tied at the
// k-th place as in) and on uniform draws; in a compiled model and its files. AUC, Precision and Recall against
// Keras (tests/fixtures/metrics/confusion.json), in a compiled model and its files. R2Score (r2.json), F1Score and
// FBetaScore (f_score.json) likewise.
#include <gmock/gmock.h>
#include <systolic/systolic.h>

#include <nlohmann/json.hpp>

#include "json_fixture.h"
#include "metrics/registry.h"
#include "saving/keras_zip.h"
#include "test_util.h"

using namespace systolic;
using json = nlohmann::json;
using systolic::testing::error_of;
using ::testing::HasSubstr;

TEST(TopKAccuracy, MatchesKerasWithTies) {
  const json& f = systolic::testing::json_fixture("metrics/top_k.json");
  ASSERT_EQ(f["cases"].size(), 2u);
  for (const json& c : f["cases"]) {
    SCOPED_TRACE(c["kind"].get<std::string>());
    Tensor pred = Tensor::from_vector(c["pred"].get<std::vector<float>>(), {12, 8});
    auto labels = c["labels"].get<std::vector<std::int32_t>>();
    std::vector<float> one_hot(12 * 8, 0.0f);
    for (std::size_t r = 0; r < labels.size(); ++r) one_hot[r * 8 + std::size_t(labels[r])] = 1.0f;
    for (bool sparse : {true, false}) {
      const std::string name = sparse ? "sparse_top_k_categorical_accuracy" : "top_k_categorical_accuracy";
      auto m = metrics::get(name, sparse);
      EXPECT_EQ(m->class_name(), sparse ? "SparseTopKCategoricalAccuracy" : "TopKCategoricalAccuracy");
      Tensor y = sparse ? Tensor::from_vector(labels, {12}) : Tensor::from_vector(one_hot, {12, 8});
      Tensor total = Tensor::zeros({1}, DType::float64);
      m->update(pred.slice(0, 7), y.slice(0, 7), total);
      m->update(pred.slice(7, 12), y.slice(7, 12), total);
      EXPECT_NEAR(m->result(total.item() / 12), c["results"][m->class_name()].get<double>(), 1e-6) << name;
      // k = 3, read from Keras's serialized object, and written back with its k.
      json k3 = {{"class_name", m->class_name()},
                 {"config", {{"name", "top3"}, {"dtype", "float32"}, {"k", 3}}}};
      auto m3 = metrics::make(metrics::from_config(k3), sparse);
      Tensor t3 = Tensor::zeros({1}, DType::float64);
      m3->update(pred.slice(0, 7), y.slice(0, 7), t3);
      m3->update(pred.slice(7, 12), y.slice(7, 12), t3);
      EXPECT_NEAR(m3->result(t3.item() / 12), c["results"][m->class_name() + " k=3"].get<double>(), 1e-6)
          << name;
      EXPECT_EQ(metrics::serialize(*m3, keras_object::Form::keras3)["config"]["k"], 3);
    }
  }
}

TEST(TopKAccuracy, InACompiledModelAndKerasConfigs) {
  set_random_seed(3);
  auto in = layers::Input({4});
  auto out = layers::Dense(10, {.activation = "softmax"})(in);
  Model m(in, out);
  m.compile("adam", "sparse_categorical_crossentropy", {"accuracy", "sparse_top_k_categorical_accuracy"});
  EXPECT_EQ(m.metrics_names(),
            (std::vector<std::string>{"loss", "accuracy", "sparse_top_k_categorical_accuracy"}));
  Tensor x = systolic::testing::random_tensor({32, 4}, 5);
  Tensor y = Tensor::from_vector(std::vector<std::int32_t>(32, 7), {32});
  auto scores = m.evaluate(x, y, {.verbose = 0});
  EXPECT_GE(scores[2], scores[1]);  // the top 5 hold the top 1
  systolic::testing::TempDir tmp;
  m.save(tmp.file("m.keras"));
  EXPECT_EQ(load_model(tmp.file("m.keras")).metrics_names(), m.metrics_names());
  // Keras's serialized objects: the default k reads; a k that is no whole number >= 1 is refused, naming it.
  json k5 = {{"class_name", "TopKCategoricalAccuracy"},
             {"config", {{"name", "top_k_categorical_accuracy"}, {"dtype", "float32"}, {"k", 5}}}};
  EXPECT_EQ(metrics::from_config(k5).name(), "top_k_categorical_accuracy");
  json k0 = k5;
  k0["config"]["k"] = 0;
  EXPECT_THAT(error_of([&] { metrics::from_config(k0); }), HasSubstr("k must be a whole number >= 1"));
}

namespace {

// Each case of a fixture of tests/reference/metrics.py: the metric read from the config Keras serialized, its state
// accumulated over the same two batches (rows 0-9, then the rest), Keras's result; written back as Keras wrote it.
void expect_as_keras(const std::string& fixture, std::size_t cases, double tolerance) {
  const json& f = systolic::testing::json_fixture(fixture);
  ASSERT_EQ(f["cases"].size(), cases);
  for (const json& c : f["cases"]) {
    SCOPED_TRACE(c["config"].dump());
    auto m = metrics::make(metrics::from_config(c["config"]), /*loss_has_sparse_labels=*/false);
    auto dims = c["shape"].get<std::vector<std::int64_t>>();
    m->build(Shape(std::vector<std::int64_t>(dims.begin() + 1, dims.end())));
    Tensor pred = Tensor::from_vector(c["pred"].get<std::vector<float>>(), Shape(dims));
    Tensor labels = Tensor::from_vector(c["labels"].get<std::vector<float>>(), Shape(dims));
    Tensor state = Tensor::zeros({m->state_size()}, DType::float64);
    double samples = double(dims[0]);
    if (c.contains("weights")) {  // weighted_metrics: each sample's weight, the weights' sum as the count
      Tensor w = Tensor::from_vector(c["weights"].get<std::vector<float>>(), {dims[0]});
      m->update_weighted(pred.slice(0, 10), labels.slice(0, 10), w.slice(0, 10), state);
      m->update_weighted(pred.slice(10, dims[0]), labels.slice(10, dims[0]), w.slice(10, dims[0]), state);
      samples = 0;
      for (double v : c["weights"].get<std::vector<double>>()) samples += double(float(v));
    } else {
      m->update(pred.slice(0, 10), labels.slice(0, 10), state);
      m->update(pred.slice(10, dims[0]), labels.slice(10, dims[0]), state);
    }
    const double value = m->value(state.data<double>(), samples);
    if (c["result"].is_array()) {  // a value per threshold: values() gives them, the logs their mean
      auto expected = c["result"].get<std::vector<double>>();
      auto* thresholded = dynamic_cast<const metrics::ThresholdMetric*>(m.get());
      ASSERT_NE(thresholded, nullptr);
      auto values = thresholded->values(state.data<double>());
      ASSERT_EQ(values.size(), expected.size());
      double mean = 0;
      for (std::size_t i = 0; i < values.size(); ++i) {
        EXPECT_NEAR(values[i], expected[i], tolerance) << "threshold " << i;
        mean += values[i] / double(values.size());
      }
      EXPECT_DOUBLE_EQ(value, mean);
    } else {
      EXPECT_NEAR(value, c["result"].get<double>(), tolerance);
    }
    EXPECT_EQ(json::parse(metrics::serialize(*m, keras_object::Form::keras3).dump()), c["config"]);
  }
}

}  // namespace

// Keras's AUC, Precision and Recall (tests/fixtures/metrics/confusion.json).
TEST(ConfusionMetrics, MatchKerasAcrossBatches) {
  expect_as_keras("metrics/confusion.json", 14, 1e-6);
}

// Keras's AUC with thresholds of its own, Precision and Recall with lists of thresholds (a value each), and these and
// R2Score with sample weights, as weighted_metrics pass them (tests/fixtures/metrics/thresholds.json).
TEST(ConfusionMetrics, ThresholdListsAndSampleWeightsMatchKerasAcrossBatches) {
  expect_as_keras("metrics/thresholds.json", 31, 1e-5);
}

// A loss's ignore_class outside the classes (-1): the loss skips those samples, the accuracies count them as misses,
// as Keras's evaluate does (tests/fixtures/metrics/ignore_class.json).
TEST(SparseAccuracy, CountsALossIgnoredClassAsAMiss) {
  const json& c = systolic::testing::json_fixture("metrics/ignore_class.json")["cases"][0];
  auto in = layers::Input({4});
  Model m(in, layers::Dense(4, {.activation = "softmax",
                                .kernel_initializer = "identity",
                                .bias_initializer = "zeros"})(in));
  m.compile(optimizers::SGD(0.01), losses::SparseCategoricalCrossentropy({.ignore_class = -1}),
            {"accuracy", "sparse_top_k_categorical_accuracy"});
  Tensor x = Tensor::from_vector(c["x"].get<std::vector<float>>(), {6, 4});
  Tensor y = Tensor::from_vector(c["y"].get<std::vector<std::int32_t>>(), {6});
  auto got = m.evaluate(x, y, {.verbose = 0});
  const auto names = m.metrics_names();
  ASSERT_EQ(got.size(), names.size());
  for (std::size_t i = 0; i < names.size(); ++i)
    EXPECT_NEAR(got[i], c["evaluate"][names[i]].get<double>(), 1e-6) << names[i];
}

// Keras's PrecisionAtRecall, RecallAtPrecision, SensitivityAtSpecificity, SpecificityAtSensitivity, Precision and
// Recall with top_k (tied predictions too), and AUC with multi_label (tests/fixtures/metrics/rates.json).
TEST(ConfusionMetrics, RatesTopKAndMultiLabelMatchKerasAcrossBatches) {
  expect_as_keras("metrics/rates.json", 27, 1e-6);
}

namespace {

// Each case of a fixture whose labels have their own shape (integer labels as int32, as a sparse loss's): the
// metric read from Keras's config, two batches, Keras's result (float32 in Keras); `serialized`: written back as
// Keras wrote it.
void expect_labelled_as_keras(const std::string& fixture, std::size_t cases, bool serialized) {
  const json& f = systolic::testing::json_fixture(fixture);
  ASSERT_EQ(f["cases"].size(), cases);
  for (const json& c : f["cases"]) {
    SCOPED_TRACE(c["config"].dump());
    const bool integer = c["integer_labels"].get<bool>();
    auto m = metrics::make(metrics::from_config(c["config"]), integer);
    EXPECT_EQ(m->class_name(), c["config"]["class_name"].get<std::string>());
    auto dims = c["shape"].get<std::vector<std::int64_t>>();
    auto label_dims = c["label_shape"].get<std::vector<std::int64_t>>();
    m->build(Shape(std::vector<std::int64_t>(dims.begin() + 1, dims.end())));
    Tensor pred = Tensor::from_vector(c["pred"].get<std::vector<float>>(), Shape(dims));
    auto values = c["labels"].get<std::vector<double>>();
    Tensor labels =
        integer
            ? Tensor::from_vector(std::vector<std::int32_t>(values.begin(), values.end()), Shape(label_dims))
            : Tensor::from_vector(std::vector<float>(values.begin(), values.end()), Shape(label_dims));
    Tensor state = Tensor::zeros({m->state_size()}, DType::float64);
    m->update(pred.slice(0, 10), labels.slice(0, 10), state);
    m->update(pred.slice(10, dims[0]), labels.slice(10, dims[0]), state);
    EXPECT_NEAR(m->value(state.data<double>(), double(dims[0])), c["result"].get<double>(), 1e-6);
    if (serialized) {
      EXPECT_EQ(json::parse(metrics::serialize(*m, keras_object::Form::keras3).dump()), c["config"]);
    }
  }
}

}  // namespace

// Keras's IoU, MeanIoU, OneHotIoU, OneHotMeanIoU and BinaryIoU (tests/fixtures/metrics/iou.json).
TEST(IoUMetrics, MatchKerasAcrossBatches) {
  expect_labelled_as_keras("metrics/iou.json", 9, true);
  // They need their arguments: by name alone compile refuses them, saying so; a target class out of range is named.
  EXPECT_THAT(error_of([] { metrics::get("mean_io_u", true); }), HasSubstr("needs its arguments"));
  json bad = {{"class_name", "IoU"},
              {"config", {{"name", "iou"}, {"num_classes", 2}, {"target_class_ids", {0, 2}}}}};
  EXPECT_THAT(error_of([&] { metrics::from_config(bad); }), HasSubstr("target class id 2 is out of range"));
}

// Keras's SparseCategoricalCrossentropy and CategoricalCrossentropy metrics (tests/fixtures/metrics/crossentropy.json),
// from probabilities (one clipped) and from logits. By default they are written by name (compile's "name"), with
// from_logits as Keras's object; in a model ending in softmax they read the logits (more_of_keras).
TEST(CrossentropyMetrics, MatchKerasAcrossBatches) {
  expect_labelled_as_keras("metrics/crossentropy.json", 4, false);
  auto m = metrics::get("sparse_categorical_crossentropy", true);
  EXPECT_EQ(metrics::serialize(*m, keras_object::Form::keras3), "sparse_categorical_crossentropy");
  json logits = {
      {"class_name", "CategoricalCrossentropy"},
      {"config",
       {{"name", "cce"}, {"dtype", "float32"}, {"from_logits", true}, {"label_smoothing", 0}, {"axis", -1}}}};
  auto cce = metrics::make(metrics::from_config(logits), false);
  EXPECT_EQ(json::parse(metrics::serialize(*cce, keras_object::Form::keras3).dump())["config"],
            logits["config"]);
  logits["config"]["label_smoothing"] = 0.1;
  EXPECT_THAT(error_of([&] { metrics::from_config(logits); }), HasSubstr("label_smoothing"));
  EXPECT_THAT(error_of([] { metrics::get("categorical_crossentropy", true); }),
              HasSubstr("reads dense labels"));
}

// Keras's Mean and Sum (tests/fixtures/metrics/mean_sum.json): two update_state calls of values and sample weights of
// several shapes; Keras sums in float32.
TEST(MeanAndSum, MatchKeras) {
  const json& f = systolic::testing::json_fixture("metrics/mean_sum.json");
  ASSERT_EQ(f["cases"].size(), 9u);
  for (const json& c : f["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    metrics::Mean mean;
    metrics::Sum sum;
    for (const json& u : c["updates"]) {
      Tensor v = Tensor::from_vector(u["values"].get<std::vector<float>>(),
                                     Shape(u["shape"].get<std::vector<std::int64_t>>()));
      Tensor w = u.contains("weights")
                     ? Tensor::from_vector(u["weights"].get<std::vector<float>>(),
                                           Shape(u["weight_shape"].get<std::vector<std::int64_t>>()))
                     : Tensor();
      mean.update_state(v, w);
      sum.update_state(v, w);
    }
    EXPECT_NEAR(mean.result(), c["mean"].get<double>(), 1e-6);
    EXPECT_NEAR(sum.result(), c["sum"].get<double>(), 1e-5);
  }
  metrics::Mean m("running_loss");
  EXPECT_EQ(m.name(), "running_loss");
  EXPECT_EQ(m.result(), 0.0);  // nothing counted: divide_no_nan
  m.update_state(Tensor::from_vector(std::vector<float>{1, 3, 5, 7}, {4}),
                 Tensor::from_vector(std::vector<float>{1, 1, 0, 0}, {4}));
  EXPECT_DOUBLE_EQ(m.result(), 2.0);  // Keras's docstring example
  m.reset_state();
  m.update_state(Tensor::from_vector(std::vector<float>{1, 3, 5, 7}, {4}));
  EXPECT_DOUBLE_EQ(m.result(), 4.0);
  EXPECT_THAT(error_of([&] {
                m.update_state(Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}),
                               Tensor::from_vector(std::vector<float>{1, 2}, {1, 2}));
              }),
              HasSubstr("does not broadcast"));
}

// Keras's R2Score (tests/fixtures/metrics/r2.json): Keras sums in float32.
TEST(R2Score, MatchesKerasAcrossBatches) {
  expect_as_keras("metrics/r2.json", 5, 1e-5);
}

TEST(R2Score, InACompiledModelAndItsConfig) {
  set_random_seed(7);
  auto in = layers::Input({4});
  Model m(in, layers::Dense(2)(in));
  m.compile("adam", "mse",
            {"r2_score", metrics::R2Score({.class_aggregation = "variance_weighted_average"})});
  EXPECT_EQ(m.metrics_names(), (std::vector<std::string>{"loss", "r2_score", "r2_score_1"}));
  Tensor x = systolic::testing::random_tensor({30, 4}, 8);
  Tensor y = systolic::testing::random_tensor({30, 2}, 9, DType::float32, 0, 5);
  auto whole = m.evaluate(x, y, {.batch_size = 30, .verbose = 0});
  auto batched = m.evaluate(x, y, {.batch_size = 8, .verbose = 0});
  // The sums accumulate over batches (the predictions of a batch of 8 and of 30 differ in float32's last bits).
  for (std::size_t i = 1; i < whole.size(); ++i) EXPECT_NEAR(batched[i], whole[i], 1e-6) << i;
  systolic::testing::TempDir tmp;
  m.save(tmp.file("m.keras"));
  EXPECT_EQ(load_model(tmp.file("m.keras")).evaluate(x, y, {.batch_size = 8, .verbose = 0}), batched);
  // Keras's refusals: not (batch, columns); a score per column (class_aggregation null).
  auto in3 = layers::Input({2, 3});
  Model images(in3, layers::Dense(1)(in3));
  EXPECT_THAT(error_of([&] { images.compile("adam", "mse", {"r2_score"}); }),
              HasSubstr("R2Score expects 2D"));
  json r2 = {{"class_name", "R2Score"}, {"config", {{"name", "r2"}, {"class_aggregation", nullptr}}}};
  EXPECT_THAT(error_of([&] { metrics::from_config(r2); }), HasSubstr("class_aggregation null"));
}

// Keras's F1Score and FBetaScore (tests/fixtures/metrics/f_score.json): every average, thresholds None (the rows'
// maxima, ties and a row of zeros), 0.5, 0.35 and 0.6 (predictions exactly at them), beta 2 and 0.5, on one-hot,
// multi-label and smoothed labels. Keras computes in float32 (the counts are exact in it; smoothed labels' sums
// are not).
TEST(FScore, MatchesKerasAcrossBatches) {
  const json& f = systolic::testing::json_fixture("metrics/f_score.json");
  ASSERT_EQ(f["cases"].size(), 3u);
  std::size_t checked = 0;
  for (const json& c : f["cases"]) {
    SCOPED_TRACE(c["kind"].get<std::string>());
    auto dims = c["shape"].get<std::vector<std::int64_t>>();
    Tensor pred = Tensor::from_vector(c["pred"].get<std::vector<float>>(), Shape(dims));
    Tensor labels = Tensor::from_vector(c["labels"].get<std::vector<float>>(), Shape(dims));
    for (const json& k : c["metrics"]) {
      SCOPED_TRACE(k["config"].dump());
      auto m = metrics::make(metrics::from_config(k["config"]), /*loss_has_sparse_labels=*/false);
      EXPECT_EQ(m->class_name(), k["config"]["class_name"]);
      m->build(Shape{dims[1]});
      ASSERT_EQ(m->state_size(), 4 * dims[1]);
      Tensor state = Tensor::zeros({m->state_size()}, DType::float64);
      m->update(pred.slice(0, 10), labels.slice(0, 10), state);
      m->update(pred.slice(10, dims[0]), labels.slice(10, dims[0]), state);
      const auto scores = dynamic_cast<const metrics::FBetaScore&>(*m).scores(state.data<double>());
      const std::vector<double> keras =
          k["result"].is_array() ? k["result"].get<std::vector<double>>() : std::vector<double>{k["result"]};
      ASSERT_EQ(scores.size(), keras.size());
      double mean = 0;
      for (std::size_t i = 0; i < keras.size(); ++i) {
        EXPECT_NEAR(scores[i], keras[i], 1e-6) << "class " << i;
        mean += keras[i] / double(keras.size());
      }
      // The value logged: the score, or with average None the classes' mean (Keras's progress bar shows it).
      EXPECT_NEAR(m->value(state.data<double>(), double(dims[0])), mean, 1e-6);
      EXPECT_EQ(json::parse(metrics::serialize(*m, keras_object::Form::keras3).dump()), k["config"]);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 25u + 8u + 5u);
}

// F1Score and FBetaScore compiled as Keras's compile_config holds them (the fixture's: "f1_score",
// F1Score(average="macro", threshold=0.5, name="f1_macro"), FBetaScore(beta=2.0, average="weighted")) and from C++
// options: fit, evaluate (the counts accumulate over batches), the metric's values of the predictions, and the
// .keras round trip.
TEST(FScore, InACompiledModelAndItsConfig) {
  const json& f = systolic::testing::json_fixture("metrics/f_score.json");
  const json& keras_metrics = f["compile_config"]["metrics"];
  ASSERT_EQ(keras_metrics.size(), 3u);
  std::vector<metrics::MetricArg> args;
  for (const json& k : keras_metrics) args.push_back(metrics::from_config(k));
  args.push_back(metrics::F1Score({.average = "micro", .name = "f1_micro"}));
  args.push_back(metrics::FBetaScore({.beta = 0.5, .threshold = 0.4, .name = "f_half"}));
  set_random_seed(11);
  auto in = layers::Input({4});
  Model m(in, layers::Dense(3, {.activation = "softmax"})(in));
  m.compile("adam", "categorical_crossentropy", args);
  const std::vector<std::string> names{"loss", "f1_score", "f1_macro", "fbeta_score", "f1_micro", "f_half"};
  EXPECT_EQ(m.metrics_names(), names);
  Tensor x = systolic::testing::random_tensor({40, 4}, 12);
  std::vector<float> one_hot(40 * 3, 0.0f);
  for (std::size_t i = 0; i < 40; ++i) one_hot[i * 3 + (i * 7 + i / 5) % 3] = 1.0f;
  Tensor y = Tensor::from_vector(one_hot, {40, 3});
  History h = m.fit(x, y, {.batch_size = 8, .epochs = 2, .verbose = 0});
  for (auto& n : names) EXPECT_EQ(h.history.at(n).size(), 2u) << n;
  auto whole = m.evaluate(x, y, {.batch_size = 40, .verbose = 0});
  auto batched = m.evaluate(x, y, {.batch_size = 7, .verbose = 0});
  ASSERT_EQ(whole.size(), names.size());
  for (std::size_t i = 1; i < whole.size(); ++i) EXPECT_NEAR(batched[i], whole[i], 1e-12) << names[i];
  // Each logged value is the metric's of the model's predictions in one batch.
  Tensor pred = m.predict(x, {.batch_size = 40, .verbose = 0});
  for (std::size_t i = 1; i < names.size(); ++i) {
    auto metric = metrics::make(args[i - 1], false);
    metric->build(Shape{3});
    Tensor state = Tensor::zeros({metric->state_size()}, DType::float64);
    metric->update(pred, y, state);
    EXPECT_NEAR(whole[i], metric->value(state.data<double>(), 40), 1e-12) << names[i];
  }
  systolic::testing::TempDir tmp;
  m.save(tmp.file("m.keras"));
  Model back = load_model(tmp.file("m.keras"));
  EXPECT_EQ(back.metrics_names(), names);
  EXPECT_EQ(back.evaluate(x, y, {.batch_size = 7, .verbose = 0}), batched);
  // Written as Keras writes them: the serialized objects; "f1_score", which Keras's compile_config keeps as the name
  // compile took, as F1Score's defaults (Keras reads either).
  auto written = keras_io::read_keras_archive_file(tmp.file("m.keras")).config["compile_config"]["metrics"];
  ASSERT_EQ(written.size(), 5u);
  EXPECT_EQ(
      json::parse(written[0].dump()),
      json({{"module", "keras.metrics"},
            {"class_name", "F1Score"},
            {"config",
             {{"name", "f1_score"}, {"dtype", "float32"}, {"average", nullptr}, {"threshold", nullptr}}},
            {"registered_name", nullptr}}));
  EXPECT_EQ(json::parse(written[1].dump()), keras_metrics[1]);
  EXPECT_EQ(json::parse(written[2].dump()), keras_metrics[2]);
  EXPECT_EQ(written[4]["config"]["beta"], 0.5);
  EXPECT_EQ(written[4]["config"]["threshold"], 0.4);
  // By name: keras.metrics.get takes "f1_score", "F1Score" and "FBetaScore", not "fbeta_score".
  EXPECT_EQ(metrics::get("F1Score", false)->name(), "f1_score");
  EXPECT_EQ(metrics::get("FBetaScore", false)->name(), "fbeta_score");
  EXPECT_THAT(error_of([] { metrics::get("fbeta_score", false); }),
              HasSubstr("unknown metric 'fbeta_score'"));
}

TEST(FScore, RefusesWhatKerasRefuses) {
  // Not (batch, classes), as Keras's _build; integer labels (the metric reads one-hot or multi-label ones).
  auto in3 = layers::Input({2, 3});
  Model images(in3, layers::Dense(3, {.activation = "softmax"})(in3));
  EXPECT_THAT(error_of([&] { images.compile("adam", "categorical_crossentropy", {"f1_score"}); }),
              HasSubstr("F1Score expects 2D inputs"));
  auto in = layers::Input({4});
  Model m(in, layers::Dense(3, {.activation = "softmax"})(in));
  EXPECT_THAT(error_of([&] { m.compile("adam", "sparse_categorical_crossentropy", {"f1_score"}); }),
              HasSubstr("reads dense labels but the loss takes integer labels"));
  // Keras's __init__ checks, in configs and in C++ options.
  auto config = [](const std::string& cls, json options) {
    json c = {{"name", "f"}, {"dtype", "float32"}};
    c.update(options);
    return json{
        {"module", "keras.metrics"}, {"class_name", cls}, {"config", c}, {"registered_name", nullptr}};
  };
  auto refused = [](const json& c) { return error_of([&] { metrics::from_config(c); }); };
  EXPECT_THAT(refused(config("F1Score", {{"average", "bogus"}})), HasSubstr("average 'bogus' is not one of"));
  EXPECT_THAT(refused(config("FBetaScore", {{"average", 3}})), HasSubstr("average 3 is not one of"));
  EXPECT_THAT(refused(config("FBetaScore", {{"beta", 0.0}})), HasSubstr("beta must be > 0"));
  EXPECT_THAT(refused(config("FBetaScore", {{"beta", -2.0}})), HasSubstr("beta must be > 0"));
  EXPECT_THAT(refused(config("FBetaScore", {{"beta", 2}})), HasSubstr("beta 2 must be a float"));
  EXPECT_THAT(refused(config("F1Score", {{"beta", 2.0}})), HasSubstr("'beta'"));
  EXPECT_THAT(refused(config("F1Score", {{"threshold", 1.5}})), HasSubstr("0 < threshold <= 1"));
  EXPECT_THAT(refused(config("FBetaScore", {{"threshold", 0.0}})), HasSubstr("0 < threshold <= 1"));
  EXPECT_THAT(refused(config("F1Score", {{"threshold", "0.5"}})),
              HasSubstr("threshold \"0.5\" must be null"));
  EXPECT_THAT(refused(config("F1Score", {{"top_k", 2}})), HasSubstr("'top_k'"));
  EXPECT_EQ(metrics::from_config(config("FBetaScore", {{"beta", 2.0}, {"threshold", 1.0}})).name(), "f");
  EXPECT_THAT(error_of([] { metrics::F1Score({.average = "samples"}); }), HasSubstr("average 'samples'"));
  EXPECT_THAT(error_of([] { metrics::FBetaScore({.beta = 0}); }), HasSubstr("beta must be > 0"));
  EXPECT_THAT(error_of([] { metrics::FBetaScore({.threshold = -0.5}); }), HasSubstr("0 < threshold <= 1"));
}

TEST(ConfusionMetrics, InACompiledModelAndTheirConfigs) {
  set_random_seed(4);
  auto in = layers::Input({4});
  auto out = layers::Dense(1, {.activation = "sigmoid"})(in);
  Model m(in, out);
  m.compile("adam", "binary_crossentropy",
            {"accuracy", "auc", metrics::AUC({.curve = "PR", .name = "pr_auc"}),
             metrics::Precision({.threshold = 0.3}), "recall",
             metrics::AUC({.thresholds = {0.6, 0.2, 0.45}, .name = "auc_given"}),
             metrics::Recall({.name = "recalls", .thresholds = {0.7, 0.4}})});
  EXPECT_EQ(m.metrics_names(), (std::vector<std::string>{"loss", "accuracy", "auc", "pr_auc", "precision",
                                                         "recall", "auc_given", "recalls"}));
  Tensor x = systolic::testing::random_tensor({40, 4}, 3);
  std::vector<float> y(40);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = float(i % 3 == 0);
  Tensor labels = Tensor::from_vector(y, {40, 1});
  // The counts accumulate over batches: a batch of 7 gives what one batch of all gives.
  auto whole = m.evaluate(x, labels, {.batch_size = 40, .verbose = 0});
  auto batched = m.evaluate(x, labels, {.batch_size = 7, .verbose = 0});
  ASSERT_EQ(whole.size(), 8u);
  for (std::size_t i = 2; i < whole.size(); ++i) EXPECT_NEAR(batched[i], whole[i], 1e-12) << i;
  systolic::testing::TempDir tmp;
  m.save(tmp.file("m.keras"));
  Model back = load_model(tmp.file("m.keras"));
  EXPECT_EQ(back.metrics_names(), m.metrics_names());
  EXPECT_EQ(back.evaluate(x, labels, {.batch_size = 7, .verbose = 0}), batched);
  // What systolic does not compute is refused by name.
  json auc = {{"class_name", "AUC"}, {"config", {{"name", "auc"}, {"label_weights", {1, 2}}}}};
  EXPECT_THAT(error_of([&] { metrics::from_config(auc); }), HasSubstr("label_weights without multi_label"));
  auc["config"] = {{"name", "auc"}, {"curve", "PRGAIN"}};
  EXPECT_THAT(error_of([&] { metrics::from_config(auc); }), HasSubstr("PRGAIN"));
  // Thresholds: numbers in [0, 1] (Keras's assert_thresholds_range), a list for AUC, one or a list for Precision.
  json precision = {{"class_name", "Precision"}, {"config", {{"name", "p"}, {"thresholds", {0.2, 1.5}}}}};
  EXPECT_THAT(error_of([&] { metrics::from_config(precision); }),
              HasSubstr("threshold values must be in [0, 1], got 1.5"));
  precision["config"]["thresholds"] = {0.2, "0.7"};
  EXPECT_THAT(error_of([&] { metrics::from_config(precision); }), HasSubstr("is not a list of numbers"));
  precision["config"]["thresholds"] = "0.5";
  EXPECT_THAT(error_of([&] { metrics::from_config(precision); }),
              HasSubstr("thresholds \"0.5\" is not a number"));
  precision["config"]["thresholds"] = -0.1;
  EXPECT_THAT(error_of([&] { metrics::from_config(precision); }), HasSubstr("must be in [0, 1], got -0.1"));
  EXPECT_THAT(error_of([] { metrics::Precision({.threshold = 0.5, .thresholds = {0.2}}); }),
              HasSubstr("not both"));
  auc["config"] = {{"name", "auc"}, {"thresholds", 0.5}};
  EXPECT_THAT(error_of([&] { metrics::from_config(auc); }),
              HasSubstr("thresholds 0.5 is not a list of numbers"));
  auc["config"] = {{"name", "auc"}, {"thresholds", {0.5, 2}}};
  EXPECT_THAT(error_of([&] { metrics::from_config(auc); }), HasSubstr("must be in [0, 1], got 2"));
  auc["config"] = {{"name", "auc"}, {"thresholds", json::array()}};
  EXPECT_THAT(error_of([&] { metrics::from_config(auc); }), HasSubstr("thresholds [] is not supported"));
  precision["config"] = {{"name", "p"}, {"top_k", 0}};
  EXPECT_THAT(error_of([&] { metrics::from_config(precision); }),
              HasSubstr("top_k must be a whole number >= 1, not 0"));
  // multi_label takes an output of (batch, labels); label_weights one per label.
  metrics::AUC multi({.multi_label = true, .label_weights = {1, 2}});
  EXPECT_THAT(error_of([&] { multi.build(Shape{3}); }), HasSubstr("2 label_weights for 3 labels"));
  EXPECT_THAT(error_of([&] { multi.build(Shape{2, 2}); }), HasSubstr("multi_label takes an output"));
  EXPECT_THAT(error_of([] { metrics::AUC({.num_thresholds = 1}); }), HasSubstr("num_thresholds"));
}

// Keras 3 logs a metric whose name was shown already with _1, _2, ... (CompileMetrics.result()): compiled with
// ["mae", "mae", AUC(), AUC(curve="PR")] Keras 3.15 evaluates to {loss, mae, mae_1, auc, auc_1}. The metrics keep
// their own names in files. evaluate's list is in Keras's order (Trainer._flatten_metrics_in_order: the logs named
// as the metrics are, then the rest sorted), each log once.
TEST(MetricNames, DuplicatesAreLoggedWithSuffixesAsKerasDoes) {
  set_random_seed(5);
  auto in = layers::Input({3});
  Model m(in, layers::Dense(1, {.activation = "sigmoid"})(in));
  m.compile("adam", "binary_crossentropy",
            {"mae", "mae", metrics::AUC(), metrics::AUC({.curve = "PR"}), "mae"});
  const std::vector<std::string> names{"loss", "mae", "auc", "auc_1", "mae_1", "mae_2"};
  EXPECT_EQ(m.metrics_names(), names);
  Tensor x = systolic::testing::random_tensor({8, 3}, 6);
  Tensor y = Tensor::from_vector(std::vector<float>{0, 1, 1, 0, 1, 0, 0, 1}, {8, 1});
  History h = m.fit(x, y, {.batch_size = 4, .epochs = 1, .verbose = 0});
  for (auto& n : names) EXPECT_TRUE(h.history.count(n)) << n;
  systolic::testing::TempDir tmp;
  m.save(tmp.file("m.keras"));
  Model back = load_model(tmp.file("m.keras"));
  EXPECT_EQ(back.metrics_names(), names);
}
