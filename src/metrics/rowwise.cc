// Keras's metrics that are per-sample means of a row function (MeanMetricWrapper of categorical_hinge and of
// keras.metrics.cosine_similarity): ops::row_loss with no gradient adds the batch's per-sample values to the total.
// CosineSimilarity's metric is the similarity, the loss's value negated.
#include <systolic/ops.h>

#include "metrics/registry.h"

namespace systolic::metrics {

namespace {
class RowwiseMetric final : public WeighableMetric {
 public:
  RowwiseMetric(std::string name, std::string class_name, ops::RowLoss kind)
      : name_(std::move(name)), class_name_(std::move(class_name)), kind_(kind) {}
  std::string name() const override { return name_; }
  std::string class_name() const override { return class_name_; }
  std::unique_ptr<Metric> clone() const override { return std::make_unique<RowwiseMetric>(*this); }
  bool sparse_labels() const override { return false; }
  bool weighs_by_mask() const override { return true; }
  void update_weighted(const Tensor& output, const Tensor& labels, const Tensor& weights,
                       Tensor& total) const override {
    Tensor no_gradient;
    ops::row_loss(output, labels, weights, total, no_gradient, {.kind = kind_}, 1.0);
  }
  double result(double mean) const override {
    return kind_ == ops::RowLoss::cosine_similarity ? -mean : mean;
  }

 private:
  std::string name_, class_name_;
  ops::RowLoss kind_;
};
}  // namespace

#define SYSTOLIC_ROWWISE_METRIC(function, Class)                                                       \
  const Entry& function##_entry() {                                                                    \
    static const Entry e{#Class, {#function}, [](const std::string& name, bool, bool) {                \
                           return std::unique_ptr<Metric>(                                             \
                               std::make_unique<RowwiseMetric>(name, #Class, ops::RowLoss::function)); \
                         }};                                                                           \
    return e;                                                                                          \
  }
SYSTOLIC_ROWWISE_METRIC(categorical_hinge, CategoricalHinge)
SYSTOLIC_ROWWISE_METRIC(cosine_similarity, CosineSimilarity)
#undef SYSTOLIC_ROWWISE_METRIC

}  // namespace systolic::metrics
