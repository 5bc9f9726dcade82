// Adam and AdamW (Keras): t = iterations + 1; m += (g - m)(1 - beta_1); v += (g^2 - v)(1 - beta_2);
// w -= lr * sqrt(1 - beta_2^t) / (1 - beta_1^t) * m / (sqrt(v) + epsilon) (ops::adam_update).
#include <systolic/ops.h>

#include "optimizers/registry.h"

namespace systolic::optimizers {

nlohmann::ordered_json Adam::get_config() const {
  return {{"beta_1", beta_1_}, {"beta_2", beta_2_}, {"epsilon", epsilon_}, {"amsgrad", false}};
}

std::vector<Slot> Adam::slot_specs() const {
  return {{.name = "m", .tf_keras = "m", .keras3 = "momentum"},
          {.name = "v", .tf_keras = "v", .keras3 = "velocity"}};
}

void Adam::update(Tensor& params, const Tensor& grads, const Tensor& lr, const Tensor& iterations) {
  ops::adam_update(params, grads, slot(0), slot(1), {beta_1_, beta_2_, epsilon_}, lr, iterations);
}

const Entry& adam_entry() {
  static const Entry e{"Adam", {"adam"}, "adam", [](keras_object::StrictConfig& c, std::optional<double> lr) {
                         c.off("amsgrad", false);
                         return std::unique_ptr<Optimizer>(
                             std::make_unique<Adam>(lr.value_or(0.001), c.number("beta_1", 0.9),
                                                    c.number("beta_2", 0.999), c.number("epsilon", 1e-7)));
                       }};
  return e;
}

// AdamW: Adam's arguments; its weight_decay (0.004 by default) is the base class's, read by the registry.
const Entry& adamw_entry() {
  static const Entry e{
      "AdamW", {"adamw"}, "adam_w", [](keras_object::StrictConfig& c, std::optional<double> lr) {
        c.off("amsgrad", false);
        return std::unique_ptr<Optimizer>(
            std::make_unique<AdamW>(lr.value_or(0.001), 0.004, c.number("beta_1", 0.9),
                                    c.number("beta_2", 0.999), c.number("epsilon", 1e-7)));
      }};
  return e;
}

}  // namespace systolic::optimizers
