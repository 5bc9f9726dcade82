// The shared pieces of the .cu files: launch geometry and the one elementwise launcher, the element types and
// their compute type (loads and stores), the visitor from an Element to its element type, warp and row helpers.
// No .cu file defines its own copy of any of these.
//
// How CUDA code is laid out (cuda_backend.h): a family's .cu file reads kernel -> launcher (raw device pointers,
// sizes and a stream in, the launch status out) -> entry (the backend's op: unpacks the tensors the common entry
// point ops::<name> has checked, wraps each launch in SYSTOLIC_CUDA_CHECK). Error messages are the common
// checks', in src/ops/ops.cc.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "core/dtype_dispatch.h"
#include "ops/cuda/element.h"

namespace systolic {

// bfloat16 elements are __nv_bfloat16 in device code (core/dtype_dispatch.h's storage types).
template <>
inline constexpr DType dtype_v<__nv_bfloat16> = DType::bfloat16;

}  // namespace systolic

namespace systolic::ops::cuda {

constexpr int kThreads = 256;

// Blocks for n elements at kThreads per block, capped (kernels use grid-stride loops).
inline unsigned blocks_for(std::int64_t n, int per_thread = 1) {
  std::int64_t b = (n + std::int64_t(kThreads) * per_thread - 1) / (std::int64_t(kThreads) * per_thread);
  if (b < 1) b = 1;
  if (b > 65535 * 8) b = 65535 * 8;
  return static_cast<unsigned>(b);
}

// Grid-stride loop over [0, n) in a kernel launched by launch_elementwise (or any grid).
#define SYSTOLIC_GRID_STRIDE(i, n)                                                    \
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < (n); \
       i += std::int64_t(blockDim.x) * gridDim.x)

// The elementwise launcher: `kernel`, which takes `n` items with SYSTOLIC_GRID_STRIDE, on blocks_for(n) blocks of
// kThreads on `stream`, with `args` (converted to the kernel's parameters). Returns the launch's status (nothing
// is launched for n = 0).
template <class... Params, class... Args>
cudaError_t launch_elementwise(void (*kernel)(Params...), std::int64_t n, cudaStream_t stream,
                               Args&&... args) {
  if (n == 0) return cudaSuccess;
  kernel<<<blocks_for(n), kThreads, 0, stream>>>(std::forward<Args>(args)...);
  return cudaGetLastError();
}

// ---- element types

// A type as a value (core/dtype_dispatch.h's TypeTag): `using T = typename decltype(tag)::type;`.
template <class T>
using Tag = TypeTag<T>;

// The dtype of an Element (the two enums list the same types).
constexpr DType dtype_of(Element e) {
  switch (e) {
    case Element::float32:
      return DType::float32;
    case Element::bfloat16:
      return DType::bfloat16;
    case Element::float64:
      return DType::float64;
    case Element::int32:
      return DType::int32;
    case Element::uint8:
      return DType::uint8;
  }
  return DType::float32;
}

// Calls f(Tag<T>{}) with the element type T of e among the listed device types (float, __nv_bfloat16, double,
// std::int32_t, std::uint8_t), through visit_dtype; another element type is cudaErrorInvalidValue (the launchers'
// way of refusing, as their callers check each status).
template <class... Ts, class F>
cudaError_t visit_element(Element e, F&& f) {
  static_assert(sizeof...(Ts) > 0, "visit_element: list the element types the launcher takes");
  return visit_dtype<Ts...>(dtype_of(e), f, [](DType) { return cudaErrorInvalidValue; });
}

// The compute type of an element type: float for float32 and bfloat16, double for float64.
template <class T>
using acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

// Element i in its compute type, and a compute-type value stored as T (bfloat16 rounded to nearest).
template <class T>
__device__ __forceinline__ acc_t<T> load(const T* p, std::int64_t i) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __bfloat162float(p[i]);
  else
    return p[i];
}
template <class T>
__device__ __forceinline__ void store(T* p, std::int64_t i, acc_t<T> v) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    p[i] = __float2bfloat16(v);
  else
    p[i] = v;
}

// The same in double whatever T, for kernels that compute in double (losses, regularizers): a double stored is
// rounded once to T.
template <class T>
__device__ __forceinline__ double load_double(const T* p, std::int64_t i) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return double(__bfloat162float(p[i]));
  else
    return double(p[i]);
}
template <class T>
__device__ __forceinline__ void store_double(T* p, std::int64_t i, double v) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    p[i] = __double2bfloat16(v);
  else
    p[i] = static_cast<T>(v);
}

// float <-> storage type conversions of single values, for kernels of float32 and bfloat16 data.
template <class T>
__device__ __forceinline__ float to_float(T v) {
  return static_cast<float>(v);
}
template <>
__device__ __forceinline__ float to_float<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <class T>
__device__ __forceinline__ T from_float(float v) {
  return static_cast<T>(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16(v);
}

// ---- warps and rows

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ double warp_sum(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Row kernels: warp w of the grid takes rows w, w + warps, ...; all lanes of a warp share the row (so the
// warp stays converged for the shuffles), lane l takes columns l, l + 32, ...
#define SYSTOLIC_WARP_ROWS(r, rows)                                                                    \
  for (std::int64_t r = std::int64_t(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5); r < (rows); \
       r += std::int64_t(gridDim.x) * (blockDim.x >> 5))

// Blocks of kThreads for one warp per row.
inline unsigned blocks_for_rows(std::int64_t rows) {
  return blocks_for(rows * 32);
}

// Reductions that add to one address per block: a grid of at most this many blocks (grid-stride loops do the
// rest).
constexpr unsigned kMaxReductionBlocks = 1024;
inline unsigned reduction_blocks(std::int64_t threads_needed) {
  return std::min(blocks_for(threads_needed), kMaxReductionBlocks);
}

}  // namespace systolic::ops::cuda
