// Adagrad (Keras): accumulator += g^2; w -= lr g / sqrt(accumulator + epsilon), the accumulator starting at
// initial_accumulator_value (the adagrad rule of ops::optimizer_update).
#include "ops/optimizer_math.h"
#include "optimizers/registry.h"

namespace systolic::optimizers {

nlohmann::ordered_json Adagrad::get_config() const {
  return {{"initial_accumulator_value", initial_}, {"epsilon", epsilon_}};
}

std::vector<Slot> Adagrad::slot_specs() const {
  return {{.name = "accumulator", .tf_keras = "accumulator", .keras3 = "accumulator", .initial = initial_}};
}

ops::UpdateParams Adagrad::rule() const {
  return {.rule = ops::UpdateRule::adagrad, .epsilon = epsilon_};
}

const Entry& adagrad_entry() {
  static const Entry e{
      "Adagrad", {"adagrad"}, "adagrad", [](keras_object::StrictConfig& c, std::optional<double> lr) {
        return std::unique_ptr<Optimizer>(std::make_unique<Adagrad>(
            lr.value_or(0.001), c.number("initial_accumulator_value", 0.1), c.number("epsilon", 1e-7)));
      }};
  return e;
}

}  // namespace systolic::optimizers
