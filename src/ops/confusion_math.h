// ops::confusion_counts's thresholds and predictions, and ops::f_score_counts's positive predictions, once for
// every backend: the CPU loops (ops/cpu/losses.cc) and the CUDA kernels (ops/cuda/losses.cu) call these, the XLA
// emitter (ops/xla/losses.cc) builds the same values.
#pragma once

#include <systolic/ops.h>

#include "ops/double_math.h"

namespace systolic::ops::confusion {

// Threshold t of p.thresholds, in double (each backend rounds it to the predictions' type): p.values[t] when
// given (read on the host only), else Keras's AUC's [0 - epsilon] + [(i + 1) / (T - 1) for i in range(T - 2)] +
// [1 + epsilon], epsilon = keras.backend.epsilon() (with p.exact_ends, 0 and 1 at the ends).
SYSTOLIC_MATH_HD double threshold(const ConfusionParams& p, std::int64_t t) {
  if (!p.values.empty()) return p.values[t];
  if (p.thresholds == 1) return p.threshold;
  const double eps = p.exact_ends ? 0.0 : 1e-7;
  if (t == 0) return 0.0 - eps;
  if (t == p.thresholds - 1) return 1.0 + eps;
  return double(t) * 1.0 / double(p.thresholds - 1);
}

// The prediction compared with the thresholds, in double (rounded to the predictions' type by the caller): the
// sigmoid of a logit, clipped to [0, 1] when p.clip.
SYSTOLIC_MATH_HD double prediction(const ConfusionParams& p, double x) {
  if (p.from_logits) x = DoubleMath::sigmoid(x);
  return p.clip ? DoubleMath::clip(x, 0.0, 1.0) : x;
}

// Keras's _filter_top_k: -1e10 for a prediction outside its row's top k.
constexpr double kOutsideTopK = -1e10;
// Whether x, at column c of a row, is among the row's top k (tf.math.top_k: the largest values, ties to the lower
// index): fewer than k of the row's values are greater, or equal at a lower index. row(j) reads column j.
template <class T, class Row>
SYSTOLIC_MATH_HD bool in_top_k(const Row& row, std::int64_t C, std::int64_t c, T x, std::int64_t k) {
  std::int64_t before = 0;
  for (std::int64_t j = 0; j < C && before < k; ++j) {
    const T v = row(j);
    before += (v > x || (v == x && j < c)) ? 1 : 0;
  }
  return before < k;
}

// class_confusion's class of a value: trunc(v) when 0 <= v < classes (Keras's IoU bounds mask, then its cast),
// else -1 (the item counts nowhere).
SYSTOLIC_MATH_HD std::int64_t value_class(double v, std::int64_t classes) {
  return v >= 0.0 && v < double(classes) ? static_cast<std::int64_t>(v) : -1;
}

// Where class_confusion counts an item of label class t and predicted class q: t * classes + q, or -1 when either
// is outside [0, classes) or t is the ignored class.
SYSTOLIC_MATH_HD std::int64_t confusion_cell(const ClassConfusionParams& p, std::int64_t t, std::int64_t q) {
  const bool valid =
      t >= 0 && t < p.classes && q >= 0 && q < p.classes && !(p.has_ignore_class && t == p.ignore_class);
  return valid ? t * p.classes + q : -1;
}

// Keras's FBetaScore with threshold None: a maximum of the row counts as positive only when |p| > this (as
// float32: Keras compares ops.abs(y_pred) > 1e-9 in the metric's float32).
constexpr double kFScoreZero = 1e-9;

// Whether prediction x (of a row whose maximum is row_max, read only with p.argmax) is positive, in the
// predictions' compute type T (float for float32 and bfloat16, as Keras compares in float32; double for float64).
template <class T>
SYSTOLIC_MATH_HD bool f_score_positive(const FScoreParams& p, T x, T row_max) {
  if (p.argmax) return x >= row_max && (x < T(0) ? -x : x) > T(kFScoreZero);
  return x > T(p.threshold);
}

}  // namespace systolic::ops::confusion
