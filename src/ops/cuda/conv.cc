// Convolution on CUDA through cuDNN's convolution API (NHWC tensors). Contract (ops.h):
//   y[N,OH,OW,F] = sum_{i,j,c} xpad[n, oh*sh + i*dh, ow*sw + j*dw, c] * w[i,j,c,f] + b[f]
//   backward: dx = (=); dw, db += (accumulated); any of dx, dw, db may be undefined.
// x, w, y, dy, dx share one dtype: float32 (TF32 tensor-core math allowed, TensorFlow's default) or bfloat16
// (float accumulation); b, dw, db may also be float32 when the data are bfloat16.
//
// How the contract meets cuDNN:
// - Groups (p.groups = G > 1, Keras's Conv2D groups and DepthwiseConv2D): Keras's kernel is (KH, KW, C/G, F),
//   cuDNN's grouped filter (F, KH, KW, C/G) with cudnnSetConvolutionGroupCount; the transposes below are the
//   same with C/G in place of C.
// - Kernels: Keras stores (KH, KW, C, F); cuDNN's NHWC filter layout is (F, KH, KW, C) and no cuDNN layout
//   matches Keras's, so each call transposes the kernel into workspace memory (a [KH*KW*C, F] -> [F, KH*KW*C]
//   transpose, 1.2M elements for the seed CNN's largest kernel), and the filter gradient, which cuDNN writes
//   in its layout, is transposed back and added into dw (dw +=).
// - Padding: cuDNN pads symmetrically. The symmetric part (min(top, bottom), min(left, right)) goes to cuDNN;
//   any extra rows or columns ('same' padding with an even kernel or a stride of 2 pads one more at the
//   bottom/right) are padded explicitly into workspace memory, and backward crops the padded input gradient
//   back into dx.
// - db: a deterministic column sum of dy (dnn_kernels.cu), added into db.
// - Algorithms: chosen once per (device, dtype, shapes, params) with cudnnFind*Algorithm (which times them,
//   on buffers it allocates itself, and waits for the GPU: it runs at the first call, the warm-up step), within
//   kWorkspaceLimit of workspace; under CUDA graph capture, or if Find fails, cuDNN's heuristics
//   (cudnnGet*Algorithm_v7) choose instead. The choice, with the math type it was timed with, is cached; so
//   are the descriptors. Steady-state calls allocate nothing: all scratch is Context::workspace. With op
//   determinism on (system.h), only algorithms cuDNN reports as deterministic are taken (some of the fastest
//   add partial sums with atomics, in an order that varies from run to run); the switch is part of the cache
//   key.
#include <fmt/format.h>
#include <systolic/system.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ops/cuda/context.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/dnn_common.h"
#include "ops/cuda/dnn_kernels.h"

namespace systolic::ops::cuda {

namespace {

constexpr std::size_t kWorkspaceLimit = std::size_t(256) << 20;

struct ConvGeometry {
  std::int64_t N, H, W, C, KH, KW, F, OH, OW;
  std::int64_t G, Cg;  // groups and input channels per group (the kernel's third dimension)
  Conv2DParams p;
  int pad_h, pad_w;                      // symmetric padding done by cuDNN
  std::int64_t extra_top, extra_bottom;  // padded explicitly (the asymmetric rest)
  std::int64_t extra_left, extra_right;
  std::int64_t PH, PW;  // x as cuDNN sees it: H + extra_top + extra_bottom, ...
  bool padded() const { return extra_top || extra_bottom || extra_left || extra_right; }
  std::int64_t filter_elements() const { return KH * KW * Cg * F; }
  std::string str() const {
    return fmt::format(
        "x ({}, {}, {}, {}), kernel ({}, {}, {}, {}), y ({}, {}, {}, {}), strides ({}, {}), "
        "dilation ({}, {}), padding (top {}, bottom {}, left {}, right {}), groups {}",
        N, H, W, C, KH, KW, Cg, F, N, OH, OW, F, p.stride_h, p.stride_w, p.dilation_h, p.dilation_w,
        p.pad_top, p.pad_bottom, p.pad_left, p.pad_right, G);
  }
};

// The geometry of a checked call (ops.cc checked shapes and dtypes) in cuDNN's terms; cuDNN's own limits (int
// sizes) are checked here.
ConvGeometry conv_geometry(const char* op, const Tensor& x, const Tensor& w, const Tensor& y,
                           const char* y_name, const Conv2DParams& p) {
  ConvGeometry g;
  g.N = x.dim(0), g.H = x.dim(1), g.W = x.dim(2), g.C = x.dim(3);
  g.KH = w.dim(0), g.KW = w.dim(1), g.F = w.dim(3), g.OH = y.dim(1), g.OW = y.dim(2);
  g.G = p.groups, g.Cg = w.dim(2);
  g.p = p;
  g.pad_h = std::min(p.pad_top, p.pad_bottom);
  g.pad_w = std::min(p.pad_left, p.pad_right);
  g.extra_top = p.pad_top - g.pad_h, g.extra_bottom = p.pad_bottom - g.pad_h;
  g.extra_left = p.pad_left - g.pad_w, g.extra_right = p.pad_right - g.pad_w;
  g.PH = g.H + g.extra_top + g.extra_bottom;
  g.PW = g.W + g.extra_left + g.extra_right;
  check_int_sized(op, "x (padded)", g.N * g.PH * g.PW * g.C);
  check_int_sized(op, y_name, y.numel());
  check_int_sized(op, "the kernel", w.numel());
  return g;
}

// Descriptors and chosen algorithms of one convolution; never freed (cached for the process).
struct ConvPlan {
  TensorDescriptor x, y;  // x as cuDNN sees it (explicitly padded when asymmetric)
  FilterDescriptor w;     // (F, KH, KW, C)
  ConvolutionDescriptor forward, backward_data,
      backward_filter;  // one each: each keeps its algorithm's math type
  bool has_forward = false, has_data = false, has_filter = false;
  cudnnConvolutionFwdAlgo_t forward_algo{};
  cudnnConvolutionBwdDataAlgo_t data_algo{};
  cudnnConvolutionBwdFilterAlgo_t filter_algo{};
  std::size_t forward_workspace = 0, data_workspace = 0, filter_workspace = 0;
};

void set_convolution(cudnnConvolutionDescriptor_t d, const ConvGeometry& g) {
  // Keras's convolution is a cross-correlation (no kernel flip); accumulation in float for both data types.
  SYSTOLIC_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(d, g.pad_h, g.pad_w, g.p.stride_h, g.p.stride_w,
                                                       g.p.dilation_h, g.p.dilation_w,
                                                       CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  // Tensor cores allowed while searching: TF32 for float32 data, bfloat16 MMA for bfloat16.
  SYSTOLIC_CUDNN_CHECK(cudnnSetConvolutionMathType(d, CUDNN_TENSOR_OP_MATH));
  if (g.G > 1) SYSTOLIC_CUDNN_CHECK(cudnnSetConvolutionGroupCount(d, static_cast<int>(g.G)));
}

std::unique_ptr<ConvPlan> make_plan(const ConvGeometry& g, DType dtype) {
  auto e = std::make_unique<ConvPlan>();
  set_nhwc(e->x, dtype, g.N, g.PH, g.PW, g.C);
  set_nhwc(e->y, dtype, g.N, g.OH, g.OW, g.F);
  SYSTOLIC_CUDNN_CHECK(cudnnSetFilter4dDescriptor(e->w, cudnn_type(dtype), CUDNN_TENSOR_NHWC,
                                                  static_cast<int>(g.F), static_cast<int>(g.Cg),
                                                  static_cast<int>(g.KH), static_cast<int>(g.KW)));
  set_convolution(e->forward, g);
  set_convolution(e->backward_data, g);
  set_convolution(e->backward_filter, g);
  int n = 0, c = 0, h = 0, w = 0;
  SYSTOLIC_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(e->forward, e->x, e->w, &n, &c, &h, &w));
  SYSTOLIC_CHECK(n == g.N && c == g.F && h == g.OH && w == g.OW,
                 "conv2d: cuDNN computes an output of (N {}, H {}, W {}, C {}) for {}", n, h, w, c, g.str());
  return e;
}

// The first result (Find and Get_v7 list the fastest first) that ran and fits the workspace limit, and is
// deterministic when op determinism is on.
template <class Perf>
const Perf* first_usable(const std::vector<Perf>& perfs, int count, bool deterministic) {
  for (int i = 0; i < count && i < static_cast<int>(perfs.size()); ++i)
    if (perfs[i].status == CUDNN_STATUS_SUCCESS && perfs[i].memory <= kWorkspaceLimit &&
        (!deterministic || perfs[i].determinism == CUDNN_DETERMINISTIC))
      return &perfs[i];
  return nullptr;
}

// Find (timed; synchronises, so only outside graph capture), else the heuristics. `find` and `heuristic` fill
// perfs and the count and return the status.
template <class Perf, class Find, class Heuristic>
Perf choose(Context& c, int max_count, Find&& find, Heuristic&& heuristic, const char* direction,
            const ConvGeometry& g) {
  std::vector<Perf> perfs(static_cast<std::size_t>(std::max(max_count, 1)));
  int count = 0;
  const Perf* best = nullptr;
  const bool deterministic = op_determinism_enabled();
  if (!capturing(c.stream) && find(perfs, count) == CUDNN_STATUS_SUCCESS)
    best = first_usable(perfs, count, deterministic);
  if (!best) {
    count = 0;
    SYSTOLIC_CUDNN_CHECK(heuristic(perfs, count));
    best = first_usable(perfs, count, deterministic);
  }
  SYSTOLIC_CHECK(best, "conv2d: cuDNN has no {}{} algorithm for {} within {} MiB of workspace",
                 deterministic ? "deterministic " : "", direction, g.str(), kWorkspaceLimit >> 20);
  return *best;
}

void choose_forward(Context& c, ConvPlan& e, const ConvGeometry& g) {
  int max_count = 0;
  SYSTOLIC_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(c.cudnn, &max_count));
  using Perf = cudnnConvolutionFwdAlgoPerf_t;
  Perf best = choose<Perf>(
      c, max_count,
      [&](std::vector<Perf>& perfs, int& count) {
        return cudnnFindConvolutionForwardAlgorithm(c.cudnn, e.x, e.w, e.forward, e.y,
                                                    static_cast<int>(perfs.size()), &count, perfs.data());
      },
      [&](std::vector<Perf>& perfs, int& count) {
        return cudnnGetConvolutionForwardAlgorithm_v7(c.cudnn, e.x, e.w, e.forward, e.y,
                                                      static_cast<int>(perfs.size()), &count, perfs.data());
      },
      "forward", g);
  SYSTOLIC_CUDNN_CHECK(cudnnSetConvolutionMathType(e.forward, best.mathType));
  std::size_t bytes = 0;
  SYSTOLIC_CUDNN_CHECK(
      cudnnGetConvolutionForwardWorkspaceSize(c.cudnn, e.x, e.w, e.forward, e.y, best.algo, &bytes));
  e.forward_algo = best.algo;
  e.forward_workspace = std::max(bytes, best.memory);
  e.has_forward = true;
}

void choose_data(Context& c, ConvPlan& e, const ConvGeometry& g) {
  int max_count = 0;
  SYSTOLIC_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(c.cudnn, &max_count));
  using Perf = cudnnConvolutionBwdDataAlgoPerf_t;
  Perf best = choose<Perf>(
      c, max_count,
      [&](std::vector<Perf>& perfs, int& count) {
        return cudnnFindConvolutionBackwardDataAlgorithm(
            c.cudnn, e.w, e.y, e.backward_data, e.x, static_cast<int>(perfs.size()), &count, perfs.data());
      },
      [&](std::vector<Perf>& perfs, int& count) {
        return cudnnGetConvolutionBackwardDataAlgorithm_v7(
            c.cudnn, e.w, e.y, e.backward_data, e.x, static_cast<int>(perfs.size()), &count, perfs.data());
      },
      "backward-data", g);
  SYSTOLIC_CUDNN_CHECK(cudnnSetConvolutionMathType(e.backward_data, best.mathType));
  std::size_t bytes = 0;
  SYSTOLIC_CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(c.cudnn, e.w, e.y, e.backward_data, e.x,
                                                                    best.algo, &bytes));
  e.data_algo = best.algo;
  e.data_workspace = std::max(bytes, best.memory);
  e.has_data = true;
}

void choose_filter(Context& c, ConvPlan& e, const ConvGeometry& g) {
  int max_count = 0;
  SYSTOLIC_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(c.cudnn, &max_count));
  using Perf = cudnnConvolutionBwdFilterAlgoPerf_t;
  Perf best = choose<Perf>(
      c, max_count,
      [&](std::vector<Perf>& perfs, int& count) {
        return cudnnFindConvolutionBackwardFilterAlgorithm(
            c.cudnn, e.x, e.y, e.backward_filter, e.w, static_cast<int>(perfs.size()), &count, perfs.data());
      },
      [&](std::vector<Perf>& perfs, int& count) {
        return cudnnGetConvolutionBackwardFilterAlgorithm_v7(
            c.cudnn, e.x, e.y, e.backward_filter, e.w, static_cast<int>(perfs.size()), &count, perfs.data());
      },
      "backward-filter", g);
  SYSTOLIC_CUDNN_CHECK(cudnnSetConvolutionMathType(e.backward_filter, best.mathType));
  std::size_t bytes = 0;
  SYSTOLIC_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(c.cudnn, e.x, e.y, e.backward_filter,
                                                                      e.w, best.algo, &bytes));
  e.filter_algo = best.algo;
  e.filter_workspace = std::max(bytes, best.memory);
  e.has_filter = true;
}

enum Need { kForward = 1, kData = 2, kFilter = 4 };

// The cached plan of (device, dtype, geometry), with the algorithms of `need` chosen. Plans are never erased,
// so the reference stays valid; the mutex covers creation and algorithm choice (the first calls only).
ConvPlan& conv_plan(Context& c, const ConvGeometry& g, DType dtype, int need) {
  static auto* mutex = new std::mutex;
  static auto* plans = new std::map<std::vector<std::int64_t>, std::unique_ptr<ConvPlan>>;
  std::vector<std::int64_t> key{c.device,
                                static_cast<std::int64_t>(dtype),
                                g.N,
                                g.H,
                                g.W,
                                g.C,
                                g.KH,
                                g.KW,
                                g.F,
                                g.OH,
                                g.OW,
                                g.p.stride_h,
                                g.p.stride_w,
                                g.p.dilation_h,
                                g.p.dilation_w,
                                g.p.pad_top,
                                g.p.pad_bottom,
                                g.p.pad_left,
                                g.p.pad_right,
                                g.G,
                                op_determinism_enabled() ? 1 : 0};
  std::lock_guard lock(*mutex);
  auto& slot = (*plans)[key];
  if (!slot) slot = make_plan(g, dtype);
  ConvPlan& e = *slot;
  if ((need & kForward) && !e.has_forward) choose_forward(c, e, g);
  if ((need & kData) && !e.has_data) choose_data(c, e, g);
  if ((need & kFilter) && !e.has_filter) choose_filter(c, e, g);
  return e;
}

const float kOne = 1.0f, kZero = 0.0f;  // cuDNN's scaling factors are float for float and bfloat16 data

}  // namespace

const DTypes conv2d_forward_dtypes{DType::float32, DType::bfloat16};
void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y, const Conv2DParams& p) {
  ConvGeometry g = conv_geometry("conv2d_forward", x, w, y, "y", p);
  if (y.numel() == 0) return;
  Context& c = context(x);
  ConvPlan& e = conv_plan(c, g, x.dtype(), kForward);

  const std::size_t es = element_size(element_of(x.dtype()));
  WorkspacePlan plan;
  std::size_t at_w = plan.add(static_cast<std::size_t>(g.filter_elements()) * es);
  std::size_t at_x = plan.add(g.padded() ? static_cast<std::size_t>(g.N * g.PH * g.PW * g.C) * es : 0);
  std::size_t at_scratch = plan.add(e.forward_workspace);
  void* base = c.workspace(plan.total());
  void* wt = WorkspacePlan::at(base, at_w);

  SYSTOLIC_CUDA_CHECK(dnn::launch_transpose(w.raw_data(), element_of(w.dtype()), wt, element_of(x.dtype()),
                                            g.KH * g.KW * g.Cg, g.F,
                                            /*accumulate=*/false, c.stream));
  const void* xin = x.raw_data();
  if (g.padded()) {
    void* xpad = WorkspacePlan::at(base, at_x);
    SYSTOLIC_CUDA_CHECK(dnn::launch_pad_nhwc(x.raw_data(), xpad, element_of(x.dtype()), g.N, g.H, g.W, g.C,
                                             g.PH, g.PW, g.extra_top, g.extra_left, 0.0f, c.stream));
    xin = xpad;
  }
  SYSTOLIC_CUDNN_CHECK(cudnnConvolutionForward(c.cudnn, &kOne, e.x, xin, e.w, wt, e.forward, e.forward_algo,
                                               WorkspacePlan::at(base, at_scratch), e.forward_workspace,
                                               &kZero, e.y, y.raw_data()));
  // The epilogue: bias and the fused activation in one pass over y.
  bool relu = p.activation == Activation::relu;
  if (b.defined() || relu)
    SYSTOLIC_CUDA_CHECK(dnn::launch_add_bias(
        y.raw_data(), element_of(y.dtype()), b.defined() ? b.raw_data() : nullptr,
        b.defined() ? element_of(b.dtype()) : element_of(y.dtype()), g.N * g.OH * g.OW, g.F, relu, c.stream));
}

const DTypes conv2d_backward_dtypes{DType::float32, DType::bfloat16};
void conv2d_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw, Tensor& db,
                     const Conv2DParams& p) {
  // x gives only its shape to the data gradient; it may be undefined when dw is (ops.h), dx then gives it.
  ConvGeometry g = conv_geometry("conv2d_backward", x.defined() ? x : dx, w, dy, "dy", p);
  const bool need_data = dx.defined() && dx.numel() > 0, need_filter = dw.defined();
  if (!need_data && !need_filter && !db.defined()) return;
  Context& c = context(dy);
  if (dy.numel() == 0) {  // no output cells: nothing flows back, nothing is added to dw or db
    if (need_data) SYSTOLIC_CUDA_CHECK(cudaMemsetAsync(dx.raw_data(), 0, dx.nbytes(), c.stream));
    return;
  }
  const DType dtype = dy.dtype();
  ConvPlan& e = conv_plan(c, g, dtype, (need_data ? kData : 0) | (need_filter ? kFilter : 0));

  const Element t = element_of(dtype);
  const std::size_t es = element_size(t);
  const std::size_t filter_bytes = static_cast<std::size_t>(g.filter_elements()) * es;
  const std::size_t padded_bytes = g.padded() ? static_cast<std::size_t>(g.N * g.PH * g.PW * g.C) * es : 0;
  const std::int64_t rows = g.N * g.OH * g.OW;
  WorkspacePlan plan;
  std::size_t at_wt = plan.add(need_data ? filter_bytes : 0);
  std::size_t at_dxpad = plan.add(need_data ? padded_bytes : 0);
  std::size_t at_dwt = plan.add(need_filter ? filter_bytes : 0);
  std::size_t at_xpad = plan.add(need_filter ? padded_bytes : 0);
  // The two cuDNN calls run one after the other on the stream: they share one scratch area.
  std::size_t at_scratch = plan.add(std::max(need_data ? e.data_workspace : std::size_t(0),
                                             need_filter ? e.filter_workspace : std::size_t(0)));
  std::size_t at_partial = plan.add(db.defined() ? dnn::bias_grad_partial_bytes(rows, g.F) : 0);
  void* base = c.workspace(plan.total());
  void* scratch = WorkspacePlan::at(base, at_scratch);

  if (db.defined())
    SYSTOLIC_CUDA_CHECK(dnn::launch_bias_grad(dy.raw_data(), t, db.raw_data(), element_of(db.dtype()), rows,
                                              g.F, WorkspacePlan::at(base, at_partial), c.stream));
  if (need_data) {
    void* wt = WorkspacePlan::at(base, at_wt);
    SYSTOLIC_CUDA_CHECK(dnn::launch_transpose(w.raw_data(), t, wt, t, g.KH * g.KW * g.Cg, g.F,
                                              /*accumulate=*/false, c.stream));
    void* out = g.padded() ? WorkspacePlan::at(base, at_dxpad) : dx.raw_data();
    SYSTOLIC_CUDNN_CHECK(cudnnConvolutionBackwardData(c.cudnn, &kOne, e.w, wt, e.y, dy.raw_data(),
                                                      e.backward_data, e.data_algo, scratch, e.data_workspace,
                                                      &kZero, e.x, out));
    if (g.padded())
      SYSTOLIC_CUDA_CHECK(dnn::launch_crop_nhwc(out, dx.raw_data(), t, g.N, g.H, g.W, g.C, g.PH, g.PW,
                                                g.extra_top, g.extra_left, c.stream));
  }
  if (need_filter) {
    const void* xin = x.raw_data();
    if (g.padded()) {
      void* xpad = WorkspacePlan::at(base, at_xpad);
      SYSTOLIC_CUDA_CHECK(dnn::launch_pad_nhwc(x.raw_data(), xpad, t, g.N, g.H, g.W, g.C, g.PH, g.PW,
                                               g.extra_top, g.extra_left, 0.0f, c.stream));
      xin = xpad;
    }
    void* dwt = WorkspacePlan::at(base, at_dwt);
    SYSTOLIC_CUDNN_CHECK(cudnnConvolutionBackwardFilter(c.cudnn, &kOne, e.x, xin, e.y, dy.raw_data(),
                                                        e.backward_filter, e.filter_algo, scratch,
                                                        e.filter_workspace, &kZero, e.w, dwt));
    // dwt is (F, KH, KW, C) = [F, KH*KW*C]; dw is [KH*KW*C, F]: transpose and add.
    SYSTOLIC_CUDA_CHECK(dnn::launch_transpose(dwt, t, dw.raw_data(), element_of(dw.dtype()), g.F,
                                              g.KH * g.KW * g.Cg,
                                              /*accumulate=*/true, c.stream));
  }
}

}  // namespace systolic::ops::cuda

// ---- conv area: the bias of Conv2DTranspose (whose convolution is conv2d_backward's data gradient), with the
// convolution epilogue's kernels (dnn_kernels.cu): y = x + b, and db += the column sums of dy.
namespace systolic::ops::cuda {

const DTypes bias_add_forward_dtypes{DType::float32, DType::bfloat16};
void bias_add_forward(const Tensor& x, const Tensor& b, Tensor& y) {
  if (y.numel() == 0) return;
  Context& c = context(y);
  if (y.raw_data() != x.raw_data())
    SYSTOLIC_CUDA_CHECK(
        cudaMemcpyAsync(y.raw_data(), x.raw_data(), y.nbytes(), cudaMemcpyDeviceToDevice, c.stream));
  std::int64_t C = y.dim(-1);
  SYSTOLIC_CUDA_CHECK(dnn::launch_add_bias(y.raw_data(), element_of(y.dtype()), b.raw_data(),
                                           element_of(b.dtype()), y.numel() / C, C, /*relu=*/false,
                                           c.stream));
}

const DTypes bias_add_backward_dtypes{DType::float32, DType::bfloat16};
void bias_add_backward(const Tensor& dy, Tensor& db) {
  if (dy.numel() == 0) return;
  Context& c = context(dy);
  std::int64_t C = dy.dim(-1), rows = dy.numel() / C;
  void* partial = c.workspace(dnn::bias_grad_partial_bytes(rows, C));
  SYSTOLIC_CUDA_CHECK(dnn::launch_bias_grad(dy.raw_data(), element_of(dy.dtype()), db.raw_data(),
                                            element_of(db.dtype()), rows, C, partial, c.stream));
}

}  // namespace systolic::ops::cuda
