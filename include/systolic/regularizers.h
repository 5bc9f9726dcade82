// Keras's regularizers (keras.regularizers) and constraints (keras.constraints) as values a layer attaches to
// its weights (Weight::regularizer, Weight::constraint) and to its outputs (Layer::activity_regularizer).
//
// A weight regularizer's penalty is added to the training loss and its gradient to the weight's gradient; an
// activity regularizer's penalty of a layer's output, divided by the batch size, is added to the loss and its
// gradient to the output's gradient (Keras 3: Layer.__call__ records it, Trainer.compute_loss adds
// sum(model.losses) to the compiled loss, in fit and in evaluate). A constraint projects its weight after every
// optimizer update (Keras 3: BaseOptimizer.apply). The math runs on the weights' device through ops
// (ops::regularize, ops::orthogonal_regularize, ops::constrain); formulas in include/systolic/ops.h.
#pragma once

#include <systolic/ops.h>

#include <string>
#include <vector>

namespace systolic {

struct Regularizer {
  enum class Kind { none, l1, l2, l1_l2, orthogonal };
  Kind kind = Kind::none;
  double l1 = 0, l2 = 0;  // L1, L2, L1L2: l1 * sum|x| + l2 * sum x^2
  double factor = 0;      // OrthogonalRegularizer
  std::string mode = "rows";
  explicit operator bool() const { return kind != Kind::none; }
  bool operator==(const Regularizer&) const = default;
};

struct Constraint {
  enum Kind { none, max_norm, non_neg, unit_norm, min_max_norm };
  Kind kind = none;
  double min_value = 0, max_value = 0, rate = 1;
  std::vector<int> axis = {0};  // the axes the norms are taken over (negative: from the end)
  explicit operator bool() const { return kind != none; }
  bool operator==(const Constraint&) const = default;
};

// What Keras passes a layer for one of its weights: `<name>_regularizer` and `<name>_constraint`
// (kernel_regularizer, bias_constraint, gamma_regularizer, depthwise_constraint, ...).
struct WeightOptions {
  Regularizer regularizer;
  Constraint constraint;
};

namespace regularizers {
// Keras's classes and defaults.
Regularizer L1(double l1 = 0.01);
Regularizer L2(double l2 = 0.01);
Regularizer L1L2(double l1 = 0.0, double l2 = 0.0);
Regularizer OrthogonalRegularizer(double factor = 0.01, const std::string& mode = "rows");

// Adds total_scale * penalty(x) to total (float64 [1]) and grad_scale * d penalty / dx to dx (either may be
// undefined), on x's device.
void apply(const Regularizer& r, const Tensor& x, Tensor& total, Tensor& dx, double total_scale,
           double grad_scale);
// penalty(x), computed on x's device and read back (tests; a layer's losses).
double penalty(const Regularizer& r, const Tensor& x);
}  // namespace regularizers

namespace constraints {
Constraint MaxNorm(double max_value = 2.0, std::vector<int> axis = {0});
Constraint NonNeg();
Constraint UnitNorm(std::vector<int> axis = {0});
Constraint MinMaxNorm(double min_value = 0.0, double max_value = 1.0, double rate = 1.0,
                      std::vector<int> axis = {0});
// w = constraint(w), in place on w's device.
void apply(const Constraint& c, Tensor& w);
}  // namespace constraints

}  // namespace systolic
