// Regularizers and constraints on CUDA (regul), each as kernel -> launcher -> entry (the arguments were checked
// at ops::<name>, src/ops/ops.cc): regularize (elementwise, block sums added to the float64 total with one
// atomicAdd per block), orthogonal_regularize (one block per vector: its norm and its dot products with every
// other vector by block reductions; the gradient accumulates into dx, whose row or column the block owns),
// constrain (one thread per group of the norm). Values are read as double, as the CPU loops compute. Formulas:
// include/systolic/ops.h; the CPU loops: src/ops/cpu/regularizers.cc.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "ops/cuda/context.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/kernels.cuh"
#include "ops/norm_layout.h"

namespace systolic::ops::cuda {

namespace {

// The sums of a and b over the block, returned to every thread. Every thread of the block must call it.
__device__ void block_sum2(double& a, double& b) {
  __shared__ double pa[kThreads / 32], pb[kThreads / 32];
  a = warp_sum(a);
  b = warp_sum(b);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // the previous call's readers are done
  if (lane == 0) pa[warp] = a, pb[warp] = b;
  __syncthreads();
  a = 0;
  b = 0;
  for (int w = 0; w < int(blockDim.x >> 5); ++w) a += pa[w], b += pb[w];
}

template <class T>
__global__ void regularize_kernel(const T* x, std::int64_t n, double* total, T* dx, double l1, double l2,
                                  double total_scale, double grad_scale) {
  double acc = 0, unused = 0;
  SYSTOLIC_GRID_STRIDE(i, n) {
    const double v = load_double(x, i);
    acc += l1 * fabs(v) + l2 * v * v;
    if (dx) {
      const double sign = v > 0 ? 1.0 : (v < 0 ? -1.0 : 0.0);
      store_double(dx, i, load_double(dx, i) + grad_scale * (l1 * sign + 2.0 * l2 * v));
    }
  }
  if (!total) return;  // uniform over the grid: no thread waits in block_sum2
  block_sum2(acc, unused);
  if (threadIdx.x == 0) atomicAdd(total, total_scale * acc);
}

// Block i: vector i (element k at i*si + k*sk) against every other vector.
template <class T>
__global__ void orthogonal_kernel(const T* x, std::int64_t n, std::int64_t len, std::int64_t si,
                                  std::int64_t sk, double* total, T* dx, double factor, double total_scale,
                                  double grad_scale) {
  const double pairs = double(n) * (double(n) - 1.0) / 2.0;
  const double c = grad_scale * factor / pairs;
  for (std::int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    const T* xi = x + i * si;
    double sq_i = 0, unused = 0;
    for (std::int64_t k = threadIdx.x; k < len; k += blockDim.x)
      sq_i += load_double(xi, k * sk) * load_double(xi, k * sk);
    block_sum2(sq_i, unused);
    bool branch_i;
    const double inv_i = normalize_scale(sq_i, branch_i);
    double sum = 0;  // sum_j |G_ij|
    for (std::int64_t j = 0; j < n; ++j) {
      if (j == i) continue;
      const T* xj = x + j * si;
      double dot = 0, sq_j = 0;
      for (std::int64_t k = threadIdx.x; k < len; k += blockDim.x) {
        const double vj = load_double(xj, k * sk);
        dot += load_double(xi, k * sk) * vj;
        sq_j += vj * vj;
      }
      block_sum2(dot, sq_j);
      bool branch_j;
      const double inv_j = normalize_scale(sq_j, branch_j);
      const double g = dot * inv_i * inv_j;
      sum += fabs(g);
      if (dx) {
        const double s = g > 0 ? 1.0 : (g < 0 ? -1.0 : 0.0);
        if (s != 0)
          for (std::int64_t k = threadIdx.x; k < len; k += blockDim.x)
            store_double(dx + i * si, k * sk,
                         load_double(dx + i * si, k * sk) + c * inv_i * s * load_double(xj, k * sk) * inv_j);
      }
    }
    if (dx && branch_i)
      for (std::int64_t k = threadIdx.x; k < len; k += blockDim.x)
        store_double(dx + i * si, k * sk,
                     load_double(dx + i * si, k * sk) - c * inv_i * load_double(xi, k * sk) * inv_i * sum);
    if (total && threadIdx.x == 0) atomicAdd(total, total_scale * factor * 0.5 * sum / pairs);
  }
}

template <class T>
__global__ void non_neg_kernel(T* w, std::int64_t n) {
  SYSTOLIC_GRID_STRIDE(i, n) {
    if (!(load_double(w, i) > 0)) store_double(w, i, 0.0);
  }
}

template <class T>
__global__ void constrain_kernel(T* w, NormLayout l, int kind, double min_value, double max_value,
                                 double rate) {
  SYSTOLIC_GRID_STRIDE(g, l.groups) {
    T* base = w + l.group_offset(g);
    double sq = 0;
    for (std::int64_t r = 0; r < l.reduced; ++r) {
      const double v = load_double(base, l.reduced_offset(r));
      sq += v * v;
    }
    const double f = constraint_factor(kind, sqrt(sq), min_value, max_value, rate);
    for (std::int64_t r = 0; r < l.reduced; ++r) {
      const std::int64_t at = l.reduced_offset(r);
      store_double(base, at, load_double(base, at) * f);
    }
  }
}

cudaError_t launch_regularize(const void* x, Element t, std::int64_t n, double* total, void* dx, double l1,
                              double l2, double total_scale, double grad_scale, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return visit_element<float, __nv_bfloat16, double>(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    regularize_kernel<T><<<reduction_blocks(n), kThreads, 0, stream>>>(
        static_cast<const T*>(x), n, total, static_cast<T*>(dx), l1, l2, total_scale, grad_scale);
    return cudaGetLastError();
  });
}

cudaError_t launch_orthogonal(const void* x, Element t, std::int64_t n, std::int64_t len, std::int64_t si,
                              std::int64_t sk, double* total, void* dx, double factor, double total_scale,
                              double grad_scale, cudaStream_t stream) {
  return visit_element<float, __nv_bfloat16, double>(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const unsigned blocks = static_cast<unsigned>(std::min<std::int64_t>(n, 65535));
    orthogonal_kernel<T><<<blocks, kThreads, 0, stream>>>(static_cast<const T*>(x), n, len, si, sk, total,
                                                          static_cast<T*>(dx), factor, total_scale,
                                                          grad_scale);
    return cudaGetLastError();
  });
}

cudaError_t launch_constrain(void* w, Element t, std::int64_t n, const NormLayout& l,
                             const ConstraintParams& p, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return visit_element<float, __nv_bfloat16, double>(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (p.kind == ConstraintParams::non_neg)
      return launch_elementwise(non_neg_kernel<T>, n, stream, static_cast<T*>(w), n);
    return launch_elementwise(constrain_kernel<T>, l.groups, stream, static_cast<T*>(w), l, int(p.kind),
                              p.min_value, p.max_value, p.rate);
  });
}

constexpr DTypes kAll{DType::float32, DType::bfloat16, DType::float64};
constexpr DTypes kWeights{DType::float32, DType::float64};

double* total_pointer(Tensor& total) {
  return total.defined() ? total.data<double>() : nullptr;
}
void* grad_pointer(Tensor& dx) {
  return dx.defined() ? dx.raw_data() : nullptr;
}

}  // namespace

const DTypes regularize_dtypes = kAll;
void regularize(const Tensor& x, Tensor& total, Tensor& dx, double l1, double l2, double total_scale,
                double grad_scale) {
  Context& c = context(x);
  SYSTOLIC_CUDA_CHECK(launch_regularize(x.raw_data(), element_of(x.dtype()), x.numel(), total_pointer(total),
                                        grad_pointer(dx), l1, l2, total_scale, grad_scale, c.stream));
}

const DTypes orthogonal_regularize_dtypes = kWeights;
void orthogonal_regularize(const Tensor& x, Tensor& total, Tensor& dx, double factor, bool columns,
                           double total_scale, double grad_scale) {
  Context& c = context(x);
  const std::int64_t R = x.dim(0), C = x.dim(1);
  SYSTOLIC_CUDA_CHECK(launch_orthogonal(x.raw_data(), element_of(x.dtype()), columns ? C : R, columns ? R : C,
                                        columns ? 1 : C, columns ? C : 1, total_pointer(total),
                                        grad_pointer(dx), factor, total_scale, grad_scale, c.stream));
}

const DTypes constrain_dtypes = kAll;
void constrain(Tensor& w, const ConstraintParams& p) {
  Context& c = context(w);
  NormLayout l =
      NormLayout::of(w.shape().dims().data(), w.rank(), p.kind == ConstraintParams::non_neg ? 0 : p.axes);
  SYSTOLIC_CUDA_CHECK(launch_constrain(w.raw_data(), element_of(w.dtype()), w.numel(), l, p, c.stream));
}

}  // namespace systolic::ops::cuda
