// Pooling on CUDA through cuDNN (NHWC, float32 or bfloat16). Contract (ops.h): windows of (window_h,
// window_w) at (oh*stride_h - pad_top, ow*stride_w - pad_left); max ignores padded cells, average divides by
// the count of valid (unpadded) cells. The `workspace` argument is unused here: cuDNN's backward takes x, y
// and dy.
//
// - Symmetric padding smaller than the window goes to cuDNN directly: CUDNN_POOLING_MAX_DETERMINISTIC
//   (padded cells never win) or CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING (Keras's average).
// - Otherwise (asymmetric 'same' padding: an even window, or a stride that leaves one more cell at the
//   bottom/right) x is padded explicitly into workspace memory and cuDNN pools it unpadded: max pads with -inf, so padded
//   cells never win; average pads with zeros, pools with CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING (the
//   window area) and rescales each output by area / (valid cells) (dnn_kernels.cu); backward rescales dy the
//   same way first, then crops the padded input gradient back into dx.
// - Max pooling ties: the CPU gives a window's gradient to its first maximum in scan order; cuDNN finds the
//   maximum by comparing x with y, and which of several equal maxima receives the gradient is cuDNN's choice
//   (deterministic with MAX_DETERMINISTIC, but not documented to be the first). Inputs with ties in a window
//   (constant regions, low-precision data) may get their gradient at a different tied cell than on the CPU;
//   the sum of the gradient is the same.
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "ops/cuda/context.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/dnn_common.h"
#include "ops/cuda/dnn_kernels.h"

namespace systolic::ops::cuda {

namespace {

struct PoolGeometry {
  std::int64_t N, H, W, C, OH, OW;
  Pool2DParams p;
  bool explicit_pad;    // padded into workspace memory (cuDNN pads nothing)
  std::int64_t PH, PW;  // x as cuDNN sees it
};

// The geometry of a checked call (ops.cc checked shapes and dtypes) in cuDNN's terms; cuDNN's own limits (int
// sizes) are checked here.
PoolGeometry pool_geometry(const char* op, const Tensor& x, const Tensor& y, const char* y_name,
                           const Pool2DParams& p) {
  PoolGeometry g;
  g.N = x.dim(0), g.H = x.dim(1), g.W = x.dim(2), g.C = x.dim(3), g.OH = y.dim(1), g.OW = y.dim(2);
  g.p = p;
  g.explicit_pad = p.pad_top != p.pad_bottom || p.pad_left != p.pad_right || p.pad_top >= p.window_h ||
                   p.pad_left >= p.window_w;
  g.PH = g.explicit_pad ? g.H + p.pad_top + p.pad_bottom : g.H;
  g.PW = g.explicit_pad ? g.W + p.pad_left + p.pad_right : g.W;
  check_int_sized(op, "x (padded)", g.N * g.PH * g.PW * g.C);
  check_int_sized(op, y_name, y.numel());
  return g;
}

struct PoolPlan {
  TensorDescriptor x, y;  // x as cuDNN sees it
  PoolingDescriptor pool;
};

PoolPlan& pool_plan(int device, const PoolGeometry& g, DType dtype) {
  static auto* mutex = new std::mutex;
  static auto* plans = new std::map<std::vector<std::int64_t>, std::unique_ptr<PoolPlan>>;
  const Pool2DParams& p = g.p;
  std::vector<std::int64_t> key{device,
                                static_cast<std::int64_t>(dtype),
                                static_cast<std::int64_t>(p.kind),
                                g.N,
                                g.H,
                                g.W,
                                g.C,
                                g.OH,
                                g.OW,
                                p.window_h,
                                p.window_w,
                                p.stride_h,
                                p.stride_w,
                                p.pad_top,
                                p.pad_bottom,
                                p.pad_left,
                                p.pad_right};
  std::lock_guard lock(*mutex);
  auto& slot = (*plans)[key];
  if (slot) return *slot;
  auto e = std::make_unique<PoolPlan>();
  set_nhwc(e->x, dtype, g.N, g.PH, g.PW, g.C);
  set_nhwc(e->y, dtype, g.N, g.OH, g.OW, g.C);
  cudnnPoolingMode_t mode = p.kind == PoolKind::max ? CUDNN_POOLING_MAX_DETERMINISTIC
                            : g.explicit_pad        ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                                    : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
  SYSTOLIC_CUDNN_CHECK(cudnnSetPooling2dDescriptor(e->pool, mode, CUDNN_NOT_PROPAGATE_NAN, p.window_h,
                                                   p.window_w, g.explicit_pad ? 0 : p.pad_top,
                                                   g.explicit_pad ? 0 : p.pad_left, p.stride_h, p.stride_w));
  int n = 0, c = 0, h = 0, w = 0;
  SYSTOLIC_CUDNN_CHECK(cudnnGetPooling2dForwardOutputDim(e->pool, e->x, &n, &c, &h, &w));
  SYSTOLIC_CHECK(
      n == g.N && c == g.C && h == g.OH && w == g.OW,
      "pool2d: cuDNN computes an output of (N {}, H {}, W {}, C {}) where ({}, {}, {}, {}) is expected", n, h,
      w, c, g.N, g.OH, g.OW, g.C);
  slot = std::move(e);
  return *slot;
}

// Padded cells of max pooling must never be the maximum.
float pad_value(const Pool2DParams& p) {
  return p.kind == PoolKind::max ? -std::numeric_limits<float>::infinity() : 0.0f;
}

const float kOne = 1.0f, kZero = 0.0f;

}  // namespace

const DTypes pool2d_forward_dtypes{DType::float32, DType::bfloat16};
void pool2d_forward(const Tensor& x, Tensor& y, Tensor& workspace, const Pool2DParams& p) {
  (void)workspace;  // cuDNN's backward recomputes what it needs from x and y
  PoolGeometry g = pool_geometry("pool2d_forward", x, y, "y", p);
  if (y.numel() == 0) return;
  Context& c = context(x);
  PoolPlan& e = pool_plan(c.device, g, x.dtype());
  const Element t = element_of(x.dtype());
  if (!g.explicit_pad) {
    SYSTOLIC_CUDNN_CHECK(
        cudnnPoolingForward(c.cudnn, e.pool, &kOne, e.x, x.raw_data(), &kZero, e.y, y.raw_data()));
    return;
  }
  void* xpad = c.workspace(static_cast<std::size_t>(g.N * g.PH * g.PW * g.C) * element_size(t));
  SYSTOLIC_CUDA_CHECK(dnn::launch_pad_nhwc(x.raw_data(), xpad, t, g.N, g.H, g.W, g.C, g.PH, g.PW, p.pad_top,
                                           p.pad_left, pad_value(p), c.stream));
  SYSTOLIC_CUDNN_CHECK(cudnnPoolingForward(c.cudnn, e.pool, &kOne, e.x, xpad, &kZero, e.y, y.raw_data()));
  if (p.kind == PoolKind::average)
    SYSTOLIC_CUDA_CHECK(dnn::launch_pool_count_rescale(y.raw_data(), y.raw_data(), t, g.N, g.OH, g.OW, g.C,
                                                       g.H, g.W, p.window_h, p.window_w, p.stride_h,
                                                       p.stride_w, p.pad_top, p.pad_left, c.stream));
}

const DTypes pool2d_backward_dtypes{DType::float32, DType::bfloat16};
void pool2d_backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& workspace, Tensor& dx,
                     const Pool2DParams& p) {
  (void)workspace;
  PoolGeometry g = pool_geometry("pool2d_backward", x, dy, "dy", p);
  if (dx.numel() == 0) return;
  Context& c = context(x);
  if (dy.numel() == 0) {
    SYSTOLIC_CUDA_CHECK(cudaMemsetAsync(dx.raw_data(), 0, dx.nbytes(), c.stream));
    return;
  }
  PoolPlan& e = pool_plan(c.device, g, x.dtype());
  const Element t = element_of(x.dtype());
  if (!g.explicit_pad) {
    SYSTOLIC_CUDNN_CHECK(cudnnPoolingBackward(c.cudnn, e.pool, &kOne, e.y, y.raw_data(), e.y, dy.raw_data(),
                                              e.x, x.raw_data(), &kZero, e.x, dx.raw_data()));
    return;
  }
  const std::size_t es = element_size(t);
  const std::size_t padded_bytes = static_cast<std::size_t>(g.N * g.PH * g.PW * g.C) * es;
  const bool average = p.kind == PoolKind::average;
  WorkspacePlan plan;
  std::size_t at_xpad = plan.add(padded_bytes);
  std::size_t at_dxpad = plan.add(padded_bytes);
  std::size_t at_dy = plan.add(average ? static_cast<std::size_t>(dy.numel()) * es : 0);
  void* base = c.workspace(plan.total());
  void* xpad = WorkspacePlan::at(base, at_xpad);
  void* dxpad = WorkspacePlan::at(base, at_dxpad);
  const void* grad = dy.raw_data();
  SYSTOLIC_CUDA_CHECK(dnn::launch_pad_nhwc(x.raw_data(), xpad, t, g.N, g.H, g.W, g.C, g.PH, g.PW, p.pad_top,
                                           p.pad_left, pad_value(p), c.stream));
  if (average) {
    // cuDNN spreads dy / (window area) over each window; scaling dy by area / (valid cells) first gives
    // Keras's dy / (valid cells). Average pooling reads neither x nor y in backward; they are passed for the
    // descriptors.
    void* scaled = WorkspacePlan::at(base, at_dy);
    SYSTOLIC_CUDA_CHECK(dnn::launch_pool_count_rescale(dy.raw_data(), scaled, t, g.N, g.OH, g.OW, g.C, g.H,
                                                       g.W, p.window_h, p.window_w, p.stride_h, p.stride_w,
                                                       p.pad_top, p.pad_left, c.stream));
    grad = scaled;
  }
  // Max: y is the forward output, the maximum over the same -inf-padded windows, so cuDNN finds the same
  // cells.
  SYSTOLIC_CUDNN_CHECK(cudnnPoolingBackward(c.cudnn, e.pool, &kOne, e.y, y.raw_data(), e.y, grad, e.x, xpad,
                                            &kZero, e.x, dxpad));
  SYSTOLIC_CUDA_CHECK(dnn::launch_crop_nhwc(dxpad, dx.raw_data(), t, g.N, g.H, g.W, g.C, g.PH, g.PW,
                                            p.pad_top, p.pad_left, c.stream));
}

}  // namespace systolic::ops::cuda
