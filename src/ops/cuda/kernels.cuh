// Shared pieces of the .cu files: launch geometry, element types (float, bfloat16), grid-stride loops.
//
// How CUDA code is laid out (cuda_backend.h): a family's .cu file reads kernel -> launcher (raw device pointers,
// sizes and a stream in, the launch status out) -> entry (the backend's op: unpacks the tensors the common entry
// point ops::<name> has checked, wraps each launch in SYSTOLIC_CUDA_CHECK). Error messages are the common
// checks', in src/ops/ops.cc.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "ops/cuda/element.h"

namespace systolic::ops::cuda {

constexpr int kThreads = 256;

// Blocks for n elements at kThreads per block, capped (kernels use grid-stride loops).
inline unsigned blocks_for(std::int64_t n, int per_thread = 1) {
  std::int64_t b = (n + std::int64_t(kThreads) * per_thread - 1) / (std::int64_t(kThreads) * per_thread);
  if (b < 1) b = 1;
  if (b > 65535 * 8) b = 65535 * 8;
  return static_cast<unsigned>(b);
}

// float <-> storage type conversions usable in templated kernels.
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

// Calls f with a value of the storage type of a float32 or bfloat16 element (float, __nv_bfloat16); other
// element types are an invalid value (the host side admits only these two where it is used).
template <class F>
cudaError_t with_float_type(Element e, F&& f) {
  if (e == Element::float32) return f(float{});
  if (e == Element::bfloat16) return f(__nv_bfloat16{});
  return cudaErrorInvalidValue;
}

#define SYSTOLIC_GRID_STRIDE(i, n)                                                    \
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < (n); \
       i += std::int64_t(blockDim.x) * gridDim.x)

}  // namespace systolic::ops::cuda
