// The row losses' formulas (ops::row_loss, RowLoss in include/systolic/ops.h), once for every backend: Keras's losses
// whose value for a row (the last axis) needs the whole row. A kind's row value and gradient come from a few
// statistics of the row, each a reduction (a sum or a maximum) over the row of an element term that may read the
// statistics before it. The CPU loops (ops/cpu/losses.cc) and the CUDA kernels (ops/cuda/losses.cu) reduce the terms
// with loops and evaluate them with doubles (DoubleMath); the XLA emitter (ops/xla/losses.cc) reduces them with its
// reductions and evaluates them with its expressions, its statistics broadcast over the row. Keras 3.15's
// definitions (keras/src/losses/losses.py over the TensorFlow backend); the gradients are TensorFlow's of the same
// formulas: a maximum's (tf.maximum) goes to its first argument where it is >= the second, a minimum's where it is
// <=, a reduce_max's is split evenly among the row's tied maxima, a clip's passes where min <= x <= max.
#pragma once

#include <systolic/ops.h>

#include "ops/double_math.h"

#define SYSTOLIC_ROW_HD SYSTOLIC_MATH_HD

namespace systolic::ops::row_loss_math {

constexpr int kMaxStats = 4;

// How many statistics the kind reads.
SYSTOLIC_ROW_HD int stats(const RowLossParams& p) {
  return p.kind == RowLoss::categorical_focal_crossentropy && p.from_logits ? 4 : 3;
}
// Whether statistic i is the row's maximum of its terms (else their sum).
SYSTOLIC_ROW_HD bool is_max(const RowLossParams& p, int i) {
  if (p.kind == RowLoss::categorical_hinge) return i == 1;
  return p.kind == RowLoss::categorical_focal_crossentropy && p.from_logits && i == 0;
}

// The target the formulas read: the focal crossentropy's smoothed by label_smoothing over `classes`.
template <class M, class V>
SYSTOLIC_ROW_HD V target(const RowLossParams& p, const V& t, double classes) {
  if (p.kind != RowLoss::categorical_focal_crossentropy || p.label_smoothing == 0) return t;
  return t * (1.0 - p.label_smoothing) + p.label_smoothing / classes;
}

// Keras's L2 normalisation's factor min(rsqrt(s), 1/eps) of a sum of squares s, and whether rsqrt was taken.
template <class M, class V>
SYSTOLIC_ROW_HD V inverse_norm(const V& s, double eps) {
  return M::where(s >= eps * eps, 1.0 / M::sqrt(s), M::like(1.0 / eps, s));
}

// The focal crossentropy's element: o = the normalised prediction (x / sum, or softmax(x) from logits), its
// clipped value's -alpha (1 - o)^gamma t log o, and g = the derivative of that w.r.t. o.
template <class V>
struct FocalTerm {
  V o, value, g;
};
template <class M, class V>
SYSTOLIC_ROW_HD FocalTerm<V> focal(const RowLossParams& p, const V& x, const V& t, const V* st) {
  const double eps = p.epsilon;
  V o = p.from_logits ? M::exp(x - st[0]) / st[1] : x / st[0];
  V c = M::clip(o, eps, 1.0 - eps), a = 1.0 - c;
  V ce = -t * M::log(c), modulating = M::pow(a, p.gamma);
  V dc = p.alpha * (-p.gamma * M::pow(a, p.gamma - 1.0) * ce - modulating * t / c);
  return {o, p.alpha * modulating * ce, M::where(o >= eps && o <= 1.0 - eps, dc, M::like(0.0, o))};
}

// Statistic i's term for prediction x and target t (already target()'s), given statistics 0..i-1 in st.
//   cosine_similarity: sum t^2, sum x^2, sum t x.
//   categorical_hinge: pos = sum t x, neg = max (1 - t) x, the count of the row's terms at neg.
//   categorical_focal_crossentropy: the row's sum (from logits: its maximum m, then sum exp(x - m)), then
//   G = sum g o, then the row's loss (sum of the elements' values).
template <class M, class V>
SYSTOLIC_ROW_HD V term(const RowLossParams& p, int i, const V& x, const V& t, const V* st) {
  switch (p.kind) {
    case RowLoss::cosine_similarity:
      return i == 0 ? t * t : i == 1 ? x * x : t * x;
    case RowLoss::categorical_hinge: {
      if (i == 0) return t * x;
      V n = (1.0 - t) * x;
      return i == 1 ? n : M::where(M::eq(n, st[1]), M::like(1.0, n), M::like(0.0, n));
    }
    case RowLoss::categorical_focal_crossentropy: {
      const int normalised = p.from_logits ? 2 : 1;  // the statistics before G
      if (i < normalised) return p.from_logits && i == 1 ? M::exp(x - st[0]) : x;
      FocalTerm<V> f = focal<M>(p, x, t, st);
      return i == normalised ? f.g * f.o : f.value;
    }
  }
  return x;  // not reached
}

// The row's loss from its statistics.
template <class M, class V>
SYSTOLIC_ROW_HD V value(const RowLossParams& p, const V* st) {
  switch (p.kind) {
    case RowLoss::cosine_similarity:
      return -st[2] * inverse_norm<M>(st[0], p.epsilon) * inverse_norm<M>(st[1], p.epsilon);
    case RowLoss::categorical_hinge:
      return M::max(st[1] - st[0] + 1.0, 0.0);
    case RowLoss::categorical_focal_crossentropy:
      return st[stats(p) - 1];
  }
  return st[0];  // not reached
}

// The derivative of the row's loss w.r.t. prediction x (target t, already target()'s).
template <class M, class V>
SYSTOLIC_ROW_HD V gradient(const RowLossParams& p, const V& x, const V& t, const V* st) {
  switch (p.kind) {
    case RowLoss::cosine_similarity: {
      const double eps = p.epsilon;
      V it = inverse_norm<M>(st[0], eps), ip = inverse_norm<M>(st[1], eps);
      V dip = M::where(st[1] >= eps * eps, -x * ip * ip * ip, M::like(0.0, x));  // d ip / d x
      return -it * (t * ip + st[2] * dip);
    }
    case RowLoss::categorical_hinge: {
      V n = (1.0 - t) * x;
      V at_max = M::where(M::eq(n, st[1]), 1.0 / st[2], M::like(0.0, n));
      return M::where(st[1] - st[0] + 1.0 >= 0.0, at_max * (1.0 - t) - t, M::like(0.0, x));
    }
    case RowLoss::categorical_focal_crossentropy: {
      FocalTerm<V> f = focal<M>(p, x, t, st);
      // d/dx of the loss through o: (g - G) / sum for o = x / sum; o (g - G) for o = softmax(x).
      return p.from_logits ? f.o * (f.g - st[2]) : (f.g - st[1]) / st[0];
    }
  }
  return x;  // not reached
}

}  // namespace systolic::ops::row_loss_math
