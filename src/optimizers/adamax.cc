// Adamax (Keras): m += (g - m)(1 - beta_1); u = max(beta_2 u, |g|); w -= lr m / ((1 - beta_1^t)(u + epsilon))
// (the adamax rule of ops::optimizer_update).
#include "ops/optimizer_math.h"
#include "optimizers/registry.h"

namespace systolic::optimizers {

std::vector<Slot> Adamax::slot_specs() const {
  return {{.name = "m", .tf_keras = "m", .keras3 = "momentum"},
          {.name = "u", .tf_keras = "u", .keras3 = "norm"}};
}

ops::UpdateParams Adamax::rule() const {
  return {.rule = ops::UpdateRule::adamax, .beta_1 = beta_1_, .beta_2 = beta_2_, .epsilon = epsilon_};
}

const Entry& adamax_entry() {
  static const Entry e{"Adamax", {"adamax"}, "adamax", betas_from_config<Adamax>};
  return e;
}

}  // namespace systolic::optimizers
