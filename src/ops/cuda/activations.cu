// The activations on CUDA (ops::activation_forward, activation_backward), each as kernel -> launcher -> entry (the
// entry unpacks the checked tensors: the checks ran at ops::<name>, src/ops/ops.cc): the elementwise kinds through
// activation_math.h's formulas, one kernel per kind; softmax and log_softmax over rows of the last axis, each row
// given to one warp, whose lanes stride over the columns and combine by shuffles. float32 and bfloat16 (computed in
// float). No entry synchronises or allocates.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "ops/activation_math.h"
#include "ops/cuda/context.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/kernels.cuh"

namespace systolic::ops::cuda {

namespace {

// ---- activations: elementwise kinds through activation_math.h, one kernel per kind (K is a constant, so the
// formula's switch folds away); softmax and log_softmax over rows.

template <class T, Activation::Kind K>
__global__ void activation_forward_kernel(const T* x, T* y, std::int64_t n, activation::Params<acc_t<T>> p) {
  SYSTOLIC_GRID_STRIDE(i, n) store(y, i, activation::forward<acc_t<T>>(K, load(x, i), p));
}

// x may be y (then unread: the kind's gradient is a function of y).
template <class T, Activation::Kind K>
__global__ void activation_backward_kernel(const T* x, const T* y, const T* dy, T* dx, std::int64_t n,
                                           activation::Params<acc_t<T>> p) {
  SYSTOLIC_GRID_STRIDE(i, n)
  store(dx, i, activation::backward<acc_t<T>>(K, load(x, i), load(y, i), load(dy, i), p));
}

// A row's maximum and the sum of exp(x - maximum), over the warp that holds the row (every lane gets both).
template <class T>
__device__ __forceinline__ void row_max_and_sum_exp(const T* in, std::int64_t cols, int lane, float& mx,
                                                    float& s) {
  mx = -INFINITY;
  for (std::int64_t c = lane; c < cols; c += 32) {
    float v = load(in, c);
    mx = v > mx ? v : mx;
  }
  mx = warp_max(mx);
  s = 0.0f;
  for (std::int64_t c = lane; c < cols; c += 32) s += expf(load(in, c) - mx);
  s = warp_sum(s);
}

// y = exp(x - max) / sum exp(x - max) per row. y may alias x: the last pass reads x[c] and writes y[c] in the
// same lane, and the earlier passes only read.
template <class T>
__global__ void softmax_forward_kernel(const T* x, T* y, std::int64_t rows, std::int64_t cols) {
  const int lane = threadIdx.x & 31;
  SYSTOLIC_WARP_ROWS(r, rows) {
    const T* in = x + r * cols;
    T* out = y + r * cols;
    float mx, s;
    row_max_and_sum_exp(in, cols, lane, mx, s);
    for (std::int64_t c = lane; c < cols; c += 32) store(out, c, expf(load(in, c) - mx) / s);
  }
}

// dx = y * (dy - sum(dy * y)) per row; dx may alias dy (same argument as the forward's).
template <class T>
__global__ void softmax_backward_kernel(const T* y, const T* dy, T* dx, std::int64_t rows,
                                        std::int64_t cols) {
  const int lane = threadIdx.x & 31;
  SYSTOLIC_WARP_ROWS(r, rows) {
    const T* yr = y + r * cols;
    const T* gr = dy + r * cols;
    T* out = dx + r * cols;
    float dot = 0.0f;
    for (std::int64_t c = lane; c < cols; c += 32) dot += load(gr, c) * load(yr, c);
    dot = warp_sum(dot);
    for (std::int64_t c = lane; c < cols; c += 32) store(out, c, load(yr, c) * (load(gr, c) - dot));
  }
}

// y = x - max - log(sum exp(x - max)) per row; y may alias x (as softmax's).
template <class T>
__global__ void log_softmax_forward_kernel(const T* x, T* y, std::int64_t rows, std::int64_t cols) {
  const int lane = threadIdx.x & 31;
  SYSTOLIC_WARP_ROWS(r, rows) {
    const T* in = x + r * cols;
    T* out = y + r * cols;
    float mx, s;
    row_max_and_sum_exp(in, cols, lane, mx, s);
    const float lse = mx + logf(s);
    for (std::int64_t c = lane; c < cols; c += 32) store(out, c, load(in, c) - lse);
  }
}

// dx = dy - exp(y) * sum(dy) per row; dx may alias dy.
template <class T>
__global__ void log_softmax_backward_kernel(const T* y, const T* dy, T* dx, std::int64_t rows,
                                            std::int64_t cols) {
  const int lane = threadIdx.x & 31;
  SYSTOLIC_WARP_ROWS(r, rows) {
    const T* yr = y + r * cols;
    const T* gr = dy + r * cols;
    T* out = dx + r * cols;
    float s = 0.0f;
    for (std::int64_t c = lane; c < cols; c += 32) s += load(gr, c);
    s = warp_sum(s);
    for (std::int64_t c = lane; c < cols; c += 32) store(out, c, load(gr, c) - expf(load(yr, c)) * s);
  }
}

// ---- launchers

// The kernel of an activation's kind.
template <class T>
cudaError_t launch_activation_forward(const Activation& a, const T* x, T* y, std::int64_t rows,
                                      std::int64_t cols, cudaStream_t stream) {
  const std::int64_t n = rows * cols;
  if (n == 0) return cudaSuccess;
  if (a.kind == Activation::softmax) {
    softmax_forward_kernel<T><<<blocks_for_rows(rows), kThreads, 0, stream>>>(x, y, rows, cols);
    return cudaGetLastError();
  }
  if (a.kind == Activation::log_softmax) {
    log_softmax_forward_kernel<T><<<blocks_for_rows(rows), kThreads, 0, stream>>>(x, y, rows, cols);
    return cudaGetLastError();
  }
  const auto p = activation::params_of<acc_t<T>>(a);
  switch (a.kind) {
#define SYSTOLIC_FORWARD_KIND(kind, name, alias) \
  case Activation::kind:                         \
    return launch_elementwise(activation_forward_kernel<T, Activation::kind>, n, stream, x, y, n, p);
    SYSTOLIC_ACTIVATIONS(SYSTOLIC_FORWARD_KIND)
#undef SYSTOLIC_FORWARD_KIND
  }
  return cudaErrorInvalidValue;
}

template <class T>
cudaError_t launch_activation_backward(const Activation& a, const T* x, const T* y, const T* dy, T* dx,
                                       std::int64_t rows, std::int64_t cols, cudaStream_t stream) {
  const std::int64_t n = rows * cols;
  if (n == 0) return cudaSuccess;
  if (a.kind == Activation::softmax) {
    softmax_backward_kernel<T><<<blocks_for_rows(rows), kThreads, 0, stream>>>(y, dy, dx, rows, cols);
    return cudaGetLastError();
  }
  if (a.kind == Activation::log_softmax) {
    log_softmax_backward_kernel<T><<<blocks_for_rows(rows), kThreads, 0, stream>>>(y, dy, dx, rows, cols);
    return cudaGetLastError();
  }
  const auto p = activation::params_of<acc_t<T>>(a);
  switch (a.kind) {
#define SYSTOLIC_BACKWARD_KIND(kind, name, alias) \
  case Activation::kind:                          \
    return launch_elementwise(activation_backward_kernel<T, Activation::kind>, n, stream, x, y, dy, dx, n, p);
    SYSTOLIC_ACTIVATIONS(SYSTOLIC_BACKWARD_KIND)
#undef SYSTOLIC_BACKWARD_KIND
  }
  return cudaErrorInvalidValue;
}

// Rows and columns of an activation: softmax and log_softmax run over rows of the last axis.
void activation_extent(const Activation& a, const Tensor& t, std::int64_t& rows, std::int64_t& cols) {
  cols = a.over_last_axis() ? t.dim(-1) : 1;
  rows = cols ? t.numel() / cols : 0;
}

constexpr DTypes kFloat32Or16{DType::float32, DType::bfloat16};

}  // namespace

const DTypes activation_forward_dtypes = kFloat32Or16;
void activation_forward(const Activation& a, const Tensor& x, Tensor& y) {
  Context& c = context(y);
  if (a.kind == Activation::linear) return copy(x, y);
  std::int64_t rows, cols;
  activation_extent(a, x, rows, cols);
  SYSTOLIC_CUDA_CHECK((visit_dtype<float, __nv_bfloat16>(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    return launch_activation_forward<T>(a, static_cast<const T*>(x.raw_data()), static_cast<T*>(y.raw_data()),
                                        rows, cols, c.stream);
  })));
}

const DTypes activation_backward_dtypes = kFloat32Or16;
void activation_backward(const Activation& a, const Tensor& x, const Tensor& y, const Tensor& dy,
                         Tensor& dx) {
  Context& c = context(dx);
  if (a.kind == Activation::linear) return copy(dy, dx);
  std::int64_t rows, cols;
  activation_extent(a, y, rows, cols);
  SYSTOLIC_CUDA_CHECK((visit_dtype<float, __nv_bfloat16>(y.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* yp = static_cast<const T*>(y.raw_data());
    const T* xp = x.defined() ? static_cast<const T*>(x.raw_data()) : yp;  // read only by kinds that need it
    return launch_activation_backward<T>(a, xp, yp, static_cast<const T*>(dy.raw_data()),
                                         static_cast<T*>(dx.raw_data()), rows, cols, c.stream);
  })));
}

}  // namespace systolic::ops::cuda
