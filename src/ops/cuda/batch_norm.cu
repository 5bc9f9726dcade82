// Batch normalisation on CUDA over [R, C] (C contiguous; NHWC has R = N*H*W), kernel -> launcher -> entry (the
// arguments were checked at ops::<name>, src/ops/ops.cc). x, y, dy, dx are float32 or bfloat16; gamma, beta, mean,
// var and the parameter gradients float32. Statistics: two deterministic column reductions (reduce.cuh: fixed
// partitions, no atomics) for the mean, then for the centred squares, so inputs far from zero do not cancel;
// backward: one reduction of (dy, dy*(x - mean)), then an elementwise pass for dx. Partial sums live in the
// device's workspace (Context::workspace).
#include "ops/cuda/context.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/kernels.cuh"
#include "ops/cuda/reduce.cuh"

namespace systolic::ops::cuda::dnn {

namespace {

// Workspace: per-channel coefficients (3 C floats) first, then the reduction's partial sums.
std::size_t coefficient_bytes(std::int64_t C) {
  return (static_cast<std::size_t>(3 * C) * sizeof(float) + 255) / 256 * 256;
}

template <class T>
struct SumX {
  const T* x;
  std::int64_t C;
  __device__ void init(std::int64_t) {}
  __device__ void operator()(std::int64_t r, std::int64_t c, float* acc) const {
    acc[0] += to_float(x[r * C + c]);
  }
};

struct WriteMean {
  float* mean;
  std::int64_t R;
  __device__ void operator()(std::int64_t c, const double* s) const {
    mean[c] = static_cast<float>(s[0] / double(R));
  }
};

template <class T>
struct CentredSquares {
  const T* x;
  const float* mean;
  std::int64_t C;
  float m;
  __device__ void init(std::int64_t c) { m = mean[c]; }
  __device__ void operator()(std::int64_t r, std::int64_t c, float* acc) const {
    float d = to_float(x[r * C + c]) - m;
    acc[0] += d * d;
  }
};

// var, and scale = gamma / sqrt(var + eps) into coef[c].
struct WriteVar {
  float* var;
  const float* gamma;
  float* coef;
  std::int64_t R;
  float eps;
  __device__ void operator()(std::int64_t c, const double* s) const {
    float v = static_cast<float>(s[0] / double(R));
    var[c] = v;
    coef[c] = gamma[c] / sqrtf(v + eps);
  }
};

// y = (x - mean) * scale + beta: subtracting first keeps inputs with a large mean exact (x - mean is exact
// when x and mean are within a factor of two), where x * scale + (beta - mean * scale) would round two large
// terms.
template <class T>
__global__ void normalize_kernel(const T* __restrict__ x, T* __restrict__ y, const float* __restrict__ mean,
                                 const float* __restrict__ scale, const float* __restrict__ beta,
                                 std::int64_t R, std::int64_t C) {
  SYSTOLIC_GRID_STRIDE(i, R * C) {
    std::int64_t c = i % C;
    y[i] = from_float<T>((to_float(x[i]) - mean[c]) * scale[c] + beta[c]);
  }
}

template <class T>
__global__ void normalize_inference_kernel(const T* __restrict__ x, T* __restrict__ y,
                                           const float* __restrict__ gamma, const float* __restrict__ beta,
                                           const float* __restrict__ mean, const float* __restrict__ var,
                                           std::int64_t R, std::int64_t C, float eps) {
  SYSTOLIC_GRID_STRIDE(i, R * C) {
    std::int64_t c = i % C;
    float scale = gamma[c] / sqrtf(var[c] + eps);
    y[i] = from_float<T>((to_float(x[i]) - mean[c]) * scale + beta[c]);
  }
}

// acc[0] += dy, acc[1] += dy * (x - mean).
template <class T>
struct BackwardSums {
  const T* x;
  const T* dy;
  const float* mean;
  std::int64_t C;
  float m;
  __device__ void init(std::int64_t c) { m = mean[c]; }
  __device__ void operator()(std::int64_t r, std::int64_t c, float* acc) const {
    float g = to_float(dy[r * C + c]);
    acc[0] += g;
    acc[1] += g * (to_float(x[r * C + c]) - m);
  }
};

// Parameter gradients (+=), and dx's coefficients: dx = a * (dy - b - (x - mean) * k) with a = gamma *
// inv_std, b = sum dy / R, k = inv_std * sum(dy * xhat) / R.
struct BackwardFinish {
  const float* gamma;
  const float* var;
  float* dgamma;
  float* dbeta;
  float* coef;
  std::int64_t R, C;
  double eps;
  __device__ void operator()(std::int64_t c, const double* s) const {
    double inv_std = 1.0 / sqrt(double(var[c]) + eps);
    double sum_dy = s[0], sum_dy_xhat = s[1] * inv_std;
    if (dgamma) dgamma[c] += static_cast<float>(sum_dy_xhat);
    if (dbeta) dbeta[c] += static_cast<float>(sum_dy);
    coef[c] = static_cast<float>(double(gamma[c]) * inv_std);
    coef[C + c] = static_cast<float>(sum_dy / double(R));
    coef[2 * C + c] = static_cast<float>(inv_std * sum_dy_xhat / double(R));
  }
};

template <class T>
__global__ void backward_data_kernel(const T* __restrict__ x, const T* __restrict__ dy, T* __restrict__ dx,
                                     const float* __restrict__ mean, const float* __restrict__ coef,
                                     std::int64_t R, std::int64_t C) {
  SYSTOLIC_GRID_STRIDE(i, R * C) {
    std::int64_t c = i % C;
    float d = to_float(dy[i]) - coef[C + c] - (to_float(x[i]) - mean[c]) * coef[2 * C + c];
    dx[i] = from_float<T>(coef[c] * d);
  }
}

std::size_t batch_norm_workspace_bytes(std::int64_t R, std::int64_t C) {
  return coefficient_bytes(C) + reduce::partials_floats(R, C, 2) * sizeof(float);
}

cudaError_t launch_batch_norm_forward_training(const void* x, Element type, const float* gamma,
                                               const float* beta, void* y, float* mean, float* var,
                                               std::int64_t R, std::int64_t C, float eps, void* workspace,
                                               cudaStream_t stream) {
  if (R <= 0 || C <= 0) return cudaSuccess;
  float* coef = static_cast<float*>(workspace);
  float* partial = reinterpret_cast<float*>(static_cast<char*>(workspace) + coefficient_bytes(C));
  return with_float_type(type, [&](auto tag) {
    using T = decltype(tag);
    const T* xp = static_cast<const T*>(x);
    cudaError_t e = reduce::column_sums<1>(SumX<T>{xp, C}, WriteMean{mean, R}, R, C, partial, stream);
    if (e != cudaSuccess) return e;
    e = reduce::column_sums<1>(CentredSquares<T>{xp, mean, C, 0.0f}, WriteVar{var, gamma, coef, R, eps}, R, C,
                               partial, stream);
    if (e != cudaSuccess) return e;
    normalize_kernel<T>
        <<<blocks_for(R * C), kThreads, 0, stream>>>(xp, static_cast<T*>(y), mean, coef, beta, R, C);
    return cudaGetLastError();
  });
}

cudaError_t launch_batch_norm_forward_inference(const void* x, Element type, const float* gamma,
                                                const float* beta, const float* mean, const float* var,
                                                void* y, std::int64_t R, std::int64_t C, float eps,
                                                cudaStream_t stream) {
  if (R <= 0 || C <= 0) return cudaSuccess;
  return with_float_type(type, [&](auto tag) {
    using T = decltype(tag);
    normalize_inference_kernel<T><<<blocks_for(R * C), kThreads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<T*>(y), gamma, beta, mean, var, R, C, eps);
    return cudaGetLastError();
  });
}

cudaError_t launch_batch_norm_backward(const void* x, const void* dy, Element type, const float* gamma,
                                       const float* mean, const float* var, void* dx, float* dgamma,
                                       float* dbeta, std::int64_t R, std::int64_t C, double eps,
                                       void* workspace, cudaStream_t stream) {
  if (R <= 0 || C <= 0) return cudaSuccess;
  float* coef = static_cast<float*>(workspace);
  float* partial = reinterpret_cast<float*>(static_cast<char*>(workspace) + coefficient_bytes(C));
  return with_float_type(type, [&](auto tag) {
    using T = decltype(tag);
    const T* xp = static_cast<const T*>(x);
    const T* dyp = static_cast<const T*>(dy);
    cudaError_t e = reduce::column_sums<2>(BackwardSums<T>{xp, dyp, mean, C, 0.0f},
                                           BackwardFinish{gamma, var, dgamma, dbeta, coef, R, C, eps}, R, C,
                                           partial, stream);
    if (e != cudaSuccess || !dx) return e;
    backward_data_kernel<T>
        <<<blocks_for(R * C), kThreads, 0, stream>>>(xp, dyp, static_cast<T*>(dx), mean, coef, R, C);
    return cudaGetLastError();
  });
}

}  // namespace

}  // namespace systolic::ops::cuda::dnn

namespace systolic::ops::cuda {

namespace {
constexpr DTypes kFloat32Or16{DType::float32, DType::bfloat16};
struct Rows {
  std::int64_t R, C;
};
Rows rows_of(const Tensor& x) {
  return {x.dim(-1) ? x.numel() / x.dim(-1) : 0, x.dim(-1)};
}
}  // namespace

const DTypes batch_norm_forward_training_dtypes = kFloat32Or16;
void batch_norm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                                 Tensor& mean, Tensor& var, double eps) {
  if (x.numel() == 0) return;
  Rows s = rows_of(x);
  Context& c = context(x);
  void* workspace = c.workspace(dnn::batch_norm_workspace_bytes(s.R, s.C));
  SYSTOLIC_CUDA_CHECK(dnn::launch_batch_norm_forward_training(
      x.raw_data(), element_of(x.dtype()), gamma.data<float>(), beta.data<float>(), y.raw_data(),
      mean.data<float>(), var.data<float>(), s.R, s.C, static_cast<float>(eps), workspace, c.stream));
}

const DTypes batch_norm_forward_inference_dtypes = kFloat32Or16;
void batch_norm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                  const Tensor& mean, const Tensor& var, Tensor& y, double eps) {
  if (x.numel() == 0) return;
  Rows s = rows_of(x);
  Context& c = context(x);
  SYSTOLIC_CUDA_CHECK(dnn::launch_batch_norm_forward_inference(
      x.raw_data(), element_of(x.dtype()), gamma.data<float>(), beta.data<float>(), mean.data<float>(),
      var.data<float>(), y.raw_data(), s.R, s.C, static_cast<float>(eps), c.stream));
}

const DTypes batch_norm_backward_dtypes = kFloat32Or16;
void batch_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& var,
                         const Tensor& dy, Tensor& dx, Tensor& dgamma, Tensor& dbeta, double eps) {
  if (!dx.defined() && !dgamma.defined() && !dbeta.defined()) return;
  if (x.numel() == 0) return;
  Rows s = rows_of(x);
  Context& c = context(x);
  void* workspace = c.workspace(dnn::batch_norm_workspace_bytes(s.R, s.C));
  SYSTOLIC_CUDA_CHECK(dnn::launch_batch_norm_backward(
      x.raw_data(), dy.raw_data(), element_of(x.dtype()), gamma.data<float>(), mean.data<float>(),
      var.data<float>(), dx.defined() ? dx.raw_data() : nullptr,
      dgamma.defined() ? dgamma.data<float>() : nullptr, dbeta.defined() ? dbeta.data<float>() : nullptr, s.R,
      s.C, eps, workspace, c.stream));
}

}  // namespace systolic::ops::cuda
