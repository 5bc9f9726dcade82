// Arithmetic rounded after every operation, as the CPU loops compute it: nvcc contracts a * b + c into one
// fused multiply-add (rounded once), which the host compiler does not do on x86-64, and flags such as
// --use_fast_math would make division and square root approximate. Kernels whose result must equal the CPU's
// bit for bit (scale_shift, moving_average, dropout's scaling, optimizer updates) spell their formulas with
// these.
#pragma once

#include <cuda_runtime.h>

namespace systolic::ops::cuda {

__device__ __forceinline__ float add_rn(float a, float b) {
  return __fadd_rn(a, b);
}
__device__ __forceinline__ float sub_rn(float a, float b) {
  return __fsub_rn(a, b);
}
__device__ __forceinline__ float mul_rn(float a, float b) {
  return __fmul_rn(a, b);
}
__device__ __forceinline__ float div_rn(float a, float b) {
  return __fdiv_rn(a, b);
}
__device__ __forceinline__ float sqrt_rn(float a) {
  return __fsqrt_rn(a);
}
__device__ __forceinline__ double add_rn(double a, double b) {
  return __dadd_rn(a, b);
}
__device__ __forceinline__ double sub_rn(double a, double b) {
  return __dsub_rn(a, b);
}
__device__ __forceinline__ double mul_rn(double a, double b) {
  return __dmul_rn(a, b);
}

}  // namespace systolic::ops::cuda
