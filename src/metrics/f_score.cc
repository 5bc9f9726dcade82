// Keras's FBetaScore and F1Score: ops::f_score_counts adds each batch's true positives, false positives, false
// negatives and label sums per class to the state ([4, classes]); the value is Keras 3.15's result() of those sums
// (keras/src/metrics/f_score_metrics.py), in double. "micro" sums the classes' counts (Keras keeps them summed
// already; the sums are the same).
#include <systolic/ops.h>

#include <cmath>

#include "metrics/registry.h"

namespace systolic::metrics {

using keras_object::json;

namespace {

constexpr double kEpsilon = 1e-7;  // keras.backend.epsilon()

}  // namespace

FBetaScore::FBetaScore(const FBetaScoreOptions& options, const char* class_name) : options_(options) {
  SYSTOLIC_CHECK(!options_.average || *options_.average == "micro" || *options_.average == "macro" ||
                     *options_.average == "weighted",
                 "{}: average '{}' is not one of null, 'micro', 'macro', 'weighted'", class_name,
                 options_.average.value_or(""));
  SYSTOLIC_CHECK(std::isfinite(options_.beta) && options_.beta > 0, "{}: beta must be > 0, got {}",
                 class_name, options_.beta);
  SYSTOLIC_CHECK(!options_.threshold || (*options_.threshold > 0 && *options_.threshold <= 1),
                 "{}: threshold must verify 0 < threshold <= 1, got {}", class_name,
                 options_.threshold.value_or(0));
}

F1Score::F1Score(const F1ScoreOptions& options)
    : FBetaScore(
          {.average = options.average, .beta = 1.0, .threshold = options.threshold, .name = options.name},
          "F1Score") {}

void FBetaScore::build(const Shape& output) {
  SYSTOLIC_CHECK(output.rank() == 1,
                 "{} expects 2D inputs with shape (batch_size, output_dim); the model's output has shape {}",
                 class_name(), output.keras_str());
  classes_ = output[0];
}

void FBetaScore::update_weighted(const Tensor& output, const Tensor& labels, const Tensor& weights,
                                 Tensor& state) const {
  ops::f_score_counts(output, labels, weights, state,
                      {.argmax = !options_.threshold, .threshold = options_.threshold.value_or(0.5)});
}

std::vector<double> FBetaScore::scores(const double* state) const {
  const std::int64_t C = classes_;
  const double *tp = state, *fp = state + C, *fn = state + 2 * C, *support = state + 3 * C;
  const double b2 = options_.beta * options_.beta;
  auto score = [&](double t, double f_p, double f_n) {
    const double precision = t / (t + f_p + kEpsilon), recall = t / (t + f_n + kEpsilon);
    return precision * recall / (b2 * precision + recall + kEpsilon) * (1 + b2);
  };
  if (options_.average == "micro") {
    double t = 0, f_p = 0, f_n = 0;
    for (std::int64_t c = 0; c < C; ++c) t += tp[c], f_p += fp[c], f_n += fn[c];
    return {score(t, f_p, f_n)};
  }
  std::vector<double> per_class(static_cast<std::size_t>(C));
  for (std::int64_t c = 0; c < C; ++c) per_class[c] = score(tp[c], fp[c], fn[c]);
  if (!options_.average) return per_class;
  double mean = 0;
  if (*options_.average == "macro") {
    for (double f : per_class) mean += f / double(C);
  } else {  // weighted by the classes' label sums
    double weights = 0;
    for (std::int64_t c = 0; c < C; ++c) weights += support[c];
    for (std::int64_t c = 0; c < C; ++c) mean += per_class[c] * (support[c] / (weights + kEpsilon));
  }
  return {mean};
}

double FBetaScore::value(const double* state, double) const {
  const std::vector<double> s = scores(state);
  double mean = 0;
  for (double f : s) mean += f / double(s.size());
  return mean;
}

nlohmann::ordered_json FBetaScore::get_config() const {
  auto optional = [](const auto& v) {
    return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
  };
  return {{"average", optional(options_.average)},
          {"beta", options_.beta},
          {"threshold", optional(options_.threshold)}};
}

nlohmann::ordered_json F1Score::get_config() const {
  auto config = FBetaScore::get_config();
  config.erase("beta");
  return config;
}

namespace {

// Keras's arguments as its __init__ takes them: average null or a string, beta and threshold Python floats (Keras
// refuses an int), threshold null or in (0, 1].
FBetaScoreOptions f_score_options(keras_object::StrictConfig& c, const std::string& name, bool with_beta) {
  FBetaScoreOptions o{.name = name};
  const json& average = c.raw("average");
  if (average.is_string())
    o.average = average.get<std::string>();
  else if (!average.is_null())
    c.fail("average " + average.dump() + " is not one of null, 'micro', 'macro', 'weighted'");
  if (with_beta && c.present("beta")) {
    const json& beta = c.raw("beta");
    if (!beta.is_number_float()) c.fail("beta " + beta.dump() + " must be a float > 0");
    o.beta = beta.get<double>();
  }
  const json& threshold = c.raw("threshold");
  if (threshold.is_number_float())
    o.threshold = threshold.get<double>();
  else if (!threshold.is_null())
    c.fail("threshold " + threshold.dump() + " must be null or a float in (0, 1]");
  return o;
}

template <class M>
std::unique_ptr<Metric> made(keras_object::StrictConfig& c, const FBetaScoreOptions& o) {
  return c.checked([&]() -> std::unique_ptr<Metric> {
    if constexpr (std::is_same_v<M, F1Score>)
      return std::make_unique<F1Score>(
          F1ScoreOptions{.average = o.average, .threshold = o.threshold, .name = o.name});
    else
      return std::make_unique<FBetaScore>(o);
  });
}

}  // namespace

const Entry& f1_score_entry() {
  static const Entry e{
      "F1Score",
      {"f1_score"},
      [](const std::string& name, bool, bool) -> std::unique_ptr<Metric> {
        return std::make_unique<F1Score>(F1ScoreOptions{.name = name == "F1Score" ? "f1_score" : name});
      },
      [](keras_object::StrictConfig& c, const std::string& name) -> std::unique_ptr<Metric> {
        return made<F1Score>(c, f_score_options(c, name, /*with_beta=*/false));
      }};
  return e;
}

// keras.metrics.get takes "FBetaScore" but not "fbeta_score" (Keras 3.15).
const Entry& fbeta_score_entry() {
  static const Entry e{"FBetaScore",
                       {},
                       [](const std::string& name, bool, bool) -> std::unique_ptr<Metric> {
                         return std::make_unique<FBetaScore>(
                             FBetaScoreOptions{.name = name == "FBetaScore" ? "fbeta_score" : name});
                       },
                       [](keras_object::StrictConfig& c, const std::string& name) -> std::unique_ptr<Metric> {
                         return made<FBetaScore>(c, f_score_options(c, name, /*with_beta=*/true));
                       }};
  return e;
}

}  // namespace systolic::metrics
