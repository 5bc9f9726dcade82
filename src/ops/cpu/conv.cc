// Convolution on the CPU: oneDNN primitives for float32 and bfloat16 (onednn_conv.cc), direct NHWC loops for
// float64, the reference every backend is tested against (tests/test_ops.cc); and the bias addition over the last
// axis (Conv2DTranspose's bias), plain loops for float32 and float64. Contracts: include/systolic/ops.h.
#include <algorithm>
#include <vector>

#include "ops/cpu/bf16_emulation.h"
#include "ops/cpu/cpu_backend.h"
#include "ops/cpu/onednn.h"

namespace systolic::ops::cpu {

namespace {

// Cg = C / G input channels and Fg = F / G filters per group; w is (KH, KW, Cg, F).
struct ConvDims {
  std::int64_t N, H, W, C, KH, KW, F, OH, OW, G, Cg, Fg;
};
ConvDims conv_dims(const Tensor& x, const Tensor& w, const Tensor& y, const Conv2DParams& p) {
  std::int64_t G = p.groups;
  return {x.dim(0), x.dim(1), x.dim(2), x.dim(3), w.dim(0), w.dim(1),
          w.dim(3), y.dim(1), y.dim(2), G,        w.dim(2), w.dim(3) / G};
}

template <class T>
void conv2d_forward_loop(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y,
                         const Conv2DParams& p) {
  auto d = conv_dims(x, w, y, p);
  const T* xp = x.data<T>();
  const T* wp = w.data<T>();
  const T* bp = b.defined() ? b.data<T>() : nullptr;
  T* yp = y.data<T>();
  const std::int64_t work = d.N * d.OH * d.OW * d.F * d.KH * d.KW * d.Cg;
  parallel_ranges(d.N * d.OH, work, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {  // r = n * OH + oh
      const std::int64_t n = r / d.OH, oh = r % d.OH;
      for (std::int64_t ow = 0; ow < d.OW; ++ow) {
        T* out = yp + ((n * d.OH + oh) * d.OW + ow) * d.F;
        for (std::int64_t f = 0; f < d.F; ++f) out[f] = bp ? bp[f] : T(0);
        for (std::int64_t i = 0; i < d.KH; ++i) {
          std::int64_t ih = oh * p.stride_h + i * p.dilation_h - p.pad_top;
          if (ih < 0 || ih >= d.H) continue;
          for (std::int64_t j = 0; j < d.KW; ++j) {
            std::int64_t iw = ow * p.stride_w + j * p.dilation_w - p.pad_left;
            if (iw < 0 || iw >= d.W) continue;
            const T* in = xp + ((n * d.H + ih) * d.W + iw) * d.C;
            const T* wk = wp + (i * d.KW + j) * d.Cg * d.F;
            for (std::int64_t g = 0; g < d.G; ++g)
              for (std::int64_t c = 0; c < d.Cg; ++c)
                for (std::int64_t f = g * d.Fg; f < (g + 1) * d.Fg; ++f)
                  out[f] += in[g * d.Cg + c] * wk[c * d.F + f];
          }
        }
        if (p.activation == Activation::relu)
          for (std::int64_t f = 0; f < d.F; ++f) out[f] = out[f] > T(0) ? out[f] : T(0);
      }
    }
  });
}

// x may be undefined when dw is (ops.h): dx then gives its shape.
template <class T>
void conv2d_backward_loop(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw,
                          Tensor& db, const Conv2DParams& p) {
  auto d = conv_dims(x.defined() ? x : dx, w, dy, p);
  const T* wp = w.data<T>();
  const T* gp = dy.data<T>();
  const std::int64_t work = d.N * d.OH * d.OW * d.F * d.KH * d.KW * d.Cg;
  if (db.defined()) {
    T* dbp = db.data<T>();
    for (std::int64_t r = 0; r < d.N * d.OH * d.OW; ++r)
      for (std::int64_t f = 0; f < d.F; ++f) dbp[f] += gp[r * d.F + f];
  }
  if (dx.defined()) {
    T* dxp = dx.data<T>();
    std::fill_n(dxp, dx.numel(), T(0));
    parallel_ranges(d.N, work, [&](std::int64_t n0, std::int64_t n1) {
      for (std::int64_t n = n0; n < n1; ++n)  // each image's dx is written by one thread only
        for (std::int64_t oh = 0; oh < d.OH; ++oh)
          for (std::int64_t ow = 0; ow < d.OW; ++ow) {
            const T* g = gp + ((n * d.OH + oh) * d.OW + ow) * d.F;
            for (std::int64_t i = 0; i < d.KH; ++i) {
              std::int64_t ih = oh * p.stride_h + i * p.dilation_h - p.pad_top;
              if (ih < 0 || ih >= d.H) continue;
              for (std::int64_t j = 0; j < d.KW; ++j) {
                std::int64_t iw = ow * p.stride_w + j * p.dilation_w - p.pad_left;
                if (iw < 0 || iw >= d.W) continue;
                T* din = dxp + ((n * d.H + ih) * d.W + iw) * d.C;
                const T* wk = wp + (i * d.KW + j) * d.Cg * d.F;
                for (std::int64_t gr = 0; gr < d.G; ++gr)
                  for (std::int64_t c = 0; c < d.Cg; ++c) {
                    T s = 0;
                    for (std::int64_t f = gr * d.Fg; f < (gr + 1) * d.Fg; ++f) s += g[f] * wk[c * d.F + f];
                    din[gr * d.Cg + c] += s;
                  }
              }
            }
          }
    });
  }
  if (dw.defined()) {
    const T* xp = x.data<T>();
    T* dwp = dw.data<T>();
    parallel_ranges(d.KH * d.KW, work, [&](std::int64_t b0, std::int64_t b1) {
      for (std::int64_t b = b0; b < b1; ++b) {  // each (i, j) block of dw is written by one thread only
        const std::int64_t i = b / d.KW, j = b % d.KW;
        for (std::int64_t n = 0; n < d.N; ++n)
          for (std::int64_t oh = 0; oh < d.OH; ++oh) {
            std::int64_t ih = oh * p.stride_h + i * p.dilation_h - p.pad_top;
            if (ih < 0 || ih >= d.H) continue;
            for (std::int64_t ow = 0; ow < d.OW; ++ow) {
              std::int64_t iw = ow * p.stride_w + j * p.dilation_w - p.pad_left;
              if (iw < 0 || iw >= d.W) continue;
              const T* in = xp + ((n * d.H + ih) * d.W + iw) * d.C;
              const T* g = gp + ((n * d.OH + oh) * d.OW + ow) * d.F;
              T* wk = dwp + (i * d.KW + j) * d.Cg * d.F;
              for (std::int64_t gr = 0; gr < d.G; ++gr)
                for (std::int64_t c = 0; c < d.Cg; ++c)
                  for (std::int64_t f = gr * d.Fg; f < (gr + 1) * d.Fg; ++f)
                    wk[c * d.F + f] += in[gr * d.Cg + c] * g[f];
            }
          }
      }
    });
  }
}

// ---- bias_add

template <class T>
void bias_add_loop(const Tensor& x, const Tensor& b, Tensor& y) {
  std::int64_t C = x.dim(-1), rows = C ? x.numel() / C : 0;
  const T* xp = x.data<T>();
  T* yp = y.data<T>();
  auto bv = b.to_doubles();
  parallel_ranges(rows, rows * C, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r)
      for (std::int64_t c = 0; c < C; ++c) yp[r * C + c] = xp[r * C + c] + static_cast<T>(bv[c]);
  });
}

template <class T>
void bias_grad_loop(const Tensor& dy, Tensor& db) {
  std::int64_t C = dy.dim(-1), rows = C ? dy.numel() / C : 0;
  const T* g = dy.data<T>();
  std::vector<double> sum(static_cast<std::size_t>(C), 0.0);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < C; ++c) sum[c] += g[r * C + c];
  visit_dtype<float, double>(db.dtype(), [&](auto t) {
    using D = typename decltype(t)::type;
    D* out = db.data<D>();
    for (std::int64_t c = 0; c < C; ++c) out[c] += static_cast<D>(sum[c]);
  });
}

}  // namespace

const DTypes conv2d_forward_dtypes = kFloatsAndBf16;
void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y, const Conv2DParams& p) {
  if (x.dtype() == DType::float64) return conv2d_forward_loop<double>(x, w, b, y, p);
  if (!onednn::takes(x.dtype())) return Widened<&conv2d_forward>::run(x, w, b, y, p);
  onednn::conv2d_forward(x, w, b, y, p);
}

const DTypes conv2d_backward_dtypes = kFloatsAndBf16;
void conv2d_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw, Tensor& db,
                     const Conv2DParams& p) {
  if (dy.dtype() == DType::float64) return conv2d_backward_loop<double>(x, w, dy, dx, dw, db, p);
  if (!onednn::takes(dy.dtype())) return Widened<&conv2d_backward>::run(x, w, dy, dx, dw, db, p);
  onednn::conv2d_backward(x, w, dy, dx, dw, db, p);  // x may be undefined
}

const DTypes bias_add_forward_dtypes = kFloats;
void bias_add_forward(const Tensor& x, const Tensor& b, Tensor& y) {
  visit_dtype<float, double>(x.dtype(), [&](auto t) { bias_add_loop<typename decltype(t)::type>(x, b, y); });
}

const DTypes bias_add_backward_dtypes = kFloats;
void bias_add_backward(const Tensor& dy, Tensor& db) {
  visit_dtype<float, double>(dy.dtype(), [&](auto t) { bias_grad_loop<typename decltype(t)::type>(dy, db); });
}

}  // namespace systolic::ops::cpu
