// Nadam (Keras 3): Adam with Nesterov momentum under the schedule u_t = beta_1 (1 - 0.5 * 0.96^t), and the product
// of the u_t so far, which Keras keeps as a variable (_u_product) and this class computes from the step count (the
// nadam rule of ops::optimizer_update; its step values in ops/optimizer_math.h).
#include "ops/optimizer_math.h"
#include "optimizers/registry.h"

namespace systolic::optimizers {

std::vector<Slot> Nadam::slot_specs() const {
  return {{.name = "m", .tf_keras = "m", .keras3 = "momentum"},
          {.name = "v", .tf_keras = "v", .keras3 = "velocity"}};
}

ops::UpdateParams Nadam::rule() const {
  return {.rule = ops::UpdateRule::nadam, .beta_1 = beta_1_, .beta_2 = beta_2_, .epsilon = epsilon_};
}

double Nadam::u_product(std::int64_t t) const {
  if (t < product_t_) {
    product_t_ = 0;
    product_ = 1.0;
  }
  for (; product_t_ < t; ++product_t_) product_ *= ops::update::nadam_u(beta_1_, double(product_t_ + 1));
  return product_;
}

std::vector<double> Nadam::step_values(double lr) {
  const std::int64_t t = updates() + 1;  // Keras multiplies in this step's u_t before the update
  auto c = ops::update::step_values(rule(), lr, double(updates()), u_product(t));
  return {c.begin(), c.end()};
}

const Entry& nadam_entry() {
  static const Entry e{"Nadam", {"nadam"}, "nadam", betas_from_config<Nadam>};
  return e;
}

}  // namespace systolic::optimizers
