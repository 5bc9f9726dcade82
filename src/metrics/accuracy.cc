// Keras's accuracy metrics: argmax(prediction) == label (SparseCategoricalAccuracy: integer labels) or
// == argmax(labels) (CategoricalAccuracy: one-hot), the top-k ones (the label among the k best predictions),
// counted by ops::accuracy_count; and "accuracy"/"acc", which
// compile resolves as Keras does: BinaryAccuracy on an output of one unit, else the one that fits the loss's
// labels.
#include <systolic/ops.h>

#include <cmath>

#include "metrics/registry.h"

namespace systolic::metrics {

namespace {
// k = 1: (Sparse)CategoricalAccuracy; k > 1: (Sparse)TopKCategoricalAccuracy, the label among the k best.
class Accuracy final : public WeighableMetric {
 public:
  Accuracy(std::string name, bool sparse, int k = 1) : name_(std::move(name)), sparse_(sparse), k_(k) {}
  std::string name() const override { return name_; }
  std::string class_name() const override {
    if (k_ > 1) return sparse_ ? "SparseTopKCategoricalAccuracy" : "TopKCategoricalAccuracy";
    return sparse_ ? "SparseCategoricalAccuracy" : "CategoricalAccuracy";
  }
  std::unique_ptr<Metric> clone() const override { return std::make_unique<Accuracy>(*this); }
  bool sparse_labels() const override { return sparse_; }
  bool weighs_by_mask() const override { return true; }
  void update_weighted(const Tensor& output, const Tensor& labels, const Tensor& weights,
                       Tensor& total) const override {
    ops::accuracy_count(output, labels, weights, total, k_);
  }
  // A top-k accuracy's k when it is not Keras's default 5 (a file then holds the serialized object).
  nlohmann::ordered_json get_config() const override {
    if (k_ > 1 && k_ != 5) return {{"k", k_}};
    return nlohmann::ordered_json::object();
  }

 private:
  std::string name_;
  bool sparse_;
  int k_;
};
// A top-k accuracy's config: k (a whole number >= 1; Keras's default 5) and, sparse, from_sorted_ids (false only).
std::unique_ptr<Metric> top_k_from_config(keras_object::StrictConfig& c, const std::string& name,
                                          bool sparse) {
  const std::int64_t k = c.integer("k", 5, 1);
  if (k > 1000000000) c.fail("k must be a whole number >= 1 and at most 1e9");
  if (sparse) c.off("from_sorted_ids", false);
  return std::make_unique<Accuracy>(name, sparse, static_cast<int>(k));
}
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
                       },
                       [](keras_object::StrictConfig& c, const std::string& name) {
                         return top_k_from_config(c, name, true);
                       }};
  return e;
}

const Entry& top_k_categorical_accuracy_entry() {
  static const Entry e{"TopKCategoricalAccuracy",
                       {"top_k_categorical_accuracy"},
                       [](const std::string& name, bool, bool) -> std::unique_ptr<Metric> {
                         return std::make_unique<Accuracy>(name, false, 5);
                       },
                       [](keras_object::StrictConfig& c, const std::string& name) {
                         return top_k_from_config(c, name, false);
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
