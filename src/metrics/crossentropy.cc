// Keras's CategoricalCrossentropy and SparseCategoricalCrossentropy metrics: the per-sample mean of the
// crossentropy. As Keras's TensorFlow backend computes them, from the output layer's logits when it ends in softmax
// (ops::softmax_cross_entropy; compute_metrics hands them over: Metric::reads_logits), from the logits with
// from_logits, else from the probabilities as Keras's: each row normalised to sum 1, clipped to [1e-7, 1 - 1e-7]
// (ops::crossentropy_from_probabilities).
#include <systolic/ops.h>

#include "metrics/registry.h"

namespace systolic::metrics {

namespace {

constexpr double kEpsilon = 1e-7;  // keras.backend.epsilon()

class CrossentropyMetric final : public WeighableMetric {
 public:
  CrossentropyMetric(std::string name, bool sparse, bool from_logits)
      : name_(std::move(name)), sparse_(sparse), from_logits_(from_logits) {}
  std::string name() const override { return name_; }
  std::string class_name() const override {
    return sparse_ ? "SparseCategoricalCrossentropy" : "CategoricalCrossentropy";
  }
  std::unique_ptr<Metric> clone() const override { return std::make_unique<CrossentropyMetric>(*this); }
  bool sparse_labels() const override { return sparse_; }
  bool weighs_by_mask() const override { return true; }
  bool reads_logits() const override { return !from_logits_; }
  void update_from_logits(const Tensor& logits, const Tensor& labels, Tensor& total) const override {
    update_weighted_from_logits(logits, labels, Tensor(), total);
  }
  void update_weighted(const Tensor& output, const Tensor& labels, const Tensor& weights,
                       Tensor& total) const override {
    Tensor no_gradient;
    if (from_logits_)
      ops::softmax_cross_entropy(output, labels, weights, total, no_gradient, 1.0);
    else
      ops::crossentropy_from_probabilities(output, labels, weights, total, no_gradient, 1.0, kEpsilon);
  }
  void update_weighted_from_logits(const Tensor& logits, const Tensor& labels, const Tensor& weights,
                                   Tensor& total) const override {
    Tensor no_gradient;
    ops::softmax_cross_entropy(logits, labels, weights, total, no_gradient, 1.0);
  }
  // Keras's arguments, written when one differs from its default (compile's name is written otherwise, as Keras
  // writes the name it was given).
  nlohmann::ordered_json get_config() const override {
    if (!from_logits_) return nlohmann::ordered_json::object();
    if (sparse_) return {{"from_logits", true}, {"ignore_class", nullptr}, {"axis", -1}};
    return {{"from_logits", true}, {"label_smoothing", 0}, {"axis", -1}};
  }

 private:
  std::string name_;
  bool sparse_, from_logits_;
};

template <bool sparse>
std::unique_ptr<Metric> from_config(keras_object::StrictConfig& c, const std::string& name) {
  const bool from_logits = c.boolean("from_logits", false);
  if (sparse)
    c.off("ignore_class");
  else
    c.off("label_smoothing", 0);
  c.off("axis", -1);
  return std::make_unique<CrossentropyMetric>(name, sparse, from_logits);
}

template <bool sparse>
std::unique_ptr<Metric> by_name(const std::string& name, bool, bool) {
  const bool class_name = name == "CategoricalCrossentropy" || name == "SparseCategoricalCrossentropy";
  return std::make_unique<CrossentropyMetric>(
      class_name ? (sparse ? "sparse_categorical_crossentropy" : "categorical_crossentropy") : name, sparse,
      false);
}

}  // namespace

const Entry& categorical_crossentropy_entry() {
  static const Entry e{
      "CategoricalCrossentropy", {"categorical_crossentropy"}, by_name<false>, from_config<false>};
  return e;
}

const Entry& sparse_categorical_crossentropy_entry() {
  static const Entry e{
      "SparseCategoricalCrossentropy", {"sparse_categorical_crossentropy"}, by_name<true>, from_config<true>};
  return e;
}

}  // namespace systolic::metrics
