// Keras's SparseCategoricalCrossentropy and CategoricalCrossentropy. From the output layer's logits when it ends in
// softmax (Keras does the same: stable, and the gradient skips the softmax), else from probabilities clipped to
// [1e-7, 1 - 1e-7] (ops::softmax_cross_entropy, ops::crossentropy_from_probabilities).
#include <systolic/ops.h>

#include "losses/registry.h"

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

nlohmann::ordered_json SparseCategoricalCrossentropy::get_config() const {
  return {{"from_logits", options_.from_logits}, {"ignore_class", nullptr}, {"axis", -1}};
}
nlohmann::ordered_json CategoricalCrossentropy::get_config() const {
  return {{"from_logits", options_.from_logits}, {"label_smoothing", 0.0}, {"axis", -1}};
}

const Entry& sparse_categorical_crossentropy_entry() {
  static const Entry e{"SparseCategoricalCrossentropy",
                       {"sparse_categorical_crossentropy"},
                       [](keras_object::StrictConfig& c) {
                         c.off("ignore_class");
                         c.off("axis", -1);
                         return std::unique_ptr<Loss>(std::make_unique<SparseCategoricalCrossentropy>(
                             CrossentropyOptions{c.boolean("from_logits", false)}));
                       }};
  return e;
}

const Entry& categorical_crossentropy_entry() {
  static const Entry e{
      "CategoricalCrossentropy", {"categorical_crossentropy"}, [](keras_object::StrictConfig& c) {
        c.off("label_smoothing", 0);
        c.off("axis", -1);
        return std::unique_ptr<Loss>(
            std::make_unique<CategoricalCrossentropy>(CrossentropyOptions{c.boolean("from_logits", false)}));
      }};
  return e;
}

}  // namespace systolic::losses
