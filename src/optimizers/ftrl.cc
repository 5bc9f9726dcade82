// Ftrl (Keras): the accumulator (from initial_accumulator_value) and the linear term, with the l1, l2 and
// l2-shrinkage strengths and beta; w = (clip(linear, -l1, l1) - linear) / quadratic (the ftrl rule of
// ops::optimizer_update has the formula).
#include "ops/optimizer_math.h"
#include "optimizers/registry.h"

namespace systolic::optimizers {

Ftrl::Ftrl(double learning_rate, double learning_rate_power, double initial_accumulator_value,
           double l1_regularization_strength, double l2_regularization_strength,
           double l2_shrinkage_regularization_strength, double beta)
    : RuleOptimizer(learning_rate),
      lr_power_(learning_rate_power),
      initial_(initial_accumulator_value),
      l1_(l1_regularization_strength),
      l2_(l2_regularization_strength),
      l2_shrinkage_(l2_shrinkage_regularization_strength),
      beta_(beta) {
  // Keras's checks (Ftrl.__init__).
  SYSTOLIC_CHECK(initial_ >= 0, "Ftrl: initial_accumulator_value {} must be >= 0", initial_);
  SYSTOLIC_CHECK(lr_power_ <= 0, "Ftrl: learning_rate_power {} must be <= 0", lr_power_);
  SYSTOLIC_CHECK(l1_ >= 0 && l2_ >= 0 && l2_shrinkage_ >= 0,
                 "Ftrl: the l1 ({}), l2 ({}) and l2 shrinkage ({}) regularization strengths must be >= 0",
                 l1_, l2_, l2_shrinkage_);
}

nlohmann::ordered_json Ftrl::get_config() const {
  return {{"learning_rate_power", lr_power_},
          {"initial_accumulator_value", initial_},
          {"l1_regularization_strength", l1_},
          {"l2_regularization_strength", l2_},
          {"l2_shrinkage_regularization_strength", l2_shrinkage_},
          {"beta", beta_}};
}

std::vector<Slot> Ftrl::slot_specs() const {
  return {{.name = "accumulator", .tf_keras = "accumulator", .keras3 = "accumulator", .initial = initial_},
          {.name = "linear", .tf_keras = "linear", .keras3 = "linear"}};
}

ops::UpdateParams Ftrl::rule() const {
  return {.rule = ops::UpdateRule::ftrl,
          .lr_power = lr_power_,
          .l1 = l1_,
          .l2 = l2_,
          .l2_shrinkage = l2_shrinkage_,
          .beta = beta_};
}

const Entry& ftrl_entry() {
  static const Entry e{
      "Ftrl", {"ftrl"}, "ftrl", [](keras_object::StrictConfig& c, std::optional<double> lr) {
        return std::unique_ptr<Optimizer>(std::make_unique<Ftrl>(
            lr.value_or(0.001), c.number("learning_rate_power", -0.5),
            c.number("initial_accumulator_value", 0.1), c.number("l1_regularization_strength", 0.0),
            c.number("l2_regularization_strength", 0.0),
            c.number("l2_shrinkage_regularization_strength", 0.0), c.number("beta", 0.0)));
      }};
  return e;
}

}  // namespace systolic::optimizers
