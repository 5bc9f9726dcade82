// Keras's elementwise losses against real Keras (tests/fixtures/losses/keras_losses.json, written by
// tests/reference/losses.py with Keras 3.15 over TensorFlow 2.21): each loss made from Keras's class name and
// arguments computes Keras's value and gradient in float64 and float32, from probabilities, from logits
// (from_logits) and from the logits behind a sigmoid output; names and configs round-trip as Keras writes them;
// models with a sigmoid output or a regression head train with them, and "accuracy" on one output unit is
// binary accuracy.
#include <gmock/gmock.h>
#include <systolic/systolic.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "json_fixture.h"
#include "losses/registry.h"
#include "test_util.h"

using namespace systolic;
using json = nlohmann::json;
using systolic::testing::error_of;
using ::testing::HasSubstr;

namespace {

const json& fixture() {
  return systolic::testing::json_fixture("losses/keras_losses.json");
}

std::string label(const json& c) {
  return fmt::format("{}({}) on {} {}", c["class_name"].get<std::string>(), c["kwargs"].dump(),
                     c["input"].get<std::string>(), c["shape"].dump());
}

// The loss of the case's class with its arguments, as Keras's deserialize reads {"class_name", "config"}.
std::unique_ptr<losses::Loss> loss_of(const json& c) {
  return losses::deserialize(json{{"class_name", c["class_name"]}, {"config", c["kwargs"]}});
}

struct Result {
  double value;
  std::vector<double> grad;
  bool from_logits_gradient;
};

// The loss's value (total / samples) and gradient w.r.t. the case's input, computed in `dtype`.
Result run(const losses::Loss& loss, const json& c, DType dtype) {
  Shape shape(c["shape"].get<std::vector<std::int64_t>>());
  Tensor x = Tensor::from_vector(c["x"].get<std::vector<double>>(), shape).to(dtype);
  Tensor y = c.contains("y_shape") ? Tensor::from_vector(c["y"].get<std::vector<double>>(),
                                                         Shape(c["y_shape"].get<std::vector<std::int64_t>>()))
                                         .to(DType::int32)
                                   : Tensor::from_vector(c["y"].get<std::vector<double>>(), shape).to(dtype);
  Tensor weights;
  if (c.contains("sample_weight"))  // one per sample ([N] or [N, 1]) or one per row ([N, T])
    weights = Tensor::from_vector(c["sample_weight"].get<std::vector<double>>(),
                                  c.contains("sample_weight_shape")
                                      ? Shape(c["sample_weight_shape"].get<std::vector<std::int64_t>>())
                                      : Shape{shape[0]})
                  .to(dtype == DType::float64 ? DType::float64 : DType::float32);
  const bool sigmoid = c["input"] == "sigmoid", softmax = c["input"] == "softmax";
  Tensor output = x, none;
  if (sigmoid || softmax) {
    output = Tensor(shape, dtype);
    ops::activation_forward(sigmoid ? Activation::sigmoid : Activation::softmax, x, output);
  }
  Tensor total = Tensor::zeros({1}, DType::float64), grad(shape, dtype);
  const std::int64_t n = shape[0];
  losses::LossArgs args{output, softmax ? x : none, sigmoid ? x : none, y, weights, total, grad,
                        grad,   1.0 / double(n)};
  bool pre = loss.compute(args);
  if ((sigmoid || softmax) &&
      !pre) {  // a gradient w.r.t. the output: on through the activation to the logits
    Tensor dx(shape, dtype);
    ops::activation_backward(sigmoid ? Activation::sigmoid : Activation::softmax, x, output, grad, dx);
    grad = dx;
  }
  return {total.item() / double(n), grad.to_doubles(), pre};
}

double max_relative(const std::vector<double>& a, const std::vector<double>& b) {
  double scale = 0, err = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    scale = std::max(scale, std::abs(b[i]));
    err = std::max(err, std::abs(a[i] - b[i]));
  }
  return err / std::max(scale, 1e-30);
}

}  // namespace

TEST(KerasLosses, ValuesAndGradientsMatchKeras) {
  const json& f = fixture();
  ASSERT_GE(f["cases"].size(), 170u);
  for (const json& c : f["cases"]) {
    SCOPED_TRACE(label(c));
    auto loss = loss_of(c);
    ASSERT_EQ(loss->class_name(), c["class_name"].get<std::string>());
    const double keras = c["value"].get<double>();
    const auto keras_grad = c["grad"].get<std::vector<double>>();
    Result r64 = run(*loss, c, DType::float64);
    EXPECT_NEAR(r64.value, keras, 1e-12 * std::max(1.0, std::abs(keras)));
    EXPECT_LT(max_relative(r64.grad, keras_grad), 1e-10);
    // From the logits behind a sigmoid or softmax: the gradient is w.r.t. those logits, as Keras's; Keras's
    // CategoricalFocalCrossentropy, and a crossentropy that ignores a class, read the softmax's output.
    EXPECT_EQ(r64.from_logits_gradient,
              c["input"] == "sigmoid" ||
                  (c["input"] == "softmax" && c["class_name"] != "CategoricalFocalCrossentropy" &&
                   !c["kwargs"].contains("ignore_class")));
    Result r32 = run(*loss, c, DType::float32);
    EXPECT_NEAR(r32.value, keras, 2e-6 * std::max(1.0, std::abs(keras)));
    EXPECT_LT(max_relative(r32.grad, keras_grad), 2e-5);
  }
}

TEST(KerasLosses, ConfigsAreKerasOwn) {
  for (const json& c : fixture()["cases"]) {
    SCOPED_TRACE(label(c));
    auto loss = loss_of(c);
    // Keras 3.15 leaves Huber's delta out of its config; systolic writes it (Keras's Huber(**config) reads it).
    if (c["class_name"] == "Huber" && c["kwargs"].contains("delta")) {
      json s = losses::serialize(*loss, keras_object::Form::keras3);
      EXPECT_EQ(s["config"]["delta"], c["kwargs"]["delta"]);
      EXPECT_EQ(s["config"]["name"], "huber_loss");
      EXPECT_EQ(losses::deserialize(s)->get_config(), loss->get_config());
      continue;
    }
    json serialized = losses::serialize(*loss, keras_object::Form::keras3);
    if (c["kwargs"].empty()) {
      // Keras's defaults: compile(loss="name") writes the name.
      EXPECT_EQ(serialized, loss->name());
    } else {
      EXPECT_EQ(serialized, c["serialized"]);
    }
    // Keras's serialized form reads back to the same loss.
    auto back = losses::deserialize(c["serialized"]);
    EXPECT_EQ(back->class_name(), loss->class_name());
    EXPECT_EQ(back->get_config(), loss->get_config());
  }
}

TEST(KerasLosses, NamesAndAliasesAreKeras) {
  const std::vector<std::pair<std::string, std::string>> names{
      {"binary_crossentropy", "BinaryCrossentropy"},
      {"bce", "BinaryCrossentropy"},
      {"BinaryFocalCrossentropy", "BinaryFocalCrossentropy"},
      {"mae", "MeanAbsoluteError"},
      {"MAPE", "MeanAbsolutePercentageError"},
      {"msle", "MeanSquaredLogarithmicError"},
      {"huber", "Huber"},
      {"log_cosh", "LogCosh"},
      {"logcosh", "LogCosh"},
      {"poisson", "Poisson"},
      {"kld", "KLDivergence"},
      {"kl_divergence", "KLDivergence"},
      {"hinge", "Hinge"},
      {"squared_hinge", "SquaredHinge"},
      {"mse", "MeanSquaredError"},
      {"cosine_similarity", "CosineSimilarity"},
      {"categorical_hinge", "CategoricalHinge"},
      {"categorical_focal_crossentropy", "CategoricalFocalCrossentropy"},
  };
  for (auto& [name, cls] : names) EXPECT_EQ(losses::get(name)->class_name(), cls) << name;
  EXPECT_EQ(losses::get("huber")->name(), "huber");
}

TEST(KerasLosses, BadArgumentsAreNamed) {
  auto bad = [](const json& config) {
    return error_of([&] {
      losses::deserialize(json{{"class_name", "BinaryCrossentropy"}, {"config", config}});
    });
  };
  EXPECT_THAT(bad({{"label_smoothing", 1.5}}), HasSubstr("label_smoothing"));
  EXPECT_THAT(bad({{"axis", 1}}), HasSubstr("axis"));
  EXPECT_THAT(bad({{"from_logits", "yes"}}), HasSubstr("from_logits"));
  EXPECT_THAT(bad({{"reduction", "sum"}}), HasSubstr("reduction"));
  EXPECT_THAT(error_of([] {
                losses::deserialize(json{{"class_name", "Huber"}, {"config", {{"delta", -1}}}});
              }),
              HasSubstr("delta"));
  for (const json& ignore : {json(1.5), json("0"), json(std::int64_t(1) << 40)})
    EXPECT_THAT(error_of([&] {
                  losses::deserialize(json{{"class_name", "SparseCategoricalCrossentropy"},
                                           {"config", {{"ignore_class", ignore}}}});
                }),
                HasSubstr("ignore_class"));
  EXPECT_THAT(error_of([] { losses::get("binary_cross_entropy"); }), HasSubstr("binary_cross_entropy"));
}

// The op's kinds as metrics: per-sample means of the element function, no gradient.
TEST(KerasMetrics, ElementwiseMetricsAreTheMeansOfTheirFunctions) {
  Tensor pred = Tensor::from_vector<float>({0.2f, 0.7f, 0.6f, 0.4f}, {4, 1});
  Tensor truth = Tensor::from_vector<float>({0, 1, 0, 0}, {4, 1});
  auto value = [&](const std::string& name) {
    auto m = metrics::get(name, false, true);
    Tensor total = Tensor::zeros({1}, DType::float64);
    m->update(pred, truth, total);
    return total.item() / 4.0;
  };
  EXPECT_DOUBLE_EQ(value("accuracy"), 0.75);  // 0.2 -> 0, 0.7 -> 1, 0.6 -> 1 (wrong), 0.4 -> 0
  EXPECT_EQ(metrics::get("accuracy", false, true)->class_name(), "BinaryAccuracy");
  EXPECT_DOUBLE_EQ(value("binary_accuracy"), 0.75);
  EXPECT_NEAR(value("mae"), (0.2 + 0.3 + 0.6 + 0.4) / 4, 1e-7);
  EXPECT_NEAR(value("mse"), (0.04 + 0.09 + 0.36 + 0.16) / 4, 1e-7);
  auto rmse = metrics::get("root_mean_squared_error", false, true);
  EXPECT_EQ(rmse->class_name(), "RootMeanSquaredError");
  EXPECT_NEAR(rmse->result(value("root_mean_squared_error")), std::sqrt((0.04 + 0.09 + 0.36 + 0.16) / 4),
              1e-7);
  EXPECT_NEAR(value("binary_crossentropy"),
              -(std::log(0.8) + std::log(0.7) + std::log(0.4) + std::log(0.6)) / 4, 1e-6);
}

// Keras's CosineSimilarity and CategoricalHinge metrics (the similarity, and the loss's value) on the row losses'
// cases, against the metric results the fixture records.
TEST(KerasMetrics, RowMetricsMatchKeras) {
  int checked = 0;
  for (const json& c : fixture()["cases"]) {
    if (!c.contains("metric")) continue;
    SCOPED_TRACE(label(c));
    Shape shape(c["shape"].get<std::vector<std::int64_t>>());
    auto m = metrics::get(c["class_name"].get<std::string>(), false, false);
    EXPECT_EQ(m->class_name(), c["class_name"].get<std::string>());
    for (DType dtype : {DType::float64, DType::float32}) {
      Tensor x = Tensor::from_vector(c["x"].get<std::vector<double>>(), shape).to(dtype);
      Tensor y = Tensor::from_vector(c["y"].get<std::vector<double>>(), shape).to(dtype);
      Tensor total = Tensor::zeros({1}, DType::float64);
      m->update(x, y, total);
      EXPECT_NEAR(m->value(total.data<double>(), double(shape[0])), c["metric"].get<double>(),
                  dtype == DType::float64 ? 1e-12 : 1e-6);
    }
    ++checked;
  }
  EXPECT_EQ(checked, 10);
}

// A binary classifier as keras.io's guides write one: Dense(1, sigmoid), binary_crossentropy, "accuracy" (binary
// accuracy), labels of shape (N,). It learns a linearly separable rule, and a .keras file keeps its loss.
TEST(KerasLosses, BinaryClassifierTrainsWithSigmoidAndBinaryCrossentropy) {
  const std::int64_t n = 256;
  Tensor x = systolic::testing::random_tensor({n, 4}, 7, DType::float32, -1, 1);
  std::vector<float> labels(n);
  for (std::int64_t i = 0; i < n; ++i) {
    const float* r = x.data<float>() + i * 4;
    labels[i] = r[0] + 0.5f * r[1] - r[2] > 0 ? 1.0f : 0.0f;
  }
  Tensor y = Tensor::from_vector(labels, {n});
  auto in = layers::Input({4});
  auto h = layers::Dense(8, {.activation = "relu"})(in);
  auto out = layers::Dense(1, {.activation = "sigmoid"})(h);
  Model model(in, out);
  model.compile(optimizers::Adam(0.05), "binary_crossentropy", {"accuracy"});
  EXPECT_EQ(model.metrics_names(), (std::vector<std::string>{"loss", "accuracy"}));
  auto before = model.evaluate(x, y, {.verbose = 0});
  model.fit(x, y, {.batch_size = 32, .epochs = 15, .verbose = 0});
  auto after = model.evaluate(x, y, {.verbose = 0});
  EXPECT_LT(after[0], 0.5 * before[0]);
  EXPECT_GT(after[1], 0.95);

  systolic::testing::TempDir dir;
  model.save(dir.file("m.keras"));
  Model back = load_model(dir.file("m.keras"));
  auto again = back.evaluate(x, y, {.verbose = 0});
  EXPECT_NEAR(again[0], after[0], 1e-6);
  EXPECT_NEAR(again[1], after[1], 1e-9);
}

// A regression with Huber and MAE as the metric; and every elementwise loss by name trains a step without error.
TEST(KerasLosses, RegressionTrainsWithHuberAndReportsMae) {
  const std::int64_t n = 200;
  Tensor x = systolic::testing::random_tensor({n, 3}, 8, DType::float32, -1, 1);
  std::vector<float> t(n);
  for (std::int64_t i = 0; i < n; ++i) {
    const float* r = x.data<float>() + i * 3;
    t[i] = 2 * r[0] - r[1] + 0.5f * r[2] + 1.0f;
  }
  Tensor y = Tensor::from_vector(t, {n, 1});
  auto in = layers::Input({3});
  auto out = layers::Dense(1)(in);
  Model model(in, out);
  model.compile(optimizers::Adam(0.1), losses::Huber(0.5), {"mae", "mse", "root_mean_squared_error"});
  model.fit(x, y, {.batch_size = 20, .epochs = 30, .verbose = 0});
  auto r = model.evaluate(x, y, {.verbose = 0});
  EXPECT_LT(r[1], 0.05);                     // mae
  EXPECT_LT(r[2], 0.005);                    // mse
  EXPECT_NEAR(r[3], std::sqrt(r[2]), 1e-6);  // root_mean_squared_error: Keras's sqrt of the mean

  for (const std::string& name : losses::names()) {
    if (losses::get(name)->sparse_labels() || name.find("categorical") != std::string::npos) continue;
    SCOPED_TRACE(name);
    auto pin = layers::Input({3});
    auto pout = layers::Dense(1, {.activation = "sigmoid"})(pin);
    Model m(pin, pout);
    m.compile(optimizers::SGD(0.01), name);
    Tensor yp = Tensor::from_vector(std::vector<float>(n, 1.0f), {n, 1});
    auto h = m.fit(x, yp, {.batch_size = 50, .epochs = 1, .verbose = 0});
    EXPECT_TRUE(std::isfinite(h.history.at("loss").back()));
  }
}

// SparseCategoricalCrossentropy(ignore_class=-1): samples with the ignored label count for nothing, and the loss is
// the mean over the others (Keras's masked mean). One SGD step on a batch with ignored samples is the step on the
// batch without them, and its logged loss is theirs; the option is kept in a .keras file.
TEST(KerasLosses, IgnoreClassLeavesTheIgnoredSamplesOut) {
  const std::int64_t n = 12;
  Tensor x = systolic::testing::random_tensor({n, 5}, 31, DType::float32, -1, 1);
  const std::vector<std::int32_t> labels{0, 1, 2, -1, 1, 0, -1, 2, 2, -1, 0, 1};
  std::vector<float> kept_x;
  std::vector<std::int32_t> kept_labels;
  for (std::int64_t i = 0; i < n; ++i)
    if (labels[i] != -1) {
      kept_x.insert(kept_x.end(), x.data<float>() + i * 5, x.data<float>() + (i + 1) * 5);
      kept_labels.push_back(labels[i]);
    }
  const std::int64_t k = std::int64_t(kept_labels.size());
  auto in = layers::Input({5});
  Model model(in, layers::Dense(3, {.activation = "softmax"})(in));
  auto in2 = layers::Input({5});
  Model plain(in2, layers::Dense(3, {.activation = "softmax"})(in2));
  plain.set_weights(model.get_weights());
  model.compile(optimizers::SGD(0.5), losses::SparseCategoricalCrossentropy({.ignore_class = -1}));
  plain.compile(optimizers::SGD(0.5), "sparse_categorical_crossentropy");
  auto h = model.fit(x, Tensor::from_vector(labels, {n}), {.batch_size = n, .epochs = 1, .verbose = 0});
  auto hp = plain.fit(Tensor::from_vector(kept_x, {k, 5}), Tensor::from_vector(kept_labels, {k}),
                      {.batch_size = k, .epochs = 1, .verbose = 0});
  EXPECT_NEAR(h.history.at("loss")[0], hp.history.at("loss")[0], 1e-6);
  auto a = model.get_weights(), b = plain.get_weights();
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    EXPECT_LT(max_relative(a[i].to_doubles(), b[i].to_doubles()), 1e-5) << "weight " << i;

  systolic::testing::TempDir dir;
  model.save(dir.file("m.keras"));
  Model back = load_model(dir.file("m.keras"));
  EXPECT_EQ(back.loss().get_config()["ignore_class"], -1);
}
