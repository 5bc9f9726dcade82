// The optimizers' base class: the learning rate and step count on the device, the slots (flat buffers as large as
// the parameters), the update step. The classes are in src/optimizers/<name>.cc.
#include <systolic/ops.h>
#include <systolic/optimizers.h>

#include <cmath>

#include "ops/optimizer_math.h"

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

DeviceValues& DeviceValues::operator=(const DeviceValues& other) {
  if (this != &other) {
    values_ = other.values_;
    device_ = Tensor();
  }
  return *this;
}

void DeviceValues::set(std::vector<double> values) {
  if (device_.defined() && values == values_) return;  // the device holds them already: no write
  const bool resized = values.size() != values_.size();
  values_ = std::move(values);
  if (!device_.defined()) return;
  if (resized)
    device_ = Tensor();  // made again by on()
  else
    device_.copy_from(Tensor::from_vector(values_, {std::int64_t(values_.size())}));  // in place
}

const Tensor& DeviceValues::on(Device device) {
  SYSTOLIC_CHECK(!values_.empty(), "DeviceValues::on: no values were set");
  if (!device_.defined() || device_.device() != device)
    device_ = Tensor::from_vector(values_, {std::int64_t(values_.size())}).to(device);
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
  auto values = step_values(lr);
  if (!values.empty()) step_values_.set(std::move(values));
  if (use_ema_) ema_values_.set(ema_step_values());
  if (accumulation_steps_) updates_.set(double(updates()));
}

namespace {

ops::UpdateParams ema_rule(double momentum, std::optional<std::int64_t> frequency) {
  return {.rule = ops::UpdateRule::ema, .beta_1 = momentum, .ema_overwrite_frequency = frequency.value_or(0)};
}

}  // namespace

std::vector<double> Optimizer::ema_step_values() const {
  auto c =
      ops::update::step_values(ema_rule(ema_momentum_, ema_overwrite_frequency_), 0.0, double(updates()));
  return {c.begin(), c.end()};
}

Tensor Optimizer::ema_values_on(Device device) {
  if (!use_ema_) return Tensor();
  if (ema_values_.values().empty()) ema_values_.set(ema_step_values());
  return ema_values_.on(device);
}

void Optimizer::set_ema(bool use_ema, double momentum, std::optional<std::int64_t> overwrite_frequency) {
  if (use_ema) {
    SYSTOLIC_CHECK(momentum >= 0 && momentum <= 1,
                   "optimizer {}: ema_momentum must be in the range [0, 1], got {} (as in Keras)", name(),
                   momentum);
    SYSTOLIC_CHECK(
        !overwrite_frequency || *overwrite_frequency >= 1,
        "optimizer {}: ema_overwrite_frequency must be an integer >= 1 or None, got {} (as in Keras)", name(),
        overwrite_frequency.value_or(0));
  }
  if (use_ema != use_ema_) slots_.clear();  // build() makes them again, with or without the average
  use_ema_ = use_ema;
  ema_momentum_ = momentum;
  ema_overwrite_frequency_ = overwrite_frequency;
  ema_values_ = DeviceValues();
}

void Optimizer::set_gradient_accumulation_steps(std::optional<std::int64_t> steps) {
  SYSTOLIC_CHECK(!steps || *steps >= 2,
                 "optimizer {}: gradient_accumulation_steps must be an integer >= 2, got {} (as in Keras)",
                 name(), steps.value_or(0));
  if (steps.has_value() != accumulation_steps_.has_value()) slots_.clear();  // build() makes them again
  accumulation_steps_ = steps;
}

std::vector<Slot> Optimizer::variable_slots() const {
  std::vector<Slot> specs = slot_specs();
  // Keras 3's base build makes the average, then the accumulators, before the class's slots.
  const int first = int(use_ema_) + int(accumulation_steps_.has_value());
  for (auto& s : specs) s.keras3_call += first;
  if (use_ema_)
    specs.push_back({.name = "average", .tf_keras = "average", .keras3 = "average", .keras3_call = 0});
  if (accumulation_steps_)
    specs.push_back({.name = "gradient_accumulator",
                     .tf_keras = "gradient_accumulator",
                     .keras3 = "gradient_accumulator",
                     .keras3_call = first - 1});
  return specs;
}

void Optimizer::finalize_variable_values(Tensor& params) {
  if (use_ema_ && !slots_.empty()) ops::copy(slot("average"), params);
}

void Optimizer::make_device_values(Device device) {
  loaded_rate_.on(device);
  step_values_on(device);
  ema_values_on(device);
  if (accumulation_steps_) updates_.on(device);
}

Tensor Optimizer::step_values_on(Device device) {
  if (step_values_.values().empty()) {
    auto values = step_values(loaded_rate_.value());
    if (values.empty()) return Tensor();
    step_values_.set(std::move(values));
  }
  return step_values_.on(device);
}

void Optimizer::update_by_rule(const ops::UpdateParams& p, Tensor& params, const Tensor& grads) {
  auto& s = slots_;  // a rule's slots are shaped as the variables: at the parameters' offsets
  const Tensor& step = step_values_on(params.device());
  auto update = [&](std::int64_t at, std::int64_t n) {
    auto part = [&](const Tensor& t) { return t.slice(at, at + n); };
    Tensor w = part(params), none;
    Tensor s0 = s.size() > 0 ? part(s[0].second) : none, s1 = s.size() > 1 ? part(s[1].second) : none,
           s2 = s.size() > 2 ? part(s[2].second) : none;
    ops::optimizer_update(w, part(grads), s0, s1, s2, p, step);
  };
  if (!ops::update::trust_ratio(p.rule)) return update(0, params.numel());
  for (std::size_t i = 0; i < variables_.size(); ++i)
    update(variable_offsets_[i], variables_[i].shape.numel());
}

void RuleOptimizer::update(Tensor& params, const Tensor& grads, const Tensor&, const Tensor&) {
  update_by_rule(rule(), params, grads);
}

std::vector<double> RuleOptimizer::step_values(double lr) {
  auto c = ops::update::step_values(rule(), lr, double(updates()));
  return {c.begin(), c.end()};
}

nlohmann::ordered_json BetasOptimizer::get_config() const {
  return {{"beta_1", beta_1_}, {"beta_2", beta_2_}, {"epsilon", epsilon_}};
}

void Optimizer::set_weight_decay(std::optional<double> decay) {
  SYSTOLIC_CHECK(!decay || (std::isfinite(*decay) && *decay >= 0),
                 "optimizer {}: weight_decay {} must be a number >= 0 (or None)", name(), decay.value_or(0));
  weight_decay_ = decay;
}

void Optimizer::set_clipping(std::optional<double> clipnorm, std::optional<double> global_clipnorm,
                             std::optional<double> clipvalue) {
  SYSTOLIC_CHECK(
      int(clipnorm.has_value()) + int(global_clipnorm.has_value()) + int(clipvalue.has_value()) <= 1,
      "optimizer {}: only one of clipnorm, clipvalue and global_clipnorm can be set (as in Keras)", name());
  for (auto [what, v] : {std::pair{"clipnorm", clipnorm}, std::pair{"global_clipnorm", global_clipnorm},
                         std::pair{"clipvalue", clipvalue}})
    SYSTOLIC_CHECK(!v || std::isfinite(*v), "optimizer {}: {} {} must be a finite number (or None)", name(),
                   what, v.value_or(0));
  clipnorm_ = clipnorm;
  global_clipnorm_ = global_clipnorm;
  clipvalue_ = clipvalue;
}

void Optimizer::set_loss_scale_factor(std::optional<double> factor) {
  SYSTOLIC_CHECK(!factor || (std::isfinite(*factor) && *factor > 0),
                 "optimizer {}: loss_scale_factor {} must be a number > 0 (or None)", name(),
                 factor.value_or(0));
  loss_scale_factor_ = factor;
}

std::optional<Shape> Optimizer::slot_shape(const Slot&, const TrainableVariable& variable) const {
  return variable.shape;
}

namespace {

std::int64_t total_size(const std::vector<TrainableVariable>& variables) {
  std::int64_t n = 0;
  for (auto& v : variables) n += v.shape.numel();
  return n;
}

}  // namespace

void Optimizer::build(const Tensor& params, const std::vector<TrainableVariable>& variables) {
  // Called before every update: nothing is copied unless the slots are made again.
  const bool as_built = variables.empty() && !variables_.empty() && total_size(variables_) == params.numel();
  std::vector<TrainableVariable> one;  // none given and none built for these parameters: one flat variable
  if (variables.empty() && !as_built) one = {{.shape = Shape{params.numel()}}};
  const std::vector<TrainableVariable>& vars = !variables.empty() ? variables : as_built ? variables_ : one;
  SYSTOLIC_CHECK(total_size(vars) == params.numel(),
                 "optimizer {}: the variables' sizes add up to {}, the weights hold {}", name(),
                 total_size(vars), params.numel());
  auto specs = variable_slots();
  if (vars == variables_ && slots_.size() == specs.size() && slot_parts_.size() == specs.size()) return;
  variables_ = vars;
  variable_offsets_.clear();
  std::int64_t at = 0;
  for (auto& v : variables_) {
    variable_offsets_.push_back(at);
    at += v.shape.numel();
  }
  slots_.clear();
  slot_parts_.assign(specs.size(), {});
  for (std::size_t k = 0; k < specs.size(); ++k) {
    std::int64_t n = 0;
    for (auto& v : variables_) {
      auto shape = slot_shape(specs[k], v);
      slot_parts_[k].push_back(shape ? SlotPart{n, *shape} : SlotPart{});
      if (shape) n += shape->numel();
    }
    slots_.emplace_back(specs[k].name, Tensor::full({n}, specs[k].initial, params.dtype(), params.device()));
  }
}

Tensor Optimizer::slot_view(std::size_t slot, std::size_t variable) const {
  SYSTOLIC_CHECK(slot < slots_.size() && slot < slot_parts_.size() && variable < variables_.size(),
                 "optimizer {}: no slot {} of variable {} ({} slots, {} variables built)", name(), slot,
                 variable, slots_.size(), variables_.size());
  const SlotPart& part = slot_parts_[slot][variable];
  return part.offset < 0 ? Tensor() : slots_[slot].second.view(part.offset, part.shape);
}

Tensor Optimizer::variable_view(const Tensor& flat, std::size_t i) const {
  return flat.view(variable_offsets_[i], variables_[i].shape);
}

std::vector<std::pair<std::size_t, std::size_t>> Optimizer::keras3_slot_order() const {
  auto specs = variable_slots();
  int calls = 0;
  for (auto& s : specs) calls = std::max(calls, s.keras3_call + 1);
  std::vector<std::pair<std::size_t, std::size_t>> order;
  for (int call = 0; call < calls; ++call)
    for (std::size_t i = 0; i < variables_.size(); ++i)
      for (std::size_t k = 0; k < specs.size(); ++k)
        if (specs[k].keras3_call == call && (k >= slot_parts_.size() || slot_parts_[k][i].offset >= 0))
          order.emplace_back(i, k);
  return order;
}

void Optimizer::to(Device device) {
  for (auto& [n, t] : slots_) t = t.to(device);
  iterations_.release();
  updates_.release();
  loaded_rate_.release();
  step_values_.release();
  ema_values_.release();
}

Tensor& Optimizer::slot(const std::string& name) {
  for (auto& [n, t] : slots_)
    if (n == name) return t;
  fail("optimizer {}: no slot '{}' (built: {})", this->name(), name, slots_.empty() ? "no" : "yes");
}

void Optimizer::apply(Tensor& params, const Tensor& grads, const std::vector<TrainableVariable>& variables) {
  load_learning_rate();
  apply_update(params, grads, variables);
  iterations_.advance();
}

void Optimizer::apply_update(Tensor& params, const Tensor& grads,
                             const std::vector<TrainableVariable>& variables) {
  build(params, variables);
  SYSTOLIC_CHECK(grads.numel() == params.numel(),
                 "optimizer {}: the weights hold {} values, the gradients {}", name(), params.numel(),
                 grads.numel());
  Tensor g = grads;  // the same buffer, unscaled and clipped in place
  if (loss_scale_factor_) ops::scale_shift(g, g, 1.0 / *loss_scale_factor_, 0.0);  // Keras's g / scale
  if (accumulation_steps_) {
    Tensor& sum = slot("gradient_accumulator");
    if (accumulates_next_step()) {  // Keras's _backend_increment_gradient_accumulators
      ops::accumulate(g, sum);
      update_average(params, grads);
      return;
    }
    ops::accumulate(sum, g);  // the mean of the steps' gradients, and the sum back to 0
    ops::scale_shift(g, g, 1.0 / double(*accumulation_steps_), 0.0);
    ops::fill(sum, 0.0);
  }
  // Keras's _clip_gradients: clipnorm first, then global_clipnorm, then clipvalue, each only when > 0.
  if (clipnorm_ && *clipnorm_ > 0) {
    for (std::size_t i = 0; i < variables_.size(); ++i) {
      Tensor part = variable_view(g, i);
      ops::clip_gradients(part, /*by_norm=*/true, *clipnorm_);
    }
  } else if (global_clipnorm_ && *global_clipnorm_ > 0) {
    ops::clip_gradients(g, /*by_norm=*/true, *global_clipnorm_);
  } else if (clipvalue_ && *clipvalue_ > 0) {
    ops::clip_gradients(g, /*by_norm=*/false, *clipvalue_);
  }
  const Tensor& lr = loaded_rate_.on(params.device());
  decay_weights(params, lr);
  update(params, grads, lr,
         accumulation_steps_ ? updates_.on(params.device()) : iterations_.on(params.device()));
  update_average(params, grads);
}

void Optimizer::decay_weights(Tensor& params, const Tensor& lr) {
  if (weight_decay_ && *weight_decay_ != 0) ops::decay_weights(params, lr, *weight_decay_);
}

void Optimizer::update_average(Tensor& params, const Tensor& grads) {
  if (!use_ema_) return;
  Tensor none;  // the rule reads no gradient
  ops::optimizer_update(params, grads, slot("average"), none, none,
                        ema_rule(ema_momentum_, ema_overwrite_frequency_), ema_values_on(params.device()));
}

}  // namespace systolic::optimizers
