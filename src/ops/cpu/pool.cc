// Pooling on the CPU: oneDNN primitives for float32 and bfloat16 (onednn_conv.cc), direct NHWC loops for float64,
// the reference every backend is tested against (tests/test_ops.cc). Contracts: include/systolic/ops.h.
#include <algorithm>
#include <limits>

#include "ops/cpu/bf16_emulation.h"
#include "ops/cpu/cpu_backend.h"
#include "ops/cpu/onednn.h"

namespace systolic::ops::cpu {

namespace {

// Visits the valid (unpadded) input cells of one pooling window.
template <class F>
void for_window(const Pool2DParams& p, std::int64_t H, std::int64_t W, std::int64_t oh, std::int64_t ow,
                F&& f) {
  for (int i = 0; i < p.window_h; ++i) {
    std::int64_t ih = oh * p.stride_h + i - p.pad_top;
    if (ih < 0 || ih >= H) continue;
    for (int j = 0; j < p.window_w; ++j) {
      std::int64_t iw = ow * p.stride_w + j - p.pad_left;
      if (iw < 0 || iw >= W) continue;
      f(ih, iw);
    }
  }
}

template <class T>
void pool2d_forward_loop(const Tensor& x, Tensor& y, const Pool2DParams& p) {
  std::int64_t N = x.dim(0), H = x.dim(1), W = x.dim(2), C = x.dim(3), OH = y.dim(1), OW = y.dim(2);
  const T* xp = x.data<T>();
  T* yp = y.data<T>();
  parallel_ranges(N * OH, N * OH * OW * C * p.window_h * p.window_w, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {  // r = n * OH + oh
      const std::int64_t n = r / OH, oh = r % OH;
      for (std::int64_t ow = 0; ow < OW; ++ow)
        for (std::int64_t c = 0; c < C; ++c) {
          T acc = p.kind == PoolKind::max ? -std::numeric_limits<T>::infinity() : T(0);
          std::int64_t count = 0;
          for_window(p, H, W, oh, ow, [&](std::int64_t ih, std::int64_t iw) {
            T v = xp[((n * H + ih) * W + iw) * C + c];
            if (p.kind == PoolKind::max)
              acc = v > acc ? v : acc;
            else
              acc += v;
            ++count;
          });
          if (p.kind == PoolKind::average) acc = count ? acc / T(count) : T(0);
          yp[((n * OH + oh) * OW + ow) * C + c] = acc;
        }
    }
  });
}

template <class T>
void pool2d_backward_loop(const Tensor& x, const Tensor& dy, Tensor& dx, const Pool2DParams& p) {
  std::int64_t N = x.dim(0), H = x.dim(1), W = x.dim(2), C = x.dim(3), OH = dy.dim(1), OW = dy.dim(2);
  const T* xp = x.data<T>();
  const T* gp = dy.data<T>();
  T* dxp = dx.data<T>();
  std::fill_n(dxp, dx.numel(), T(0));
  parallel_ranges(N, N * OH * OW * C * p.window_h * p.window_w, [&](std::int64_t n0, std::int64_t n1) {
    for (std::int64_t n = n0; n < n1; ++n)
      for (std::int64_t oh = 0; oh < OH; ++oh)
        for (std::int64_t ow = 0; ow < OW; ++ow)
          for (std::int64_t c = 0; c < C; ++c) {
            T g = gp[((n * OH + oh) * OW + ow) * C + c];
            if (p.kind == PoolKind::max) {
              // The gradient goes to the first maximum in scan order.
              T best = -std::numeric_limits<T>::infinity();
              std::int64_t at = -1;
              for_window(p, H, W, oh, ow, [&](std::int64_t ih, std::int64_t iw) {
                std::int64_t k = ((n * H + ih) * W + iw) * C + c;
                if (at < 0 || xp[k] > best) best = xp[k], at = k;
              });
              if (at >= 0) dxp[at] += g;
            } else {
              std::int64_t count = 0;
              for_window(p, H, W, oh, ow, [&](std::int64_t, std::int64_t) { ++count; });
              if (!count) continue;
              for_window(p, H, W, oh, ow, [&](std::int64_t ih, std::int64_t iw) {
                dxp[((n * H + ih) * W + iw) * C + c] += g / T(count);
              });
            }
          }
  });
}

}  // namespace

const DTypes pool2d_forward_dtypes = kFloatsAndBf16;
void pool2d_forward(const Tensor& x, Tensor& y, Tensor& workspace, const Pool2DParams& p) {
  if (x.dtype() == DType::float64) return pool2d_forward_loop<double>(x, y, p);
  if (!onednn::takes(x.dtype())) return Widened<&pool2d_forward>::run(x, y, workspace, p);
  onednn::pool2d_forward(x, y, workspace, p);
}

const DTypes pool2d_backward_dtypes = kFloatsAndBf16;
void pool2d_backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& workspace, Tensor& dx,
                     const Pool2DParams& p) {
  if (x.dtype() == DType::float64) return pool2d_backward_loop<double>(x, dy, dx, p);
  if (!onednn::takes(x.dtype())) return Widened<&pool2d_backward>::run(x, y, dy, workspace, dx, p);
  onednn::pool2d_backward(x, y, dy, workspace, dx, p);
}

}  // namespace systolic::ops::cpu
