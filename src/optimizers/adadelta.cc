// Adadelta (Keras): with rms(x) = sqrt(x + epsilon), a = rho a + (1 - rho) g^2; delta = -rms(d) g / rms(a);
// d = rho d + (1 - rho) delta^2; w += lr delta (the adadelta rule of ops::optimizer_update).
#include "ops/optimizer_math.h"
#include "optimizers/registry.h"

namespace systolic::optimizers {

nlohmann::ordered_json Adadelta::get_config() const {
  return {{"rho", rho_}, {"epsilon", epsilon_}};
}

std::vector<Slot> Adadelta::slot_specs() const {
  return {{.name = "accumulated_grad", .tf_keras = "accumulated_grad", .keras3 = "accumulated_grad"},
          {.name = "accumulated_delta_var",
           .tf_keras = "accumulated_delta_var",
           .keras3 = "accumulated_delta_var"}};
}

ops::UpdateParams Adadelta::rule() const {
  return {.rule = ops::UpdateRule::adadelta, .epsilon = epsilon_, .rho = rho_};
}

const Entry& adadelta_entry() {
  static const Entry e{
      "Adadelta", {"adadelta"}, "adadelta", [](keras_object::StrictConfig& c, std::optional<double> lr) {
        return std::unique_ptr<Optimizer>(
            std::make_unique<Adadelta>(lr.value_or(0.001), c.number("rho", 0.95), c.number("epsilon", 1e-7)));
      }};
  return e;
}

}  // namespace systolic::optimizers
