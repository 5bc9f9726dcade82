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

// The finishing functors divide by the count: R, or *count where the sums were summed over replicas with the
// count (sums[K * C]).
struct WriteMean {
  float* mean;
  std::int64_t R;
  const double* count = nullptr;
  __device__ void operator()(std::int64_t c, const double* s) const {
    mean[c] = static_cast<float>(s[0] / (count ? *count : double(R)));
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
  const double* count = nullptr;
  __device__ void operator()(std::int64_t c, const double* s) const {
    float v = static_cast<float>(s[0] / (count ? *count : double(R)));
    var[c] = v;
    coef[c] = (gamma ? gamma[c] : 1.0f) / sqrtf(v + eps);
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
    y[i] = from_float<T>((to_float(x[i]) - mean[c]) * scale[c] + (beta ? beta[c] : 0.0f));
  }
}

template <class T>
__global__ void normalize_inference_kernel(const T* __restrict__ x, T* __restrict__ y,
                                           const float* __restrict__ gamma, const float* __restrict__ beta,
                                           const float* __restrict__ mean, const float* __restrict__ var,
                                           std::int64_t R, std::int64_t C, float eps) {
  SYSTOLIC_GRID_STRIDE(i, R * C) {
    std::int64_t c = i % C;
    float scale = (gamma ? gamma[c] : 1.0f) / sqrtf(var[c] + eps);
    y[i] = from_float<T>((to_float(x[i]) - mean[c]) * scale + (beta ? beta[c] : 0.0f));
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
  const double* count = nullptr;
  __device__ void operator()(std::int64_t c, const double* s) const {
    double inv_std = 1.0 / sqrt(double(var[c]) + eps);
    double sum_dy = s[0], sum_dy_xhat = s[1] * inv_std, n = count ? *count : double(R);
    if (dgamma) dgamma[c] += static_cast<float>(sum_dy_xhat);
    if (dbeta) dbeta[c] += static_cast<float>(sum_dy);
    coef[c] = static_cast<float>((gamma ? double(gamma[c]) : 1.0) * inv_std);
    coef[C + c] = static_cast<float>(sum_dy / n);
    coef[2 * C + c] = static_cast<float>(inv_std * sum_dy_xhat / n);
  }
};

// Synchronised batch norm: a reduction's finish that keeps channel c's K sums at sums[k * C + c] and the rows at
// sums[K * C], so the replicas can sum them; then finish_from_sums hands the summed values to a finishing
// functor.
template <int K>
struct KeepSums {
  double* sums;
  std::int64_t R, C;
  __device__ void operator()(std::int64_t c, const double* s) const {
    for (int k = 0; k < K; ++k) sums[k * C + c] = s[k];
    if (c == 0) sums[K * C] = double(R);
  }
};

template <int K, class W>
__global__ void finish_from_sums(const double* __restrict__ sums, std::int64_t C, W w) {
  SYSTOLIC_GRID_STRIDE(c, C) {
    double s[K];
    for (int k = 0; k < K; ++k) s[k] = sums[k * C + c];
    w(c, s);
  }
}

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
  return visit_element<float, __nv_bfloat16>(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = static_cast<const T*>(x);
    cudaError_t e = reduce::column_sums<1>(SumX<T>{xp, C}, WriteMean{mean, R}, R, C, partial, stream);
    if (e != cudaSuccess) return e;
    e = reduce::column_sums<1>(CentredSquares<T>{xp, mean, C, 0.0f}, WriteVar{var, gamma, coef, R, eps}, R, C,
                               partial, stream);
    if (e != cudaSuccess) return e;
    return launch_elementwise(normalize_kernel<T>, R * C, stream, xp, static_cast<T*>(y), mean, coef, beta, R,
                              C);
  });
}

cudaError_t launch_batch_norm_forward_inference(const void* x, Element type, const float* gamma,
                                                const float* beta, const float* mean, const float* var,
                                                void* y, std::int64_t R, std::int64_t C, float eps,
                                                cudaStream_t stream) {
  if (R <= 0 || C <= 0) return cudaSuccess;
  return visit_element<float, __nv_bfloat16>(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return launch_elementwise(normalize_inference_kernel<T>, R * C, stream, static_cast<const T*>(x),
                              static_cast<T*>(y), gamma, beta, mean, var, R, C, eps);
  });
}

cudaError_t launch_batch_norm_backward(const void* x, const void* dy, Element type, const float* gamma,
                                       const float* mean, const float* var, void* dx, float* dgamma,
                                       float* dbeta, std::int64_t R, std::int64_t C, double eps,
                                       void* workspace, cudaStream_t stream) {
  if (R <= 0 || C <= 0) return cudaSuccess;
  float* coef = static_cast<float*>(workspace);
  float* partial = reinterpret_cast<float*>(static_cast<char*>(workspace) + coefficient_bytes(C));
  return visit_element<float, __nv_bfloat16>(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = static_cast<const T*>(x);
    const T* dyp = static_cast<const T*>(dy);
    cudaError_t e = reduce::column_sums<2>(BackwardSums<T>{xp, dyp, mean, C, 0.0f},
                                           BackwardFinish{gamma, var, dgamma, dbeta, coef, R, C, eps}, R, C,
                                           partial, stream);
    if (e != cudaSuccess || !dx) return e;
    return launch_elementwise(backward_data_kernel<T>, R * C, stream, xp, dyp, static_cast<T*>(dx), mean,
                              coef, R, C);
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
// gamma or beta, or null for Keras's scale=False (1) and center=False (0).
const float* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<float>() : nullptr;
}
Rows rows_of(const Tensor& x) {
  return {x.dim(-1) ? x.numel() / x.dim(-1) : 0, x.dim(-1)};
}
}  // namespace

namespace {

// Synchronised: the sums of x and the rows, summed over the replicas, give the mean; the centred squares around
// it, summed again, the variance (two passes over x, as the local statistics, so no cancellation).
void synchronised_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y, Tensor& mean,
                          Tensor& var, double eps, const CrossReplica& replicas) {
  Rows s = rows_of(x);
  Context& c = context(x);
  Tensor sums({s.C + 1}, DType::float64, x.device()), squares({s.C + 1}, DType::float64, x.device());
  float* coef = static_cast<float*>(c.workspace(dnn::batch_norm_workspace_bytes(s.R, s.C)));
  float* partial = reinterpret_cast<float*>(reinterpret_cast<char*>(coef) + dnn::coefficient_bytes(s.C));
  SYSTOLIC_CUDA_CHECK((visit_element<float, __nv_bfloat16>(element_of(x.dtype()), [&](auto tag) {
    using T = typename decltype(tag)::type;
    return reduce::column_sums<1>(dnn::SumX<T>{static_cast<const T*>(x.raw_data()), s.C},
                                  dnn::KeepSums<1>{sums.data<double>(), s.R, s.C}, s.R, s.C, partial,
                                  c.stream);
  })));
  replicas.all_reduce(sums);
  const double* count = sums.data<double>() + s.C;
  SYSTOLIC_CUDA_CHECK(launch_elementwise(dnn::finish_from_sums<1, dnn::WriteMean>, s.C, c.stream,
                                         sums.data<double>(), s.C,
                                         dnn::WriteMean{mean.data<float>(), s.R, count}));
  SYSTOLIC_CUDA_CHECK((visit_element<float, __nv_bfloat16>(element_of(x.dtype()), [&](auto tag) {
    using T = typename decltype(tag)::type;
    return reduce::column_sums<1>(
        dnn::CentredSquares<T>{static_cast<const T*>(x.raw_data()), mean.data<float>(), s.C, 0.0f},
        dnn::KeepSums<1>{squares.data<double>(), s.R, s.C}, s.R, s.C, partial, c.stream);
  })));
  replicas.all_reduce(squares);
  SYSTOLIC_CUDA_CHECK(launch_elementwise(
      dnn::finish_from_sums<1, dnn::WriteVar>, s.C, c.stream, squares.data<double>(), s.C,
      dnn::WriteVar{var.data<float>(), data_or_null(gamma), coef, s.R, static_cast<float>(eps), count}));
  if (x.numel() == 0) return;
  SYSTOLIC_CUDA_CHECK((visit_element<float, __nv_bfloat16>(element_of(x.dtype()), [&](auto tag) {
    using T = typename decltype(tag)::type;
    return launch_elementwise(dnn::normalize_kernel<T>, s.R * s.C, c.stream,
                              static_cast<const T*>(x.raw_data()), static_cast<T*>(y.raw_data()),
                              mean.data<float>(), coef, data_or_null(beta), s.R, s.C);
  })));
}

}  // namespace

const DTypes batch_norm_forward_training_dtypes = kFloat32Or16;
void batch_norm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                                 Tensor& mean, Tensor& var, double eps, const CrossReplica* replicas) {
  if (replicas) return synchronised_forward(x, gamma, beta, y, mean, var, eps, *replicas);
  if (x.numel() == 0) return;
  Rows s = rows_of(x);
  Context& c = context(x);
  void* workspace = c.workspace(dnn::batch_norm_workspace_bytes(s.R, s.C));
  SYSTOLIC_CUDA_CHECK(dnn::launch_batch_norm_forward_training(
      x.raw_data(), element_of(x.dtype()), data_or_null(gamma), data_or_null(beta), y.raw_data(),
      mean.data<float>(), var.data<float>(), s.R, s.C, static_cast<float>(eps), workspace, c.stream));
}

const DTypes batch_norm_forward_inference_dtypes = kFloat32Or16;
void batch_norm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                  const Tensor& mean, const Tensor& var, Tensor& y, double eps) {
  if (x.numel() == 0) return;
  Rows s = rows_of(x);
  Context& c = context(x);
  SYSTOLIC_CUDA_CHECK(dnn::launch_batch_norm_forward_inference(
      x.raw_data(), element_of(x.dtype()), data_or_null(gamma), data_or_null(beta), mean.data<float>(),
      var.data<float>(), y.raw_data(), s.R, s.C, static_cast<float>(eps), c.stream));
}

namespace {

// Synchronised: this replica's sums of dy and dy*(x - mean) go into dgamma and dbeta; summed over the replicas
// with the rows, they give dx's coefficients.
void synchronised_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& var,
                           const Tensor& dy, Tensor& dx, Tensor& dgamma, Tensor& dbeta, double eps,
                           const CrossReplica& replicas) {
  Rows s = rows_of(x);
  Context& c = context(x);
  Tensor sums({2 * s.C + 1}, DType::float64, x.device());
  float* coef = static_cast<float*>(c.workspace(dnn::batch_norm_workspace_bytes(s.R, s.C)));
  float* partial = reinterpret_cast<float*>(reinterpret_cast<char*>(coef) + dnn::coefficient_bytes(s.C));
  SYSTOLIC_CUDA_CHECK((visit_element<float, __nv_bfloat16>(element_of(x.dtype()), [&](auto tag) {
    using T = typename decltype(tag)::type;
    return reduce::column_sums<2>(
        dnn::BackwardSums<T>{static_cast<const T*>(x.raw_data()), static_cast<const T*>(dy.raw_data()),
                             mean.data<float>(), s.C, 0.0f},
        dnn::KeepSums<2>{sums.data<double>(), s.R, s.C}, s.R, s.C, partial, c.stream);
  })));
  float* dg = dgamma.defined() ? dgamma.data<float>() : nullptr;
  float* db = dbeta.defined() ? dbeta.data<float>() : nullptr;
  if (dg || db) {
    SYSTOLIC_CUDA_CHECK(launch_elementwise(
        dnn::finish_from_sums<2, dnn::BackwardFinish>, s.C, c.stream, sums.data<double>(), s.C,
        dnn::BackwardFinish{data_or_null(gamma), var.data<float>(), dg, db, coef, s.R, s.C, eps}));
  }
  replicas.all_reduce(sums);
  if (!dx.defined() || x.numel() == 0) return;
  SYSTOLIC_CUDA_CHECK(launch_elementwise(
      dnn::finish_from_sums<2, dnn::BackwardFinish>, s.C, c.stream, sums.data<double>(), s.C,
      dnn::BackwardFinish{data_or_null(gamma), var.data<float>(), nullptr, nullptr, coef, s.R, s.C, eps,
                          sums.data<double>() + 2 * s.C}));
  SYSTOLIC_CUDA_CHECK((visit_element<float, __nv_bfloat16>(element_of(x.dtype()), [&](auto tag) {
    using T = typename decltype(tag)::type;
    return launch_elementwise(dnn::backward_data_kernel<T>, s.R * s.C, c.stream,
                              static_cast<const T*>(x.raw_data()), static_cast<const T*>(dy.raw_data()),
                              static_cast<T*>(dx.raw_data()), mean.data<float>(), coef, s.R, s.C);
  })));
}

}  // namespace

const DTypes batch_norm_backward_dtypes = kFloat32Or16;
void batch_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& var,
                         const Tensor& dy, Tensor& dx, Tensor& dgamma, Tensor& dbeta, double eps,
                         const CrossReplica* replicas) {
  if (replicas) return synchronised_backward(x, gamma, mean, var, dy, dx, dgamma, dbeta, eps, *replicas);
  if (!dx.defined() && !dgamma.defined() && !dbeta.defined()) return;
  if (x.numel() == 0) return;
  Rows s = rows_of(x);
  Context& c = context(x);
  void* workspace = c.workspace(dnn::batch_norm_workspace_bytes(s.R, s.C));
  SYSTOLIC_CUDA_CHECK(dnn::launch_batch_norm_backward(
      x.raw_data(), dy.raw_data(), element_of(x.dtype()), data_or_null(gamma), mean.data<float>(),
      var.data<float>(), dx.defined() ? dx.raw_data() : nullptr,
      dgamma.defined() ? dgamma.data<float>() : nullptr, dbeta.defined() ? dbeta.data<float>() : nullptr, s.R,
      s.C, eps, workspace, c.stream));
}

}  // namespace systolic::ops::cuda
