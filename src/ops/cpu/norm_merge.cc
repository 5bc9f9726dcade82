// The norm family on the CPU: layer normalisation over any set of axes (Keras's layer norm, its rms_scaling, the
// unit norm), the broadcasting binary ops of the merge layers and LayerScale, Keras Normalization's given
// statistics, transposes. Loops (OpenMP over rows or output elements) for float32 and float64, statistics in
// double; float64 is the reference of tests/test_ops.cc. Reductions of parameter gradients go over columns, each
// summed in row order (deterministic). float32 layer norm over trailing axes goes to oneDNN's layer_normalization
// primitive (onednn_dense_norm.cc). Contracts: include/systolic/ops.h.
#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/cpu/cpu_backend.h"
#include "ops/cpu/onednn.h"
#include "ops/norm_math.h"

namespace systolic::ops::cpu {

namespace {

template <class T>
void layer_norm_forward_loop(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                             Tensor& mean, Tensor& rstd, std::uint32_t axes, NormKind kind, double eps) {
  const AxesLayout l = axes_layout(x.shape(), axes);
  const std::int64_t K = l.cols, M = l.rows;
  const T* xp = x.data<T>();
  const T* gp = gamma.defined() ? gamma.data<T>() : nullptr;
  const T* bp = beta.defined() ? beta.data<T>() : nullptr;
  T *yp = y.data<T>(), *mp = mean.data<T>(), *rp = rstd.data<T>();
  parallel_ranges(M, M * K, [&](std::int64_t m0, std::int64_t m1) {
    for (std::int64_t m = m0; m < m1; ++m) {
      const std::int64_t base = l.row_offset(m);
      auto at = [&](std::int64_t k) { return base + l.col_offset(k); };
      double mu = 0, r;
      if (kind == NormKind::unit) {
        double s = 0;
        for (std::int64_t k = 0; k < K; ++k) s += double(xp[at(k)]) * double(xp[at(k)]);
        r = unit_inverse(s);
      } else {
        for (std::int64_t k = 0; k < K; ++k) mu += double(xp[at(k)]);
        mu /= double(K);
        double v = 0;
        for (std::int64_t k = 0; k < K; ++k) v += (double(xp[at(k)]) - mu) * (double(xp[at(k)]) - mu);
        r = 1.0 / std::sqrt(v / double(K) + eps);
      }
      mp[m] = T(mu);
      rp[m] = T(r);
      for (std::int64_t k = 0; k < K; ++k) {
        const double g = gp ? double(gp[k]) : 1.0, xv = double(xp[at(k)]);
        const double v =
            kind == NormKind::layer ? (xv - mu) * r * g + (bp ? double(bp[k]) : 0.0) : xv * r * g;
        yp[at(k)] = T(v);
      }
    }
  });
}

template <class T>
void layer_norm_backward_loop(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                              const Tensor& dy, Tensor& dx, Tensor& dgamma, Tensor& dbeta, std::uint32_t axes,
                              NormKind kind) {
  const AxesLayout l = axes_layout(x.shape(), axes);
  const std::int64_t K = l.cols, M = l.rows;
  const T *xp = x.data<T>(), *mp = mean.data<T>(), *rp = rstd.data<T>(), *gy = dy.data<T>();
  const T* gp = gamma.defined() ? gamma.data<T>() : nullptr;
  if (dx.defined()) {
    T* dxp = dx.data<T>();
    parallel_ranges(M, M * K, [&](std::int64_t m0, std::int64_t m1) {
      for (std::int64_t m = m0; m < m1; ++m) {
        const std::int64_t base = l.row_offset(m);
        auto at = [&](std::int64_t k) { return base + l.col_offset(k); };
        const double mu = mp[m], r = rp[m];
        auto xv = [&](std::int64_t k) { return double(xp[at(k)]); };
        auto gg = [&](std::int64_t k) { return double(gy[at(k)]) * (gp ? double(gp[k]) : 1.0); };
        if (kind == NormKind::layer) {
          double a = 0, b = 0;
          for (std::int64_t k = 0; k < K; ++k) {
            a += gg(k);
            b += gg(k) * (xv(k) - mu) * r;
          }
          a /= double(K), b /= double(K);
          for (std::int64_t k = 0; k < K; ++k) dxp[at(k)] = T(r * (gg(k) - a - (xv(k) - mu) * r * b));
        } else if (kind == NormKind::rms_scaling) {
          double s = 0;
          for (std::int64_t k = 0; k < K; ++k) s += gg(k) * xv(k);
          for (std::int64_t k = 0; k < K; ++k)
            dxp[at(k)] = T(r * gg(k) - r * r * r * (xv(k) - mu) / double(K) * s);
        } else {
          // min(rsqrt(s), 1e12): at the cap, r is a constant (TensorFlow sends minimum's gradient to its first
          // argument only where it is the smaller).
          double s = 0;
          for (std::int64_t k = 0; k < K; ++k) s += double(gy[at(k)]) * xv(k);
          const bool capped = r >= kUnitMaxInverse;
          for (std::int64_t k = 0; k < K; ++k)
            dxp[at(k)] = T(r * double(gy[at(k)]) - (capped ? 0.0 : r * r * r * xv(k) * s));
        }
      }
    });
  }
  T* dgp = dgamma.defined() ? dgamma.data<T>() : nullptr;
  T* dbp = dbeta.defined() ? dbeta.data<T>() : nullptr;
  if (!dgp && !dbp) return;
  parallel_ranges(K, M * K, [&](std::int64_t k0, std::int64_t k1) {
    for (std::int64_t k = k0; k < k1; ++k) {
      const std::int64_t col = l.col_offset(k);
      double sg = 0, sb = 0;
      for (std::int64_t m = 0; m < M; ++m) {
        const std::int64_t o = l.row_offset(m) + col;
        const double g = gy[o], v = xp[o];
        sg += g * (kind == NormKind::layer ? (v - double(mp[m])) * double(rp[m]) : v * double(rp[m]));
        sb += g;
      }
      if (dgp) dgp[k] += T(sg);
      if (dbp) dbp[k] += T(sb);
    }
  });
}

template <class T>
void broadcast_forward_loop(BinaryKind kind, const Tensor& a, const Tensor& b, Tensor& y) {
  const BroadcastLayout l = broadcast_layout(a.shape(), b.shape(), y.shape());
  const T *ap = a.data<T>(), *bp = b.data<T>();
  T* yp = y.data<T>();
  const std::int64_t n = y.numel();
  if (a.numel() == n && b.numel() == n) {
    parallel_ranges(n, n, [&](std::int64_t i0, std::int64_t i1) {
      for (std::int64_t i = i0; i < i1; ++i) yp[i] = binary_value(kind, ap[i], bp[i]);
    });
    return;
  }
  parallel_ranges(n, n, [&](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t i = i0; i < i1; ++i) {
      std::int64_t oa, ob;
      l.offsets(i, oa, ob);
      yp[i] = binary_value(kind, ap[oa], bp[ob]);
    }
  });
}

template <class T>
void broadcast_backward_loop(BinaryKind kind, const Tensor& a, const Tensor& b, const Tensor& dy, Tensor& da,
                             Tensor& db) {
  const BroadcastLayout l = broadcast_layout(a.shape(), b.shape(), dy.shape());
  const T *ap = a.data<T>(), *bp = b.data<T>(), *gp = dy.data<T>();
  for (int which = 0; which < 2; ++which) {
    Tensor& d = which ? db : da;
    if (!d.defined()) continue;
    T* dp = d.data<T>();
    const std::int64_t n = d.numel();
    parallel_ranges(n, dy.numel(), [&](std::int64_t i0, std::int64_t i1) {
      for (std::int64_t i = i0; i < i1; ++i) {
        double s = 0;
        l.for_each_source(which, i, [&](std::int64_t oy, std::int64_t oo) {
          const T av = which ? ap[oo] : ap[i], bv = which ? bp[i] : bp[oo];
          s += double(binary_gradient(kind, which, av, bv, gp[oy]));
        });
        dp[i] = T(s);
      }
    });
  }
}

template <class T>
void normalize_forward_loop(const Tensor& x, const Tensor& mean, const Tensor& variance, Tensor& y,
                            std::uint32_t axes, bool invert) {
  const AxesLayout l = axes_layout(x.shape(), axes);
  const std::int64_t n = x.numel();
  const T *xp = x.data<T>(), *mp = mean.data<T>(), *vp = variance.data<T>();
  T* yp = y.data<T>();
  parallel_ranges(n, n, [&](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t i = i0; i < i1; ++i) {
      const std::int64_t k = l.column_of(i);
      const T d = normalization_divisor(vp[k]);
      yp[i] = invert ? mp[k] + xp[i] * d : (xp[i] - mp[k]) / d;
    }
  });
}

template <class T>
void normalize_backward_loop(const Tensor& variance, const Tensor& dy, Tensor& dx, std::uint32_t axes,
                             bool invert) {
  const AxesLayout l = axes_layout(dy.shape(), axes);
  const std::int64_t n = dy.numel();
  const T *vp = variance.data<T>(), *gp = dy.data<T>();
  T* dxp = dx.data<T>();
  parallel_ranges(n, n, [&](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t i = i0; i < i1; ++i) {
      const T d = normalization_divisor(vp[l.column_of(i)]);
      dxp[i] = invert ? gp[i] * d : gp[i] / d;
    }
  });
}

template <class T>
void transpose_loop(const Tensor& x, Tensor& y, const std::vector<int>& perm) {
  const BroadcastLayout l = transpose_layout(x.shape(), perm);
  const T* xp = x.data<T>();
  T* yp = y.data<T>();
  const std::int64_t n = y.numel();
  if (n == 0) return;
  // Trailing axes left in place (a recurrent layer's (N, T, F) <-> (T, N, F)): runs of `inner` values contiguous in
  // both, copied whole.
  std::int64_t inner = 1;
  for (int a = x.rank() - 1; a >= 0 && perm[static_cast<std::size_t>(a)] == a; --a) inner *= x.dim(a);
  if (inner > 1) {
    const std::int64_t runs = n / inner;
    parallel_ranges(runs, n, [&](std::int64_t j0, std::int64_t j1) {
      for (std::int64_t j = j0; j < j1; ++j) {
        std::int64_t ox, unused;
        l.offsets(j * inner, ox, unused);
        std::copy_n(xp + ox, inner, yp + j * inner);
      }
    });
    return;
  }
  parallel_ranges(n, n, [&](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t i = i0; i < i1; ++i) {
      std::int64_t ox, unused;
      l.offsets(i, ox, unused);
      yp[i] = xp[ox];
    }
  });
}

}  // namespace

const DTypes layer_norm_forward_dtypes = kFloats;
void layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y, Tensor& mean,
                        Tensor& rstd, std::uint32_t axes, NormKind kind, double eps) {
  // oneDNN's layer_normalization normalises rows of contiguous values: float32 layer norm over trailing axes.
  if (x.dtype() == DType::float32 && kind == NormKind::layer && axes_layout(x.shape(), axes).trailing)
    return onednn::layer_norm_forward(x, gamma, beta, y, mean, rstd, axes_layout(x.shape(), axes).cols, eps);
  visit_dtype<float, double>(x.dtype(), [&](auto t) {
    layer_norm_forward_loop<typename decltype(t)::type>(x, gamma, beta, y, mean, rstd, axes, kind, eps);
  });
}

const DTypes layer_norm_backward_dtypes = kFloats;
void layer_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                         const Tensor& dy, Tensor& dx, Tensor& dgamma, Tensor& dbeta, std::uint32_t axes,
                         NormKind kind) {
  if (x.dtype() == DType::float32 && kind == NormKind::layer && axes_layout(x.shape(), axes).trailing)
    return onednn::layer_norm_backward(x, gamma, mean, rstd, dy, dx, dgamma, dbeta,
                                       axes_layout(x.shape(), axes).cols);
  visit_dtype<float, double>(x.dtype(), [&](auto t) {
    layer_norm_backward_loop<typename decltype(t)::type>(x, gamma, mean, rstd, dy, dx, dgamma, dbeta, axes,
                                                         kind);
  });
}

const DTypes broadcast_forward_dtypes = kFloats;
void broadcast_forward(BinaryKind kind, const Tensor& a, const Tensor& b, Tensor& y) {
  visit_dtype<float, double>(
      a.dtype(), [&](auto t) { broadcast_forward_loop<typename decltype(t)::type>(kind, a, b, y); });
}

const DTypes broadcast_backward_dtypes = kFloats;
void broadcast_backward(BinaryKind kind, const Tensor& a, const Tensor& b, const Tensor& dy, Tensor& da,
                        Tensor& db) {
  visit_dtype<float, double>(a.dtype(), [&](auto t) {
    broadcast_backward_loop<typename decltype(t)::type>(kind, a, b, dy, da, db);
  });
}

const DTypes normalize_forward_dtypes = kFloats;
void normalize_forward(const Tensor& x, const Tensor& mean, const Tensor& variance, Tensor& y,
                       std::uint32_t axes, bool invert) {
  visit_dtype<float, double>(x.dtype(), [&](auto t) {
    normalize_forward_loop<typename decltype(t)::type>(x, mean, variance, y, axes, invert);
  });
}

const DTypes normalize_backward_dtypes = kFloats;
void normalize_backward(const Tensor& variance, const Tensor& dy, Tensor& dx, std::uint32_t axes,
                        bool invert) {
  visit_dtype<float, double>(dy.dtype(), [&](auto t) {
    normalize_backward_loop<typename decltype(t)::type>(variance, dy, dx, axes, invert);
  });
}

const DTypes transpose_dtypes = kFloats;
void transpose(const Tensor& x, Tensor& y, const std::vector<int>& perm) {
  visit_dtype<float, double>(x.dtype(),
                             [&](auto t) { transpose_loop<typename decltype(t)::type>(x, y, perm); });
}

}  // namespace systolic::ops::cpu
