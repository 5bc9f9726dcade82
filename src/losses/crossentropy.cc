// Keras's SparseCategoricalCrossentropy and CategoricalCrossentropy. From the output layer's logits when it ends in
// softmax (Keras does the same: stable, and the gradient skips the softmax), else from probabilities as Keras's
// TensorFlow backend: each row normalised to sum 1 and clipped to [1e-7, 1 - 1e-7] (ops::softmax_cross_entropy,
// ops::crossentropy_from_probabilities). CategoricalCrossentropy's
// label smoothing computes on smoothed copies of the targets (ops::scale_shift), as Keras's does.
#include <systolic/ops.h>

#include "losses/registry.h"

namespace systolic::losses {

namespace {
constexpr double kEpsilon = 1e-7;  // keras.backend.epsilon()

bool crossentropy(LossArgs& a, bool from_logits) {
  if (from_logits) {
    ops::softmax_cross_entropy(a.output, a.labels, a.weights, a.total, a.doutput, a.grad_scale);
    return false;
  }
  if (a.logits.defined()) {
    ops::softmax_cross_entropy(a.logits, a.labels, a.weights, a.total, a.dlogits, a.grad_scale);
    return true;
  }
  ops::crossentropy_from_probabilities(a.output, a.labels, a.weights, a.total, a.doutput, a.grad_scale,
                                       kEpsilon);
  return false;
}
}  // namespace

bool SparseCategoricalCrossentropy::compute_weighted(LossArgs& a) const {
  if (!options_.ignore_class) return crossentropy(a, options_.from_logits);
  // Keras masks the ignored samples out of the loss and its mean (ops::ignore_class). Its predictions, masked
  // with ops.where, no longer carry their logits: the loss reads the output, as Keras's does.
  const DType w = a.output.dtype() == DType::float64 ? DType::float64 : DType::float32;
  Tensor kept = kept_.rows_like(a.labels);
  Tensor kept_weights = kept_weights_.rows(a.labels.shape(), w, a.labels.device());
  ops::ignore_class(a.labels, *options_.ignore_class, a.weights, a.mask, kept, kept_weights);
  Tensor none;
  LossArgs b{a.output, none,      a.sigmoid_logits, kept,        kept_weights,
             a.total,  a.doutput, a.dlogits,        a.grad_scale};
  return crossentropy(b, options_.from_logits);
}
bool CategoricalCrossentropy::compute_weighted(LossArgs& a) const {
  const double s = options_.label_smoothing;
  if (s == 0) return crossentropy(a, options_.from_logits);
  // Keras: y_true * (1 - label_smoothing) + label_smoothing / num_classes.
  Tensor smoothed = smoothed_.rows_like(a.labels);
  ops::scale_shift(a.labels, smoothed, 1.0 - s, s / double(a.labels.dim(-1)));
  LossArgs b{a.output, a.logits,  a.sigmoid_logits, smoothed,    a.weights,
             a.total,  a.doutput, a.dlogits,        a.grad_scale};
  return crossentropy(b, options_.from_logits);
}

nlohmann::ordered_json SparseCategoricalCrossentropy::get_config() const {
  nlohmann::ordered_json ignore = nullptr;
  if (options_.ignore_class) ignore = *options_.ignore_class;
  return {{"from_logits", options_.from_logits}, {"ignore_class", ignore}};  // Keras 3.15 writes no axis
}
nlohmann::ordered_json CategoricalCrossentropy::get_config() const {
  return {{"from_logits", options_.from_logits}, {"label_smoothing", options_.label_smoothing}, {"axis", -1}};
}

const Entry& sparse_categorical_crossentropy_entry() {
  static const Entry e{
      "SparseCategoricalCrossentropy",
      {"sparse_categorical_crossentropy"},
      [](keras_object::StrictConfig& c) {
        c.off("axis", -1);
        const std::optional<std::int64_t> ignore = c.optional_integer("ignore_class", INT32_MIN);
        if (ignore && *ignore > INT32_MAX)
          c.fail(fmt::format("ignore_class {} is not a 32-bit class index", *ignore));
        return std::unique_ptr<Loss>(std::make_unique<SparseCategoricalCrossentropy>(CrossentropyOptions{
            .from_logits = c.boolean("from_logits", false),
            .ignore_class = ignore ? std::optional<std::int32_t>(std::int32_t(*ignore)) : std::nullopt}));
      }};
  return e;
}

const Entry& categorical_crossentropy_entry() {
  static const Entry e{
      "CategoricalCrossentropy", {"categorical_crossentropy"}, [](keras_object::StrictConfig& c) {
        c.off("axis", -1);
        const double smoothing = c.number("label_smoothing", 0.0);
        if (!(smoothing >= 0 && smoothing <= 1))
          c.fail(fmt::format("label_smoothing {} must be in [0, 1]", smoothing));
        return std::unique_ptr<Loss>(std::make_unique<CategoricalCrossentropy>(CrossentropyOptions{
            .from_logits = c.boolean("from_logits", false), .label_smoothing = smoothing}));
      }};
  return e;
}

}  // namespace systolic::losses
