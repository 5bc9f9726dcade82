// Lamb (Keras 3): Adam's moments, and each variable's step m_hat / (sqrt(v_hat) + epsilon) scaled by its trust ratio
// ||w|| / ||step|| (the lamb rule of ops::optimizer_update, a trust-ratio rule, which the base class applies variable
// by variable).
#include "ops/optimizer_math.h"
#include "optimizers/registry.h"

namespace systolic::optimizers {

std::vector<Slot> Lamb::slot_specs() const {
  return {{.name = "m", .tf_keras = "m", .keras3 = "momentum"},
          {.name = "v", .tf_keras = "v", .keras3 = "velocity"}};
}

ops::UpdateParams Lamb::rule() const {
  return {.rule = ops::UpdateRule::lamb, .beta_1 = beta_1_, .beta_2 = beta_2_, .epsilon = epsilon_};
}

const Entry& lamb_entry() {
  static const Entry e{"Lamb", {"lamb"}, "lamb", betas_from_config<Lamb>};
  return e;
}

}  // namespace systolic::optimizers
