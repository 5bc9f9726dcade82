// Keras's elementwise losses (ElementwiseLoss in include/systolic/losses.h): each an ops::elementwise_loss kind
// with its arguments, and the binary crossentropies computed from the pre-sigmoid values when the output layer ends
// in a sigmoid (Keras's TensorFlow backend finds the logits behind a sigmoid's output and uses them: stable, and
// the gradient skips the sigmoid).
#include <systolic/ops.h>

#include "losses/registry.h"

namespace systolic::losses {

bool ElementwiseLoss::compute_weighted(LossArgs& a) const {
  using K = ops::ElementLoss;
  const bool binary = params_.kind == K::binary_crossentropy || params_.kind == K::binary_focal_crossentropy;
  // BinaryCrossentropy takes the logits behind a sigmoid even with from_logits (Keras warns, and does);
  // BinaryFocalCrossentropy with from_logits applies its own sigmoid to the output first.
  const bool behind_sigmoid = binary && a.sigmoid_logits.defined() &&
                              (params_.kind == K::binary_crossentropy || !params_.from_logits);
  if (behind_sigmoid) {
    ops::ElementLossParams p = params_;
    p.from_logits = true;
    ops::elementwise_loss(a.sigmoid_logits, a.labels, a.weights, a.total, a.dlogits, p, a.grad_scale);
    return true;
  }
  ops::elementwise_loss(a.output, a.labels, a.weights, a.total, a.doutput, params_, a.grad_scale);
  return false;
}

nlohmann::ordered_json ElementwiseLoss::get_config() const {
  const ops::ElementLossParams& p = params_;
  switch (p.kind) {
    case ops::ElementLoss::huber:
      // Keras 3.15's Huber.get_config leaves delta out (it then reloads as 1.0); it is written here, and Keras's
      // from_config takes it.
      return {{"delta", p.delta}};
    case ops::ElementLoss::binary_crossentropy:
      return {{"from_logits", p.from_logits}, {"label_smoothing", p.label_smoothing}, {"axis", -1}};
    case ops::ElementLoss::binary_focal_crossentropy:
      return {{"from_logits", p.from_logits},
              {"label_smoothing", p.label_smoothing},
              {"axis", -1},
              {"apply_class_balancing", p.class_balancing},
              {"alpha", p.alpha},
              {"gamma", p.gamma}};
    default:
      return nlohmann::ordered_json::object();
  }
}

namespace {
template <class L>
std::unique_ptr<Loss> plain(keras_object::StrictConfig&) {
  return std::make_unique<L>();
}
double label_smoothing(keras_object::StrictConfig& c) {
  double s = c.number("label_smoothing", 0.0);
  if (!(s >= 0 && s <= 1)) c.fail("label_smoothing " + std::to_string(s) + " is outside [0, 1]");
  return s;
}
}  // namespace

#define SYSTOLIC_PLAIN_ENTRY(function, Class, ...)                          \
  const Entry& function##_entry() {                                         \
    static const Entry e{#Class, {#function, ##__VA_ARGS__}, plain<Class>}; \
    return e;                                                               \
  }
SYSTOLIC_PLAIN_ENTRY(mean_squared_error, MeanSquaredError, "mse", "MSE")
SYSTOLIC_PLAIN_ENTRY(mean_absolute_error, MeanAbsoluteError, "mae", "MAE")
SYSTOLIC_PLAIN_ENTRY(mean_absolute_percentage_error, MeanAbsolutePercentageError, "mape", "MAPE")
SYSTOLIC_PLAIN_ENTRY(mean_squared_logarithmic_error, MeanSquaredLogarithmicError, "msle", "MSLE")
SYSTOLIC_PLAIN_ENTRY(log_cosh, LogCosh, "logcosh")  // tf.keras's name
SYSTOLIC_PLAIN_ENTRY(poisson, Poisson)
SYSTOLIC_PLAIN_ENTRY(hinge, Hinge)
SYSTOLIC_PLAIN_ENTRY(squared_hinge, SquaredHinge)
SYSTOLIC_PLAIN_ENTRY(kl_divergence, KLDivergence, "kld", "KLD", "kullback_leibler_divergence")
#undef SYSTOLIC_PLAIN_ENTRY

const Entry& huber_entry() {
  static const Entry e{"Huber", {"huber", "huber_loss"}, [](keras_object::StrictConfig& c) {
                         double delta = c.number("delta", 1.0);
                         if (!(delta >= 0)) c.fail("delta " + std::to_string(delta) + " is negative");
                         return std::unique_ptr<Loss>(std::make_unique<Huber>(delta));
                       }};
  return e;
}

const Entry& binary_crossentropy_entry() {
  static const Entry e{
      "BinaryCrossentropy", {"binary_crossentropy", "bce", "BCE"}, [](keras_object::StrictConfig& c) {
        BinaryCrossentropyOptions o;
        o.from_logits = c.boolean("from_logits", false);
        o.label_smoothing = label_smoothing(c);
        c.off("axis", -1);
        return std::unique_ptr<Loss>(std::make_unique<BinaryCrossentropy>(o));
      }};
  return e;
}

const Entry& binary_focal_crossentropy_entry() {
  static const Entry e{
      "BinaryFocalCrossentropy", {"binary_focal_crossentropy"}, [](keras_object::StrictConfig& c) {
        BinaryFocalCrossentropyOptions o;
        o.apply_class_balancing = c.boolean("apply_class_balancing", false);
        o.alpha = c.number("alpha", 0.25);
        o.gamma = c.number("gamma", 2.0);
        o.from_logits = c.boolean("from_logits", false);
        o.label_smoothing = label_smoothing(c);
        c.off("axis", -1);
        return std::unique_ptr<Loss>(std::make_unique<BinaryFocalCrossentropy>(o));
      }};
  return e;
}

}  // namespace systolic::losses
