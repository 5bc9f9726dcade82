// The norm family on the CPU: layer normalisation over trailing axes (Keras's layer norm, its rms_scaling, the
// unit norm), the broadcasting binary ops of the merge layers and LayerScale, Keras Normalization's given
// statistics, transposes. Loops (OpenMP over rows or output elements) for float32 and float64, statistics in
// double; float64 is the reference of tests/test_ops.cc. Reductions of parameter gradients go over columns, each
// summed in row order (deterministic). Contracts: include/systolic/ops.h.
#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/cpu/cpu_backend.h"
#include "ops/norm_math.h"

namespace systolic::ops::cpu {

namespace {

std::int64_t row_size(const Tensor& x, int axes) {
  std::int64_t k = 1;
  for (int i = x.rank() - axes; i < x.rank(); ++i) k *= x.dim(i);
  return k;
}

template <class T>
void layer_norm_forward_loop(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                             Tensor& mean, Tensor& rstd, int axes, NormKind kind, double eps) {
  const std::int64_t K = row_size(x, axes), M = x.numel() / K;
  const T* xp = x.data<T>();
  const T* gp = gamma.defined() ? gamma.data<T>() : nullptr;
  const T* bp = beta.defined() ? beta.data<T>() : nullptr;
  T *yp = y.data<T>(), *mp = mean.data<T>(), *rp = rstd.data<T>();
#pragma omp parallel for
  for (std::int64_t m = 0; m < M; ++m) {
    const T* row = xp + m * K;
    double mu = 0, r;
    if (kind == NormKind::unit) {
      double s = 0;
      for (std::int64_t k = 0; k < K; ++k) s += double(row[k]) * double(row[k]);
      r = 1.0 / std::sqrt(std::max(s, 1e-12));
    } else {
      for (std::int64_t k = 0; k < K; ++k) mu += double(row[k]);
      mu /= double(K);
      double v = 0;
      for (std::int64_t k = 0; k < K; ++k) v += (double(row[k]) - mu) * (double(row[k]) - mu);
      r = 1.0 / std::sqrt(v / double(K) + eps);
    }
    mp[m] = T(mu);
    rp[m] = T(r);
    T* out = yp + m * K;
    for (std::int64_t k = 0; k < K; ++k) {
      double g = gp ? double(gp[k]) : 1.0;
      double v = kind == NormKind::layer ? (double(row[k]) - mu) * r * g + (bp ? double(bp[k]) : 0.0)
                                         : double(row[k]) * r * g;
      out[k] = T(v);
    }
  }
}

template <class T>
void layer_norm_backward_loop(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                              const Tensor& dy, Tensor& dx, Tensor& dgamma, Tensor& dbeta, int axes,
                              NormKind kind) {
  const std::int64_t K = row_size(x, axes), M = x.numel() / K;
  const T *xp = x.data<T>(), *mp = mean.data<T>(), *rp = rstd.data<T>(), *gy = dy.data<T>();
  const T* gp = gamma.defined() ? gamma.data<T>() : nullptr;
  if (dx.defined()) {
    T* dxp = dx.data<T>();
#pragma omp parallel for
    for (std::int64_t m = 0; m < M; ++m) {
      const T *row = xp + m * K, *g = gy + m * K;
      const double mu = mp[m], r = rp[m];
      T* out = dxp + m * K;
      auto gg = [&](std::int64_t k) { return double(g[k]) * (gp ? double(gp[k]) : 1.0); };
      if (kind == NormKind::layer) {
        double a = 0, b = 0;
        for (std::int64_t k = 0; k < K; ++k) {
          a += gg(k);
          b += gg(k) * (double(row[k]) - mu) * r;
        }
        a /= double(K), b /= double(K);
        for (std::int64_t k = 0; k < K; ++k) out[k] = T(r * (gg(k) - a - (double(row[k]) - mu) * r * b));
      } else if (kind == NormKind::rms_scaling) {
        double s = 0;
        for (std::int64_t k = 0; k < K; ++k) s += gg(k) * double(row[k]);
        for (std::int64_t k = 0; k < K; ++k)
          out[k] = T(r * gg(k) - r * r * r * (double(row[k]) - mu) / double(K) * s);
      } else {
        // max(sum x^2, 1e-12): below the floor, r is a constant (TensorFlow sends the tie's gradient to x).
        double s = 0;
        for (std::int64_t k = 0; k < K; ++k) s += double(g[k]) * double(row[k]);
        const bool clamped = 1.0 / (r * r) < 1e-12;
        for (std::int64_t k = 0; k < K; ++k)
          out[k] = T(r * double(g[k]) - (clamped ? 0.0 : r * r * r * double(row[k]) * s));
      }
    }
  }
  T* dgp = dgamma.defined() ? dgamma.data<T>() : nullptr;
  T* dbp = dbeta.defined() ? dbeta.data<T>() : nullptr;
  if (!dgp && !dbp) return;
#pragma omp parallel for
  for (std::int64_t k = 0; k < K; ++k) {
    double sg = 0, sb = 0;
    for (std::int64_t m = 0; m < M; ++m) {
      const double g = gy[m * K + k], v = xp[m * K + k];
      sg += g * (kind == NormKind::layer ? (v - double(mp[m])) * double(rp[m]) : v * double(rp[m]));
      sb += g;
    }
    if (dgp) dgp[k] += T(sg);
    if (dbp) dbp[k] += T(sb);
  }
}

template <class T>
void broadcast_forward_loop(BinaryKind kind, const Tensor& a, const Tensor& b, Tensor& y) {
  const BroadcastLayout l = broadcast_layout(a.shape(), b.shape(), y.shape());
  const T *ap = a.data<T>(), *bp = b.data<T>();
  T* yp = y.data<T>();
  const std::int64_t n = y.numel();
  if (a.numel() == n && b.numel() == n) {
#pragma omp parallel for
    for (std::int64_t i = 0; i < n; ++i) yp[i] = binary_value(kind, ap[i], bp[i]);
    return;
  }
#pragma omp parallel for
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t oa, ob;
    l.offsets(i, oa, ob);
    yp[i] = binary_value(kind, ap[oa], bp[ob]);
  }
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
#pragma omp parallel for
    for (std::int64_t i = 0; i < n; ++i) {
      double s = 0;
      l.for_each_source(which, i, [&](std::int64_t oy, std::int64_t oo) {
        const T av = which ? ap[oo] : ap[i], bv = which ? bp[i] : bp[oo];
        s += double(binary_gradient(kind, which, av, bv, gp[oy]));
      });
      dp[i] = T(s);
    }
  }
}

template <class T>
void normalize_forward_loop(const Tensor& x, const Tensor& mean, const Tensor& variance, Tensor& y,
                            bool invert) {
  const std::int64_t K = variance.numel(), n = x.numel();
  const T *xp = x.data<T>(), *mp = mean.data<T>(), *vp = variance.data<T>();
  T* yp = y.data<T>();
#pragma omp parallel for
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t k = i % K;
    const T d = normalization_divisor(vp[k]);
    yp[i] = invert ? mp[k] + xp[i] * d : (xp[i] - mp[k]) / d;
  }
}

template <class T>
void normalize_backward_loop(const Tensor& variance, const Tensor& dy, Tensor& dx, bool invert) {
  const std::int64_t K = variance.numel(), n = dy.numel();
  const T *vp = variance.data<T>(), *gp = dy.data<T>();
  T* dxp = dx.data<T>();
#pragma omp parallel for
  for (std::int64_t i = 0; i < n; ++i) {
    const T d = normalization_divisor(vp[i % K]);
    dxp[i] = invert ? gp[i] * d : gp[i] / d;
  }
}

template <class T>
void transpose_loop(const Tensor& x, Tensor& y, const std::vector<int>& perm) {
  const BroadcastLayout l = transpose_layout(x.shape(), perm);
  const T* xp = x.data<T>();
  T* yp = y.data<T>();
  const std::int64_t n = y.numel();
#pragma omp parallel for
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t ox, unused;
    l.offsets(i, ox, unused);
    yp[i] = xp[ox];
  }
}

}  // namespace

const DTypes layer_norm_forward_dtypes = kFloats;
void layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y, Tensor& mean,
                        Tensor& rstd, int axes, NormKind kind, double eps) {
  by_float(x.dtype(), [&](auto t) {
    layer_norm_forward_loop<decltype(t)>(x, gamma, beta, y, mean, rstd, axes, kind, eps);
  });
}

const DTypes layer_norm_backward_dtypes = kFloats;
void layer_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                         const Tensor& dy, Tensor& dx, Tensor& dgamma, Tensor& dbeta, int axes,
                         NormKind kind) {
  by_float(x.dtype(), [&](auto t) {
    layer_norm_backward_loop<decltype(t)>(x, gamma, mean, rstd, dy, dx, dgamma, dbeta, axes, kind);
  });
}

const DTypes broadcast_forward_dtypes = kFloats;
void broadcast_forward(BinaryKind kind, const Tensor& a, const Tensor& b, Tensor& y) {
  by_float(a.dtype(), [&](auto t) { broadcast_forward_loop<decltype(t)>(kind, a, b, y); });
}

const DTypes broadcast_backward_dtypes = kFloats;
void broadcast_backward(BinaryKind kind, const Tensor& a, const Tensor& b, const Tensor& dy, Tensor& da,
                        Tensor& db) {
  by_float(a.dtype(), [&](auto t) { broadcast_backward_loop<decltype(t)>(kind, a, b, dy, da, db); });
}

const DTypes normalize_forward_dtypes = kFloats;
void normalize_forward(const Tensor& x, const Tensor& mean, const Tensor& variance, Tensor& y, bool invert) {
  by_float(x.dtype(), [&](auto t) { normalize_forward_loop<decltype(t)>(x, mean, variance, y, invert); });
}

const DTypes normalize_backward_dtypes = kFloats;
void normalize_backward(const Tensor& variance, const Tensor& dy, Tensor& dx, bool invert) {
  by_float(dy.dtype(), [&](auto t) { normalize_backward_loop<decltype(t)>(variance, dy, dx, invert); });
}

const DTypes transpose_dtypes = kFloats;
void transpose(const Tensor& x, Tensor& y, const std::vector<int>& perm) {
  by_float(x.dtype(), [&](auto t) { transpose_loop<decltype(t)>(x, y, perm); });
}

}  // namespace systolic::ops::cpu
