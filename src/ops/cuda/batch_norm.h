// Launchers of the batch normalisation kernels (batch_norm.cu). x, y, dy, dx are [R, C] row-major (NHWC with
// R = N*H*W, or any tensor with C last) in float32 or bfloat16; gamma, beta, mean, var and the parameter
// gradients are float32 [C]. Statistics are reduced deterministically (reduce.cuh: fixed partitions, no
// atomics) from `workspace`, which holds batch_norm_workspace_bytes(R, C) bytes of device scratch. Formulas:
// ops.h and the CPU reference (src/ops/cpu/loops_dense_norm.cc). This header includes nothing of systolic's.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "ops/cuda/dnn_kernels.h"

namespace systolic::ops::cuda::dnn {

std::size_t batch_norm_workspace_bytes(std::int64_t R, std::int64_t C);

// mean = sum x / R; var = sum (x - mean)^2 / R (two passes: no cancellation for inputs far from zero);
// y = (x - mean) * scale + beta with scale = gamma / sqrt(var + eps).
cudaError_t launch_batch_norm_forward_training(const void* x, Element type, const float* gamma,
                                               const float* beta, void* y, float* mean, float* var,
                                               std::int64_t R, std::int64_t C, float eps, void* workspace,
                                               cudaStream_t stream);

// y = (x - mean) * scale + beta with the given mean and var.
cudaError_t launch_batch_norm_forward_inference(const void* x, Element type, const float* gamma,
                                                const float* beta, const float* mean, const float* var,
                                                void* y, std::int64_t R, std::int64_t C, float eps,
                                                cudaStream_t stream);

// With inv_std = 1/sqrt(var + eps), xhat = (x - mean) * inv_std, sums over the R rows:
// dgamma += sum dy*xhat; dbeta += sum dy; dx = gamma*inv_std*(dy - sum dy/R - xhat * sum(dy*xhat)/R).
// dx, dgamma, dbeta may be null (skipped).
cudaError_t launch_batch_norm_backward(const void* x, const void* dy, Element type, const float* gamma,
                                       const float* mean, const float* var, void* dx, float* dgamma,
                                       float* dbeta, std::int64_t R, std::int64_t C, double eps,
                                       void* workspace, cudaStream_t stream);

}  // namespace systolic::ops::cuda::dnn
