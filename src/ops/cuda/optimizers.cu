// Optimizer updates on CUDA, each one fused elementwise kernel over the flat float32 parameter buffer (kernel ->
// launcher -> entry; the arguments were checked at ops::<name>). The formulas are the CPU loops', rounded the same
// way (rounding.cuh), so a GPU step equals the CPU's. Each reads the learning rate (and Adam the iteration count)
// on the device, so a captured CUDA graph replays with the rate and step of the moment, which the optimizer writes
// there between steps.
#include <cuda_runtime.h>

#include <cstdint>

#include "ops/cuda/context.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/kernels.cuh"
#include "ops/cuda/rounding.cuh"

namespace systolic::ops::cuda {

namespace {

__global__ void adam_kernel(float* w, const float* g, float* m, float* v, std::int64_t n, const double* lr,
                            double beta_1, double beta_2, float b1, float b2, float eps,
                            const double* iterations) {
  // The step size, once per block: two pow() per thread would cost more than the update itself.
  __shared__ float lr_shared;
  if (threadIdx.x == 0) {
    const double t = (iterations ? *iterations : 0.0) + 1.0;
    lr_shared = static_cast<float>(*lr * sqrt(1.0 - pow(beta_2, t)) / (1.0 - pow(beta_1, t)));
  }
  __syncthreads();
  const float lr_t = lr_shared;
  SYSTOLIC_GRID_STRIDE(i, n) {
    const float gi = g[i];
    const float mi = add_rn(m[i], mul_rn(sub_rn(gi, m[i]), b1));
    const float vi = add_rn(v[i], mul_rn(sub_rn(mul_rn(gi, gi), v[i]), b2));
    m[i] = mi;
    v[i] = vi;
    w[i] = sub_rn(w[i], div_rn(mul_rn(lr_t, mi), add_rn(sqrt_rn(vi), eps)));
  }
}

__global__ void sgd_kernel(float* w, const float* g, float* velocity, std::int64_t n, const double* rate,
                           float momentum, bool nesterov) {
  const float lr = static_cast<float>(*rate);
  SYSTOLIC_GRID_STRIDE(i, n) {
    const float gi = g[i];
    if (!velocity) {
      w[i] = sub_rn(w[i], mul_rn(lr, gi));
      continue;
    }
    const float vi = sub_rn(mul_rn(momentum, velocity[i]), mul_rn(lr, gi));
    velocity[i] = vi;
    w[i] = add_rn(w[i], nesterov ? sub_rn(mul_rn(momentum, vi), mul_rn(lr, gi)) : vi);
  }
}

__global__ void decay_kernel(float* w, std::int64_t n, const double* rate, float decay) {
  const float lr = static_cast<float>(*rate);
  SYSTOLIC_GRID_STRIDE(i, n) w[i] = sub_rn(w[i], mul_rn(mul_rn(w[i], decay), lr));
}

__global__ void rmsprop_kernel(float* w, const float* g, float* ms, float* mom, std::int64_t n,
                               const double* rate, float rho, float momentum, float eps) {
  const float lr = static_cast<float>(*rate);
  const float rest = sub_rn(1.0f, rho);
  SYSTOLIC_GRID_STRIDE(i, n) {
    const float gi = g[i];
    const float si = add_rn(mul_rn(rho, ms[i]), mul_rn(mul_rn(rest, gi), gi));
    ms[i] = si;
    const float step = div_rn(mul_rn(lr, gi), sqrt_rn(add_rn(si, eps)));
    if (mom) {
      const float mi = add_rn(mul_rn(momentum, mom[i]), step);
      mom[i] = mi;
      w[i] = sub_rn(w[i], mi);
    } else {
      w[i] = sub_rn(w[i], step);
    }
  }
}

cudaError_t launch_adam_update(float* w, const float* g, float* m, float* v, std::int64_t n, const double* lr,
                               double beta_1, double beta_2, double epsilon, const double* iterations,
                               cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return launch_elementwise(adam_kernel, n, stream, w, g, m, v, n, lr, beta_1, beta_2,
                            static_cast<float>(1.0 - beta_1), static_cast<float>(1.0 - beta_2),
                            static_cast<float>(epsilon), iterations);
}

cudaError_t launch_sgd_update(float* w, const float* g, float* velocity, std::int64_t n, const double* lr,
                              double momentum, bool nesterov, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return launch_elementwise(sgd_kernel, n, stream, w, g, velocity, n, lr, static_cast<float>(momentum),
                            nesterov);
}

cudaError_t launch_decay_weights(float* w, std::int64_t n, const double* lr, double decay,
                                 cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return launch_elementwise(decay_kernel, n, stream, w, n, lr, static_cast<float>(decay));
}

cudaError_t launch_rmsprop_update(float* w, const float* g, float* ms, float* mom, std::int64_t n,
                                  const double* lr, double rho, double momentum, double epsilon,
                                  cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return launch_elementwise(rmsprop_kernel, n, stream, w, g, ms, mom, n, lr, static_cast<float>(rho),
                            static_cast<float>(momentum), static_cast<float>(epsilon));
}

}  // namespace

const DTypes adam_update_dtypes{DType::float32};
void adam_update(Tensor& w, const Tensor& g, Tensor& m, Tensor& v, const AdamStep& s, const Tensor& lr,
                 const Tensor& iterations) {
  Context& c = context(w);
  SYSTOLIC_CUDA_CHECK(launch_adam_update(
      w.data<float>(), g.data<float>(), m.data<float>(), v.data<float>(), w.numel(), lr.data<double>(),
      s.beta_1, s.beta_2, s.epsilon, iterations.defined() ? iterations.data<double>() : nullptr, c.stream));
}

const DTypes sgd_update_dtypes{DType::float32};
void sgd_update(Tensor& w, const Tensor& g, Tensor& velocity, const Tensor& lr, double momentum,
                bool nesterov) {
  Context& c = context(w);
  SYSTOLIC_CUDA_CHECK(launch_sgd_update(w.data<float>(), g.data<float>(),
                                        momentum != 0.0 ? velocity.data<float>() : nullptr, w.numel(),
                                        lr.data<double>(), momentum, nesterov, c.stream));
}

const DTypes decay_weights_dtypes{DType::float32};
void decay_weights(Tensor& w, const Tensor& lr, double decay) {
  Context& c = context(w);
  SYSTOLIC_CUDA_CHECK(launch_decay_weights(w.data<float>(), w.numel(), lr.data<double>(), decay, c.stream));
}

const DTypes rmsprop_update_dtypes{DType::float32};
void rmsprop_update(Tensor& w, const Tensor& g, Tensor& ms, Tensor& mom, const Tensor& lr, double rho,
                    double momentum, double epsilon) {
  Context& c = context(w);
  SYSTOLIC_CUDA_CHECK(launch_rmsprop_update(w.data<float>(), g.data<float>(), ms.data<float>(),
                                            momentum > 0 ? mom.data<float>() : nullptr, w.numel(),
                                            lr.data<double>(), rho, momentum, epsilon, c.stream));
}

}  // namespace systolic::ops::cuda
