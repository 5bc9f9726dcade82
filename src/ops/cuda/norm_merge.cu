// The norm family on CUDA, kernel -> launcher -> entry (the entries unpack tensors ops::<name> has checked):
// layer normalisation over any set of axes (one thread per row, statistics in double; the parameter gradients one
// thread per column, summed in row order: deterministic), the broadcasting binary ops (one thread per output
// element; their backward one thread per operand element, summing the outputs it fed), Keras Normalization's
// given statistics, transposes. bfloat16 data computes in float with float32 parameters and statistics. Plain
// kernels, written for correctness first. Contracts: include/systolic/ops.h.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "ops/cuda/context.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/kernels.cuh"
#include "ops/norm_math.h"

namespace systolic::ops::cuda {

namespace {

// The parameter and statistic type of data type T: double for double, float otherwise.
template <class T>
using param_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

// A double stored as T (kernels.cuh's load_double reads): bfloat16 through float, as these kernels always rounded
// (store_double rounds once, straight from double).
template <class T>
__device__ __forceinline__ void st(T* p, std::int64_t i, double v) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    p[i] = __float2bfloat16(float(v));
  else
    p[i] = T(v);
}

template <class T, class P>
__global__ void layer_norm_forward_kernel(const T* x, const P* gamma, const P* beta, T* y, P* mean, P* rstd,
                                          AxesLayout l, NormKind kind, double eps) {
  const std::int64_t K = l.cols;
  SYSTOLIC_GRID_STRIDE(m, l.rows) {
    const std::int64_t base = l.row_offset(m);
    double mu = 0, r;
    if (kind == NormKind::unit) {
      double s = 0;
      for (std::int64_t k = 0; k < K; ++k)
        s += load_double(x, base + l.col_offset(k)) * load_double(x, base + l.col_offset(k));
      r = unit_inverse(s);
    } else {
      for (std::int64_t k = 0; k < K; ++k) mu += load_double(x, base + l.col_offset(k));
      mu /= double(K);
      double v = 0;
      for (std::int64_t k = 0; k < K; ++k) {
        const double d = load_double(x, base + l.col_offset(k)) - mu;
        v += d * d;
      }
      r = 1.0 / sqrt(v / double(K) + eps);
    }
    mean[m] = P(mu);
    rstd[m] = P(r);
    for (std::int64_t k = 0; k < K; ++k) {
      const std::int64_t o = base + l.col_offset(k);
      double g = gamma ? double(gamma[k]) : 1.0;
      double v = kind == NormKind::layer ? (load_double(x, o) - mu) * r * g + (beta ? double(beta[k]) : 0.0)
                                         : load_double(x, o) * r * g;
      st(y, o, v);
    }
  }
}

template <class T, class P>
__global__ void layer_norm_dx_kernel(const T* x, const P* gamma, const P* mean, const P* rstd, const T* dy,
                                     T* dx, AxesLayout l, NormKind kind) {
  const std::int64_t K = l.cols;
  SYSTOLIC_GRID_STRIDE(m, l.rows) {
    const std::int64_t base = l.row_offset(m);
    const double mu = mean[m], r = rstd[m];
    auto xv = [&](std::int64_t k) { return load_double(x, base + l.col_offset(k)); };
    auto gv = [&](std::int64_t k) { return load_double(dy, base + l.col_offset(k)); };
    auto gg = [&](std::int64_t k) { return gv(k) * (gamma ? double(gamma[k]) : 1.0); };
    if (kind == NormKind::layer) {
      double a = 0, b = 0;
      for (std::int64_t k = 0; k < K; ++k) {
        a += gg(k);
        b += gg(k) * (xv(k) - mu) * r;
      }
      a /= double(K), b /= double(K);
      for (std::int64_t k = 0; k < K; ++k)
        st(dx, base + l.col_offset(k), r * (gg(k) - a - (xv(k) - mu) * r * b));
    } else if (kind == NormKind::rms_scaling) {
      double s = 0;
      for (std::int64_t k = 0; k < K; ++k) s += gg(k) * xv(k);
      for (std::int64_t k = 0; k < K; ++k)
        st(dx, base + l.col_offset(k), r * gg(k) - r * r * r * (xv(k) - mu) / double(K) * s);
    } else {
      double s = 0;
      for (std::int64_t k = 0; k < K; ++k) s += gv(k) * xv(k);
      const bool capped = r >= kUnitMaxInverse;
      for (std::int64_t k = 0; k < K; ++k)
        st(dx, base + l.col_offset(k), r * gv(k) - (capped ? 0.0 : r * r * r * xv(k) * s));
    }
  }
}

template <class T, class P>
__global__ void layer_norm_dparams_kernel(const T* x, const P* mean, const P* rstd, const T* dy, P* dgamma,
                                          P* dbeta, AxesLayout l, NormKind kind) {
  SYSTOLIC_GRID_STRIDE(k, l.cols) {
    const std::int64_t col = l.col_offset(k);
    double sg = 0, sb = 0;
    for (std::int64_t m = 0; m < l.rows; ++m) {
      const std::int64_t o = l.row_offset(m) + col;
      const double g = load_double(dy, o), v = load_double(x, o);
      sg += g * (kind == NormKind::layer ? (v - double(mean[m])) * double(rstd[m]) : v * double(rstd[m]));
      sb += g;
    }
    if (dgamma) dgamma[k] += P(sg);
    if (dbeta) dbeta[k] += P(sb);
  }
}

template <class T>
__global__ void broadcast_forward_kernel(BinaryKind kind, const T* a, const T* b, T* y, std::int64_t n,
                                         BroadcastLayout l) {
  SYSTOLIC_GRID_STRIDE(i, n) {
    std::int64_t oa, ob;
    l.offsets(i, oa, ob);
    st(y, i, binary_value(kind, load_double(a, oa), load_double(b, ob)));
  }
}

template <class T>
__global__ void broadcast_backward_kernel(BinaryKind kind, int which, const T* a, const T* b, const T* dy,
                                          T* d, std::int64_t n, BroadcastLayout l) {
  SYSTOLIC_GRID_STRIDE(i, n) {
    double s = 0;
    l.for_each_source(which, i, [&](std::int64_t oy, std::int64_t oo) {
      const double av = which ? load_double(a, oo) : load_double(a, i),
                   bv = which ? load_double(b, i) : load_double(b, oo);
      s += binary_gradient(kind, which, av, bv, load_double(dy, oy));
    });
    st(d, i, s);
  }
}

template <class T, class P>
__global__ void normalize_forward_kernel(const T* x, const P* mean, const P* variance, T* y, std::int64_t n,
                                         AxesLayout l, bool invert) {
  SYSTOLIC_GRID_STRIDE(i, n) {
    const std::int64_t k = l.column_of(i);
    const P d = normalization_divisor(variance[k]);
    const P v = P(load_double(x, i));
    st(y, i, double(invert ? mean[k] + v * d : (v - mean[k]) / d));
  }
}

template <class T, class P>
__global__ void normalize_backward_kernel(const P* variance, const T* dy, T* dx, std::int64_t n, AxesLayout l,
                                          bool invert) {
  SYSTOLIC_GRID_STRIDE(i, n) {
    const P d = normalization_divisor(variance[l.column_of(i)]);
    const P g = P(load_double(dy, i));
    st(dx, i, double(invert ? g * d : g / d));
  }
}

template <class T>
__global__ void transpose_kernel(const T* x, T* y, std::int64_t n, BroadcastLayout l) {
  SYSTOLIC_GRID_STRIDE(i, n) {
    std::int64_t ox, unused;
    l.offsets(i, ox, unused);
    y[i] = x[ox];
  }
}

// Calls f(Tag<T>{}) for the data's element type T; its parameters (gamma, beta, statistics) are acc_t<T>.
template <class F>
cudaError_t by_data_type(Element e, F&& f) {
  return visit_element<float, __nv_bfloat16, double>(e, f);
}

template <class P>
const P* ptr(const Tensor& t) {
  return t.defined() ? static_cast<const P*>(t.raw_data()) : nullptr;
}
template <class P>
P* mut(Tensor& t) {
  return t.defined() ? static_cast<P*>(t.raw_data()) : nullptr;
}

constexpr DTypes kNormDTypes{DType::float32, DType::bfloat16, DType::float64};

}  // namespace

const DTypes layer_norm_forward_dtypes = kNormDTypes;
void layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y, Tensor& mean,
                        Tensor& rstd, std::uint32_t axes, NormKind kind, double eps) {
  Context& c = context(y);
  const AxesLayout l = axes_layout(x.shape(), axes);
  if (l.rows == 0) return;
  SYSTOLIC_CUDA_CHECK(by_data_type(element_of(x.dtype()), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using P = acc_t<T>;
    return launch_elementwise(layer_norm_forward_kernel<T, P>, l.rows, c.stream, ptr<T>(x), ptr<P>(gamma),
                              ptr<P>(beta), mut<T>(y), mut<P>(mean), mut<P>(rstd), l, kind, eps);
  }));
}

const DTypes layer_norm_backward_dtypes = kNormDTypes;
void layer_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                         const Tensor& dy, Tensor& dx, Tensor& dgamma, Tensor& dbeta, std::uint32_t axes,
                         NormKind kind) {
  Context& c = context(dy);
  const AxesLayout l = axes_layout(x.shape(), axes);
  if (l.rows == 0) return;
  SYSTOLIC_CUDA_CHECK(by_data_type(element_of(x.dtype()), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using P = acc_t<T>;
    cudaError_t status = cudaSuccess;
    if (dx.defined())
      status = launch_elementwise(layer_norm_dx_kernel<T, P>, l.rows, c.stream, ptr<T>(x), ptr<P>(gamma),
                                  ptr<P>(mean), ptr<P>(rstd), ptr<T>(dy), mut<T>(dx), l, kind);
    if (status == cudaSuccess && (dgamma.defined() || dbeta.defined()))
      status = launch_elementwise(layer_norm_dparams_kernel<T, P>, l.cols, c.stream, ptr<T>(x), ptr<P>(mean),
                                  ptr<P>(rstd), ptr<T>(dy), mut<P>(dgamma), mut<P>(dbeta), l, kind);
    return status;
  }));
}

const DTypes broadcast_forward_dtypes = kNormDTypes;
void broadcast_forward(BinaryKind kind, const Tensor& a, const Tensor& b, Tensor& y) {
  Context& c = context(y);
  const std::int64_t n = y.numel();
  if (n == 0) return;
  const BroadcastLayout l = broadcast_layout(a.shape(), b.shape(), y.shape());
  SYSTOLIC_CUDA_CHECK(by_data_type(element_of(a.dtype()), [&](auto tag) {
    using T = typename decltype(tag)::type;
    return launch_elementwise(broadcast_forward_kernel<T>, n, c.stream, kind, ptr<T>(a), ptr<T>(b), mut<T>(y),
                              n, l);
  }));
}

const DTypes broadcast_backward_dtypes = kNormDTypes;
void broadcast_backward(BinaryKind kind, const Tensor& a, const Tensor& b, const Tensor& dy, Tensor& da,
                        Tensor& db) {
  Context& c = context(dy);
  const BroadcastLayout l = broadcast_layout(a.shape(), b.shape(), dy.shape());
  SYSTOLIC_CUDA_CHECK(by_data_type(element_of(a.dtype()), [&](auto tag) {
    using T = typename decltype(tag)::type;
    cudaError_t status = cudaSuccess;
    for (int which = 0; which < 2 && status == cudaSuccess; ++which) {
      Tensor& d = which ? db : da;
      if (!d.defined() || d.numel() == 0) continue;
      status = launch_elementwise(broadcast_backward_kernel<T>, d.numel(), c.stream, kind, which, ptr<T>(a),
                                  ptr<T>(b), ptr<T>(dy), mut<T>(d), d.numel(), l);
    }
    return status;
  }));
}

const DTypes normalize_forward_dtypes = kNormDTypes;
void normalize_forward(const Tensor& x, const Tensor& mean, const Tensor& variance, Tensor& y,
                       std::uint32_t axes, bool invert) {
  Context& c = context(y);
  const std::int64_t n = x.numel();
  if (n == 0) return;
  const AxesLayout l = axes_layout(x.shape(), axes);
  SYSTOLIC_CUDA_CHECK(by_data_type(element_of(x.dtype()), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using P = acc_t<T>;
    return launch_elementwise(normalize_forward_kernel<T, P>, n, c.stream, ptr<T>(x), ptr<P>(mean),
                              ptr<P>(variance), mut<T>(y), n, l, invert);
  }));
}

const DTypes normalize_backward_dtypes = kNormDTypes;
void normalize_backward(const Tensor& variance, const Tensor& dy, Tensor& dx, std::uint32_t axes,
                        bool invert) {
  Context& c = context(dx);
  const std::int64_t n = dy.numel();
  if (n == 0) return;
  const AxesLayout l = axes_layout(dy.shape(), axes);
  SYSTOLIC_CUDA_CHECK(by_data_type(element_of(dy.dtype()), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using P = acc_t<T>;
    return launch_elementwise(normalize_backward_kernel<T, P>, n, c.stream, ptr<P>(variance), ptr<T>(dy),
                              mut<T>(dx), n, l, invert);
  }));
}

const DTypes transpose_dtypes = kNormDTypes;
void transpose(const Tensor& x, Tensor& y, const std::vector<int>& perm) {
  Context& c = context(y);
  const std::int64_t n = y.numel();
  if (n == 0) return;
  const BroadcastLayout l = transpose_layout(x.shape(), perm);
  SYSTOLIC_CUDA_CHECK(by_data_type(element_of(x.dtype()), [&](auto tag) {
    using T = typename decltype(tag)::type;
    return launch_elementwise(transpose_kernel<T>, n, c.stream, ptr<T>(x), mut<T>(y), n, l);
  }));
}

}  // namespace systolic::ops::cuda
