// Keras losses on top of the loss ops. Crossentropies use the output layer's logits when it ends in softmax
// (Keras does the same), else clip probabilities to [1e-7, 1 - 1e-7].
#include <systolic/losses.h>
#include <systolic/ops.h>

namespace systolic::losses {

namespace {
constexpr double kEpsilon = 1e-7;  // keras.backend.epsilon()

bool crossentropy(LossArgs& a, bool from_logits) {
  if (from_logits) {
    ops::softmax_cross_entropy(a.output, a.labels, a.total, a.doutput, a.grad_scale);
    return false;
  }
  if (a.logits.defined()) {
    ops::softmax_cross_entropy(a.logits, a.labels, a.total, a.dlogits, a.grad_scale);
    return true;
  }
  ops::crossentropy_from_probabilities(a.output, a.labels, a.total, a.doutput, a.grad_scale, kEpsilon);
  return false;
}
}  // namespace

bool SparseCategoricalCrossentropy::compute(LossArgs& a) const {
  return crossentropy(a, options_.from_logits);
}
bool CategoricalCrossentropy::compute(LossArgs& a) const {
  return crossentropy(a, options_.from_logits);
}

bool MeanSquaredError::compute(LossArgs& a) const {
  ops::mean_squared_error(a.output, a.labels, a.total, a.doutput, a.grad_scale);
  return false;
}

std::unique_ptr<Loss> get(const std::string& name) {
  if (name == "sparse_categorical_crossentropy") return std::make_unique<SparseCategoricalCrossentropy>();
  if (name == "categorical_crossentropy") return std::make_unique<CategoricalCrossentropy>();
  if (name == "mean_squared_error" || name == "mse") return std::make_unique<MeanSquaredError>();
  fail(
      "unknown loss '{}' (known: sparse_categorical_crossentropy, categorical_crossentropy, "
      "mean_squared_error)",
      name);
}

}  // namespace systolic::losses
