// The elementwise losses' formulas (ops::elementwise_loss, ElementLoss in include/systolic/ops.h), once for every
// backend: the CPU loops (ops/cpu/losses.cc) and the CUDA kernels (ops/cuda/losses.cu) call them with doubles
// (DoubleMath), the XLA emitter (ops/xla/losses.cc) with its expressions (E, through its own Math), so the three
// cannot drift apart. Keras 3.15's definitions (keras/src/losses/losses.py over the TensorFlow backend); the
// gradients are TensorFlow's of the same formulas: a clip passes the gradient where min <= x <= max, a maximum to
// its first argument where it is >= the second, abs's is sign(x) (0 at 0).
#pragma once

#include <systolic/ops.h>

#include <cmath>

#include "ops/double_math.h"

#define SYSTOLIC_LOSS_HD SYSTOLIC_MATH_HD

namespace systolic::ops::loss {

using ops::DoubleMath;  // ops/double_math.h

template <class V>
struct ValueGrad {
  V value;  // the element's loss
  V grad;   // its derivative w.r.t. the prediction (the logits when from_logits)
};

// Whether the kind reads its targets as hinge labels (0/1 targets, when every target of the batch is 0 or 1, are
// taken as -1/1: Keras's convert_binary_labels_to_hinge).
SYSTOLIC_LOSS_HD bool hinge_targets(ElementLoss k) {
  return k == ElementLoss::hinge || k == ElementLoss::squared_hinge;
}
SYSTOLIC_LOSS_HD bool binary_target(double t) {
  return t == 0.0 || t == 1.0;
}

// What an element's loss counts in its sample's: the mean over the last axis (of `last` values) and over the
// other non-batch axes is 1/per_sample; kl_divergence sums over the last axis, so last/per_sample.
SYSTOLIC_LOSS_HD double element_weight(ElementLoss k, long long per_sample, long long last) {
  if (per_sample == 0) return 0.0;
  return (k == ElementLoss::kl_divergence ? double(last) : 1.0) / double(per_sample);
}

// Keras's sample weights over a loss's values: weights[value / per_weight], one weight per sample (a sample of [T, C]
// predictions is T rows of C) or one per value (a mask's weights, ops::mask_weights), float32 or float64 (one pointer
// set); 1 without weights. Times `scale`: a loss that means its rows over the sample (1 / rows per sample).
struct RowWeights {
  const float* f = nullptr;
  const double* d = nullptr;
  long long per_weight = 1;
  double scale = 1.0;
  SYSTOLIC_LOSS_HD double operator()(long long value) const {
    const long long s = value / per_weight;
    return scale * (d ? d[s] : (f ? double(f[s]) : 1.0));
  }
};

// The weights `w` of a loss over `count` values (rows, or elements): one per sample or one per value (ops.h), on
// the host or the device the backend computes on; undefined weights weigh 1; each times `scale`.
inline RowWeights row_weights(const Tensor& w, long long count, double scale = 1.0) {
  if (!w.defined() || w.numel() == 0) return {.scale = scale};
  return {.f = w.dtype() == DType::float32 ? w.data<float>() : nullptr,
          .d = w.dtype() == DType::float64 ? w.data<double>() : nullptr,
          .per_weight = count / w.numel(),
          .scale = scale};
}

// A sample's share of the rows of predictions [N, ..., C] that a loss means over the sample: 1 / (rows per sample)
// (1 for predictions [C] or without rows).
inline double per_sample_mean(const Tensor& pred) {
  const long long rows = pred.rank() >= 2 && pred.dim(-1) ? pred.numel() / pred.dim(-1) : 0;
  return rows ? double(pred.dim(0)) / double(rows) : 1.0;
}

// softplus as TensorFlow computes it: log(1 + exp(-|x|)) + max(x, 0).
template <class M, class V>
SYSTOLIC_LOSS_HD V softplus(const V& x) {
  return M::log1p(M::exp(-M::abs(x))) + M::max(x, 0.0);
}

// Binary crossentropy of probabilities q (clipped to [eps, 1 - eps]) and its derivative w.r.t. q.
template <class M, class V>
SYSTOLIC_LOSS_HD ValueGrad<V> bce_of_probabilities(const V& q, const V& t, double eps) {
  V c = M::clip(q, eps, 1.0 - eps);
  V value = -(t * M::log(c) + (1.0 - t) * M::log(1.0 - c));
  V grad = M::where(q >= eps && q <= 1.0 - eps, (1.0 - t) / (1.0 - c) - t / c, M::like(0.0, q));
  return {value, grad};
}
// From logits z (TensorFlow's sigmoid_cross_entropy_with_logits), and its derivative w.r.t. z.
template <class M, class V>
SYSTOLIC_LOSS_HD ValueGrad<V> bce_of_logits(const V& z, const V& t) {
  return {M::max(z, 0.0) - z * t + M::log1p(M::exp(-M::abs(z))), M::sigmoid(z) - t};
}

// Keras's crossentropy from probabilities p (ops::crossentropy_from_probabilities; keras/src/backend/tensorflow/
// nn.py), an element of a row at a time, given the row's statistic s: the sum of ce_statistic_term over the row.
// - Categorical targets y: s = the row's sum of p and q = p / s. The element's loss is -y log clip(q, eps, 1 - eps)
//   and `grad` its derivative w.r.t. q, g; the gradient w.r.t. p_k is (g_k - sum_j g_j q_j) / s.
// - A sparse label (y one-hot): Keras takes the log of the clipped probabilities as logits, so s = the row's sum of
//   clip(p, eps, 1 - eps), the row's loss is log s plus its elements' -y log clip(p), and `grad` is the derivative
//   w.r.t. p, 1/s - y/clip(p).
// A clipped element gets no gradient of its own.
template <class M, class V>
SYSTOLIC_LOSS_HD V ce_statistic_term(bool sparse, const V& p, double eps) {
  return sparse ? M::clip(p, eps, 1.0 - eps) : p;
}
template <class M, class V>
SYSTOLIC_LOSS_HD ValueGrad<V> ce_of_probabilities(bool sparse, const V& p, const V& y, const V& s,
                                                  double eps) {
  V q = sparse ? p : p / s;
  V c = M::clip(q, eps, 1.0 - eps);
  V g = sparse ? 1.0 / s - y / c : -y / c;
  return {-y * M::log(c), M::where(q >= eps && q <= 1.0 - eps, g, M::like(0.0, q))};
}
// The row's loss from the sum of its elements' values, and an element's gradient w.r.t. p from its `grad` and, for
// categorical targets, G = the row's sum of grad * q.
template <class M, class V>
SYSTOLIC_LOSS_HD V ce_row_loss(bool sparse, const V& values, const V& s) {
  return sparse ? values + M::log(s) : values;
}
template <class V>
SYSTOLIC_LOSS_HD V ce_gradient(bool sparse, const V& grad, const V& G, const V& s) {
  return sparse ? grad : (grad - G) / s;
}

// The element's loss and derivative for prediction x and target t (a hinge kind's t already converted, see
// hinge_targets). `logits`: x is a logit (the binary crossentropies computed from the pre-sigmoid values).
template <class M, class V>
SYSTOLIC_LOSS_HD ValueGrad<V> element(const ElementLossParams& p, const V& x, V t) {
  const double eps = p.epsilon;
  switch (p.kind) {
    case ElementLoss::squared_error: {
      V e = x - t;
      return {e * e, 2.0 * e};
    }
    case ElementLoss::absolute_error: {
      V e = x - t;
      return {M::abs(e), M::sign(e)};
    }
    case ElementLoss::absolute_percentage_error: {
      V e = x - t, d = M::max(M::abs(t), eps);
      return {100.0 * M::abs(e) / d, 100.0 * M::sign(e) / d};
    }
    case ElementLoss::squared_logarithmic_error: {
      V xp = M::max(x, eps) + 1.0;
      V a = M::log(xp) - M::log(M::max(t, eps) + 1.0);
      return {a * a, M::where(x >= eps, 2.0 * a / xp, M::like(0.0, a))};
    }
    case ElementLoss::huber: {
      V e = x - t, ae = M::abs(e);
      const double d = p.delta;
      return {M::where(ae <= d, 0.5 * e * e, d * ae - 0.5 * d * d), M::where(ae <= d, e, d * M::sign(e))};
    }
    case ElementLoss::log_cosh: {
      V e = x - t;
      // Keras subtracts ops.log(2.0), computed in float32 whatever the data's type: log 2 rounded to float32.
      return {e + softplus<M>(-2.0 * e) - 0.693147182464599609375, M::tanh(e)};
    }
    case ElementLoss::poisson:
      return {x - t * M::log(x + eps), 1.0 - t / (x + eps)};
    case ElementLoss::hinge:
    case ElementLoss::squared_hinge: {
      V m = 1.0 - t * x, h = M::max(m, 0.0);
      if (p.kind == ElementLoss::hinge) return {h, M::where(m >= 0.0, -t, M::like(0.0, t))};
      return {h * h, -2.0 * t * h};
    }
    case ElementLoss::kl_divergence: {
      V tc = M::clip(t, eps, 1.0), pc = M::clip(x, eps, 1.0);
      return {tc * M::log(tc / pc), M::where(x >= eps && x <= 1.0, -tc / pc, M::like(0.0, x))};
    }
    case ElementLoss::binary_crossentropy:
      t = t * (1.0 - p.label_smoothing) + 0.5 * p.label_smoothing;
      return p.from_logits ? bce_of_logits<M>(x, t) : bce_of_probabilities<M>(x, t, eps);
    case ElementLoss::binary_focal_crossentropy: {
      t = t * (1.0 - p.label_smoothing) + 0.5 * p.label_smoothing;
      V q = p.from_logits ? M::sigmoid(x) : x;
      ValueGrad<V> bce = p.from_logits ? bce_of_logits<M>(x, t) : bce_of_probabilities<M>(x, t, eps);
      V a = 1.0 - (t * q + (1.0 - t) * (1.0 - q));  // 1 - p_t
      V focal = M::pow(a, p.gamma);
      V dfocal = p.gamma * M::pow(a, p.gamma - 1.0) * (1.0 - 2.0 * t);  // d focal / d q
      if (p.from_logits) dfocal = dfocal * q * (1.0 - q);               // d focal / d z
      V w = p.class_balancing ? t * p.alpha + (1.0 - t) * (1.0 - p.alpha) : M::like(1.0, t);
      return {w * focal * bce.value, w * (dfocal * bce.value + focal * bce.grad)};
    }
    case ElementLoss::binary_accuracy: {
      V zero = M::like(0.0, x), one = M::like(1.0, x);
      return {M::where(M::eq(t, M::where(x > p.threshold, one, zero)), one, zero), zero};
    }
  }
  return {x, x};  // not reached
}

}  // namespace systolic::ops::loss
