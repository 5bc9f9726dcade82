// Optimizers: Keras's update rules over the flat parameter buffer, one op per step.
#include <systolic/ops.h>
#include <systolic/optimizers.h>

#include <cmath>

namespace systolic::optimizers {

StepCounter& StepCounter::operator=(const StepCounter& other) {
  if (this != &other) {
    count_ = other.count_;
    device_ = Tensor();
  }
  return *this;
}

void StepCounter::set(std::int64_t count) {
  count_ = count;
  if (device_.defined()) ops::fill(device_, double(count_));  // in place: a recorded step reads this address
}

const Tensor& StepCounter::on(Device device) {
  if (!device_.defined() || device_.device() != device)
    device_ = Tensor::full({1}, double(count_), DType::float64, device);
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

void Optimizer::build(const Tensor& params) {
  auto names = slot_names();
  if (slots_.size() == names.size() && (slots_.empty() || slots_[0].second.numel() == params.numel())) return;
  slots_.clear();
  for (auto& n : names)
    slots_.emplace_back(n, Tensor::zeros(params.shape(), params.dtype(), params.device()));
}

void Optimizer::to(Device device) {
  for (auto& [n, t] : slots_) t = t.to(device);
  iterations_.release();
}

Tensor& Optimizer::slot(const std::string& name) {
  for (auto& [n, t] : slots_)
    if (n == name) return t;
  fail("optimizer {}: no slot '{}' (built: {})", this->name(), name, slots_.empty() ? "no" : "yes");
}

void Optimizer::apply(Tensor& params, const Tensor& grads) {
  apply_update(params, grads);
  iterations_.advance();
}

void Optimizer::apply_update(Tensor& params, const Tensor& grads) {
  build(params);
  update(params, grads, iterations_.on(params.device()));
}

void Adam::update(Tensor& params, const Tensor& grads, const Tensor& iterations) {
  ops::adam_update(params, grads, slot(0), slot(1), {learning_rate(), beta_1_, beta_2_, epsilon_},
                   iterations);
}

void SGD::update(Tensor& params, const Tensor& grads, const Tensor&) {
  Tensor none;
  ops::sgd_update(params, grads, momentum_ > 0 ? slot(0) : none, learning_rate(), momentum_, nesterov_);
}

void RMSprop::update(Tensor& params, const Tensor& grads, const Tensor&) {
  Tensor none;
  ops::rmsprop_update(params, grads, slot(0), momentum_ > 0 ? slot(1) : none, learning_rate(), rho_,
                      momentum_, epsilon_);
}

std::unique_ptr<Optimizer> get(const std::string& name) {
  if (name == "adam" || name == "Adam") return std::make_unique<Adam>();
  if (name == "sgd" || name == "SGD") return std::make_unique<SGD>();
  if (name == "rmsprop" || name == "RMSprop") return std::make_unique<RMSprop>();
  fail("unknown optimizer '{}' (known: adam, sgd, rmsprop)", name);
}

}  // namespace systolic::optimizers
