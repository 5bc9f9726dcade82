// Lion (Keras): w -= lr sign(beta_1 m + (1 - beta_1) g); m = beta_2 m + (1 - beta_2) g (the lion rule of
// ops::optimizer_update).
#include "ops/optimizer_math.h"
#include "optimizers/registry.h"

namespace systolic::optimizers {

nlohmann::ordered_json Lion::get_config() const {
  return {{"beta_1", beta_1_}, {"beta_2", beta_2_}};
}

std::vector<Slot> Lion::slot_specs() const {
  return {{.name = "m", .tf_keras = "m", .keras3 = "momentum"}};
}

ops::UpdateParams Lion::rule() const {
  return {.rule = ops::UpdateRule::lion, .beta_1 = beta_1_, .beta_2 = beta_2_};
}

const Entry& lion_entry() {
  static const Entry e{"Lion", {"lion"}, "lion", [](keras_object::StrictConfig& c, std::optional<double> lr) {
                         const double beta_1 = c.number("beta_1", 0.9);
                         if (beta_1 <= 0 || beta_1 > 1)
                           c.fail(fmt::format("beta_1 {} must be in (0, 1] (as Keras requires)", beta_1));
                         return std::unique_ptr<Optimizer>(
                             std::make_unique<Lion>(lr.value_or(0.001), beta_1, c.number("beta_2", 0.99)));
                       }};
  return e;
}

}  // namespace systolic::optimizers
