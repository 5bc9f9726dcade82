// The CPU backend: oneDNN primitives for float32 convolution, pooling, batch norm, dense and the activations it
// has; plain C++ loops (OpenMP-parallel) for float64 and for the ops oneDNN has no primitive for. Each op is
// defined in the file of its family (conv_pool.cc, dense_norm.cc, activations.cc, elementwise.cc, losses.cc,
// optimizers.cc) with the dtypes it takes; backend.cc builds the table.
#pragma once

#include <type_traits>

#include "ops/backend.h"

namespace systolic::ops::cpu {

SYSTOLIC_DECLARE_BACKEND_OPS()

const Backend& backend();

// Float types of the CPU's loops.
inline constexpr DTypes kFloats{DType::float32, DType::float64};
// ... and bfloat16, for the ops with oneDNN's bfloat16 kernels (widened where the CPU lacks them:
// bf16_emulation.h).
inline constexpr DTypes kFloatsAndBf16{DType::float32, DType::float64, DType::bfloat16};

// Calls f(float{}) or f(double{}) for a float32 or float64 tensor; other dtypes never get here (the table says
// which dtypes each op takes).
template <class F>
void by_float(DType t, F&& f) {
  if (t == DType::float64)
    f(double{});
  else
    f(float{});
}

// The loops' storage types and their arithmetic: bfloat16 values are computed with in float32.
template <class T>
using arithmetic_t = std::conditional_t<std::is_same_v<T, bfloat16>, float, T>;
inline float widen(bfloat16 v) {
  return static_cast<float>(v);
}
inline float widen(float v) {
  return v;
}
inline double widen(double v) {
  return v;
}

// A result computed in double, stored as T (bfloat16: rounded to float32, then to bfloat16; the double rounding
// is within bfloat16's tolerances).
template <class T>
T narrow(double v) {
  if constexpr (std::is_same_v<T, bfloat16>)
    return bfloat16(static_cast<float>(v));
  else
    return static_cast<T>(v);
}

// Calls f(float{}), f(double{}) or f(bfloat16{}) for a tensor of that dtype (loops that take bfloat16 storage).
template <class F>
void by_storage(DType t, F&& f) {
  if (t == DType::float64)
    f(double{});
  else if (t == DType::bfloat16)
    f(bfloat16{});
  else
    f(float{});
}

}  // namespace systolic::ops::cpu
