// The CPU backend: oneDNN primitives for float32 convolution, pooling, batch norm, dense and the activations it
// has; plain C++ loops (OpenMP-parallel) for float64 and for the ops oneDNN has no primitive for. Each op is
// defined, with the dtypes it takes, in the file of its family, named as the CUDA backend's (cuda_backend.h lists
// the families; tests/test_source_layout.cc checks it): conv.cc, pool.cc, dense.cc, batch_norm.cc,
// activations.cc, elementwise.cc, augment.cc, losses.cc, optimizers.cc, norm_merge.cc, regularizers.cc,
// resize.cc. onednn*.cc hold the oneDNN primitives they call; backend.cc builds the table.
#pragma once

#include <omp.h>

#include <cstdint>
#include <type_traits>
#include <vector>

#include "core/dtype_dispatch.h"
#include "ops/backend.h"

namespace systolic::ops::cpu {

SYSTOLIC_DECLARE_BACKEND_OPS()

const Backend& backend();

// Elementwise loops over fewer values than this run on one thread: forking the team costs more than it saves
// (an RNN's per-step ops are a few thousand values each).
inline constexpr std::int64_t kParallelMin = 32768;
// Calls f(begin, end) over [0, n): one contiguous range per OpenMP thread when `work` (about the values the loop
// touches) exceeds kParallelMin, else f(0, n) on the calling thread without entering OpenMP at all (a parallel
// region whose `if` clause is false still builds a team of one: an allocation and a barrier, about 0.3 µs, which
// a batch-1 predict paid on every small loop).
template <class F>
void parallel_ranges(std::int64_t n, std::int64_t work, F&& f) {
  if (work <= kParallelMin) {
    f(std::int64_t(0), n);
    return;
  }
#pragma omp parallel
  {
    const std::int64_t k = omp_get_thread_num(), team = omp_get_num_threads();
    f(n * k / team, n * (k + 1) / team);
  }
}
// The sum of f(begin, end) (a double, or a type with + whose value-initialised Sum{} is zero) over parallel_ranges'
// ranges, added in range order: for a given thread count the same bits on every run (OpenMP's reduction clause
// leaves the order open), and on one thread f(0, n).
template <class F>
auto parallel_sum(std::int64_t n, std::int64_t work, F&& f) {
  using Sum = decltype(f(std::int64_t(0), n));
  if (work <= kParallelMin) return f(std::int64_t(0), n);
  std::vector<Sum> parts(static_cast<std::size_t>(omp_get_max_threads()), Sum{});
#pragma omp parallel
  {
    const std::int64_t k = omp_get_thread_num(), team = omp_get_num_threads();
    parts[static_cast<std::size_t>(k)] = f(n * k / team, n * (k + 1) / team);
  }
  Sum total{};
  for (const Sum& s : parts) total = total + s;
  return total;
}
// oneDNN costs one to three microseconds a call before it computes anything (memory objects, the argument map,
// its dispatch); float32 dense products of fewer multiply-adds than this, and activations of fewer values, run
// forward (their backward stays with oneDNN, under guarded()'s one thread) in the backend's own loops instead,
// which cost nothing to start (a batch-1 Dense(2) head and its softmax after an LSTM(64) step: 3.7 µs of the 11 a
// Model::predict took on the AVX2 VM, through oneDNN).
inline constexpr std::int64_t kOneDnnMinWork = 4096;

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
