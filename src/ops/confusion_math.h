// ops::confusion_counts's thresholds and predictions, and ops::f_score_counts's positive predictions, once for
// every backend: the CPU loops (ops/cpu/losses.cc) and the CUDA kernels (ops/cuda/losses.cu) call these, the XLA
// emitter (ops/xla/losses.cc) builds the same values.
#pragma once

#include <systolic/ops.h>

#include "ops/double_math.h"

namespace systolic::ops::confusion {

// Threshold t of p.thresholds, in double (each backend rounds it to the predictions' type): Keras's AUC's
// [0 - epsilon] + [(i + 1) / (T - 1) for i in range(T - 2)] + [1 + epsilon], epsilon = keras.backend.epsilon().
SYSTOLIC_MATH_HD double threshold(const ConfusionParams& p, std::int64_t t) {
  if (p.thresholds == 1) return p.threshold;
  if (t == 0) return 0.0 - 1e-7;
  if (t == p.thresholds - 1) return 1.0 + 1e-7;
  return double(t) * 1.0 / double(p.thresholds - 1);
}

// The prediction compared with the thresholds, in double (rounded to the predictions' type by the caller): the
// sigmoid of a logit, clipped to [0, 1] when p.clip.
SYSTOLIC_MATH_HD double prediction(const ConfusionParams& p, double x) {
  if (p.from_logits) x = DoubleMath::sigmoid(x);
  return p.clip ? DoubleMath::clip(x, 0.0, 1.0) : x;
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
