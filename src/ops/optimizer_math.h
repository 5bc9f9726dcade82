// The update rules of ops::optimizer_update, once for every backend: each rule's slots, its per-step values
// (computed on the host in float64 from the step's learning rate and count, and read by the op on the device) and
// its formula for one element, which the CPU loops and the CUDA kernels evaluate in double (DoubleMath) and the XLA
// emitter over its expressions (its Math), so the backends cannot drift apart. Keras 3.15's update_step of each
// optimizer (keras/src/optimizers/<name>.py). A new rule is an enumerator, its slot count, its step values and its
// case in update_element, all here.
#pragma once

#include <systolic/ops.h>

#include <array>
#include <cmath>

#include "ops/double_math.h"

namespace systolic::ops {

enum class UpdateRule : int {
  amsgrad,   // Adam(amsgrad=True): slots m, v, v_hat
  adamax,    // slots m, u
  nadam,     // slots m, v
  adagrad,   // slot accumulator
  adadelta,  // slots accumulated_grad, accumulated_delta_var
  lion,      // slot m
  ftrl,      // slots accumulator, linear
  // Lamb: slots m, v; a trust-ratio rule: the op takes w as one variable (see trust_ratio)
  lamb,
  // Any optimizer's use_ema, after its update: slot average (of the weights); w is overwritten with it every
  // ema_overwrite_frequency updates. The gradient is not read.
  ema,
};

// A rule and the optimizer's constants (those of other rules unused).
struct UpdateParams {
  UpdateRule rule = UpdateRule::amsgrad;
  double beta_1 = 0.9, beta_2 = 0.999, epsilon = 1e-7;
  double rho = 0.95;  // adadelta
  // ftrl: learning_rate_power, the l1, l2 and l2-shrinkage strengths, beta
  double lr_power = -0.5, l1 = 0, l2 = 0, l2_shrinkage = 0, beta = 0;
  // ema: beta_1 is ema_momentum; the weights take the average every this many updates (0: never)
  std::int64_t ema_overwrite_frequency = 0;
};

namespace update {

// How many values a step passes the op (a float64 [kStepValues] tensor on the parameters' device).
inline constexpr int kStepValues = 6;
using StepValues = std::array<double, kStepValues>;

// The slots the rule reads and writes (s0, s1, s2 in that order; the others may be undefined).
inline int slot_count(UpdateRule r) {
  switch (r) {
    case UpdateRule::amsgrad:
      return 3;
    case UpdateRule::adagrad:
    case UpdateRule::lion:
    case UpdateRule::ema:
      return 1;
    default:
      return 2;
  }
}

// Whether the rule scales its step by a trust ratio over the whole of w, which the op then takes as one variable:
// element() updates the slots alone, then w -= c[0] * ratio(sum of w^2, sum of direction^2) * direction, all of w's
// sums taken before any of it changes.
SYSTOLIC_MATH_HD bool trust_ratio(UpdateRule r) {
  return r == UpdateRule::lamb;
}

// Nadam's momentum schedule: u_t = beta_1 (1 - 0.5 * 0.96^t).
inline double nadam_u(double beta_1, double t) {
  return beta_1 * (1.0 - 0.5 * std::pow(0.96, t));
}

// The values of the step with learning rate `lr` after `iterations` updates (t = iterations + 1). Nadam also takes
// u_product, the product of u_1 .. u_t (Keras's _u_product after its update of this step), which its optimizer
// keeps: the only rule whose step values are not a function of (lr, t).
inline StepValues step_values(const UpdateParams& p, double lr, double iterations, double u_product = 0) {
  const double t = iterations + 1;
  StepValues c{};
  c[0] = lr;
  switch (p.rule) {
    case UpdateRule::amsgrad:  // alpha = lr sqrt(1 - beta_2^t) / (1 - beta_1^t)
      c[0] = lr * std::sqrt(1.0 - std::pow(p.beta_2, t)) / (1.0 - std::pow(p.beta_1, t));
      break;
    case UpdateRule::adamax:
      c[1] = 1.0 - std::pow(p.beta_1, t);
      break;
    case UpdateRule::nadam:
      c[1] = nadam_u(p.beta_1, t);
      c[2] = nadam_u(p.beta_1, t + 1);
      c[3] = u_product;
      c[4] = u_product * c[2];
      c[5] = 1.0 - std::pow(p.beta_2, t);
      break;
    case UpdateRule::lamb:  // 1 - beta_1^t, 1 - beta_2^t
      c[1] = 1.0 - std::pow(p.beta_1, t);
      c[2] = 1.0 - std::pow(p.beta_2, t);
      break;
    case UpdateRule::ftrl:  // l2 + beta / (2 lr)
      c[1] = p.l2 + p.beta / (2.0 * lr);
      break;
    case UpdateRule::
        ema: {  // the average's momentum (0 at the first update: it starts as the weights), overwrite
      c[0] = iterations == 0 ? 0.0 : p.beta_1;
      const auto n = static_cast<std::int64_t>(iterations) + 1;
      c[1] = p.ema_overwrite_frequency > 0 && n % p.ema_overwrite_frequency == 0 ? 1.0 : 0.0;
      break;
    }
    default:
      break;
  }
  return c;
}

// One element's update: the weight w and the rule's slots s0, s1, s2 (those it does not use untouched), from the
// gradient g and the step values c[0 .. kStepValues).
template <class M, class V>
SYSTOLIC_MATH_HD void element(const UpdateParams& p, const V* c, V& w, const V& g, V& s0, V& s1, V& s2) {
  const double b1 = p.beta_1, b2 = p.beta_2, eps = p.epsilon;
  switch (p.rule) {
    case UpdateRule::amsgrad:  // m += (g - m)(1 - b1); v += (g^2 - v)(1 - b2); v_hat = max(v_hat, v)
      s0 = s0 + (g - s0) * (1.0 - b1);
      s1 = s1 + (g * g - s1) * (1.0 - b2);
      s2 = M::max(s2, s1);
      w = w - s0 * c[0] / (M::sqrt(s2) + eps);
      break;
    case UpdateRule::adamax:  // u = max(b2 u, |g|); w -= lr m / ((1 - b1^t)(u + eps))
      s0 = s0 + (g - s0) * (1.0 - b1);
      s1 = M::max(s1 * b2, M::abs(g));
      w = w - c[0] * s0 / (c[1] * (s1 + eps));
      break;
    case UpdateRule::nadam: {  // c: lr, u_t, u_t+1, u_product_t, u_product_t+1, 1 - b2^t
      s0 = s0 + (g - s0) * (1.0 - b1);
      s1 = s1 + (g * g - s1) * (1.0 - b2);
      V m_hat = c[2] * s0 / (1.0 - c[4]) + (1.0 - c[1]) * g / (1.0 - c[3]);
      V v_hat = s1 / c[5];
      w = w - m_hat * c[0] / (M::sqrt(v_hat) + eps);
      break;
    }
    case UpdateRule::adagrad:  // acc += g^2; w -= lr g / sqrt(acc + eps)
      s0 = s0 + g * g;
      w = w - c[0] * g / M::sqrt(s0 + eps);
      break;
    case UpdateRule::adadelta: {  // Keras's, with rms(x) = sqrt(x + eps)
      s0 = s0 * p.rho + g * g * (1.0 - p.rho);
      V delta = -(M::sqrt(s1 + eps) * g) / M::sqrt(s0 + eps);
      s1 = s1 * p.rho + delta * delta * (1.0 - p.rho);
      w = w + c[0] * delta;
      break;
    }
    case UpdateRule::lion:  // w -= lr sign(b1 m + (1 - b1) g); m = b2 m + (1 - b2) g
      w = w - c[0] * M::sign(s0 * b1 + g * (1.0 - b1));
      s0 = s0 * b2 + g * (1.0 - b2);
      break;
    case UpdateRule::ftrl: {  // c: lr, l2 + beta / (2 lr)
      const double power = -p.lr_power;
      V shrunk = g + w * (2.0 * p.l2_shrinkage);
      V accumulated = s0 + g * g;
      V grown = M::pow(accumulated, power);
      s1 = s1 + shrunk - (grown - M::pow(s0, power)) / c[0] * w;
      V quadratic = grown / c[0] + 2.0 * c[1];
      w = (M::clip(s1, -p.l1, p.l1) - s1) / quadratic;
      s0 = accumulated;
      break;
    }
    case UpdateRule::lamb:  // the moments; the step is direction() and ratio()
      s0 = s0 + (g - s0) * (1.0 - b1);
      s1 = s1 + (g * g - s1) * (1.0 - b2);
      break;
    case UpdateRule::ema:  // c: momentum (0 at the first update), 1 to overwrite the weights with the average
      s0 = s0 * c[0] + w * (1.0 - c[0]);
      w = s0 * c[1] + w * (1.0 - c[1]);
      break;
  }
}

// A trust-ratio rule's direction for an element, from its slots after element(): Lamb's m_hat / (sqrt(v_hat) + eps),
// c: lr, 1 - beta_1^t, 1 - beta_2^t.
template <class M, class V>
SYSTOLIC_MATH_HD V direction(const UpdateParams& p, const V* c, const V& s0, const V& s1) {
  return (s0 / c[1]) / (M::sqrt(s1 / c[2]) + p.epsilon);
}

// The trust ratio of w's sum of squares and its direction's: ||w|| / ||direction||, 1 where either norm is 0.
template <class M, class V>
SYSTOLIC_MATH_HD V ratio(const V& w_squares, const V& direction_squares) {
  V w_norm = M::sqrt(w_squares), d_norm = M::sqrt(direction_squares);
  return M::where(w_norm > 0.0 && d_norm > 0.0, w_norm / d_norm, M::like(1.0, w_norm));
}

}  // namespace update

// Keras 3.15's Adafactor.update_step (keras/src/optimizers/adafactor.py), ops::adafactor_update's formulas: per
// variable, with t = iterations + 1,
//   G = g^2 + epsilon_1;  beta = 1 - t^beta_2_decay;  rho = min(lr, 1 / sqrt(t));
//   factored (rank >= 2, the last two axes R, C): r = beta r + (1 - beta) mean_C(G), c = beta c + (1 - beta)
//   mean_R(G), v = r / mean_R(r) * c;  else v = beta v + (1 - beta) G;
//   u = g / sqrt(v);  w -= max(epsilon_2, rms(w)) rho / max(1, rms(u) / clip_threshold) * u
// (rms(x) = sqrt(mean(x^2)) over the whole variable, w's taken before the update).
namespace adafactor {

// How many values a step passes the op: rho and beta (a float64 [kStepValues] tensor on w's device).
inline constexpr int kStepValues = 2;

// rho and beta of the step with learning rate `lr` after `iterations` updates.
inline std::array<double, kStepValues> step_values(double lr, double iterations, double beta_2_decay) {
  const double t = iterations + 1;
  return {std::fmin(lr, 1.0 / std::sqrt(t)), 1.0 - std::pow(t, beta_2_decay)};
}

// The regulated square of a gradient: g^2 + epsilon_1.
template <class V>
SYSTOLIC_MATH_HD V regulated(const V& g, double epsilon_1) {
  return g * g + epsilon_1;
}

// A second moment's moving average with the step's beta: beta s + (1 - beta) mean.
template <class V, class B>
SYSTOLIC_MATH_HD V moment(const B& beta, const V& s, const V& mean) {
  return beta * s + (1.0 - beta) * mean;
}

// The step's factor of u = g / sqrt(v): max(epsilon_2, rms(w)) rho / max(1, rms(u) / clip_threshold).
template <class M, class V>
SYSTOLIC_MATH_HD V scale(const V& rms_w, const V& rms_u, const V& rho, double epsilon_2,
                         double clip_threshold) {
  return M::max(rms_w, epsilon_2) * rho / M::max(rms_u / clip_threshold, 1.0);
}

}  // namespace adafactor

// Keras 3.15's Muon._muon_update_step (keras/src/optimizers/muon.py), ops::muon_update's formulas for a matrix
// w [R, C]: the momentum and the matrix x element by element (moment(), direction()), X = x / (||x||_F + kNormEpsilon) taken
// as [min, max] (x transposed when R > C), then newton_schulz's `steps` iterations A = X X^T, X = a X + (b A + c A A) X
// (each backend's matrix products), and w -= lr adjust() X.
namespace muon {

inline constexpr double kNormEpsilon = 1e-7;

// The momentum after the step: m + (g + m (momentum - 1)) (Keras's assign_add).
template <class V>
SYSTOLIC_MATH_HD V moment(const MuonStep& s, const V& m, const V& g) {
  return m + (g + m * (s.momentum - 1.0));
}

// The matrix's element from the momentum after the step (as stored): g + momentum m with Nesterov's, else m.
template <class V>
SYSTOLIC_MATH_HD V direction(const MuonStep& s, const V& m, const V& g) {
  return s.nesterov ? g + m * s.momentum : m;
}

// The factor of lr X in w's step (Keras's lr_adjust): sqrt(max(R, C)) rms_rate, or 1 (rms_rate None).
SYSTOLIC_MATH_HD double adjust(const MuonStep& s, std::int64_t R, std::int64_t C) {
  return s.scaled ? ::sqrt(double(R > C ? R : C)) * s.rms_rate : 1.0;
}

}  // namespace muon
}  // namespace systolic::ops
