// Adafactor (Keras 3): the second moment of each variable of rank >= 2 factored over its last two axes (r: the mean
// of g^2 + epsilon_1 over the last axis, c: over the second last, v their outer product normalised by r's mean), the
// step scaled by the variable's RMS and clipped by the update's (ops::adafactor_update, its formulas in
// ops/optimizer_math.h). A variable of lower rank keeps v itself; Keras gives it r and c as unused scalars.
#include <systolic/ops.h>

#include "ops/optimizer_math.h"
#include "optimizers/registry.h"

namespace systolic::optimizers {

Adafactor::Adafactor(double learning_rate, double beta_2_decay, double epsilon_1, double epsilon_2,
                     double clip_threshold, bool relative_step)
    : Optimizer(learning_rate),
      beta_2_decay_(beta_2_decay),
      epsilon_1_(epsilon_1),
      epsilon_2_(epsilon_2),
      clip_threshold_(clip_threshold),
      relative_step_(relative_step) {
  SYSTOLIC_CHECK(epsilon_1 >= 0 && epsilon_2 >= 0, "Adafactor: epsilon_1 {} and epsilon_2 {} must be >= 0",
                 epsilon_1, epsilon_2);
  SYSTOLIC_CHECK(clip_threshold > 0, "Adafactor: clip_threshold {} must be > 0", clip_threshold);
}

nlohmann::ordered_json Adafactor::get_config() const {
  return {{"beta_2_decay", beta_2_decay_},
          {"epsilon_1", epsilon_1_},
          {"epsilon_2", epsilon_2_},
          {"clip_threshold", clip_threshold_},
          {"relative_step", relative_step_}};
}

// Keras 3 names r and c after the variable alone ("adafactor/dense/kernel"), v "<variable>_velocity".
std::vector<Slot> Adafactor::slot_specs() const {
  return {{.name = "r", .tf_keras = "r", .keras3 = "r"},
          {.name = "c", .tf_keras = "c", .keras3 = "c"},
          {.name = "v", .tf_keras = "v", .keras3 = "velocity"}};
}

namespace {

bool factored(const Shape& s) {
  return s.rank() >= 2;
}

}  // namespace

std::optional<Shape> Adafactor::slot_shape(const Slot& slot, const TrainableVariable& variable) const {
  const Shape& s = variable.shape;
  if (slot.name == "v" || (slot.name != "r" && slot.name != "c"))
    return s;                        // v, the average, the accumulator
  if (!factored(s)) return Shape{};  // Keras's scalar placeholder
  std::vector<std::int64_t> dims(s.dims().begin(), s.dims().end());
  dims.erase(dims.end() -
             (slot.name == "r" ? 1 : 2));  // r: without the last axis; c: without the second last
  return Shape(dims);
}

std::vector<double> Adafactor::step_values(double lr) {
  auto c = ops::adafactor::step_values(lr, double(updates()), beta_2_decay_);
  return {c.begin(), c.end()};
}

void Adafactor::update(Tensor& params, const Tensor& grads, const Tensor&, const Tensor&) {
  const Tensor& step = step_values_on(params.device());
  const ops::AdafactorStep s{
      .epsilon_1 = epsilon_1_, .epsilon_2 = epsilon_2_, .clip_threshold = clip_threshold_};
  const auto& vars = variables();
  for (std::size_t i = 0; i < vars.size(); ++i) {
    const Shape& shape = vars[i].shape;
    Tensor w = variable_view(params, i), g = variable_view(grads, i), v = slot_view(2, i);
    if (!factored(shape)) {
      Tensor none;
      ops::adafactor_update(w, g, none, none, v, s, step);
      continue;
    }
    // The op's [B, R, C]: the last two axes, and the others as one.
    const std::int64_t C = shape[-1], R = shape[-2], B = shape.numel() / (R * C == 0 ? 1 : R * C);
    const Shape bcr{B, R, C};
    Tensor w3 = w.view(0, bcr), g3 = g.view(0, bcr), v3 = v.view(0, bcr);
    Tensor r = slot_view(0, i).view(0, Shape{B, R}), c = slot_view(1, i).view(0, Shape{B, C});
    ops::adafactor_update(w3, g3, r, c, v3, s, step);
  }
}

const Entry& adafactor_entry() {
  static const Entry e{
      "Adafactor", {"adafactor"}, "adafactor", [](keras_object::StrictConfig& c, std::optional<double> lr) {
        return std::unique_ptr<Optimizer>(std::make_unique<Adafactor>(
            lr.value_or(0.001), c.number("beta_2_decay", -0.8), c.number("epsilon_1", 1e-30),
            c.number("epsilon_2", 1e-3), c.number("clip_threshold", 1.0), c.boolean("relative_step", true)));
      }};
  return e;
}

}  // namespace systolic::optimizers
