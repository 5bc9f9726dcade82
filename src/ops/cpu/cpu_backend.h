// The CPU backend: oneDNN primitives for float32 convolution, pooling, batch norm, dense and the activations it
// has; plain C++ loops (OpenMP-parallel) for float64 and for the ops oneDNN has no primitive for. Each op is
// defined, with the dtypes it takes, in the file of its family, named as the CUDA backend's (cuda_backend.h lists
// the families; tests/test_source_layout.cc checks it): conv.cc, pool.cc, dense.cc, batch_norm.cc,
// activations.cc, elementwise.cc, augment.cc, losses.cc, optimizers.cc, norm_merge.cc, regularizers.cc,
// resize.cc. onednn*.cc hold the oneDNN primitives they call; backend.cc builds the table.
#pragma once

#include <type_traits>

#include "core/dtype_dispatch.h"
#include "ops/backend.h"

namespace systolic::ops::cpu {

SYSTOLIC_DECLARE_BACKEND_OPS()

const Backend& backend();

// Elementwise loops over fewer values than this run on one thread: forking the team costs more than it saves
// (an RNN's per-step ops are a few thousand values each).
inline constexpr std::int64_t kParallelMin = 32768;

// Float types of the CPU's loops.
inline constexpr DTypes kFloats{DType::float32, DType::float64};
// ... and bfloat16, for the ops with oneDNN's bfloat16 kernels (widened where the CPU lacks them:
// bf16_emulation.h).
inline constexpr DTypes kFloatsAndBf16{DType::float32, DType::float64, DType::bfloat16};

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

}  // namespace systolic::ops::cpu
