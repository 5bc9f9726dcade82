// Keras's metrics that are per-sample means of an element function (Keras's MeanMetricWrapper of a loss function,
// and BinaryAccuracy): ops::elementwise_loss with no gradient adds the batch's per-sample values to the total.
// RootMeanSquaredError shows the square root of the mean squared error (Keras's result()).
#include <systolic/ops.h>

#include <cmath>

#include "metrics/registry.h"

namespace systolic::metrics {

namespace {
class ElementwiseMetric final : public WeighableMetric {
 public:
  ElementwiseMetric(std::string name, std::string class_name, const ops::ElementLossParams& p,
                    bool root = false)
      : name_(std::move(name)), class_name_(std::move(class_name)), params_(p), root_(root) {}
  std::string name() const override { return name_; }
  std::string class_name() const override { return class_name_; }
  std::unique_ptr<Metric> clone() const override { return std::make_unique<ElementwiseMetric>(*this); }
  bool sparse_labels() const override { return false; }
  // Keras's RootMeanSquaredError is a Mean of squared errors, not a MeanMetricWrapper: it counts masked rows.
  bool weighs_by_mask() const override { return !root_; }
  void update_weighted(const Tensor& output, const Tensor& labels, const Tensor& weights,
                       Tensor& total) const override {
    Tensor no_gradient;
    ops::elementwise_loss(output, labels, weights, total, no_gradient, params_, 1.0);
  }
  double result(double mean) const override { return root_ ? std::sqrt(mean) : mean; }

 private:
  std::string name_, class_name_;
  ops::ElementLossParams params_;
  bool root_;  // RootMeanSquaredError: sqrt of the mean of the per-sample mean squared errors
};
}  // namespace

std::unique_ptr<Metric> binary_accuracy(const std::string& name) {
  return std::make_unique<ElementwiseMetric>(
      name, "BinaryAccuracy", ops::ElementLossParams{.kind = ops::ElementLoss::binary_accuracy});
}

#define SYSTOLIC_ELEMENTWISE_METRIC(function, Class, element, ...)                                        \
  const Entry& function##_entry() {                                                                       \
    static const Entry e{#Class, {#function, ##__VA_ARGS__}, [](const std::string& name, bool, bool) {    \
                           return std::unique_ptr<Metric>(std::make_unique<ElementwiseMetric>(            \
                               name, #Class, ops::ElementLossParams{.kind = ops::ElementLoss::element})); \
                         }};                                                                              \
    return e;                                                                                             \
  }
SYSTOLIC_ELEMENTWISE_METRIC(binary_accuracy, BinaryAccuracy, binary_accuracy)
SYSTOLIC_ELEMENTWISE_METRIC(binary_crossentropy, BinaryCrossentropy, binary_crossentropy)
SYSTOLIC_ELEMENTWISE_METRIC(mean_squared_error, MeanSquaredError, squared_error, "mse", "MSE")
SYSTOLIC_ELEMENTWISE_METRIC(mean_absolute_error, MeanAbsoluteError, absolute_error, "mae", "MAE")
SYSTOLIC_ELEMENTWISE_METRIC(mean_absolute_percentage_error, MeanAbsolutePercentageError,
                            absolute_percentage_error, "mape", "MAPE")
SYSTOLIC_ELEMENTWISE_METRIC(mean_squared_logarithmic_error, MeanSquaredLogarithmicError,
                            squared_logarithmic_error, "msle", "MSLE")
SYSTOLIC_ELEMENTWISE_METRIC(log_cosh, LogCoshError, log_cosh, "logcosh")
SYSTOLIC_ELEMENTWISE_METRIC(poisson, Poisson, poisson)
SYSTOLIC_ELEMENTWISE_METRIC(kl_divergence, KLDivergence, kl_divergence, "kld", "KLD")
SYSTOLIC_ELEMENTWISE_METRIC(hinge, Hinge, hinge)
SYSTOLIC_ELEMENTWISE_METRIC(squared_hinge, SquaredHinge, squared_hinge)
#undef SYSTOLIC_ELEMENTWISE_METRIC

const Entry& root_mean_squared_error_entry() {
  static const Entry e{
      "RootMeanSquaredError", {"root_mean_squared_error"}, [](const std::string& name, bool, bool) {
        return std::unique_ptr<Metric>(std::make_unique<ElementwiseMetric>(
            name, "RootMeanSquaredError", ops::ElementLossParams{.kind = ops::ElementLoss::squared_error},
            true));
      }};
  return e;
}

}  // namespace systolic::metrics
