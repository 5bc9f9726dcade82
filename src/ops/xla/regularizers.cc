// Regularizers and constraints on the XLA backend (xla_backend.h): the CPU loops' formulas (ops/cpu/regularizers.cc,
// contracts in include/systolic/ops.h), sums and factors in double, the data rounded once when written. The
// penalty total (float64 [1]) and the gradient dx are accumulated (+=).
#include <systolic/error.h>

#include "ops/norm_layout.h"
#include "ops/xla/emit.h"
#include "ops/xla/xla_backend.h"

namespace systolic::ops::xla {

namespace {

// sign(v) with sign(0) = 0 (TensorFlow's gradient of abs).
E sign_of(const E& v) {
  return where(v > 0.0, like(1.0, v), where(v < 0.0, like(-1.0, v), 0.0));
}

// total += value (a float64 scalar).
void add_to_total(const Tensor& total, const E& value) {
  accumulate_into(total, reshape(value, {1}));
}

// dx += g: the CPU's T(double(dx) + g), rounded once.
void add_gradient(const Tensor& dx, const E& g) {
  E old = read_as(dx, Elem::f64);
  write(dx, old + reshape(g, old.dims()));
}

}  // namespace

const DTypes regularize_dtypes = kFloats;
void regularize(const Tensor& x, Tensor& total, Tensor& dx, double l1, double l2, double total_scale,
                double grad_scale) {
  traced([&] {
    E v = read_as(x, Elem::f64);
    if (total.defined()) add_to_total(total, total_scale * (l1 * sum_all(abs(v)) + l2 * sum_all(v * v)));
    if (dx.defined()) add_gradient(dx, grad_scale * (l1 * sign_of(v) + 2.0 * l2 * v));
  });
}

const DTypes orthogonal_regularize_dtypes = kFloats;
void orthogonal_regularize(const Tensor& x, Tensor& total, Tensor& dx, double factor, bool columns,
                           double total_scale, double grad_scale) {
  traced([&] {
    // The n vectors as the rows of U [n, len] (x's rows, or its columns transposed), each scaled by
    // normalize_scale (Keras's ops.normalize); G = U U^T off its diagonal.
    E v = read_as(x, Elem::f64);
    if (columns) v = hlo().transpose(v.v, {1, 0});
    const std::int64_t n = v.dims()[0], len = v.dims()[1];
    E sq = sum(v * v, {1});
    const double cap = 1e7;
    E raw = where(sq > 0.0, 1.0 / sqrt(sq), cap + 1);
    E rsqrt_branch = raw < cap;
    E inv = where(rsqrt_branch, raw, cap);
    E u = v * broadcast(inv, {n, len}, {0});
    E g = hlo().dot_general(u.v, u.v, {}, {}, {1}, {1}, Elem::f64);  // [n, n]
    E off = !eq(iota({n, n}, 0, Elem::i32), iota({n, n}, 1, Elem::i32));
    E a = where(off, abs(g), 0.0);
    const double pairs = double(n) * (double(n) - 1.0) / 2.0;
    if (total.defined()) add_to_total(total, total_scale * factor * 0.5 * sum_all(a) / pairs);
    if (!dx.defined()) return;
    // gu_i = sum_j sign(G_ij) u_j, ug_i = sum_j |G_ij| (j != i); through the scale: inv * (gu - u ug) on the
    // rsqrt branch, inv * gu at the cap.
    E s = where(off, sign_of(g), 0.0);
    E gu = hlo().dot_general(s.v, u.v, {}, {}, {1}, {0}, Elem::f64);  // [n, len]
    E ug = broadcast(sum(a, {1}), {n, len}, {0});
    E inv_b = broadcast(inv, {n, len}, {0});
    E d = where(broadcast(rsqrt_branch, {n, len}, {0}), inv_b * (gu - u * ug), inv_b * gu);
    d = (grad_scale * factor / pairs) * d;
    if (columns) d = hlo().transpose(d.v, {1, 0});
    add_gradient(dx, d);
  });
}

const DTypes constrain_dtypes = kFloats;
void constrain(Tensor& w, const ConstraintParams& p) {
  traced([&] {
    E v = read_as(w, Elem::f64);
    if (p.kind == ConstraintParams::non_neg) {
      E t = read(w);
      write(w, where(t > 0.0, t, 0.0));
      return;
    }
    // The norms over p.axes, kept per the other axes, and constraint_factor (ops/norm_layout.h) of each.
    std::vector<std::int64_t> reduced, kept;
    for (int d = 0; d < w.rank(); ++d) ((p.axes >> d) & 1u ? reduced : kept).push_back(d);
    E norm = sqrt(sum(v * v, reduced));
    const double eps = 1e-7;
    E f;
    switch (p.kind) {
      case ConstraintParams::max_norm:
        f = clip(norm, 0.0, p.max_value) / (eps + norm);
        break;
      case ConstraintParams::unit_norm:
        f = 1.0 / (eps + norm);
        break;
      case ConstraintParams::min_max_norm:
        f = (p.rate * clip(norm, p.min_value, p.max_value) + (1.0 - p.rate) * norm) / (eps + norm);
        break;
      default:
        f = like(1.0, norm);
    }
    write(w, v * broadcast(f, v.dims(), kept));
  });
}

}  // namespace systolic::ops::xla
