// Keras's L1, L2 and L1L2 regularizers: P = l1 * sum|x| + l2 * sum x^2 (ops::regularize).
#include <systolic/ops.h>

#include <cmath>

#include "regularizers/registry.h"

namespace systolic::regularizers {

namespace {

// One class per Keras class; they differ in their name and the arguments their config holds.
class L1L2Penalty final : public RegularizerBase {
 public:
  enum Form { l1_only, l2_only, both };
  L1L2Penalty(Form form, double l1, double l2) : form_(form), l1_(l1), l2_(l2) {}
  std::string class_name() const override {
    return form_ == l1_only ? "L1" : form_ == l2_only ? "L2" : "L1L2";
  }
  nlohmann::ordered_json get_config() const override {
    nlohmann::ordered_json c = nlohmann::ordered_json::object();
    if (form_ != l2_only) c["l1"] = l1_;
    if (form_ != l1_only) c["l2"] = l2_;
    return c;
  }
  void apply(const Tensor& x, Tensor& total, Tensor& dx, double total_scale,
             double grad_scale) const override {
    ops::regularize(x, total, dx, l1_, l2_, total_scale, grad_scale);
  }

 private:
  Form form_;
  double l1_, l2_;
};

bool non_negative(double v) {
  return v >= 0 && std::isfinite(v);
}

}  // namespace

Regularizer L1(double l1) {
  SYSTOLIC_CHECK(non_negative(l1), "L1: l1 must be a non-negative float, got {}", l1);
  return Regularizer(std::make_shared<L1L2Penalty>(L1L2Penalty::l1_only, l1, 0.0));
}
Regularizer L2(double l2) {
  SYSTOLIC_CHECK(non_negative(l2), "L2: l2 must be a non-negative float, got {}", l2);
  return Regularizer(std::make_shared<L1L2Penalty>(L1L2Penalty::l2_only, 0.0, l2));
}
Regularizer L1L2(double l1, double l2) {
  SYSTOLIC_CHECK(non_negative(l1) && non_negative(l2),
                 "L1L2: l1 and l2 must be non-negative floats, got {} and {}", l1, l2);
  return Regularizer(std::make_shared<L1L2Penalty>(L1L2Penalty::both, l1, l2));
}

const Entry& l1_entry() {
  static const Entry e{"L1", {"l1"}, [](keras_object::StrictConfig& c) { return L1(c.number("l1", 0.01)); }};
  return e;
}
const Entry& l2_entry() {
  static const Entry e{"L2", {"l2"}, [](keras_object::StrictConfig& c) { return L2(c.number("l2", 0.01)); }};
  return e;
}
const Entry& l1_l2_entry() {
  static const Entry e{"L1L2", {"l1l2", "l1_l2"}, [](keras_object::StrictConfig& c) {
                         return L1L2(c.number("l1", 0.0), c.number("l2", 0.0));
                       }};
  return e;
}

}  // namespace systolic::regularizers
