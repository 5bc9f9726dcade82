// resize2d on the XLA backend (xla_backend.h). Each axis's interpolation is a matrix A[out, in] known when tracing
// (weights 1-f on cell lo and f on cell hi, the CPU's taps, ops/cpu/resize.cc: half-pixel centres, tf.image.resize
// without antialias), so forward is y = A_h x A_w^T per image and channel (two dot_generals) and backward, the
// transpose, spreads each dy cell back with forward's weights: dx = A_h^T dy A_w.
#include <systolic/error.h>

#include <algorithm>
#include <cmath>

#include "ops/xla/emit.h"
#include "ops/xla/xla_backend.h"

namespace systolic::ops::xla {

namespace {

// A[out, in] of one axis, in `elem`.
E interpolation_matrix(std::int64_t in, std::int64_t out, Interpolation mode, Elem elem) {
  std::vector<double> a(static_cast<std::size_t>(out * in), 0.0);
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  for (std::int64_t o = 0; o < out; ++o) {
    double* row = a.data() + o * in;
    if (mode == Interpolation::nearest) {
      row[std::min<std::int64_t>(static_cast<std::int64_t>(std::floor((o + 0.5) * scale)), in - 1)] = 1.0;
    } else {
      const double s = (o + 0.5) * scale - 0.5, fl = std::floor(s), f = s - fl;
      const std::int64_t lo = std::max<std::int64_t>(static_cast<std::int64_t>(fl), 0);
      const std::int64_t hi = std::min<std::int64_t>(static_cast<std::int64_t>(std::ceil(s)), in - 1);
      row[lo] += 1.0 - f;
      row[hi] += f;
    }
  }
  return constant(a, Type{elem, {out, in}});
}

}  // namespace

const DTypes resize2d_forward_dtypes = kFloats;
void resize2d_forward(const Tensor& x, Tensor& y, Interpolation mode) {
  if (y.numel() == 0) return;
  traced([&] {
    E v = read(x);
    const std::int64_t H = x.dim(1), W = x.dim(2), OH = y.dim(1), OW = y.dim(2);
    E ah = interpolation_matrix(H, OH, mode, v.elem()), aw = interpolation_matrix(W, OW, mode, v.elem());
    E t = hlo().dot_general(ah.v, v.v, {}, {}, {1}, {1}, v.elem());  // [OH, N, W, C]
    E u = hlo().dot_general(aw.v, t.v, {}, {}, {1}, {2}, v.elem());  // [OW, OH, N, C]
    write(y, hlo().transpose(u.v, {2, 1, 0, 3}));
  });
}

const DTypes resize2d_backward_dtypes = kFloats;
void resize2d_backward(const Tensor& dy, Tensor& dx, Interpolation mode) {
  if (dx.numel() == 0) return;
  traced([&] {
    const std::int64_t H = dx.dim(1), W = dx.dim(2), OH = dy.dim(1), OW = dy.dim(2);
    if (dy.numel() == 0) {
      write(dx, constant(0.0, Type{compute_elem(dx.dtype()), dx.shape().dims()}));
      return;
    }
    E g = read(dy);
    E ah = interpolation_matrix(H, OH, mode, g.elem()), aw = interpolation_matrix(W, OW, mode, g.elem());
    E t = hlo().dot_general(ah.v, g.v, {}, {}, {0}, {1}, g.elem());  // [H, N, OW, C]
    E u = hlo().dot_general(aw.v, t.v, {}, {}, {0}, {2}, g.elem());  // [W, H, N, C]
    write(dx, hlo().transpose(u.v, {2, 1, 0, 3}));
  });
}

}  // namespace systolic::ops::xla
