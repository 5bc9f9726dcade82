// Normalisations over axes, broadcasting binary ops, normalize, transpose on the XLA backend (xla_backend.h). The
// CPU loops (ops/cpu/norm_merge.cc) are the reference: statistics and the layer norms in double (rounded to the
// dtype once, as there), the binary ops and Normalization in the data's own type. A set of axes (bit a: axis a)
// becomes a transpose that puts the other axes first and the set last, both in ascending order, and a reshape to
// [M rows, K columns]: exactly ops/norm_math.h's AxesLayout (rows and columns row-major over their axes).
#include <systolic/error.h>

#include <numeric>

#include "ops/norm_math.h"
#include "ops/xla/emit.h"
#include "ops/xla/xla_backend.h"

namespace systolic::ops::xla {

namespace {

// x's axes as rows and columns by a set of axes.
struct Rows {
  std::vector<std::int64_t> perm, inverse, permuted;  // the transpose to (rows..., columns...) and back
  std::int64_t M = 1, K = 1;
};
Rows rows_of(const Shape& x, std::uint32_t set) {
  Rows r;
  for (int pass = 0; pass < 2; ++pass)
    for (int d = 0; d < x.rank(); ++d)
      if ((((set >> d) & 1u) != 0) == (pass == 1)) {
        r.perm.push_back(d);
        r.permuted.push_back(x[d]);
        (pass ? r.K : r.M) *= x[d];
      }
  r.inverse.resize(r.perm.size());
  for (std::size_t i = 0; i < r.perm.size(); ++i)
    r.inverse[static_cast<std::size_t>(r.perm[i])] = std::int64_t(i);
  return r;
}
// x as [M, K], and back.
E to_rows(const E& x, const Rows& r) {
  return reshape(E(hlo().transpose(x.v, r.perm)), {r.M, r.K});
}
E from_rows(const E& x, const Rows& r) {
  return hlo().transpose(reshape(x, r.permuted).v, r.inverse);
}
// A per-row [M] or per-column [K] value over [M, K].
E over_rows(const E& v, const Rows& r) {
  return broadcast(v, {r.M, r.K}, {0});
}
E over_cols(const E& v, const Rows& r) {
  return broadcast(reshape(v, {r.K}), {r.M, r.K}, {1});
}

}  // namespace

const DTypes layer_norm_forward_dtypes = kFloats;
void layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y, Tensor& mean,
                        Tensor& rstd, std::uint32_t axes, NormKind kind, double eps) {
  traced([&] {
    const Rows r = rows_of(x.shape(), axes);
    E v = to_rows(read_as(x, Elem::f64), r);
    E mu = constant(0.0, Type{Elem::f64, {r.M}}), inv;
    if (kind == NormKind::unit) {
      inv = minimum(1.0 / sqrt(sum(v * v, {1})), kUnitMaxInverse);  // unit_inverse
    } else {
      mu = sum(v, {1}) / double(r.K);
      E c = v - over_rows(mu, r);
      inv = 1.0 / sqrt(sum(c * c, {1}) / double(r.K) + eps);
    }
    E g = gamma.defined() ? over_cols(read_as(gamma, Elem::f64), r) : like(1.0, v);
    E out =
        kind == NormKind::layer ? (v - over_rows(mu, r)) * over_rows(inv, r) * g : v * over_rows(inv, r) * g;
    if (kind == NormKind::layer && beta.defined()) out = out + over_cols(read_as(beta, Elem::f64), r);
    write(mean, mu);
    write(rstd, inv);
    write(y, from_rows(out, r));
  });
}

const DTypes layer_norm_backward_dtypes = kFloats;
void layer_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                         const Tensor& dy, Tensor& dx, Tensor& dgamma, Tensor& dbeta, std::uint32_t axes,
                         NormKind kind) {
  traced([&] {
    const Rows r = rows_of(x.shape(), axes);
    E v = to_rows(read_as(x, Elem::f64), r), gy = to_rows(read_as(dy, Elem::f64), r);
    E mu = over_rows(read_as(mean, Elem::f64), r), inv = over_rows(read_as(rstd, Elem::f64), r);
    const double K = double(r.K);
    if (dx.defined()) {
      E gg = gamma.defined() ? gy * over_cols(read_as(gamma, Elem::f64), r) : gy;
      E d;
      if (kind == NormKind::layer) {
        E a = over_rows(sum(gg, {1}) / K, r), b = over_rows(sum(gg * (v - mu) * inv, {1}) / K, r);
        d = inv * (gg - a - (v - mu) * inv * b);
      } else if (kind == NormKind::rms_scaling) {
        E s = over_rows(sum(gg * v, {1}), r);
        d = inv * gg - inv * inv * inv * (v - mu) / K * s;
      } else {
        // At the cap 1e12 the scale is a constant (TensorFlow's gradient of minimum), as on the CPU.
        E s = over_rows(sum(gy * v, {1}), r);
        d = inv * gy - where(inv >= kUnitMaxInverse, 0.0, inv * inv * inv * v * s);
      }
      write(dx, from_rows(d, r));
    }
    if (dgamma.defined())
      accumulate_into(dgamma, sum(gy * (kind == NormKind::layer ? (v - mu) * inv : v * inv), {0}));
    if (dbeta.defined()) accumulate_into(dbeta, sum(gy, {0}));
  });
}

namespace {

// a and b broadcast to y's dims (NumPy: aligned on the right).
E broadcast_to(const E& v, const std::vector<std::int64_t>& y) {
  std::vector<std::int64_t> map(v.dims().size());
  std::iota(map.begin(), map.end(), std::int64_t(y.size() - v.dims().size()));
  if (v.dims() == y) return v;
  return hlo().broadcast(v.v, y, map);
}
// ops/norm_math.h's binary_value and binary_gradient (ties of maximum and minimum to a).
E binary_value(BinaryKind k, const E& a, const E& b) {
  switch (k) {
    case BinaryKind::add:
      return a + b;
    case BinaryKind::subtract:
      return a - b;
    case BinaryKind::multiply:
      return a * b;
    case BinaryKind::maximum:
      return where(a >= b, a, b);
    case BinaryKind::minimum:
      return where(a <= b, a, b);
    case BinaryKind::divide:
      return a / b;
  }
  return a;
}
E binary_gradient(BinaryKind k, int which, const E& a, const E& b, const E& g) {
  switch (k) {
    case BinaryKind::add:
      return g;
    case BinaryKind::subtract:
      return which ? -g : g;
    case BinaryKind::multiply:
      return which ? g * a : g * b;
    case BinaryKind::maximum:
      return which ? where(a >= b, 0.0, g) : where(a >= b, g, 0.0);
    case BinaryKind::minimum:
      return which ? where(a <= b, 0.0, g) : where(a <= b, g, 0.0);
    case BinaryKind::divide:
      return which ? -g * a / (b * b) : g / b;
  }
  return g;
}

}  // namespace

const DTypes broadcast_forward_dtypes = kFloats;
void broadcast_forward(BinaryKind kind, const Tensor& a, const Tensor& b, Tensor& y) {
  traced([&] {
    const auto& dims = y.shape().dims();
    write(y, binary_value(kind, broadcast_to(read(a), dims), broadcast_to(read(b), dims)));
  });
}

const DTypes broadcast_backward_dtypes = kFloats;
void broadcast_backward(BinaryKind kind, const Tensor& a, const Tensor& b, const Tensor& dy, Tensor& da,
                        Tensor& db) {
  traced([&] {
    // Each operand's gradient: the elementwise gradient in the data's type, summed in double over the axes the
    // operand was broadcast along (the CPU's for_each_source).
    const auto& dims = dy.shape().dims();
    E av = broadcast_to(read(a), dims), bv = broadcast_to(read(b), dims), g = read(dy);
    for (int which = 0; which < 2; ++which) {
      Tensor& d = which ? db : da;
      if (!d.defined()) continue;
      const Shape& s = which ? b.shape() : a.shape();
      const int lead = static_cast<int>(dims.size()) - s.rank();
      std::vector<std::int64_t> reduced;
      for (int i = 0; i < static_cast<int>(dims.size()); ++i)
        if (i < lead || (s[i - lead] == 1 && dims[static_cast<std::size_t>(i)] != 1)) reduced.push_back(i);
      E sums = sum(convert(binary_gradient(kind, which, av, bv, g), Elem::f64), reduced);
      write(d, reshape(sums, s.dims()));
    }
  });
}

namespace {

// Normalization's statistics (K values over the set's axes, row-major) broadcast to x's dims.
E statistic(const Tensor& t, const Shape& x, std::uint32_t axes) {
  std::vector<std::int64_t> dims, map;
  for (int d = 0; d < x.rank(); ++d)
    if ((axes >> d) & 1u) {
      dims.push_back(x[d]);
      map.push_back(d);
    }
  return broadcast(reshape(read(t), dims), x.dims(), map);
}
// normalization_divisor: max(sqrt(variance), 1e-7) in the statistics' type.
E divisor(const E& variance) {
  E d = sqrt(variance);
  return where(d > 1e-7, d, 1e-7);
}

}  // namespace

const DTypes normalize_forward_dtypes = kFloats;
void normalize_forward(const Tensor& x, const Tensor& mean, const Tensor& variance, Tensor& y,
                       std::uint32_t axes, bool invert) {
  traced([&] {
    E v = read(x), m = statistic(mean, x.shape(), axes), d = divisor(statistic(variance, x.shape(), axes));
    write(y, invert ? m + v * d : (v - m) / d);
  });
}

const DTypes normalize_backward_dtypes = kFloats;
void normalize_backward(const Tensor& variance, const Tensor& dy, Tensor& dx, std::uint32_t axes,
                        bool invert) {
  traced([&] {
    E g = read(dy), d = divisor(statistic(variance, dy.shape(), axes));
    write(dx, invert ? g * d : g / d);
  });
}

const DTypes transpose_dtypes = kFloats;
void transpose(const Tensor& x, Tensor& y, const std::vector<int>& perm) {
  traced([&] {
    std::vector<std::int64_t> p(perm.begin(), perm.end());
    write(y, hlo().transpose(read(x).v, p));
  });
}

}  // namespace systolic::ops::xla
