// Launchers of the optimizer kernels (optimizers.cu): one fused, elementwise kernel per update over the flat
// float32 parameter buffer; the checking entry points are in optimizers_ops.cc. The formulas are the CPU
// loops', rounded the same way (rounding.cuh), so a GPU step equals the CPU's. No systolic header here: nvcc
// compiles it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace systolic::ops::cuda {

// t = *iterations + 1 (iterations read on the device; null: 0); lr_t = lr sqrt(1 - beta_2^t) / (1 - beta_1^t)
// in double, then m += (g - m)(1 - beta_1); v += (g^2 - v)(1 - beta_2); w -= lr_t m / (sqrt(v) + epsilon) in
// float.
cudaError_t launch_adam_update(float* w, const float* g, float* m, float* v, std::int64_t n, double lr,
                               double beta_1, double beta_2, double epsilon, const double* iterations,
                               cudaStream_t stream);

// velocity null (momentum 0): w -= lr g. Else velocity = momentum velocity - lr g; w += velocity, or with
// nesterov w += momentum velocity - lr g.
cudaError_t launch_sgd_update(float* w, const float* g, float* velocity, std::int64_t n, double lr,
                              double momentum, bool nesterov, cudaStream_t stream);

// ms = rho ms + (1 - rho) g^2; step = lr g / (sqrt(ms) + epsilon); mom null: w -= step; else mom = momentum
// mom + step, w -= mom.
cudaError_t launch_rmsprop_update(float* w, const float* g, float* ms, float* mom, std::int64_t n, double lr,
                                  double rho, double momentum, double epsilon, cudaStream_t stream);

}  // namespace systolic::ops::cuda
