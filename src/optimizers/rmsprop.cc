// RMSprop (Keras): ms = rho * ms + (1 - rho) * g^2; step = lr * g / sqrt(ms + epsilon) (Keras 3, and TensorFlow's kernel); with momentum
// mom = momentum * mom + step, w -= mom, else w -= step (ops::rmsprop_update).
#include <systolic/ops.h>

#include "optimizers/registry.h"

namespace systolic::optimizers {

nlohmann::ordered_json RMSprop::get_config() const {
  return {{"rho", rho_}, {"momentum", momentum_}, {"epsilon", epsilon_}, {"centered", false}};
}

std::vector<Slot> RMSprop::slot_specs() const {
  // Keras 3 builds velocity and momentum in two calls (RMSprop.build).
  Slot rms{.name = "rms", .tf_keras = "velocity", .keras3 = "velocity", .keras3_call = 0};
  if (momentum_ <= 0) return {rms};
  return {rms, {.name = "momentum", .tf_keras = "momentum", .keras3 = "momentum", .keras3_call = 1}};
}

void RMSprop::update(Tensor& params, const Tensor& grads, const Tensor& lr, const Tensor&) {
  Tensor none;
  ops::rmsprop_update(params, grads, slot(0), momentum_ > 0 ? slot(1) : none, lr, rho_, momentum_, epsilon_);
}

const Entry& rmsprop_entry() {
  static const Entry e{
      "RMSprop", {"rmsprop"}, "rmsprop", [](keras_object::StrictConfig& c, std::optional<double> lr) {
        c.off("centered", false);
        return std::unique_ptr<Optimizer>(std::make_unique<RMSprop>(
            lr.value_or(0.001), c.number("rho", 0.9), c.number("momentum", 0.0), c.number("epsilon", 1e-7)));
      }};
  return e;
}

}  // namespace systolic::optimizers
