// Keras's R2Score: ops::regression_sums adds each batch's column sums of w t, w t^2 and w (t - p)^2 (w the sample
// weights of weighted_metrics, else 1) and the rows' count to the state; the value is Keras 3.15's result() of them
// (keras/src/metrics/regression_metrics.py), in double, with the weights' sum (the samples unweighted) as its count.
#include <systolic/ops.h>

#include <cmath>

#include "metrics/registry.h"

namespace systolic::metrics {

R2Score::R2Score(const R2ScoreOptions& options) : options_(options) {
  SYSTOLIC_CHECK(
      options_.class_aggregation == "uniform_average" ||
          options_.class_aggregation == "variance_weighted_average",
      "R2Score: class_aggregation '{}' is not supported (uniform_average, variance_weighted_average; "
      "null, a score per column, is not)",
      options_.class_aggregation);
  SYSTOLIC_CHECK(options_.num_regressors >= 0, "R2Score: num_regressors must be >= 0, got {}",
                 options_.num_regressors);
}

void R2Score::build(const Shape& output) {
  SYSTOLIC_CHECK(
      output.rank() == 1,
      "R2Score expects 2D outputs (batch_size, output_dim); the model's output has shape (None, {})",
      output.str());
  columns_ = output[0];
}

void R2Score::update_weighted(const Tensor& output, const Tensor& labels, const Tensor& weights,
                              Tensor& state) const {
  ops::regression_sums(output, labels, weights, state);
}

double R2Score::value(const double* state, double samples) const {
  const std::int64_t C = columns_;
  double uniform = 0, weighted = 0, weights = 0;
  for (std::int64_t c = 0; c < C; ++c) {
    const double sum = state[c], squared_sum = state[C + c], residual = state[2 * C + c];
    const double mean = sum / samples, total = squared_sum - sum * mean;
    double raw = 1 - residual / total;
    if (std::isinf(raw)) raw = 0;
    uniform += raw / double(C);
    weighted += total * raw;
    weights += total;
  }
  double r2 = options_.class_aggregation == "uniform_average" ? uniform : weighted / weights;
  // Adjusted R2 by Keras's num_samples, the count of values (unweighted); Keras falls back to the plain score, with
  // a warning, when there are too few.
  double n = 0;
  for (std::int64_t c = 0; c < C; ++c) n += state[3 * C + c];
  const double p = double(options_.num_regressors);
  if (p != 0 && p < n - 1) r2 = 1 - (1 - r2) * (n - 1) / (n - p - 1);
  return r2;
}

nlohmann::ordered_json R2Score::get_config() const {
  return {{"class_aggregation", options_.class_aggregation}, {"num_regressors", options_.num_regressors}};
}

const Entry& r2_score_entry() {
  static const Entry e{
      "R2Score",
      {"r2_score"},
      [](const std::string& name, bool, bool) -> std::unique_ptr<Metric> {
        return std::make_unique<R2Score>(R2ScoreOptions{.name = name == "R2Score" ? "r2_score" : name});
      },
      [](keras_object::StrictConfig& c, const std::string& name) -> std::unique_ptr<Metric> {
        R2ScoreOptions o{.name = name};
        if (c.present("class_aggregation")) {
          const auto& aggregation = c.raw("class_aggregation");
          if (!aggregation.is_string())
            c.fail("class_aggregation " + aggregation.dump() +
                   " is not supported (a score per column is not)");
          o.class_aggregation = aggregation.get<std::string>();
        }
        o.num_regressors = c.integer("num_regressors", 0, 0);
        return c.checked([&]() -> std::unique_ptr<Metric> { return std::make_unique<R2Score>(o); });
      }};
  return e;
}

}  // namespace systolic::metrics
