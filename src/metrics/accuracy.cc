// Keras's accuracy metrics: argmax(prediction) == label (SparseCategoricalAccuracy: integer labels) or
// == argmax(labels) (CategoricalAccuracy: one-hot), the top-k ones (the label among the k best predictions),
// counted by ops::accuracy_count; and "accuracy"/"acc", which
// compile resolves as Keras does: BinaryAccuracy on an output of one unit, else the one that fits the loss's
// labels.
#include <systolic/ops.h>

#include "metrics/registry.h"

namespace systolic::metrics {

namespace {
// k = 1: (Sparse)CategoricalAccuracy; k > 1: (Sparse)TopKCategoricalAccuracy, the label among the k best.
class Accuracy final : public Metric {
 public:
  Accuracy(std::string name, bool sparse, int k = 1) : name_(std::move(name)), sparse_(sparse), k_(k) {}
  std::string name() const override { return name_; }
  std::string class_name() const override {
    if (k_ > 1) return sparse_ ? "SparseTopKCategoricalAccuracy" : "TopKCategoricalAccuracy";
    return sparse_ ? "SparseCategoricalAccuracy" : "CategoricalAccuracy";
  }
  std::unique_ptr<Metric> clone() const override { return std::make_unique<Accuracy>(*this); }
  bool sparse_labels() const override { return sparse_; }
  void update(const Tensor& output, const Tensor& labels, Tensor& total) const override {
    ops::accuracy_count(output, labels, total, k_);
  }

 private:
  std::string name_;
  bool sparse_;
  int k_;
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

// Keras's top-k accuracies with their default k = 5 (tf.math.in_top_k: ties at the k-th place count as in).
const Entry& sparse_top_k_categorical_accuracy_entry() {
  static const Entry e{"SparseTopKCategoricalAccuracy",
                       {"sparse_top_k_categorical_accuracy"},
                       [](const std::string& name, bool, bool) -> std::unique_ptr<Metric> {
                         return std::make_unique<Accuracy>(name, true, 5);
                       }};
  return e;
}

const Entry& top_k_categorical_accuracy_entry() {
  static const Entry e{"TopKCategoricalAccuracy",
                       {"top_k_categorical_accuracy"},
                       [](const std::string& name, bool, bool) -> std::unique_ptr<Metric> {
                         return std::make_unique<Accuracy>(name, false, 5);
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
