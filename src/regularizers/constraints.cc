// Keras's weight constraints, applied after every optimizer update: MaxNorm, NonNeg, UnitNorm, MinMaxNorm
// (ops::constrain; norms over `axis`, negative axes counted from the end).
#include <systolic/ops.h>

#include "regularizers/registry.h"

namespace systolic::constraints {

namespace {

using json = nlohmann::ordered_json;

json axis_json(const std::vector<int>& axis) {
  return axis.size() == 1 ? json(axis[0]) : json(axis);
}

class Projection final : public ConstraintBase {
 public:
  Projection(ops::ConstraintParams::Kind kind, double min_value, double max_value, double rate,
             std::vector<int> axis)
      : kind_(kind), min_value_(min_value), max_value_(max_value), rate_(rate), axis_(std::move(axis)) {}
  std::string class_name() const override {
    switch (kind_) {
      case ops::ConstraintParams::max_norm:
        return "MaxNorm";
      case ops::ConstraintParams::non_neg:
        return "NonNeg";
      case ops::ConstraintParams::unit_norm:
        return "UnitNorm";
      default:
        return "MinMaxNorm";
    }
  }
  json get_config() const override {
    switch (kind_) {
      case ops::ConstraintParams::max_norm:
        return {{"max_value", max_value_}, {"axis", axis_json(axis_)}};
      case ops::ConstraintParams::non_neg:
        return json::object();
      case ops::ConstraintParams::unit_norm:
        return {{"axis", axis_json(axis_)}};
      default:
        return {{"min_value", min_value_},
                {"max_value", max_value_},
                {"rate", rate_},
                {"axis", axis_json(axis_)}};
    }
  }
  void apply(Tensor& w) const override {
    ops::ConstraintParams p{
        .kind = kind_, .min_value = min_value_, .max_value = max_value_, .rate = rate_, .axes = 0};
    if (kind_ != ops::ConstraintParams::non_neg)
      for (int a : axis_) {
        int at = a < 0 ? a + w.rank() : a;
        SYSTOLIC_CHECK(at >= 0 && at < w.rank(), "constraint: axis {} is not an axis of a weight of shape {}",
                       a, w.shape().str());
        p.axes |= 1u << at;
      }
    ops::constrain(w, p);
  }

 private:
  ops::ConstraintParams::Kind kind_;
  double min_value_, max_value_, rate_;
  std::vector<int> axis_;
};

void check_axis(const char* what, const std::vector<int>& axis) {
  SYSTOLIC_CHECK(!axis.empty(), "{}: axis must name at least one axis", what);
}

}  // namespace

Constraint MaxNorm(double max_value, std::vector<int> axis) {
  check_axis("MaxNorm", axis);
  SYSTOLIC_CHECK(max_value >= 0, "MaxNorm: max_value must be >= 0, got {}", max_value);
  return Constraint(
      std::make_shared<Projection>(ops::ConstraintParams::max_norm, 0.0, max_value, 1.0, std::move(axis)));
}
Constraint NonNeg() {
  return Constraint(
      std::make_shared<Projection>(ops::ConstraintParams::non_neg, 0.0, 0.0, 1.0, std::vector<int>{0}));
}
Constraint UnitNorm(std::vector<int> axis) {
  check_axis("UnitNorm", axis);
  return Constraint(
      std::make_shared<Projection>(ops::ConstraintParams::unit_norm, 0.0, 0.0, 1.0, std::move(axis)));
}
Constraint MinMaxNorm(double min_value, double max_value, double rate, std::vector<int> axis) {
  check_axis("MinMaxNorm", axis);
  SYSTOLIC_CHECK(min_value >= 0 && max_value >= min_value && rate >= 0 && rate <= 1,
                 "MinMaxNorm: needs 0 <= min_value <= max_value and rate in [0, 1], got {}, {}, {}",
                 min_value, max_value, rate);
  return Constraint(std::make_shared<Projection>(ops::ConstraintParams::min_max_norm, min_value, max_value,
                                                 rate, std::move(axis)));
}

const Entry& max_norm_entry() {
  static const Entry e{"MaxNorm", {"max_norm"}, [](keras_object::StrictConfig& c) {
                         return MaxNorm(c.number("max_value", 2.0), c.ints("axis", {0}));
                       }};
  return e;
}
const Entry& non_neg_entry() {
  static const Entry e{"NonNeg", {"non_neg"}, [](keras_object::StrictConfig&) { return NonNeg(); }};
  return e;
}
const Entry& unit_norm_entry() {
  static const Entry e{
      "UnitNorm", {"unit_norm"}, [](keras_object::StrictConfig& c) { return UnitNorm(c.ints("axis", {0})); }};
  return e;
}
const Entry& min_max_norm_entry() {
  static const Entry e{"MinMaxNorm", {"min_max_norm"}, [](keras_object::StrictConfig& c) {
                         return MinMaxNorm(c.number("min_value", 0.0), c.number("max_value", 1.0),
                                           c.number("rate", 1.0), c.ints("axis", {0}));
                       }};
  return e;
}

}  // namespace systolic::constraints
