// SGD (Keras): velocity = momentum * velocity - lr * g; w += velocity (nesterov: w += momentum * velocity - lr * g);
// without momentum w -= lr * g and no slot (ops::sgd_update).
#include <systolic/ops.h>

#include "optimizers/registry.h"

namespace systolic::optimizers {

nlohmann::ordered_json SGD::get_config() const {
  return {{"momentum", momentum_}, {"nesterov", nesterov_}};
}

std::vector<Slot> SGD::slot_specs() const {
  if (momentum_ <= 0) return {};
  return {{.name = "momentum", .tf_keras = "m", .keras3 = "momentum"}};
}

void SGD::update(Tensor& params, const Tensor& grads, const Tensor& lr, const Tensor&) {
  Tensor none;
  ops::sgd_update(params, grads, momentum_ > 0 ? slot(0) : none, lr, momentum_, nesterov_);
}

const Entry& sgd_entry() {
  static const Entry e{"SGD", {"sgd"}, "SGD", [](keras_object::StrictConfig& c, std::optional<double> lr) {
                         return std::unique_ptr<Optimizer>(std::make_unique<SGD>(
                             lr.value_or(0.01), c.number("momentum", 0.0), c.boolean("nesterov", false)));
                       }};
  return e;
}

}  // namespace systolic::optimizers
