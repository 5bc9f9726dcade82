// The optimizers' base class: the learning rate and step count on the device, the slots (flat buffers as large as
// the parameters), the update step. The classes are in src/optimizers/<name>.cc.
#include <systolic/ops.h>
#include <systolic/optimizers.h>

#include <cmath>

namespace systolic::optimizers {

DeviceScalar& DeviceScalar::operator=(const DeviceScalar& other) {
  if (this != &other) {
    value_ = other.value_;
    device_ = Tensor();
  }
  return *this;
}

void DeviceScalar::set(double value) {
  if (device_.defined() && value == value_) return;  // the device holds it already: no write
  value_ = value;
  if (device_.defined()) ops::fill(device_, value_);  // in place: a recorded step reads this address
}

const Tensor& DeviceScalar::on(Device device) {
  if (!device_.defined() || device_.device() != device)
    device_ = Tensor::full({1}, value_, DType::float64, device);
  return device_;
}

void Optimizer::set_learning_rate(double lr) {
  SYSTOLIC_CHECK(
      !schedule_,
      "optimizer {}: its learning rate is a {} schedule and cannot be set to a number (as in Keras); "
      "set_learning_rate_schedule(nullptr) first",
      name(), schedule_ ? schedule_->class_name() : "");
  learning_rate_ = lr;
}

void Optimizer::load_learning_rate(double lr) {
  SYSTOLIC_CHECK(std::isfinite(lr), "optimizer {}: the learning rate is {}; it must be a finite number",
                 name(), lr);
  loaded_rate_.set(lr);
}

void Optimizer::set_weight_decay(std::optional<double> decay) {
  SYSTOLIC_CHECK(!decay || (std::isfinite(*decay) && *decay >= 0),
                 "optimizer {}: weight_decay {} must be a number >= 0 (or None)", name(), decay.value_or(0));
  weight_decay_ = decay;
}

void Optimizer::build(const Tensor& params) {
  auto specs = slot_specs();
  if (slots_.size() == specs.size() && (slots_.empty() || slots_[0].second.numel() == params.numel())) return;
  slots_.clear();
  for (auto& s : specs)
    slots_.emplace_back(s.name, Tensor::zeros(params.shape(), params.dtype(), params.device()));
}

void Optimizer::to(Device device) {
  for (auto& [n, t] : slots_) t = t.to(device);
  iterations_.release();
  loaded_rate_.release();
}

Tensor& Optimizer::slot(const std::string& name) {
  for (auto& [n, t] : slots_)
    if (n == name) return t;
  fail("optimizer {}: no slot '{}' (built: {})", this->name(), name, slots_.empty() ? "no" : "yes");
}

void Optimizer::apply(Tensor& params, const Tensor& grads) {
  load_learning_rate();
  apply_update(params, grads);
  iterations_.advance();
}

void Optimizer::apply_update(Tensor& params, const Tensor& grads) {
  build(params);
  const Tensor& lr = loaded_rate_.on(params.device());
  if (weight_decay_ && *weight_decay_ != 0) ops::decay_weights(params, lr, *weight_decay_);
  update(params, grads, lr, iterations_.on(params.device()));
}

}  // namespace systolic::optimizers
