// Accuracy metrics: argmax(prediction) == label, counted by ops::accuracy_count.
#include <systolic/metrics.h>
#include <systolic/ops.h>

namespace systolic::metrics {

namespace {
class Accuracy final : public Metric {
 public:
  Accuracy(std::string name, bool sparse) : name_(std::move(name)), sparse_(sparse) {}
  std::string name() const override { return name_; }
  std::unique_ptr<Metric> clone() const override { return std::make_unique<Accuracy>(*this); }
  bool sparse_labels() const override { return sparse_; }
  void update(const Tensor& output, const Tensor& labels, Tensor& total) const override {
    ops::accuracy_count(output, labels, total);
  }

 private:
  std::string name_;
  bool sparse_;
};
}  // namespace

std::unique_ptr<Metric> get(const std::string& name, bool loss_has_sparse_labels) {
  bool sparse;
  if (name == "accuracy" || name == "acc")
    sparse = loss_has_sparse_labels;
  else if (name == "sparse_categorical_accuracy")
    sparse = true;
  else if (name == "categorical_accuracy")
    sparse = false;
  else
    fail("unknown metric '{}' (known: accuracy, sparse_categorical_accuracy, categorical_accuracy)", name);
  SYSTOLIC_CHECK(sparse == loss_has_sparse_labels, "metric '{}' reads {} labels but the loss takes {} labels",
                 name, sparse ? "integer" : "one-hot", loss_has_sparse_labels ? "integer" : "one-hot");
  return std::make_unique<Accuracy>(name, sparse);
}

}  // namespace systolic::metrics
