// Keras's accuracy metrics: argmax(prediction) == label (SparseCategoricalAccuracy: integer labels) or
// == argmax(labels) (CategoricalAccuracy: one-hot), counted by ops::accuracy_count; and "accuracy"/"acc", which
// compile resolves as Keras does: BinaryAccuracy on an output of one unit, else the one that fits the loss's
// labels.
#include <systolic/ops.h>

#include "metrics/registry.h"

namespace systolic::metrics {

namespace {
class Accuracy final : public Metric {
 public:
  Accuracy(std::string name, bool sparse) : name_(std::move(name)), sparse_(sparse) {}
  std::string name() const override { return name_; }
  std::string class_name() const override {
    return sparse_ ? "SparseCategoricalAccuracy" : "CategoricalAccuracy";
  }
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

const Entry& sparse_categorical_accuracy_entry() {
  static const Entry e{"SparseCategoricalAccuracy",
                       {"sparse_categorical_accuracy"},
                       [](const std::string& name, bool, bool) -> std::unique_ptr<Metric> {
                         return std::make_unique<Accuracy>(name, true);
                       }};
  return e;
}

const Entry& categorical_accuracy_entry() {
  static const Entry e{"CategoricalAccuracy",
                       {"categorical_accuracy"},
                       [](const std::string& name, bool, bool) -> std::unique_ptr<Metric> {
                         return std::make_unique<Accuracy>(name, false);
                       }};
  return e;
}

const Entry& accuracy_entry() {
  static const Entry e{"",
                       {"accuracy", "acc"},
                       [](const std::string& name, bool sparse, bool binary) -> std::unique_ptr<Metric> {
                         if (binary && !sparse) return binary_accuracy(name);
                         return std::make_unique<Accuracy>(name, sparse);
                       }};
  return e;
}

}  // namespace systolic::metrics
