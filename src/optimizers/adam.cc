// Adam and AdamW (Keras): t = iterations + 1; m += (g - m)(1 - beta_1); v += (g^2 - v)(1 - beta_2);
// w -= lr * sqrt(1 - beta_2^t) / (1 - beta_1^t) * m / (sqrt(v) + epsilon) (ops::adam_update). With amsgrad the
// denominator is sqrt(v_hat), v_hat = max(v_hat, v): the amsgrad rule of ops::optimizer_update.
#include <systolic/ops.h>

#include "ops/optimizer_math.h"
#include "optimizers/registry.h"

namespace systolic::optimizers {

nlohmann::ordered_json Adam::get_config() const {
  return {{"beta_1", beta_1_}, {"beta_2", beta_2_}, {"epsilon", epsilon_}, {"amsgrad", amsgrad_}};
}

std::vector<Slot> Adam::slot_specs() const {
  std::vector<Slot> slots = {{.name = "m", .tf_keras = "m", .keras3 = "momentum"},
                             {.name = "v", .tf_keras = "v", .keras3 = "velocity"}};
  // Keras 3 builds velocity_hat in a second call (Adam.build).
  if (amsgrad_)
    slots.push_back({.name = "vhat", .tf_keras = "vhat", .keras3 = "velocity_hat", .keras3_call = 1});
  return slots;
}

ops::UpdateParams Adam::rule() const {
  return {.rule = ops::UpdateRule::amsgrad, .beta_1 = beta_1_, .beta_2 = beta_2_, .epsilon = epsilon_};
}

std::vector<double> Adam::step_values(double lr) {
  if (!amsgrad_) return {};  // ops::adam_update computes its step size on the device
  auto c = ops::update::step_values(rule(), lr, double(updates()));
  return {c.begin(), c.end()};
}

void Adam::update(Tensor& params, const Tensor& grads, const Tensor& lr, const Tensor& iterations) {
  if (amsgrad_)
    update_by_rule(rule(), params, grads);
  else
    ops::adam_update(params, grads, slot(0), slot(1), {beta_1_, beta_2_, epsilon_}, lr, iterations);
}

const Entry& adam_entry() {
  static const Entry e{"Adam", {"adam"}, "adam", [](keras_object::StrictConfig& c, std::optional<double> lr) {
                         return std::unique_ptr<Optimizer>(std::make_unique<Adam>(
                             lr.value_or(0.001), c.number("beta_1", 0.9), c.number("beta_2", 0.999),
                             c.number("epsilon", 1e-7), c.boolean("amsgrad", false)));
                       }};
  return e;
}

// AdamW: Adam's arguments; its weight_decay (0.004 by default) is the base class's, read by the registry.
const Entry& adamw_entry() {
  static const Entry e{
      "AdamW", {"adamw"}, "adam_w", [](keras_object::StrictConfig& c, std::optional<double> lr) {
        return std::unique_ptr<Optimizer>(std::make_unique<AdamW>(
            lr.value_or(0.001), 0.004, c.number("beta_1", 0.9), c.number("beta_2", 0.999),
            c.number("epsilon", 1e-7), c.boolean("amsgrad", false)));
      }};
  return e;
}

}  // namespace systolic::optimizers
