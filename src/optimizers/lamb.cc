// Lamb (Keras 3): Adam's moments, and each variable's step m_hat / (sqrt(v_hat) + epsilon) scaled by its trust ratio
// ||w|| / ||step|| (the lamb rule of ops::optimizer_update, a trust-ratio rule, which the base class applies variable
// by variable).
#include "ops/optimizer_math.h"
#include "optimizers/registry.h"

namespace systolic::optimizers {

nlohmann::ordered_json Lamb::get_config() const {
  return {{"beta_1", beta_1_}, {"beta_2", beta_2_}, {"epsilon", epsilon_}};
}

std::vector<Slot> Lamb::slot_specs() const {
  return {{.name = "m", .tf_keras = "m", .keras3 = "momentum"},
          {.name = "v", .tf_keras = "v", .keras3 = "velocity"}};
}

ops::UpdateParams Lamb::rule() const {
  return {.rule = ops::UpdateRule::lamb, .beta_1 = beta_1_, .beta_2 = beta_2_, .epsilon = epsilon_};
}

const Entry& lamb_entry() {
  static const Entry e{"Lamb", {"lamb"}, "lamb", [](keras_object::StrictConfig& c, std::optional<double> lr) {
                         return std::unique_ptr<Optimizer>(
                             std::make_unique<Lamb>(lr.value_or(0.001), c.number("beta_1", 0.9),
                                                    c.number("beta_2", 0.999), c.number("epsilon", 1e-7)));
                       }};
  return e;
}

}  // namespace systolic::optimizers
