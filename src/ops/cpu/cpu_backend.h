// The CPU backend: oneDNN primitives for float32 convolution, pooling, batch norm, dense and the activations it
// has; plain C++ loops (OpenMP-parallel) for float64 and for the ops oneDNN has no primitive for. Each op is
// defined in the file of its family (conv_pool.cc, dense_norm.cc, activations.cc, elementwise.cc, losses.cc,
// optimizers.cc) with the dtypes it takes; backend.cc builds the table.
#pragma once

#include "ops/backend.h"

namespace systolic::ops::cpu {

SYSTOLIC_DECLARE_BACKEND_OPS()

const Backend& backend();

// Float types of the CPU's loops.
inline constexpr DTypes kFloats{DType::float32, DType::float64};

// Calls f(float{}) or f(double{}) for a float32 or float64 tensor; other dtypes never get here (the table says
// which dtypes each op takes).
template <class F>
void by_float(DType t, F&& f) {
  if (t == DType::float64)
    f(double{});
  else
    f(float{});
}

}  // namespace systolic::ops::cpu
