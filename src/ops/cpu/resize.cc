// Image resizing (UpSampling2D) on the CPU: plain loops for float32 and float64 (the reference). Contracts:
// include/systolic/ops.h.
#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/cpu/cpu_backend.h"

namespace systolic::ops::cpu {

namespace {

// Where output row (or column) o reads along one axis: cells lo and hi with weights 1-f and f.
struct Tap {
  std::int64_t lo, hi;
  double f;
};
std::vector<Tap> taps(std::int64_t in, std::int64_t out, Interpolation mode) {
  std::vector<Tap> t(static_cast<std::size_t>(out));
  double scale = static_cast<double>(in) / static_cast<double>(out);
  for (std::int64_t o = 0; o < out; ++o) {
    if (mode == Interpolation::nearest) {
      std::int64_t i =
          std::min<std::int64_t>(static_cast<std::int64_t>(std::floor((o + 0.5) * scale)), in - 1);
      t[o] = {i, i, 0.0};
    } else {
      double s = (o + 0.5) * scale - 0.5;
      double fl = std::floor(s);
      std::int64_t lo = std::max<std::int64_t>(static_cast<std::int64_t>(fl), 0);
      std::int64_t hi = std::min<std::int64_t>(static_cast<std::int64_t>(std::ceil(s)), in - 1);
      t[o] = {lo, hi, s - fl};
    }
  }
  return t;
}

template <class T>
void resize_forward_loop(const Tensor& x, Tensor& y, Interpolation mode) {
  std::int64_t N = x.dim(0), H = x.dim(1), W = x.dim(2), C = x.dim(3), OH = y.dim(1), OW = y.dim(2);
  auto th = taps(H, OH, mode), tw = taps(W, OW, mode);
  const T* xp = x.data<T>();
  T* yp = y.data<T>();
  parallel_ranges(N * OH, N * OH * OW * C, [&](std::int64_t q0, std::int64_t q1) {
    for (std::int64_t q = q0; q < q1; ++q) {  // q = n * OH + oh
      const std::int64_t n = q / OH, oh = q % OH;
      for (std::int64_t ow = 0; ow < OW; ++ow) {
        const Tap &a = th[oh], &b = tw[ow];
        const T* r0 = xp + (n * H + a.lo) * W * C;
        const T* r1 = xp + (n * H + a.hi) * W * C;
        T fh = static_cast<T>(a.f), fw = static_cast<T>(b.f);
        T* out = yp + ((n * OH + oh) * OW + ow) * C;
        for (std::int64_t c = 0; c < C; ++c) {
          T top = r0[b.lo * C + c] + (r0[b.hi * C + c] - r0[b.lo * C + c]) * fw;
          T bottom = r1[b.lo * C + c] + (r1[b.hi * C + c] - r1[b.lo * C + c]) * fw;
          out[c] = top + (bottom - top) * fh;
        }
      }
    }
  });
}

template <class T>
void resize_backward_loop(const Tensor& dy, Tensor& dx, Interpolation mode) {
  std::int64_t N = dx.dim(0), H = dx.dim(1), W = dx.dim(2), C = dx.dim(3), OH = dy.dim(1), OW = dy.dim(2);
  auto th = taps(H, OH, mode), tw = taps(W, OW, mode);
  const T* gp = dy.data<T>();
  T* dxp = dx.data<T>();
  std::fill_n(dxp, dx.numel(), T(0));
  parallel_ranges(N, N * OH * OW * C, [&](std::int64_t n0, std::int64_t n1) {
    for (std::int64_t n = n0; n < n1; ++n)  // each image's dx is written by one thread only
      for (std::int64_t oh = 0; oh < OH; ++oh)
        for (std::int64_t ow = 0; ow < OW; ++ow) {
          const Tap &a = th[oh], &b = tw[ow];
          T fh = static_cast<T>(a.f), fw = static_cast<T>(b.f);
          const T* g = gp + ((n * OH + oh) * OW + ow) * C;
          T* r0 = dxp + (n * H + a.lo) * W * C;
          T* r1 = dxp + (n * H + a.hi) * W * C;
          for (std::int64_t c = 0; c < C; ++c) {
            T top = g[c] * (T(1) - fh), bottom = g[c] * fh;
            r0[b.lo * C + c] += top * (T(1) - fw);
            r0[b.hi * C + c] += top * fw;
            r1[b.lo * C + c] += bottom * (T(1) - fw);
            r1[b.hi * C + c] += bottom * fw;
          }
        }
  });
}

}  // namespace

const DTypes resize2d_forward_dtypes = kFloats;
void resize2d_forward(const Tensor& x, Tensor& y, Interpolation mode) {
  if (y.numel() == 0) return;
  visit_dtype<float, double>(x.dtype(),
                             [&](auto t) { resize_forward_loop<typename decltype(t)::type>(x, y, mode); });
}

const DTypes resize2d_backward_dtypes = kFloats;
void resize2d_backward(const Tensor& dy, Tensor& dx, Interpolation mode) {
  if (dx.numel() == 0) return;
  if (dy.numel() == 0) return dx.fill(0.0);
  visit_dtype<float, double>(dx.dtype(),
                             [&](auto t) { resize_backward_loop<typename decltype(t)::type>(dy, dx, mode); });
}

}  // namespace systolic::ops::cpu
