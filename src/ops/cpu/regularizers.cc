// Regularizers and constraints on the CPU (regul): regularize, orthogonal_regularize, constrain, as loops
// (oneDNN has no primitive for them); sums in double. float32 and float64 (the reference). Contracts:
// include/systolic/ops.h.
#include <cmath>
#include <vector>

#include "ops/cpu/cpu_backend.h"
#include "ops/norm_layout.h"

namespace systolic::ops::cpu {

namespace {

template <class T>
void regularize_loop(const Tensor& x, Tensor& total, Tensor& dx, double l1, double l2, double total_scale,
                     double grad_scale) {
  const T* p = x.data<T>();
  const std::int64_t n = x.numel();
  if (total.defined()) {
    struct Sums {
      double s1 = 0, s2 = 0;  // of |v| and v^2
      Sums operator+(const Sums& o) const { return {s1 + o.s1, s2 + o.s2}; }
    };
    const Sums s = parallel_sum(n, n, [&](std::int64_t i0, std::int64_t i1) {
      Sums part;
      for (std::int64_t i = i0; i < i1; ++i) {
        double v = double(p[i]);
        part.s1 += std::abs(v);
        part.s2 += v * v;
      }
      return part;
    });
    total.data<double>()[0] += total_scale * (l1 * s.s1 + l2 * s.s2);
  }
  if (dx.defined()) {
    T* d = dx.data<T>();
    parallel_ranges(n, n, [&](std::int64_t i0, std::int64_t i1) {
      for (std::int64_t i = i0; i < i1; ++i) {
        double v = double(p[i]);
        double sign = v > 0 ? 1.0 : (v < 0 ? -1.0 : 0.0);
        d[i] = T(double(d[i]) + grad_scale * (l1 * sign + 2.0 * l2 * v));
      }
    });
  }
}

template <class T>
void orthogonal_loop(const Tensor& x, Tensor& total, Tensor& dx, double factor, bool columns,
                     double total_scale, double grad_scale) {
  const std::int64_t R = x.dim(0), C = x.dim(1);
  // n vectors of length len: element k of vector i at i*si + k*sk.
  const std::int64_t n = columns ? C : R, len = columns ? R : C, si = columns ? 1 : C, sk = columns ? C : 1;
  const T* p = x.data<T>();
  std::vector<double> u(n * len), inv(n);
  std::vector<char> rsqrt_branch(n);
  for (std::int64_t i = 0; i < n; ++i) {
    double sq = 0;
    for (std::int64_t k = 0; k < len; ++k) sq += double(p[i * si + k * sk]) * double(p[i * si + k * sk]);
    bool b;
    inv[i] = normalize_scale(sq, b);
    rsqrt_branch[i] = b;
    for (std::int64_t k = 0; k < len; ++k) u[i * len + k] = double(p[i * si + k * sk]) * inv[i];
  }
  const double pairs = double(n) * (double(n) - 1.0) / 2.0;
  double sum = 0;
  std::vector<double> gu(dx.defined() ? n * len : 0);
  std::vector<double> ug(n, 0.0);  // u_i . gu_i / (factor/pairs)
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      if (i == j) continue;
      double g = 0;
      for (std::int64_t k = 0; k < len; ++k) g += u[i * len + k] * u[j * len + k];
      sum += std::abs(g);
      if (dx.defined()) {
        double s = g > 0 ? 1.0 : (g < 0 ? -1.0 : 0.0);
        for (std::int64_t k = 0; k < len; ++k) gu[i * len + k] += s * u[j * len + k];
        ug[i] += std::abs(g);
      }
    }
  if (total.defined()) total.data<double>()[0] += total_scale * factor * 0.5 * sum / pairs;
  if (!dx.defined()) return;
  T* d = dx.data<T>();
  const double c = grad_scale * factor / pairs;
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t k = 0; k < len; ++k) {
      double g =
          rsqrt_branch[i] ? inv[i] * (gu[i * len + k] - u[i * len + k] * ug[i]) : inv[i] * gu[i * len + k];
      T& out = d[i * si + k * sk];
      out = T(double(out) + c * g);
    }
}

template <class T>
void constrain_loop(Tensor& w, const ConstraintParams& p) {
  T* data = w.data<T>();
  if (p.kind == ConstraintParams::non_neg) {
    for (std::int64_t i = 0; i < w.numel(); ++i) data[i] = data[i] > T(0) ? data[i] : T(0);
    return;
  }
  const std::vector<std::int64_t>& dims = w.shape().dims();
  NormLayout l = NormLayout::of(dims.data(), w.rank(), p.axes);
  parallel_ranges(l.groups, l.groups * l.reduced, [&](std::int64_t g0, std::int64_t g1) {
    for (std::int64_t g = g0; g < g1; ++g) {
      T* base = data + l.group_offset(g);
      double sq = 0;
      for (std::int64_t r = 0; r < l.reduced; ++r) {
        double v = double(base[l.reduced_offset(r)]);
        sq += v * v;
      }
      double f = constraint_factor(p.kind, std::sqrt(sq), p.min_value, p.max_value, p.rate);
      for (std::int64_t r = 0; r < l.reduced; ++r) {
        T& v = base[l.reduced_offset(r)];
        v = T(double(v) * f);
      }
    }
  });
}

}  // namespace

const DTypes regularize_dtypes = kFloats;
void regularize(const Tensor& x, Tensor& total, Tensor& dx, double l1, double l2, double total_scale,
                double grad_scale) {
  visit_dtype<float, double>(x.dtype(), [&](auto t) {
    regularize_loop<typename decltype(t)::type>(x, total, dx, l1, l2, total_scale, grad_scale);
  });
}

const DTypes orthogonal_regularize_dtypes = kFloats;
void orthogonal_regularize(const Tensor& x, Tensor& total, Tensor& dx, double factor, bool columns,
                           double total_scale, double grad_scale) {
  visit_dtype<float, double>(x.dtype(), [&](auto t) {
    orthogonal_loop<typename decltype(t)::type>(x, total, dx, factor, columns, total_scale, grad_scale);
  });
}

const DTypes constrain_dtypes = kFloats;
void constrain(Tensor& w, const ConstraintParams& p) {
  visit_dtype<float, double>(w.dtype(), [&](auto t) { constrain_loop<typename decltype(t)::type>(w, p); });
}

}  // namespace systolic::ops::cpu
