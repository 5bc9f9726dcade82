// The entry points ops::<name> of every op in SYSTOLIC_OPS: check the call once (the checks below, one function
// per op, for every backend), find the tensors' device, ask its backend whether it runs the op on the call's
// data dtype, and call it. The checks name the op and the offending tensor, so every device rejects the same bad
// calls with the same message. Checks of values (a label out of range) stay with the backends, which see the
// data.
#include <systolic/ops.h>

#include "core/tensor_internals.h"
#include "ops/backend.h"
#include "ops/concat_layout.h"
#include "ops/cpu/cpu_backend.h"
#include "ops/optimizer_math.h"
#include "ops/rnn_math.h"
#include "ops/xla/xla_backend.h"
#if SYSTOLIC_HAS_CUDA
#include "ops/cuda/cuda_backend.h"
#endif

#include <algorithm>
#include <cmath>
#include <tuple>

namespace systolic::ops {

namespace {

// SYSTOLIC_OP_CHECK(check, cond, "format {}", args...): Error "<op>: ..." when cond fails; the message and its
// arguments are only evaluated then, so a passing check costs its comparison alone.
#define SYSTOLIC_OP_CHECK(check, cond, ...) \
  do {                                      \
    if (!(cond)) (check).fail(__VA_ARGS__); \
  } while (0)

// What every check needs: the op's name in the message, and short ways to state facts about tensors.
class Check {
 public:
  explicit Check(const char* op) : op_(op) {}

  // Raises Error "<op>: <message>" (SYSTOLIC_OP_CHECK formats it only when its condition fails).
  template <class... Args>
  [[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) const {
    systolic::fail("{}: {}", op_, fmt::format(format, std::forward<Args>(args)...));
  }
  const Tensor& defined(const char* name, const Tensor& t) const {
    SYSTOLIC_OP_CHECK(*this, t.defined(), "{} is undefined", name);
    return t;
  }
  void floating(const char* name, const Tensor& t) const {
    defined(name, t);
    SYSTOLIC_OP_CHECK(*this, is_floating(t.dtype()), "{} is {}; it takes float32, bfloat16 or float64", name,
                      dtype_name(t.dtype()));
  }
  void rank(const char* name, const Tensor& t, int rank, const char* layout) const {
    defined(name, t);
    SYSTOLIC_OP_CHECK(*this, t.rank() == rank, "{} has shape {}; it takes rank {} {}", name, t.shape().str(),
                      rank, layout);
  }
  void dtype(const char* name, const Tensor& t, DType want, const char* why) const {
    defined(name, t);
    SYSTOLIC_OP_CHECK(*this, t.dtype() == want, "{} is {}, expected {} ({})", name, dtype_name(t.dtype()),
                      dtype_name(want), why);
  }
  void shape(const char* name, const Tensor& t, const Shape& want) const {
    defined(name, t);
    SYSTOLIC_OP_CHECK(*this, t.shape() == want, "{} has shape {}, expected {}", name, t.shape().str(),
                      want.str());
  }
  // `name` is `like`'s companion: the same dtype and number of elements.
  void like(const char* name, const Tensor& t, const char* like_name, const Tensor& like) const {
    defined(name, t);
    SYSTOLIC_OP_CHECK(*this, t.dtype() == like.dtype(), "{} is {}, expected {} ({}'s dtype)", name,
                      dtype_name(t.dtype()), dtype_name(like.dtype()), like_name);
    SYSTOLIC_OP_CHECK(*this, t.numel() == like.numel(), "{} has shape {} but {} has {}", name,
                      t.shape().str(), like_name, like.shape().str());
  }
  // A parameter of data `x` (a bias, a kernel's gradient): x's dtype, or float32 when x is bfloat16 (mixed
  // precision keeps float32 master weights).
  void parameter(const char* name, const Tensor& t, DType x) const {
    defined(name, t);
    SYSTOLIC_OP_CHECK(*this, t.dtype() == x || (x == DType::bfloat16 && t.dtype() == DType::float32),
                      "{} is {}, expected {}{}", name, dtype_name(t.dtype()), dtype_name(x),
                      x == DType::bfloat16 ? " or float32" : "");
  }
  // A per-channel statistic or parameter of batch normalisation: float32 (float64 with float64 data).
  void statistic(const char* name, const Tensor& t, DType x, std::int64_t channels) const {
    DType want = x == DType::float64 ? DType::float64 : DType::float32;
    dtype(name, t, want, x == DType::float64 ? "float64 data" : "batch statistics are float32");
    SYSTOLIC_OP_CHECK(*this, t.numel() == channels, "{} has shape {}; it takes one value per channel ({})",
                      name, t.shape().str(), channels);
  }
  void step_counter(const char* name, const Tensor& t) const {
    if (!t.defined()) return;
    SYSTOLIC_OP_CHECK(*this, t.dtype() == DType::float64 && t.numel() == 1,
                      "{} must be a float64 [1] counter, not {} {}", name, dtype_name(t.dtype()),
                      t.shape().str());
  }
  // A number the op reads on the device (the learning rate of an optimizer update).
  void device_scalar(const char* name, const Tensor& t) const {
    defined(name, t);
    SYSTOLIC_OP_CHECK(*this, t.dtype() == DType::float64 && t.numel() == 1,
                      "{} must be a float64 [1] tensor, not {} {}", name, dtype_name(t.dtype()),
                      t.shape().str());
  }
  // The values of an optimizer step that the op reads on the device (optimizer_update's).
  void step_values(const char* name, const Tensor& t) const {
    defined(name, t);
    SYSTOLIC_OP_CHECK(*this, t.dtype() == DType::float64 && t.numel() == update::kStepValues,
                      "{} must be a float64 [{}] tensor, not {} {}", name, update::kStepValues,
                      dtype_name(t.dtype()), t.shape().str());
  }
  void total(const Tensor& t) const {
    defined("total", t);
    SYSTOLIC_OP_CHECK(*this, t.dtype() == DType::float64 && t.numel() == 1,
                      "total must be a float64 scalar, not {} {}", dtype_name(t.dtype()), t.shape().str());
  }

 private:
  const char* op_;
};

// Whether two tensors share bytes of one storage (on any device: by storage and offset, not by address).
bool overlap(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined() || a.nbytes() == 0 || b.nbytes() == 0 || !a.shares_storage_with(b))
    return false;
  std::size_t ao = TensorInternals::byte_offset(a), bo = TensorInternals::byte_offset(b);
  return ao < bo + b.nbytes() && bo < ao + a.nbytes();
}
// Whether two tensors start at the same byte of one storage.
bool same_start(const Tensor& a, const Tensor& b) {
  return a.same_start_as(b);
}

// The output extent of a window sliding over `in` cells, as TensorFlow computes it: floor((in + pads - span) /
// stride) + 1, span = (window - 1) * dilation + 1.
std::int64_t window_out(std::int64_t in, int pad_before, int pad_after, int window, int dilation,
                        int stride) {
  std::int64_t span = std::int64_t(window - 1) * dilation + 1;
  return (in + pad_before + pad_after - span) / stride + 1;
}

// ---- The checks, one per op, in the list's order. Each returns the call's data dtype (ops::supports).
namespace checks {

// x (N,H,W,C), w (KH,KW,C/groups,F) and p fit; returns the output shape (N,OH,OW,F). `x_name` is the tensor
// that gives x's shape (dx when conv2d_backward runs without x).
Shape conv_output(const Check& c, const char* x_name, const Tensor& x, const Tensor& w,
                  const Conv2DParams& p) {
  c.floating(x_name, x);
  c.rank(x_name, x, 4, "(N, H, W, C)");
  c.rank("w", w, 4, "(KH, KW, C/groups, F)");
  c.dtype("w", w, x.dtype(), "x's dtype");
  SYSTOLIC_OP_CHECK(c, p.groups > 0, "groups must be positive, got {}", p.groups);
  SYSTOLIC_OP_CHECK(c, x.dim(3) % p.groups == 0 && w.dim(3) % p.groups == 0,
                    "groups {} must divide the input channels ({}) and the filters ({})", p.groups, x.dim(3),
                    w.dim(3));
  SYSTOLIC_OP_CHECK(c, w.dim(2) * p.groups == x.dim(3),
                    "kernel w {} takes {} channels in {} group(s), {} {} has {}", w.shape().str(),
                    w.dim(2) * p.groups, p.groups, x_name, x.shape().str(), x.dim(3));
  SYSTOLIC_OP_CHECK(c, w.numel() > 0 && x.dim(3) > 0, "empty kernel {} or input {}", w.shape().str(),
                    x.shape().str());
  SYSTOLIC_OP_CHECK(c, p.stride_h > 0 && p.stride_w > 0 && p.dilation_h > 0 && p.dilation_w > 0,
                    "strides ({}, {}) and dilation ({}, {}) must be positive", p.stride_h, p.stride_w,
                    p.dilation_h, p.dilation_w);
  SYSTOLIC_OP_CHECK(c, p.pad_top >= 0 && p.pad_bottom >= 0 && p.pad_left >= 0 && p.pad_right >= 0,
                    "padding must not be negative (top {}, bottom {}, left {}, right {})", p.pad_top,
                    p.pad_bottom, p.pad_left, p.pad_right);
  std::int64_t oh = window_out(x.dim(1), p.pad_top, p.pad_bottom, int(w.dim(0)), p.dilation_h, p.stride_h);
  std::int64_t ow = window_out(x.dim(2), p.pad_left, p.pad_right, int(w.dim(1)), p.dilation_w, p.stride_w);
  SYSTOLIC_OP_CHECK(c, oh > 0 && ow > 0, "kernel {} does not fit x {} with this padding", w.shape().str(),
                    x.shape().str());
  return {x.dim(0), oh, ow, w.dim(3)};
}

DType conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y, const Conv2DParams& p) {
  Check c("conv2d_forward");
  Shape ys = conv_output(c, "x", x, w, p);
  c.dtype("y", y, x.dtype(), "x's dtype");
  c.shape("y", y, ys);
  if (b.defined()) {
    c.parameter("b", b, x.dtype());
    SYSTOLIC_OP_CHECK(c, b.numel() == w.dim(3), "bias b {} does not match {} filters", b.shape().str(),
                      w.dim(3));
  }
  SYSTOLIC_OP_CHECK(c, p.activation == Activation::linear || p.activation == Activation::relu,
                    "fuses linear or relu, not {}", activation_name(p.activation));
  return x.dtype();
}

// Gradients a convolution or dense backward writes, where defined: dx like x, dw with w's shape and db with
// `outputs` values (parameters: see Check::parameter).
void check_gradients(const Check& c, const Tensor& x, const Tensor& w, const Tensor& dx, const Tensor& dw,
                     const Tensor& db, std::int64_t outputs) {
  if (dx.defined()) {
    c.dtype("dx", dx, x.dtype(), "x's dtype");
    c.shape("dx", dx, x.shape());
  }
  if (dw.defined()) {
    c.parameter("dw", dw, x.dtype());
    c.shape("dw", dw, w.shape());
  }
  if (db.defined()) {
    c.parameter("db", db, x.dtype());
    SYSTOLIC_OP_CHECK(c, db.numel() == outputs, "db {} does not match {} outputs", db.shape().str(), outputs);
  }
}

DType conv2d_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw, Tensor& db,
                      const Conv2DParams& p) {
  Check c("conv2d_backward");
  // Without x (only dx wanted, as Conv2DTranspose's forward), dx gives x's shape.
  SYSTOLIC_OP_CHECK(c, x.defined() || (dx.defined() && !dw.defined()),
                    "x is undefined: it may be only when dx is defined and dw is not");
  const Tensor& shape_of_x = x.defined() ? x : dx;
  Shape ys = conv_output(c, x.defined() ? "x" : "dx", shape_of_x, w, p);
  c.dtype("dy", dy, shape_of_x.dtype(), "x's dtype");
  c.shape("dy", dy, ys);
  check_gradients(c, shape_of_x, w, dx, dw, db, w.dim(3));
  return shape_of_x.dtype();
}

Shape pool_output(const Check& c, const Tensor& x, const Pool2DParams& p) {
  c.floating("x", x);
  c.rank("x", x, 4, "(N, H, W, C)");
  SYSTOLIC_OP_CHECK(c, p.window_h > 0 && p.window_w > 0 && p.stride_h > 0 && p.stride_w > 0,
                    "window ({}, {}) and strides ({}, {}) must be positive", p.window_h, p.window_w,
                    p.stride_h, p.stride_w);
  SYSTOLIC_OP_CHECK(
      c,
      p.pad_top >= 0 && p.pad_bottom >= 0 && p.pad_left >= 0 && p.pad_right >= 0 && p.pad_top < p.window_h &&
          p.pad_bottom < p.window_h && p.pad_left < p.window_w && p.pad_right < p.window_w,
      "padding (top {}, bottom {}, left {}, right {}) must be at least 0 and less than the window ({}, {})",
      p.pad_top, p.pad_bottom, p.pad_left, p.pad_right, p.window_h, p.window_w);
  std::int64_t oh = window_out(x.dim(1), p.pad_top, p.pad_bottom, p.window_h, 1, p.stride_h);
  std::int64_t ow = window_out(x.dim(2), p.pad_left, p.pad_right, p.window_w, 1, p.stride_w);
  SYSTOLIC_OP_CHECK(c, oh > 0 && ow > 0, "window ({}, {}) does not fit x {}", p.window_h, p.window_w,
                    x.shape().str());
  return {x.dim(0), oh, ow, x.dim(3)};
}

DType pool2d_forward(const Tensor& x, Tensor& y, Tensor& workspace, const Pool2DParams& p) {
  (void)workspace;  // the backend's
  Check c("pool2d_forward");
  Shape ys = pool_output(c, x, p);
  c.dtype("y", y, x.dtype(), "x's dtype");
  c.shape("y", y, ys);
  return x.dtype();
}

DType pool2d_backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& workspace, Tensor& dx,
                      const Pool2DParams& p) {
  (void)workspace;
  Check c("pool2d_backward");
  Shape ys = pool_output(c, x, p);
  for (auto [name, t] : {std::pair<const char*, const Tensor*>{"y", &y}, {"dy", &dy}}) {
    c.dtype(name, *t, x.dtype(), "x's dtype");
    c.shape(name, *t, ys);
  }
  c.dtype("dx", dx, x.dtype(), "x's dtype");
  c.shape("dx", dx, x.shape());
  return x.dtype();
}

// x with channels last, and its channel count.
std::int64_t channels(const Check& c, const Tensor& x) {
  c.floating("x", x);
  SYSTOLIC_OP_CHECK(c, x.rank() >= 1, "x has shape {}; it needs a channel axis (the last)", x.shape().str());
  return x.dim(-1);
}

// The batch-norm forwards' operands: y like x, gamma and beta (where defined), mean and var per channel.
void normalization(const Check& c, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                   const Tensor& mean, const Tensor& var, const Tensor& y, double eps) {
  std::int64_t C = channels(c, x);
  c.dtype("y", y, x.dtype(), "x's dtype");
  c.shape("y", y, x.shape());
  if (gamma.defined()) c.statistic("gamma", gamma, x.dtype(), C);
  if (beta.defined()) c.statistic("beta", beta, x.dtype(), C);
  c.statistic("mean", mean, x.dtype(), C);
  c.statistic("var", var, x.dtype(), C);
  SYSTOLIC_OP_CHECK(c, eps > 0, "epsilon must be positive, got {}", eps);
}

DType batch_norm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                                  Tensor& mean, Tensor& var, double eps, const CrossReplica* replicas) {
  Check c("batch_norm_forward_training");
  normalization(c, x, gamma, beta, mean, var, y, eps);
  SYSTOLIC_OP_CHECK(c, !replicas || replicas->all_reduce, "replicas without an all_reduce");
  return x.dtype();
}

DType batch_norm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                   const Tensor& mean, const Tensor& var, Tensor& y, double eps) {
  Check c("batch_norm_forward_inference");
  normalization(c, x, gamma, beta, mean, var, y, eps);
  return x.dtype();
}

DType batch_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& var,
                          const Tensor& dy, Tensor& dx, Tensor& dgamma, Tensor& dbeta, double eps,
                          const CrossReplica* replicas) {
  Check c("batch_norm_backward");
  std::int64_t C = channels(c, x);
  c.dtype("dy", dy, x.dtype(), "x's dtype");
  c.shape("dy", dy, x.shape());
  if (dx.defined()) {
    c.dtype("dx", dx, x.dtype(), "x's dtype");
    c.shape("dx", dx, x.shape());
  }
  if (gamma.defined()) c.statistic("gamma", gamma, x.dtype(), C);
  c.statistic("mean", mean, x.dtype(), C);
  c.statistic("var", var, x.dtype(), C);
  if (dgamma.defined()) c.statistic("dgamma", dgamma, x.dtype(), C);
  if (dbeta.defined()) c.statistic("dbeta", dbeta, x.dtype(), C);
  SYSTOLIC_OP_CHECK(c, eps > 0, "epsilon must be positive, got {}", eps);
  SYSTOLIC_OP_CHECK(c, !replicas || replicas->all_reduce, "replicas without an all_reduce");
  return x.dtype();
}

// x (..., K), w (K, U), and y or dy (..., U) with as many rows as x.
void dense_shapes(const Check& c, const Tensor& x, const Tensor& w, const char* y_name, const Tensor& y) {
  c.floating("x", x);
  c.rank("w", w, 2, "(K, U)");
  c.dtype("w", w, x.dtype(), "x's dtype");
  c.dtype(y_name, y, x.dtype(), "x's dtype");
  SYSTOLIC_OP_CHECK(c,
                    x.rank() >= 1 && y.rank() >= 1 && x.dim(-1) == w.dim(0) && y.dim(-1) == w.dim(1) &&
                        w.dim(0) > 0 && w.dim(1) > 0 && x.numel() / w.dim(0) == y.numel() / w.dim(1),
                    "x {}, kernel w {} and {} {} do not fit (x (..., K), w (K, U), {} (..., U))",
                    x.shape().str(), w.shape().str(), y_name, y.shape().str(), y_name);
}

DType dense_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) {
  Check c("dense_forward");
  dense_shapes(c, x, w, "y", y);
  if (b.defined()) {
    c.parameter("b", b, x.dtype());
    SYSTOLIC_OP_CHECK(c, b.numel() == w.dim(1), "bias b {} does not match {} units", b.shape().str(),
                      w.dim(1));
  }
  return x.dtype();
}

DType dense_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw, Tensor& db) {
  Check c("dense_backward");
  dense_shapes(c, x, w, "dy", dy);
  check_gradients(c, x, w, dx, dw, db, w.dim(1));
  return x.dtype();
}

void activation_parameters(const Check& c, const Activation& a) {
  SYSTOLIC_OP_CHECK(
      c, std::isfinite(a.alpha) && !std::isnan(a.max_value) && a.max_value >= 0 && std::isfinite(a.threshold),
      "{} has parameters alpha {}, max_value {}, threshold {}: they must be finite (max_value >= 0)",
      activation_name(a), a.alpha, a.max_value, a.threshold);
  SYSTOLIC_OP_CHECK(c, !a.approximate || a.kind == Activation::gelu,
                    "approximate applies to gelu only, not {}", activation_name(a));
  SYSTOLIC_OP_CHECK(c, a.kind != Activation::squareplus || a.alpha >= 0, "squareplus needs b >= 0, got {}",
                    a.alpha);
  SYSTOLIC_OP_CHECK(c,
                    (a.kind != Activation::soft_shrink && a.kind != Activation::hard_shrink) || a.alpha >= 0,
                    "{} needs threshold >= 0, got {}", activation_name(a), a.alpha);
}

// A row-wise activation (softmax, log_softmax) needs a last axis and tensors of one shape; the others only one
// number of elements.
void activation_operand(const Check& c, const Activation& a, const char* name, const Tensor& t,
                        const Tensor& x) {
  c.like(name, t, "the input", x);
  if (a.over_last_axis()) c.shape(name, t, x.shape());
}

DType activation_forward(const Activation& a, const Tensor& x, Tensor& y) {
  Check c("activation_forward");
  activation_parameters(c, a);
  c.floating("x", x);
  if (a.over_last_axis())
    SYSTOLIC_OP_CHECK(c, x.rank() >= 1 && x.dim(-1) > 0, "{} runs over the last axis; x has shape {}",
                      activation_name(a), x.shape().str());
  activation_operand(c, a, "y", y, x);
  return x.dtype();
}

DType activation_backward(const Activation& a, const Tensor& x, const Tensor& y, const Tensor& dy,
                          Tensor& dx) {
  Check c("activation_backward");
  activation_parameters(c, a);
  c.floating("y", y);
  if (a.over_last_axis())
    SYSTOLIC_OP_CHECK(c, y.rank() >= 1 && y.dim(-1) > 0, "{} runs over the last axis; y has shape {}",
                      activation_name(a), y.shape().str());
  SYSTOLIC_OP_CHECK(c, x.defined() || !a.backward_needs_input(),
                    "the gradient of {} needs the forward input x", activation_name(a));
  if (x.defined()) activation_operand(c, a, "x", x, y);
  activation_operand(c, a, "dy", dy, y);
  activation_operand(c, a, "dx", dx, y);
  return y.dtype();
}

DType dropout(const char* op, const char* in, const Tensor& x, const char* out, const Tensor& y, double rate,
              const Tensor& step) {
  Check c(op);
  c.floating(in, x);
  c.like(out, y, in, x);
  SYSTOLIC_OP_CHECK(c, rate >= 0 && rate < 1, "rate must be in [0, 1), got {}", rate);
  c.step_counter("step", step);
  return x.dtype();
}

DType dropout_forward(const Tensor& x, Tensor& y, double rate, std::uint64_t, const Tensor& step) {
  return dropout("dropout_forward", "x", x, "y", y, rate, step);
}

DType dropout_backward(const Tensor& dy, Tensor& dx, double rate, std::uint64_t, const Tensor& step) {
  return dropout("dropout_backward", "dy", dy, "dx", dx, rate, step);
}

// x (N,H,W,C) padded by p is y (N, H+top+bottom, W+left+right, C).
DType pad(const char* op, const char* x_name, const Tensor& x, const char* y_name, const Tensor& y,
          const Pad2D& p) {
  Check c(op);
  c.rank(x_name, x, 4, "(N, H, W, C)");
  SYSTOLIC_OP_CHECK(c, p.top >= 0 && p.bottom >= 0 && p.left >= 0 && p.right >= 0,
                    "padding must not be negative (top {}, bottom {}, left {}, right {})", p.top, p.bottom,
                    p.left, p.right);
  c.defined(y_name, y);
  SYSTOLIC_OP_CHECK(c, y.dtype() == x.dtype(), "{} is {}, expected {} ({}'s dtype)", y_name,
                    dtype_name(y.dtype()), dtype_name(x.dtype()), x_name);
  c.shape(y_name, y, {x.dim(0), x.dim(1) + p.top + p.bottom, x.dim(2) + p.left + p.right, x.dim(3)});
  return x.dtype();
}

DType pad2d_forward(const Tensor& x, Tensor& y, const Pad2D& p) {
  return pad("pad2d_forward", "x", x, "y", y, p);
}
DType pad2d_backward(const Tensor& dy, Tensor& dx, const Pad2D& p) {
  return pad("pad2d_backward", "dx", dx, "dy", dy, p);
}

// The parts fit y off `axis`, and their sizes along it add up (an undefined part takes what is left, when
// the layout says where: no defined part after two undefined ones).
void concat_parts(const Check& c, const char* y_name, const Tensor& y, const std::vector<Tensor>& parts,
                  int axis) {
  c.defined(y_name, y);
  SYSTOLIC_OP_CHECK(c, axis >= 0 && axis < y.rank(), "axis {} is not an axis of {}", axis, y.shape().str());
  for (std::size_t k = 0; k < parts.size(); ++k) {
    const Tensor& x = parts[k];
    if (!x.defined()) continue;
    bool fits = x.rank() == y.rank() && x.dtype() == y.dtype();
    for (int i = 0; fits && i < y.rank(); ++i) fits = i == axis || x.dim(i) == y.dim(i);
    SYSTOLIC_OP_CHECK(c, fits, "part {} ({} {}) does not fit the output ({} {}) off axis {}", k,
                      dtype_name(x.dtype()), x.shape().str(), dtype_name(y.dtype()), y.shape().str(), axis);
  }
  ConcatLayout l = concat_layout(y, parts, axis);
  SYSTOLIC_OP_CHECK(c, l.undefined > 0 ? l.known <= l.row : l.known == l.row,
                    "the parts' sizes along axis {} do not add up to the output's {}", axis, y.shape().str());
  int undefined_before = 0;
  for (std::size_t k = 0; k < parts.size(); ++k) {
    if (!parts[k].defined()) {
      ++undefined_before;
      continue;
    }
    SYSTOLIC_OP_CHECK(c, undefined_before < 2,
                      "part {} follows {} undefined parts, whose sizes along axis {} are unknown", k,
                      undefined_before, axis);
  }
}

DType concat_forward(const std::vector<Tensor>& xs, Tensor& y, int axis) {
  Check c("concat_forward");
  for (std::size_t k = 0; k < xs.size(); ++k)
    SYSTOLIC_OP_CHECK(c, xs[k].defined(), "input {} is undefined", k);
  concat_parts(c, "y", y, xs, axis);
  return y.dtype();
}

DType concat_backward(const Tensor& dy, std::vector<Tensor>& dxs, int axis) {
  Check c("concat_backward");
  concat_parts(c, "dy", dy, dxs, axis);
  return dy.dtype();
}

DType fill(Tensor& x, double) {
  Check("fill").defined("x", x);
  return x.dtype();
}

DType copy(const Tensor& src, Tensor& dst) {
  Check c("copy");
  c.defined("src", src);
  c.like("dst", dst, "src", src);
  return src.dtype();
}

DType cast(const Tensor& src, Tensor& dst) {
  Check c("cast");
  c.floating("src", src);
  c.defined("dst", dst);
  SYSTOLIC_OP_CHECK(c, dst.dtype() != DType::uint8,
                    "dst is uint8; casts go to float32, bfloat16, float64 or int32");
  SYSTOLIC_OP_CHECK(c, src.numel() == dst.numel(), "{} values into {}", src.numel(), dst.numel());
  return dst.dtype();
}

DType add_n(const std::vector<Tensor>& xs, Tensor& y) {
  Check c("add_n");
  c.floating("y", y);
  for (std::size_t k = 0; k < xs.size(); ++k) {
    c.defined("an input", xs[k]);
    SYSTOLIC_OP_CHECK(c, xs[k].dtype() == y.dtype() && xs[k].numel() == y.numel(),
                      "input {} is {} {}, y {} {}: they must match", k, dtype_name(xs[k].dtype()),
                      xs[k].shape().str(), dtype_name(y.dtype()), y.shape().str());
    SYSTOLIC_OP_CHECK(c, k == 0 || !overlap(xs[k], y), "y may be input 0, but not overlap input {}", k);
  }
  return y.dtype();
}

DType accumulate(const Tensor& src, Tensor& dst) {
  Check c("accumulate");
  c.floating("dst", dst);
  c.like("src", src, "dst", dst);
  return dst.dtype();
}

DType scale_shift(const Tensor& x, Tensor& y, double, double) {
  Check c("scale_shift");
  c.floating("x", x);
  c.like("y", y, "x", x);
  return x.dtype();
}

DType moving_average(Tensor& moving, const Tensor& value, double momentum) {
  Check c("moving_average");
  c.floating("moving", moving);
  c.like("value", value, "moving", moving);
  SYSTOLIC_OP_CHECK(c, momentum >= 0 && momentum <= 1, "momentum must be in [0, 1], got {}", momentum);
  return moving.dtype();
}

DType gather_rows(const Tensor& src, const Tensor& indices, Tensor& dst) {
  Check c("gather_rows");
  c.defined("src", src);
  SYSTOLIC_OP_CHECK(c, src.rank() >= 1, "src has no rows (shape {})", src.shape().str());
  SYSTOLIC_OP_CHECK(c, src.dtype() != DType::bfloat16,
                    "src is bfloat16; rows come from uint8, int32, float32 or float64 data");
  c.dtype("indices", indices, DType::int32, "row indices");
  c.defined("dst", dst);
  SYSTOLIC_OP_CHECK(c, dst.dtype() != DType::uint8,
                    "dst is uint8; it converts to float32, bfloat16, float64 or int32");
  std::int64_t rows = src.dim(0), row = rows ? src.numel() / rows : 0;
  SYSTOLIC_OP_CHECK(c, indices.numel() * row == dst.numel(), "{} rows of {} values do not fill dst {}",
                    indices.numel(), row, dst.shape().str());
  return dst.dtype();
}

DType scatter_add_rows(const Tensor& src, const Tensor& indices, Tensor& dst) {
  Check c("scatter_add_rows");
  c.floating("src", src);
  c.dtype("indices", indices, DType::int32, "row indices");
  c.defined("dst", dst);
  SYSTOLIC_OP_CHECK(c, dst.dtype() == DType::float32 || dst.dtype() == DType::float64,
                    "dst is {}; rows are added in float32 or float64", dtype_name(dst.dtype()));
  SYSTOLIC_OP_CHECK(c, dst.rank() >= 1, "dst has no rows (shape {})", dst.shape().str());
  std::int64_t rows = dst.dim(0), row = rows ? dst.numel() / rows : 0;
  SYSTOLIC_OP_CHECK(c, indices.numel() * row == src.numel(), "{} rows of {} values do not make src {}",
                    indices.numel(), row, src.shape().str());
  SYSTOLIC_OP_CHECK(c, !overlap(src, dst), "dst must not overlap src");
  return dst.dtype();
}

DType compute_mask(const Tensor& x, double value, Tensor& mask) {
  Check c("compute_mask");
  c.floating("x", x);
  c.defined("mask", mask);
  SYSTOLIC_OP_CHECK(c, mask.dtype() == x.dtype(), "mask is {}, expected {} (x's dtype)",
                    dtype_name(mask.dtype()), dtype_name(x.dtype()));
  SYSTOLIC_OP_CHECK(c, mask.numel() > 0 ? x.numel() % mask.numel() == 0 : x.numel() == 0,
                    "x {} does not split into {} rows", x.shape().str(), mask.numel());
  SYSTOLIC_OP_CHECK(c, std::isfinite(value), "value must be finite, got {}", value);
  SYSTOLIC_OP_CHECK(c, !overlap(x, mask), "mask must not overlap x");
  return x.dtype();
}

// rnn: one step's shapes: N rows of u units, G gates; every tensor in h's (or dh's) dtype; those of the cell
// kind defined, the others' ignored.
void rnn_step_checks(const Check& c, const RnnCellParams& p, const Tensor& like, const char* like_name) {
  SYSTOLIC_OP_CHECK(
      c, like.dtype() == DType::float32 || like.dtype() == DType::float64 || like.dtype() == DType::bfloat16,
      "{} is {}; it takes float32, bfloat16 or float64", like_name, dtype_name(like.dtype()));
  c.rank(like_name, like, 2, "(rows, units)");
  for (const Activation& a : {p.activation, p.recurrent_activation}) {
    SYSTOLIC_OP_CHECK(c, !a.over_last_axis(), "a cell's activations act on each value, not {}",
                      activation_name(a));
    activation_parameters(c, a);
  }
}
void rnn_tensor(const Check& c, const char* name, const Tensor& t, const Tensor& like, Shape want) {
  c.shape(name, t, want);
  SYSTOLIC_OP_CHECK(c, t.dtype() == like.dtype(), "{} is {}, expected {}", name, dtype_name(t.dtype()),
                    dtype_name(like.dtype()));
}
void rnn_mask(const Check& c, const Tensor& mask, const Tensor& like) {
  if (mask.defined()) rnn_tensor(c, "mask", mask, like, {like.dim(0)});
}

DType rnn_cell_forward(const RnnCellParams& p, const Tensor& x_part, const Tensor& h_part,
                       const Tensor& h_prev, const Tensor& c_prev, const Tensor& mask, Tensor& h, Tensor& c,
                       Tensor& z) {
  Check k("rnn_cell_forward");
  k.defined("h", h);
  rnn_step_checks(k, p, h, "h");
  const std::int64_t N = h.dim(0), u = h.dim(1), G = rnn_math::gates(p.cell) * u;
  rnn_tensor(k, "x_part", x_part, h, {N, G});
  rnn_tensor(k, "h_part", h_part, h, {N, G});
  rnn_tensor(k, "z", z, h, {N, G});
  rnn_tensor(k, "h_prev", h_prev, h, {N, u});
  if (p.cell == RnnCell::lstm) {
    rnn_tensor(k, "c_prev", c_prev, h, {N, u});
    rnn_tensor(k, "c", c, h, {N, u});
  }
  rnn_mask(k, mask, h);
  SYSTOLIC_OP_CHECK(k, !overlap(h, h_prev) && !overlap(z, x_part) && !overlap(z, h_part),
                    "h must not overlap h_prev, nor z x_part or h_part");
  return h.dtype();
}

DType rnn_cell_backward(const RnnCellParams& p, const Tensor& h_part, const Tensor& h_prev,
                        const Tensor& c_prev, const Tensor& z, const Tensor& c, const Tensor& mask,
                        const Tensor& dh, const Tensor& dc, Tensor& dx_part, Tensor& dh_part, Tensor& dh_prev,
                        Tensor& dc_prev) {
  Check k("rnn_cell_backward");
  k.defined("dh", dh);
  rnn_step_checks(k, p, dh, "dh");
  const std::int64_t N = dh.dim(0), u = dh.dim(1), G = rnn_math::gates(p.cell) * u;
  rnn_tensor(k, "z", z, dh, {N, G});
  rnn_tensor(k, "dx_part", dx_part, dh, {N, G});
  rnn_tensor(k, "dh_prev", dh_prev, dh, {N, u});
  if (p.cell == RnnCell::gru) {
    rnn_tensor(k, "h_part", h_part, dh, {N, G});
    rnn_tensor(k, "h_prev", h_prev, dh, {N, u});
    rnn_tensor(k, "dh_part", dh_part, dh, {N, G});
  } else if (dh_part.defined()) {
    rnn_tensor(k, "dh_part", dh_part, dh, {N, G});
  }
  if (p.cell == RnnCell::lstm) {
    rnn_tensor(k, "c_prev", c_prev, dh, {N, u});
    rnn_tensor(k, "c", c, dh, {N, u});
    if (dc.defined()) rnn_tensor(k, "dc", dc, dh, {N, u});
    rnn_tensor(k, "dc_prev", dc_prev, dh, {N, u});
    SYSTOLIC_OP_CHECK(k, !dc.defined() || !overlap(dc, dc_prev), "dc_prev must not overlap dc");
  }
  rnn_mask(k, mask, dh);
  SYSTOLIC_OP_CHECK(k, !overlap(dh, dh_prev), "dh_prev must not overlap dh");
  return dh.dtype();
}

// rnn_sequence: x [T, N, F]; the weights as Keras stores them; every tensor in x's dtype (the bias: a parameter).
// Returns the sizes: steps, rows, features, units, gate columns.
struct SequenceDims {
  std::int64_t T, N, F, u, G;
};
SequenceDims rnn_sequence_checks(const Check& c, const RnnCellParams& p, const Tensor& x,
                                 const Tensor& kernel, const Tensor& recurrent, const Tensor& bias,
                                 const Tensor& h0, const Tensor& c0) {
  c.rank("x", x, 3, "(steps, rows, features), time-major");
  SYSTOLIC_OP_CHECK(c, is_floating(x.dtype()), "x is {}; it takes float32, bfloat16 or float64",
                    dtype_name(x.dtype()));
  SYSTOLIC_OP_CHECK(c, rnn_sequence_takes(p), "runs Keras's default activations only, not {} and {}",
                    activation_name(p.activation), activation_name(p.recurrent_activation));
  c.rank("recurrent", recurrent, 2, "(units, gates * units)");
  const std::int64_t u = recurrent.dim(0), G = rnn_math::gates(p.cell) * u;
  const SequenceDims d{x.dim(0), x.dim(1), x.dim(2), u, G};
  rnn_tensor(c, "kernel", kernel, x, {d.F, G});
  rnn_tensor(c, "recurrent", recurrent, x, {u, G});
  if (bias.defined()) {  // a parameter: float32 with bfloat16 data (mixed precision)
    c.parameter("bias", bias, x.dtype());
    c.shape("bias", bias, p.cell == RnnCell::gru && p.reset_after ? Shape{2, G} : Shape{G});
  }
  if (h0.defined()) rnn_tensor(c, "h0", h0, x, {d.N, u});
  if (c0.defined()) {
    SYSTOLIC_OP_CHECK(c, p.cell == RnnCell::lstm, "c0 is for an LSTM");
    rnn_tensor(c, "c0", c0, x, {d.N, u});
  }
  return d;
}

DType rnn_sequence_forward(const RnnCellParams& p, bool, const Tensor& x, const Tensor& kernel,
                           const Tensor& recurrent, const Tensor& bias, const Tensor& h0, const Tensor& c0,
                           Tensor& y, Tensor& h_last, Tensor& c_last, Tensor& workspace) {
  Check k("rnn_sequence_forward");
  const SequenceDims d = rnn_sequence_checks(k, p, x, kernel, recurrent, bias, h0, c0);
  rnn_tensor(k, "y", y, x, {d.T, d.N, d.u});
  if (h_last.defined()) rnn_tensor(k, "h_last", h_last, x, {d.N, d.u});
  if (c_last.defined()) {
    SYSTOLIC_OP_CHECK(k, p.cell == RnnCell::lstm, "c_last is for an LSTM");
    rnn_tensor(k, "c_last", c_last, x, {d.N, d.u});
  }
  for (const Tensor* in : {&x, &kernel, &recurrent, &bias, &h0, &c0})
    for (const Tensor* out : {&y, &h_last, &c_last, &workspace})
      SYSTOLIC_OP_CHECK(k, !overlap(*in, *out), "the outputs must not overlap the inputs");
  return x.dtype();
}

DType rnn_sequence_backward(const RnnCellParams& p, bool, const Tensor& x, const Tensor& kernel,
                            const Tensor& recurrent, const Tensor& bias, const Tensor& h0, const Tensor& c0,
                            const Tensor& y, const Tensor&, const Tensor& dy, const Tensor& dh_last,
                            const Tensor& dc_last, Tensor& dx, Tensor& dkernel, Tensor& drecurrent,
                            Tensor& dbias, Tensor& dh0, Tensor& dc0) {
  Check k("rnn_sequence_backward");
  const SequenceDims d = rnn_sequence_checks(k, p, x, kernel, recurrent, bias, h0, c0);
  rnn_tensor(k, "y", y, x, {d.T, d.N, d.u});
  if (dy.defined()) rnn_tensor(k, "dy", dy, x, {d.T, d.N, d.u});
  if (dh_last.defined()) rnn_tensor(k, "dh_last", dh_last, x, {d.N, d.u});
  if (dc_last.defined()) {
    SYSTOLIC_OP_CHECK(k, p.cell == RnnCell::lstm, "dc_last is for an LSTM");
    rnn_tensor(k, "dc_last", dc_last, x, {d.N, d.u});
  }
  if (dx.defined()) rnn_tensor(k, "dx", dx, x, x.shape());
  // The weights' gradients: parameters (float32 with bfloat16 data).
  if (dkernel.defined())
    k.parameter("dkernel", dkernel, x.dtype()), k.shape("dkernel", dkernel, kernel.shape());
  if (drecurrent.defined())
    k.parameter("drecurrent", drecurrent, x.dtype()), k.shape("drecurrent", drecurrent, recurrent.shape());
  if (dbias.defined()) {
    SYSTOLIC_OP_CHECK(k, bias.defined(), "dbias without a bias");
    k.parameter("dbias", dbias, x.dtype());
    k.shape("dbias", dbias, bias.shape());
  }
  if (dh0.defined()) rnn_tensor(k, "dh0", dh0, x, {d.N, d.u});
  if (dc0.defined()) {
    SYSTOLIC_OP_CHECK(k, p.cell == RnnCell::lstm, "dc0 is for an LSTM");
    rnn_tensor(k, "dc0", dc0, x, {d.N, d.u});
  }
  for (const Tensor* in : {&x, &kernel, &recurrent, &bias, &h0, &c0, &y, &dy, &dh_last, &dc_last})
    for (const Tensor* out : {&dx, &dkernel, &drecurrent, &dbias, &dh0, &dc0})
      SYSTOLIC_OP_CHECK(k, !overlap(*in, *out), "the gradients must not overlap the inputs");
  return x.dtype();
}

DType augment_images(const Tensor& x, Tensor& y, const AugmentParams& p, std::uint64_t, std::uint64_t) {
  Check c("augment_images");
  c.dtype("x", x, DType::float32, "images are float32");
  c.dtype("y", y, DType::float32, "images are float32");
  SYSTOLIC_OP_CHECK(c, (x.rank() == 4 || x.rank() == 3) && x.shape() == y.shape(),
                    "x {} and y {} must be the same images (N, H, W, C)", x.shape().str(), y.shape().str());
  SYSTOLIC_OP_CHECK(c,
                    std::isfinite(p.width_shift_range) && p.width_shift_range >= 0 &&
                        std::isfinite(p.height_shift_range) && p.height_shift_range >= 0,
                    "shift ranges must be finite and >= 0, got width {} and height {}", p.width_shift_range,
                    p.height_shift_range);
  SYSTOLIC_OP_CHECK(c, !overlap(x, y), "y must not overlap x");
  return x.dtype();
}

// Predictions [..., C]: returns the rows.
std::int64_t predictions(const Check& c, const char* name, const Tensor& pred) {
  c.floating(name, pred);
  SYSTOLIC_OP_CHECK(c, pred.rank() >= 1 && pred.dim(-1) > 0, "{} of shape {} have no classes", name,
                    pred.shape().str());
  return pred.numel() / pred.dim(-1);
}

// int32 labels [rows] (sparse), or labels like the predictions (dense: their dtype, or float32).
void labels(const Check& c, const Tensor& labels, const Tensor& pred, std::int64_t rows) {
  c.defined("labels", labels);
  if (labels.dtype() == DType::int32) {
    SYSTOLIC_OP_CHECK(c, labels.numel() == rows, "{} integer labels for {} predictions", labels.numel(),
                      rows);
    return;
  }
  c.parameter("labels", labels, pred.dtype());
  SYSTOLIC_OP_CHECK(c, labels.numel() == pred.numel(),
                    "labels of shape {} do not match predictions of shape {}", labels.shape().str(),
                    pred.shape().str());
}

void gradient(const Check& c, const char* name, const Tensor& grad, const char* of, const Tensor& pred) {
  if (grad.defined()) c.like(name, grad, of, pred);
}

// Keras's sample weights of a loss: undefined, or one per sample of pred's batch, float32 (float64 for float64
// predictions).
void sample_weights(const Check& c, const Tensor& w, const Tensor& pred, bool per_row = false) {
  if (!w.defined()) return;
  const DType want = pred.dtype() == DType::float64 ? DType::float64 : DType::float32;
  c.dtype("weights", w, want,
          pred.dtype() == DType::float64 ? "float64 predictions" : "sample weights are float32");
  SYSTOLIC_OP_CHECK(c, pred.rank() >= 1, "predictions have no batch axis (shape {})", pred.shape().str());
  const std::int64_t rows = pred.rank() >= 2 && pred.dim(-1) ? pred.numel() / pred.dim(-1) : pred.numel();
  SYSTOLIC_OP_CHECK(c, w.numel() == pred.dim(0) || (per_row && w.numel() == rows && rows > 0),
                    "weights of shape {} for predictions of shape {}: one per sample{}", w.shape().str(),
                    pred.shape().str(),
                    per_row ? fmt::format(" ({}) or one per row ({})", pred.dim(0), rows) : "");
}

// Floating predictions with a batch axis, and `what` (targets or 0/1 labels) of their dtype and element count.
void predictions_and(const Check& c, const Tensor& pred, const char* what, const Tensor& target) {
  c.floating("predictions", pred);
  SYSTOLIC_OP_CHECK(c, pred.rank() >= 1, "predictions have no batch axis (shape {})", pred.shape().str());
  c.parameter(what, target, pred.dtype());
  SYSTOLIC_OP_CHECK(c, target.numel() == pred.numel(), "{} of shape {} for predictions of shape {}", what,
                    target.shape().str(), pred.shape().str());
}

DType softmax_cross_entropy(const Tensor& logits, const Tensor& l, const Tensor& w, Tensor& total,
                            Tensor& dlogits, double) {
  Check c("softmax_cross_entropy");
  labels(c, l, logits, predictions(c, "logits", logits));
  sample_weights(c, w, logits, true);
  c.total(total);
  gradient(c, "dlogits", dlogits, "logits", logits);
  return logits.dtype();
}

DType crossentropy_from_probabilities(const Tensor& probs, const Tensor& l, const Tensor& w, Tensor& total,
                                      Tensor& dprobs, double, double eps) {
  Check c("crossentropy_from_probabilities");
  labels(c, l, probs, predictions(c, "probabilities", probs));
  sample_weights(c, w, probs, true);
  c.total(total);
  gradient(c, "dprobs", dprobs, "probabilities", probs);
  SYSTOLIC_OP_CHECK(c, eps > 0 && eps < 0.5, "epsilon must be in (0, 0.5), got {}", eps);
  return probs.dtype();
}

DType ignore_class(const Tensor& l, std::int32_t, const Tensor& w, const Tensor& mask, Tensor& kept,
                   Tensor& kept_weights) {
  Check c("ignore_class");
  c.dtype("labels", l, DType::int32, "class indices");
  SYSTOLIC_OP_CHECK(c, l.rank() >= 1, "labels have no batch axis (shape {})", l.shape().str());
  c.dtype("kept", kept, DType::int32, "class indices");
  c.shape("kept", kept, l.shape());
  c.defined("kept_weights", kept_weights);
  SYSTOLIC_OP_CHECK(c, kept_weights.dtype() == DType::float32 || kept_weights.dtype() == DType::float64,
                    "kept_weights is {}; it takes float32 or float64", dtype_name(kept_weights.dtype()));
  c.shape("kept_weights", kept_weights, l.shape());
  if (w.defined()) {
    c.dtype("weights", w, kept_weights.dtype(), "kept_weights' dtype");
    SYSTOLIC_OP_CHECK(c, w.numel() == l.dim(0) || w.numel() == l.numel(),
                      "weights of shape {} for labels of shape {}: one per sample or one per label",
                      w.shape().str(), l.shape().str());
  }
  if (mask.defined()) {
    c.floating("mask", mask);
    SYSTOLIC_OP_CHECK(c, mask.numel() == l.numel(), "mask of shape {} for labels of shape {}: one per label",
                      mask.shape().str(), l.shape().str());
  }
  return kept_weights.dtype();
}

DType mask_weights(const Tensor& mask, const Tensor& w, bool, Tensor& out) {
  Check c("mask_weights");
  c.floating("mask", mask);
  SYSTOLIC_OP_CHECK(c, mask.rank() >= 1, "mask has no batch axis (shape {})", mask.shape().str());
  c.defined("out", out);
  SYSTOLIC_OP_CHECK(c, out.dtype() == DType::float32 || out.dtype() == DType::float64,
                    "out is {}; it takes float32 or float64", dtype_name(out.dtype()));
  SYSTOLIC_OP_CHECK(c, out.numel() == mask.numel(),
                    "out of shape {} for a mask of shape {}: one per mask value", out.shape().str(),
                    mask.shape().str());
  if (w.defined()) {
    c.dtype("weights", w, out.dtype(), "out's dtype");
    SYSTOLIC_OP_CHECK(c, w.numel() == mask.dim(0) || w.numel() == mask.numel(),
                      "weights of shape {} for a mask of shape {}: one per sample or one per mask value",
                      w.shape().str(), mask.shape().str());
  }
  SYSTOLIC_OP_CHECK(c, !overlap(mask, out) && (!w.defined() || !overlap(w, out)),
                    "out must not overlap the mask or the weights");
  return out.dtype();
}

DType elementwise_loss(const Tensor& pred, const Tensor& target, const Tensor& w, Tensor& total,
                       Tensor& dpred, const ElementLossParams& p, double) {
  Check c("elementwise_loss");
  SYSTOLIC_OP_CHECK(c, p.label_smoothing >= 0 && p.label_smoothing <= 1,
                    "label_smoothing {} is outside [0, 1]", p.label_smoothing);
  SYSTOLIC_OP_CHECK(c, p.kind != ElementLoss::huber || p.delta >= 0, "huber's delta {} is negative", p.delta);
  SYSTOLIC_OP_CHECK(c, p.epsilon > 0, "epsilon {} is not positive", p.epsilon);
  predictions_and(c, pred, "targets", target);
  sample_weights(c, w, pred, true);
  c.total(total);
  gradient(c, "dpred", dpred, "predictions", pred);
  return pred.dtype();
}

DType row_loss(const Tensor& pred, const Tensor& target, const Tensor& w, Tensor& total, Tensor& dpred,
               const RowLossParams& p, double) {
  Check c("row_loss");
  SYSTOLIC_OP_CHECK(c, p.label_smoothing >= 0 && p.label_smoothing <= 1,
                    "label_smoothing {} is outside [0, 1]", p.label_smoothing);
  SYSTOLIC_OP_CHECK(c, p.epsilon > 0 && p.epsilon < 0.5, "epsilon must be in (0, 0.5), got {}", p.epsilon);
  predictions_and(c, pred, "targets", target);
  SYSTOLIC_OP_CHECK(c, pred.rank() >= 2 && pred.dim(-1) > 0,
                    "predictions of shape {}: a row loss takes [N, ..., C], C > 0", pred.shape().str());
  sample_weights(c, w, pred, true);
  c.total(total);
  gradient(c, "dpred", dpred, "predictions", pred);
  return pred.dtype();
}

DType accuracy_count(const Tensor& pred, const Tensor& l, const Tensor& w, Tensor& total, int k) {
  Check c("accuracy_count");
  SYSTOLIC_OP_CHECK(c, k >= 1, "k {}: it must be >= 1", k);
  labels(c, l, pred, predictions(c, "predictions", pred));
  sample_weights(c, w, pred, true);
  c.total(total);
  return pred.dtype();
}

DType add_sum(const Tensor& x, Tensor& total) {
  Check c("add_sum");
  c.defined("x", x);
  SYSTOLIC_OP_CHECK(c, x.dtype() == DType::float32 || x.dtype() == DType::float64,
                    "x is {}; it takes float32 or float64", dtype_name(x.dtype()));
  c.total(total);
  return x.dtype();
}

DType confusion_counts(const Tensor& pred, const Tensor& l, const Tensor& w, Tensor& counts,
                       const ConfusionParams& p) {
  Check c("confusion_counts");
  predictions_and(c, pred, "labels", l);
  sample_weights(c, w, pred);
  SYSTOLIC_OP_CHECK(c, p.thresholds >= 1, "{} thresholds: there must be at least 1", p.thresholds);
  SYSTOLIC_OP_CHECK(c, p.values.empty() || std::int64_t(p.values.size()) == p.thresholds,
                    "{} threshold values for {} thresholds", p.values.size(), p.thresholds);
  for (double v : p.values) SYSTOLIC_OP_CHECK(c, !std::isnan(v), "a threshold value is NaN");
  SYSTOLIC_OP_CHECK(c, p.class_id < 0 || (pred.rank() >= 2 && p.class_id < pred.dim(-1)),
                    "class_id {} for predictions of shape {}", p.class_id, pred.shape().str());
  SYSTOLIC_OP_CHECK(c, p.top_k >= 0, "top_k {} is negative", p.top_k);
  c.dtype("counts", counts, DType::float64, "sums of counts");
  SYSTOLIC_OP_CHECK(c, counts.numel() == 4 * p.thresholds,
                    "counts has shape {}; it takes [4 x {}] (tp, fp, tn, fn)", counts.shape().str(),
                    p.thresholds);
  return pred.dtype();
}

DType regression_sums(const Tensor& pred, const Tensor& target, const Tensor& w, Tensor& sums) {
  Check c("regression_sums");
  predictions_and(c, pred, "targets", target);
  sample_weights(c, w, pred);
  c.dtype("sums", sums, DType::float64, "sums");
  SYSTOLIC_OP_CHECK(c, sums.numel() == 4 * pred.dim(-1),
                    "sums has shape {}; it takes [4 x {}] (one per column)", sums.shape().str(),
                    pred.dim(-1));
  return pred.dtype();
}

DType class_confusion(const Tensor& pred, const Tensor& l, const Tensor& w, Tensor& counts,
                      const ClassConfusionParams& p) {
  Check c("class_confusion");
  c.floating("predictions", pred);
  sample_weights(c, w, pred);
  SYSTOLIC_OP_CHECK(c, p.classes >= 1, "{} classes: there must be at least 1", p.classes);
  SYSTOLIC_OP_CHECK(c,
                    !p.thresholded || (p.classes >= 2 && !p.argmax_predictions && std::isfinite(p.threshold)),
                    "thresholded predictions take 2 classes or more, no argmax and a finite threshold");
  auto items = [&](const char* name, const Tensor& t, bool argmax) {
    if (!argmax) return t.numel();
    SYSTOLIC_OP_CHECK(c, t.rank() >= 1 && t.dim(-1) > 0,
                      "{} of shape {} have no last axis to take the argmax of", name, t.shape().str());
    return t.numel() / t.dim(-1);
  };
  const std::int64_t n = items("predictions", pred, p.argmax_predictions);
  c.defined("labels", l);
  if (l.dtype() == DType::int32) {
    SYSTOLIC_OP_CHECK(c, !p.argmax_labels, "int32 labels are class ids: there is no argmax to take");
  } else {
    c.parameter("labels", l, pred.dtype());
  }
  SYSTOLIC_OP_CHECK(c, items("labels", l, p.argmax_labels) == n,
                    "labels of shape {} for predictions of shape {}", l.shape().str(), pred.shape().str());
  c.dtype("counts", counts, DType::float64, "sums of counts");
  SYSTOLIC_OP_CHECK(c, counts.numel() == p.classes * p.classes,
                    "counts has shape {}; it takes [{} x {}] (labels by predictions)", counts.shape().str(),
                    p.classes, p.classes);
  return pred.dtype();
}

DType f_score_counts(const Tensor& pred, const Tensor& l, const Tensor& w, Tensor& counts,
                     const FScoreParams& p) {
  Check c("f_score_counts");
  predictions_and(c, pred, "labels", l);
  sample_weights(c, w, pred);
  SYSTOLIC_OP_CHECK(c, p.argmax || std::isfinite(p.threshold), "threshold {} is not finite", p.threshold);
  c.dtype("counts", counts, DType::float64, "sums of counts");
  SYSTOLIC_OP_CHECK(c, counts.numel() == 4 * pred.dim(-1),
                    "counts has shape {}; it takes [4 x {}] (tp, fp, fn, support per class)",
                    counts.shape().str(), pred.dim(-1));
  return pred.dtype();
}

void weights(const Check& c, const Tensor& w, const Tensor& g) {
  c.floating("w", w);
  c.like("the gradient g", g, "w", w);
}

DType adam_update(Tensor& w, const Tensor& g, Tensor& m, Tensor& v, const AdamStep& s, const Tensor& lr,
                  const Tensor& iterations) {
  Check c("adam_update");
  weights(c, w, g);
  c.like("m", m, "w", w);
  c.like("v", v, "w", w);
  c.device_scalar("the learning rate lr", lr);  // its value: checked by the optimizer that wrote it
  c.step_counter("iterations", iterations);
  SYSTOLIC_OP_CHECK(c, s.beta_1 >= 0 && s.beta_1 < 1 && s.beta_2 >= 0 && s.beta_2 < 1 && s.epsilon >= 0,
                    "beta_1 {}, beta_2 {}, epsilon {}: beta_1 and beta_2 must be in [0, 1), epsilon >= 0",
                    s.beta_1, s.beta_2, s.epsilon);
  return w.dtype();
}

DType sgd_update(Tensor& w, const Tensor& g, Tensor& velocity, const Tensor& lr, double momentum, bool) {
  Check c("sgd_update");
  weights(c, w, g);
  if (momentum != 0.0) c.like("the velocity", velocity, "w", w);
  c.device_scalar("the learning rate lr", lr);  // its value: checked by the optimizer that wrote it
  SYSTOLIC_OP_CHECK(c, std::isfinite(momentum), "momentum {} must be finite", momentum);
  return w.dtype();
}

DType decay_weights(Tensor& w, const Tensor& lr, double decay) {
  Check c("decay_weights");
  c.floating("w", w);
  c.device_scalar("the learning rate lr", lr);
  SYSTOLIC_OP_CHECK(c, std::isfinite(decay) && decay >= 0, "decay {}: it must be a number >= 0", decay);
  return w.dtype();
}

DType rmsprop_update(Tensor& w, const Tensor& g, Tensor& ms, Tensor& mom, const Tensor& lr, double rho,
                     double momentum, double epsilon) {
  Check c("rmsprop_update");
  weights(c, w, g);
  c.like("the mean square", ms, "w", w);
  if (momentum > 0) c.like("the momentum", mom, "w", w);
  c.device_scalar("the learning rate lr", lr);  // its value: checked by the optimizer that wrote it
  SYSTOLIC_OP_CHECK(c, rho >= 0 && rho <= 1 && momentum >= 0 && epsilon >= 0,
                    "rho {}, momentum {}, epsilon {}: rho must be in [0, 1], momentum and epsilon >= 0", rho,
                    momentum, epsilon);
  return w.dtype();
}

DType clip_gradients(Tensor& g, bool, double limit) {
  Check c("clip_gradients");
  c.floating("g", g);
  SYSTOLIC_OP_CHECK(c, std::isfinite(limit) && limit > 0, "limit {}: it must be a number > 0", limit);
  return g.dtype();
}

DType optimizer_update(Tensor& w, const Tensor& g, Tensor& s0, Tensor& s1, Tensor& s2, const UpdateParams& p,
                       const Tensor& step) {
  Check c("optimizer_update");
  weights(c, w, g);
  const int slots = update::slot_count(p.rule);
  const char* names[] = {"s0", "s1", "s2"};
  const Tensor* given[] = {&s0, &s1, &s2};
  for (int k = 0; k < slots; ++k) c.like(names[k], *given[k], "w", w);
  c.step_values("step", step);
  SYSTOLIC_OP_CHECK(
      c, p.beta_1 >= 0 && p.beta_1 < 1 && p.beta_2 >= 0 && p.beta_2 <= 1 && p.epsilon >= 0,
      "beta_1 {}, beta_2 {}, epsilon {}: beta_1 must be in [0, 1), beta_2 in [0, 1], epsilon >= 0", p.beta_1,
      p.beta_2, p.epsilon);
  return w.dtype();
}

DType adafactor_update(Tensor& w, const Tensor& g, Tensor& r, Tensor& c_, Tensor& v, const AdafactorStep& s,
                       const Tensor& step) {
  Check c("adafactor_update");
  weights(c, w, g);
  c.like("v", v, "w", w);
  SYSTOLIC_OP_CHECK(c, r.defined() == c_.defined(), "r and c are both defined (factored) or both undefined");
  if (r.defined()) {  // w [B, R, C], r [B, R], c [B, C]
    c.rank("w", w, 3, "[B, R, C] when factored");
    const auto& d = w.shape();
    c.shape("r", r, Shape{d[0], d[1]});
    c.shape("c", c_, Shape{d[0], d[2]});
    c.dtype("r", r, w.dtype(), "w's");
    c.dtype("c", c_, w.dtype(), "w's");
  }
  c.defined("step", step);
  SYSTOLIC_OP_CHECK(c, step.dtype() == DType::float64 && step.numel() == adafactor::kStepValues,
                    "step must be a float64 [{}] tensor, not {} {}", adafactor::kStepValues,
                    dtype_name(step.dtype()), step.shape().str());
  SYSTOLIC_OP_CHECK(
      c, s.epsilon_1 >= 0 && s.epsilon_2 >= 0 && s.clip_threshold > 0,
      "epsilon_1 {}, epsilon_2 {}, clip_threshold {}: the epsilons must be >= 0, clip_threshold > 0",
      s.epsilon_1, s.epsilon_2, s.clip_threshold);
  return w.dtype();
}

DType muon_update(Tensor& w, const Tensor& g, Tensor& m, const MuonStep& s, const Tensor& lr) {
  Check c("muon_update");
  weights(c, w, g);
  c.rank("w", w, 2, "[R, C] (a matrix)");
  c.like("m", m, "w", w);
  c.device_scalar("the learning rate lr", lr);
  SYSTOLIC_OP_CHECK(
      c, s.steps >= 0 && std::isfinite(s.rms_rate + s.a + s.b + s.c + s.momentum),
      "steps {}, rms_rate {}, a {}, b {}, c {}, momentum {}: steps must be >= 0, the others finite", s.steps,
      s.rms_rate, s.a, s.b, s.c, s.momentum);
  return w.dtype();
}

// ---- norm: normalisations over sets of axes, broadcasting binary ops, Normalization, transposes.

// The number of x's values in one combination of the indices of the axes in `axes` (bit a: axis a of x), after
// checking that x has at most 8 axes and the set names only x's axes (and, unless `empty_ok`, at least one).
std::int64_t axes_block(const Check& c, const char* x_name, const Tensor& x, std::uint32_t axes,
                        bool empty_ok) {
  SYSTOLIC_OP_CHECK(c, x.rank() <= 8, "{} {} has more than 8 axes", x_name, x.shape().str());
  SYSTOLIC_OP_CHECK(c, (axes >> x.rank()) == 0 && (empty_ok || axes != 0),
                    "axes {:#x} is not a {}set of the axes of {} {}", axes, empty_ok ? "" : "non-empty ",
                    x_name, x.shape().str());
  std::int64_t k = 1;
  for (int i = 0; i < x.rank(); ++i)
    if ((axes >> i) & 1u) k *= x.dim(i);
  return k;
}

void layer_norm_operands(const Check& c, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                         const Tensor& mean, const Tensor& rstd, std::uint32_t axes, NormKind kind) {
  c.floating("x", x);
  std::int64_t K = axes_block(c, "x", x, axes, false);
  SYSTOLIC_OP_CHECK(c, K > 0, "x {} has empty rows", x.shape().str());
  std::int64_t M = x.numel() / K;
  if (gamma.defined()) c.statistic("gamma", gamma, x.dtype(), K);
  if (beta.defined()) c.statistic("beta", beta, x.dtype(), K);
  SYSTOLIC_OP_CHECK(c, kind != NormKind::unit || (!gamma.defined() && !beta.defined()),
                    "the unit norm takes no gamma or beta");
  SYSTOLIC_OP_CHECK(c, kind != NormKind::rms_scaling || !beta.defined(), "rms_scaling takes no beta");
  DType want = x.dtype() == DType::float64 ? DType::float64 : DType::float32;
  for (auto [name, t] : {std::pair<const char*, const Tensor*>{"mean", &mean}, {"rstd", &rstd}}) {
    c.dtype(name, *t, want, "row statistics");
    SYSTOLIC_OP_CHECK(c, t->numel() == M, "{} has shape {}; it takes one value per row ({})", name,
                      t->shape().str(), M);
  }
}

DType layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y, Tensor& mean,
                         Tensor& rstd, std::uint32_t axes, NormKind kind, double eps) {
  Check c("layer_norm_forward");
  layer_norm_operands(c, x, gamma, beta, mean, rstd, axes, kind);
  c.dtype("y", y, x.dtype(), "x's dtype");
  c.shape("y", y, x.shape());
  SYSTOLIC_OP_CHECK(c, kind == NormKind::unit || eps > 0, "epsilon must be positive, got {}", eps);
  return x.dtype();
}

DType layer_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                          const Tensor& dy, Tensor& dx, Tensor& dgamma, Tensor& dbeta, std::uint32_t axes,
                          NormKind kind) {
  Check c("layer_norm_backward");
  layer_norm_operands(c, x, gamma, Tensor(), mean, rstd, axes, kind);
  std::int64_t K = x.numel() / mean.numel();
  c.dtype("dy", dy, x.dtype(), "x's dtype");
  c.shape("dy", dy, x.shape());
  if (dx.defined()) {
    c.dtype("dx", dx, x.dtype(), "x's dtype");
    c.shape("dx", dx, x.shape());
  }
  if (dgamma.defined()) c.statistic("dgamma", dgamma, x.dtype(), K);
  if (dbeta.defined()) c.statistic("dbeta", dbeta, x.dtype(), K);
  SYSTOLIC_OP_CHECK(c, kind == NormKind::layer || !dbeta.defined(), "only the layer norm has a beta");
  SYSTOLIC_OP_CHECK(c, kind != NormKind::unit || !dgamma.defined(), "the unit norm has no gamma");
  SYSTOLIC_OP_CHECK(c, !dgamma.defined() || gamma.defined(), "dgamma needs gamma");
  return x.dtype();
}

// NumPy's broadcast shape of a and b; fails naming both when they do not broadcast.
Shape broadcast_shape(const Check& c, const Tensor& a, const Tensor& b) {
  int rank = std::max(a.rank(), b.rank());
  SYSTOLIC_OP_CHECK(c, rank <= 8, "a {} and b {}: at most 8 axes", a.shape().str(), b.shape().str());
  std::vector<std::int64_t> dims(rank);
  for (int i = 0; i < rank; ++i) {
    std::int64_t da = i < rank - a.rank() ? 1 : a.dim(i - (rank - a.rank()));
    std::int64_t db = i < rank - b.rank() ? 1 : b.dim(i - (rank - b.rank()));
    SYSTOLIC_OP_CHECK(c, da == db || da == 1 || db == 1, "a {} and b {} do not broadcast", a.shape().str(),
                      b.shape().str());
    dims[i] = da == 1 ? db : da;
  }
  return Shape(dims);
}

Shape broadcast_operands(const Check& c, const Tensor& a, const Tensor& b) {
  c.floating("a", a);
  c.dtype("b", b, a.dtype(), "a's dtype");
  return broadcast_shape(c, a, b);
}

DType broadcast_forward(BinaryKind, const Tensor& a, const Tensor& b, Tensor& y) {
  Check c("broadcast_forward");
  Shape ys = broadcast_operands(c, a, b);
  c.dtype("y", y, a.dtype(), "a's dtype");
  c.shape("y", y, ys);
  SYSTOLIC_OP_CHECK(c, !overlap(y, a) || same_start(y, a), "y may be a, but not overlap it");
  SYSTOLIC_OP_CHECK(c, !overlap(y, b) || same_start(y, b), "y may be b, but not overlap it");
  return a.dtype();
}

DType broadcast_backward(BinaryKind, const Tensor& a, const Tensor& b, const Tensor& dy, Tensor& da,
                         Tensor& db) {
  Check c("broadcast_backward");
  Shape ys = broadcast_operands(c, a, b);
  c.dtype("dy", dy, a.dtype(), "a's dtype");
  c.shape("dy", dy, ys);
  if (da.defined()) c.like("da", da, "a", a);
  if (db.defined()) c.like("db", db, "b", b);
  for (auto [name, t] : {std::pair<const char*, const Tensor*>{"da", &da}, {"db", &db}})
    SYSTOLIC_OP_CHECK(c, !overlap(*t, dy) && !overlap(*t, a) && !overlap(*t, b),
                      "{} must not overlap a, b or dy", name);
  return a.dtype();
}

// mean and variance: x's dtype (float32 under bfloat16), one value per combination of the kept axes' indices.
void normalize_statistics(const Check& c, const char* x_name, const Tensor& x, const Tensor& mean,
                          const Tensor& variance, std::uint32_t axes) {
  c.floating(x_name, x);
  c.parameter("variance", variance, x.dtype());
  if (mean.defined()) c.like("mean", mean, "variance", variance);
  std::int64_t K = axes_block(c, x_name, x, axes, true);
  SYSTOLIC_OP_CHECK(c, variance.numel() == K, "{} {} keeps {} statistics over axes {:#x}, variance has {}",
                    x_name, x.shape().str(), K, axes, variance.numel());
}

DType normalize_forward(const Tensor& x, const Tensor& mean, const Tensor& variance, Tensor& y,
                        std::uint32_t axes, bool) {
  Check c("normalize_forward");
  c.defined("mean", mean);
  normalize_statistics(c, "x", x, mean, variance, axes);
  c.dtype("y", y, x.dtype(), "x's dtype");
  c.shape("y", y, x.shape());
  return x.dtype();
}

DType normalize_backward(const Tensor& variance, const Tensor& dy, Tensor& dx, std::uint32_t axes, bool) {
  Check c("normalize_backward");
  normalize_statistics(c, "dy", dy, Tensor(), variance, axes);
  c.dtype("dx", dx, dy.dtype(), "dy's dtype");
  c.shape("dx", dx, dy.shape());
  return dy.dtype();
}

DType transpose(const Tensor& x, Tensor& y, const std::vector<int>& perm) {
  Check c("transpose");
  c.floating("x", x);
  SYSTOLIC_OP_CHECK(c, int(perm.size()) == x.rank(), "perm has {} axes, x {} has {}", perm.size(),
                    x.shape().str(), x.rank());
  SYSTOLIC_OP_CHECK(c, x.rank() <= 8, "x {} has more than 8 axes", x.shape().str());
  std::vector<std::int64_t> dims;
  std::vector<bool> seen(perm.size(), false);
  for (int p : perm) {
    SYSTOLIC_OP_CHECK(c, p >= 0 && p < x.rank() && !seen[p], "perm is not a permutation of 0..{}",
                      x.rank() - 1);
    seen[p] = true;
    dims.push_back(x.dim(p));
  }
  c.dtype("y", y, x.dtype(), "x's dtype");
  c.shape("y", y, Shape(dims));
  SYSTOLIC_OP_CHECK(c, !overlap(x, y), "y must not overlap x");
  return x.dtype();
}

// ---- attention

// The checks both attention ops share: q [B, T, H, D], k [B, S, G, D], v [B, S, G, E] of one floating dtype, H a
// multiple of G; the masks of any floating dtype; probs [B, H, T, S] in the data's dtype.
void attention_operands(const Check& c, const AttentionParams& p, const Tensor& q, const Tensor& k,
                        const Tensor& v, const Tensor& score_weights, const Tensor& query_mask,
                        const Tensor& key_mask, const Tensor& attention_mask, const Tensor& step,
                        const Tensor& probs) {
  c.floating("q", q);
  c.rank("q", q, 4, "(B, T, heads, key_dim)");
  c.rank("k", k, 4, "(B, S, key/value heads, key_dim)");
  c.rank("v", v, 4, "(B, S, key/value heads, value_dim)");
  c.dtype("k", k, q.dtype(), "q's dtype");
  c.dtype("v", v, q.dtype(), "q's dtype");
  const std::int64_t B = q.dim(0), T = q.dim(1), H = q.dim(2), D = q.dim(3), S = k.dim(1), G = k.dim(2);
  SYSTOLIC_OP_CHECK(c, k.dim(0) == B && k.dim(3) == D,
                    "k has shape {}, q {}: the batch and key_dim must agree", k.shape().str(),
                    q.shape().str());
  SYSTOLIC_OP_CHECK(c, v.dim(0) == B && v.dim(1) == S && v.dim(2) == G,
                    "v has shape {}, k {}: the batch, the steps and the heads must agree", v.shape().str(),
                    k.shape().str());
  SYSTOLIC_OP_CHECK(c, G > 0 && H % G == 0, "q has {} heads, k {}: the query heads must be a multiple of k's",
                    H, G);
  auto mask = [&](const char* name, const Tensor& m, const Shape& want) {
    if (!m.defined()) return;
    c.floating(name, m);
    c.shape(name, m, want);
  };
  mask("query_mask", query_mask, Shape({B, T}));
  mask("key_mask", key_mask, Shape({B, S}));
  mask("attention_mask", attention_mask, Shape({B, T, S}));
  if (score_weights.defined()) {
    SYSTOLIC_OP_CHECK(c, p.score == AttentionScore::additive,
                      "score_weights are the additive score's: the dot product takes none");
    c.dtype("score_weights", score_weights, q.dtype(), "q's dtype");
    SYSTOLIC_OP_CHECK(c,
                      score_weights.rank() == 1 && (score_weights.dim(0) == D || score_weights.dim(0) == 1),
                      "score_weights has shape {}: expected ({}) or (1)", score_weights.shape().str(), D);
  }
  SYSTOLIC_OP_CHECK(c, p.window >= 0, "window must not be negative, got {}", p.window);
  SYSTOLIC_OP_CHECK(c, p.dropout >= 0 && p.dropout < 1, "dropout must be in [0, 1), got {}", p.dropout);
  SYSTOLIC_OP_CHECK(c, std::isfinite(p.scale), "scale must be finite, got {}", p.scale);
  c.step_counter("step", step);
  c.dtype("probs", probs, q.dtype(), "q's dtype");
  c.shape("probs", probs, Shape({B, H, T, S}));
}

DType attention_forward(const AttentionParams& p, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& score_weights, const Tensor& query_mask, const Tensor& key_mask,
                        const Tensor& attention_mask, const Tensor& step, Tensor& y, Tensor& probs) {
  Check c("attention_forward");
  attention_operands(c, p, q, k, v, score_weights, query_mask, key_mask, attention_mask, step, probs);
  c.dtype("y", y, q.dtype(), "q's dtype");
  c.shape("y", y, Shape({q.dim(0), q.dim(1), q.dim(2), v.dim(3)}));
  for (auto [name, t] : {std::pair<const char*, const Tensor*>{"q", &q}, {"k", &k}, {"v", &v}})
    SYSTOLIC_OP_CHECK(c, !overlap(*t, y) && !overlap(*t, probs), "y and probs must not overlap {}", name);
  SYSTOLIC_OP_CHECK(c, !overlap(y, probs), "y must not overlap probs");
  return q.dtype();
}

DType attention_backward(const AttentionParams& p, const Tensor& q, const Tensor& k, const Tensor& v,
                         const Tensor& score_weights, const Tensor& query_mask, const Tensor& key_mask,
                         const Tensor& attention_mask, const Tensor& step, const Tensor& probs,
                         const Tensor& dy, const Tensor& dprobs, Tensor& dq, Tensor& dk, Tensor& dv,
                         Tensor& dscore_weights) {
  Check c("attention_backward");
  attention_operands(c, p, q, k, v, score_weights, query_mask, key_mask, attention_mask, step, probs);
  c.dtype("dy", dy, q.dtype(), "q's dtype");
  c.shape("dy", dy, Shape({q.dim(0), q.dim(1), q.dim(2), v.dim(3)}));
  if (dprobs.defined()) {
    c.dtype("dprobs", dprobs, q.dtype(), "q's dtype");
    c.shape("dprobs", dprobs, probs.shape());
  }
  for (auto [name, g, like] : {std::tuple<const char*, const Tensor*, const Tensor*>{"dq", &dq, &q},
                               {"dk", &dk, &k},
                               {"dv", &dv, &v}}) {
    if (!g->defined()) continue;
    c.dtype(name, *g, q.dtype(), "q's dtype");
    c.shape(name, *g, like->shape());
    SYSTOLIC_OP_CHECK(c,
                      !overlap(*g, dy) && !overlap(*g, probs) && !(dprobs.defined() && overlap(*g, dprobs)),
                      "{} must not overlap dy, probs or dprobs", name);
  }
  SYSTOLIC_OP_CHECK(c,
                    !(dq.defined() && dk.defined() && overlap(dq, dk)) &&
                        !(dq.defined() && dv.defined() && overlap(dq, dv)) &&
                        !(dk.defined() && dv.defined() && overlap(dk, dv)),
                    "dq, dk and dv must not overlap one another");
  if (dscore_weights.defined()) {
    SYSTOLIC_OP_CHECK(c, score_weights.defined(), "dscore_weights needs score_weights");
    c.dtype("dscore_weights", dscore_weights, q.dtype(), "q's dtype");
    c.shape("dscore_weights", dscore_weights, score_weights.shape());
    for (auto [name, t] : {std::pair<const char*, const Tensor*>{"dq", &dq}, {"dk", &dk}, {"dv", &dv}})
      SYSTOLIC_OP_CHECK(c, !(t->defined() && overlap(*t, dscore_weights)),
                        "dscore_weights must not overlap {}", name);
  }
  return q.dtype();
}

// regul: regularizers and constraints.
void regularizer_operands(const Check& c, const Tensor& x, const Tensor& total, const Tensor& dx,
                          double total_scale, double grad_scale) {
  c.floating("x", x);
  if (total.defined()) c.total(total);
  if (dx.defined()) c.like("dx", dx, "x", x);
  SYSTOLIC_OP_CHECK(c, std::isfinite(total_scale) && std::isfinite(grad_scale),
                    "total_scale {} and grad_scale {} must be finite", total_scale, grad_scale);
}

DType regularize(const Tensor& x, Tensor& total, Tensor& dx, double l1, double l2, double total_scale,
                 double grad_scale) {
  Check c("regularize");
  regularizer_operands(c, x, total, dx, total_scale, grad_scale);
  SYSTOLIC_OP_CHECK(c, l1 >= 0 && l2 >= 0 && std::isfinite(l1) && std::isfinite(l2),
                    "l1 {} and l2 {} must be finite and >= 0", l1, l2);
  return x.dtype();
}

DType orthogonal_regularize(const Tensor& x, Tensor& total, Tensor& dx, double factor, bool columns,
                            double total_scale, double grad_scale) {
  Check c("orthogonal_regularize");
  regularizer_operands(c, x, total, dx, total_scale, grad_scale);
  SYSTOLIC_OP_CHECK(c, x.rank() == 2, "x has shape {}; it takes rank 2 (as Keras's OrthogonalRegularizer)",
                    x.shape().str());
  SYSTOLIC_OP_CHECK(c, x.dim(columns ? 1 : 0) >= 2, "x of shape {} has fewer than two {}", x.shape().str(),
                    columns ? "columns" : "rows");
  SYSTOLIC_OP_CHECK(c, factor >= 0 && std::isfinite(factor), "factor {} must be finite and >= 0", factor);
  return x.dtype();
}

DType constrain(Tensor& w, const ConstraintParams& p) {
  Check c("constrain");
  c.floating("w", w);
  SYSTOLIC_OP_CHECK(c, w.rank() <= 8, "w has rank {}; at most 8", w.rank());
  if (p.kind != ConstraintParams::non_neg)
    SYSTOLIC_OP_CHECK(c, p.axes != 0 && (p.axes >> w.rank()) == 0,
                      "the norm axes (mask {:#x}) must be axes of w (rank {})", p.axes, w.rank());
  SYSTOLIC_OP_CHECK(c, p.min_value >= 0 && p.max_value >= p.min_value && p.rate >= 0 && p.rate <= 1,
                    "min_value {}, max_value {}, rate {}: 0 <= min <= max, rate in [0, 1]", p.min_value,
                    p.max_value, p.rate);
  return w.dtype();
}

// ---- conv area

DType bias_add_forward(const Tensor& x, const Tensor& b, Tensor& y) {
  Check c("bias_add_forward");
  std::int64_t C = channels(c, x);
  c.parameter("b", b, x.dtype());
  SYSTOLIC_OP_CHECK(c, b.numel() == C, "b {} does not match x's last dimension ({})", b.shape().str(), C);
  c.dtype("y", y, x.dtype(), "x's dtype");
  c.shape("y", y, x.shape());
  SYSTOLIC_OP_CHECK(c, same_start(y, x) || !overlap(x, y), "y overlaps x without being x");
  return x.dtype();
}

DType bias_add_backward(const Tensor& dy, Tensor& db) {
  Check c("bias_add_backward");
  std::int64_t C = channels(c, dy);
  c.parameter("db", db, dy.dtype());
  SYSTOLIC_OP_CHECK(c, db.numel() == C, "db {} does not match dy's last dimension ({})", db.shape().str(), C);
  return dy.dtype();
}

// x (N,H,W,C) resized to y (N,OH,OW,C) (the names differ between forward and backward).
DType resize(const char* op, const char* x_name, const Tensor& x, const char* y_name, const Tensor& y,
             Interpolation mode) {
  Check c(op);
  c.floating(x_name, x);
  c.rank(x_name, x, 4, "(N, H, W, C)");
  c.rank(y_name, y, 4, "(N, H, W, C)");
  c.dtype(y_name, y, x.dtype(), std::string(x_name).append("'s dtype").c_str());
  SYSTOLIC_OP_CHECK(c, y.dim(0) == x.dim(0) && y.dim(3) == x.dim(3),
                    "{} {} and {} {} differ in batch or channels", x_name, x.shape().str(), y_name,
                    y.shape().str());
  SYSTOLIC_OP_CHECK(c, (x.dim(1) > 0 && x.dim(2) > 0) || y.numel() == 0, "{} {} is empty", x_name,
                    x.shape().str());
  SYSTOLIC_OP_CHECK(c, mode == Interpolation::nearest || mode == Interpolation::bilinear,
                    "unknown interpolation {}", static_cast<int>(mode));
  SYSTOLIC_OP_CHECK(c, !overlap(x, y), "{} overlaps {}", y_name, x_name);
  return x.dtype();
}
DType resize2d_forward(const Tensor& x, Tensor& y, Interpolation mode) {
  return resize("resize2d_forward", "x", x, "y", y, mode);
}
DType resize2d_backward(const Tensor& dy, Tensor& dx, Interpolation mode) {
  return resize("resize2d_backward", "dx", dx, "dy", dy, mode);
}

// augment (branch augment): noise and image augmentation.
DType gaussian_noise(const char* op, const char* in, const Tensor& x, const char* out, const Tensor& y,
                     const NoiseParams& p, const Tensor& step) {
  Check c(op);
  c.floating(in, x);
  c.like(out, y, in, x);
  SYSTOLIC_OP_CHECK(c, std::isfinite(p.stddev) && p.stddev >= 0, "stddev must be finite and >= 0, got {}",
                    p.stddev);
  c.step_counter("step", step);
  return x.dtype();
}

DType gaussian_noise_forward(const Tensor& x, Tensor& y, const NoiseParams& p, std::uint64_t,
                             const Tensor& step) {
  return gaussian_noise("gaussian_noise_forward", "x", x, "y", y, p, step);
}

DType gaussian_noise_backward(const Tensor& dy, Tensor& dx, const NoiseParams& p, std::uint64_t,
                              const Tensor& step) {
  return gaussian_noise("gaussian_noise_backward", "dy", dy, "dx", dx, p, step);
}

DType random_image_transforms(Tensor& transforms, const ImageTransformParams& p, std::int64_t height,
                              std::int64_t width, std::uint64_t, const Tensor& step) {
  Check c("random_image_transforms");
  c.dtype("transforms", transforms, DType::float32, "transforms are float32");
  SYSTOLIC_OP_CHECK(c, transforms.rank() == 2 && transforms.dim(1) == 8,
                    "transforms has shape {}; it takes (N, 8)", transforms.shape().str());
  SYSTOLIC_OP_CHECK(c, height > 0 && width > 0, "the images' size must be positive, got {}x{}", height,
                    width);
  SYSTOLIC_OP_CHECK(c,
                    std::isfinite(p.lower0) && std::isfinite(p.upper0) && std::isfinite(p.lower1) &&
                        std::isfinite(p.upper1) && p.lower0 <= p.upper0 && p.lower1 <= p.upper1,
                    "the factors' ranges must be finite with lower <= upper, got [{}, {}] and [{}, {}]",
                    p.lower0, p.upper0, p.lower1, p.upper1);
  SYSTOLIC_OP_CHECK(c, p.kind != ImageTransformKind::crop || (p.crop_h > 0 && p.crop_w > 0),
                    "a crop's size must be positive, got {}x{}", p.crop_h, p.crop_w);
  c.step_counter("step", step);
  return DType::float32;
}

DType affine_transform_images(const Tensor& x, const Tensor& transforms, Tensor& y,
                              const AffineTransformParams& p) {
  Check c("affine_transform_images");
  c.floating("x", x);
  c.rank("x", x, 4, "(N, H, W, C)");
  c.rank("y", y, 4, "(N, OH, OW, C)");
  SYSTOLIC_OP_CHECK(c, y.dtype() == x.dtype(), "y is {}, expected {} (x's dtype)", dtype_name(y.dtype()),
                    dtype_name(x.dtype()));
  SYSTOLIC_OP_CHECK(c, y.dim(0) == x.dim(0) && y.dim(3) == x.dim(3),
                    "y {} must have x's {} images and channels", y.shape().str(), x.shape().str());
  c.dtype("transforms", transforms, DType::float32, "transforms are float32");
  c.shape("transforms", transforms, {x.dim(0), 8});
  SYSTOLIC_OP_CHECK(c, std::isfinite(p.fill_value), "fill_value must be finite, got {}", p.fill_value);
  SYSTOLIC_OP_CHECK(c, !overlap(x, y), "y must not overlap x");
  return x.dtype();
}

DType random_contrast(const Tensor& x, Tensor& y, const ContrastParams& p, std::uint64_t,
                      const Tensor& step) {
  Check c("random_contrast");
  c.floating("x", x);
  c.rank("x", x, 4, "(N, H, W, C)");
  SYSTOLIC_OP_CHECK(c, y.defined() && y.dtype() == x.dtype() && y.shape() == x.shape(),
                    "y must be like x ({} {})", dtype_name(x.dtype()), x.shape().str());
  SYSTOLIC_OP_CHECK(c,
                    std::isfinite(p.lower) && std::isfinite(p.upper) && p.lower <= p.upper &&
                        std::isfinite(p.value_min) && std::isfinite(p.value_max) &&
                        p.value_min <= p.value_max,
                    "the factor's range [{}, {}] and value range [{}, {}] must be finite, lower <= upper",
                    p.lower, p.upper, p.value_min, p.value_max);
  SYSTOLIC_OP_CHECK(c, !overlap(x, y), "y must not overlap x");
  c.step_counter("step", step);
  return x.dtype();
}

}  // namespace checks

// The one device of a call's tensors (the CPU when none is defined).
class DeviceOf {
 public:
  explicit DeviceOf(std::string_view op) : op_(op) {}
  void add(const Tensor& t) {
    if (!t.defined()) return;
    if (!found_) {
      device_ = t.device();
      found_ = true;
      return;
    }
    SYSTOLIC_CHECK(t.device() == device_, "{}: tensors on different devices ({} and {})", op_, device_.str(),
                   t.device().str());
  }
  void add(const std::vector<Tensor>& ts) {
    for (auto& t : ts) add(t);
  }
  template <class T>
  void add(const T&) {}
  Device device() const { return found_ ? device_ : Device::cpu(); }

 private:
  std::string_view op_;
  bool found_ = false;
  Device device_;
};

template <class... Args>
const Backend& backend_of(Op op, DType dtype, const Args&... args) {
  DeviceOf d(op_name(op));
  (d.add(args), ...);
  const Backend& b = backend_for(d.device());
  SYSTOLIC_CHECK(b.dtypes(op).contains(dtype), "op {} does not run on {} data on the {} backend", op_name(op),
                 dtype_name(dtype), b.name);
  return b;
}

}  // namespace

#define SYSTOLIC_UNPAREN(...) __VA_ARGS__
#define SYSTOLIC_OP_ENTRY(name, params, args)                         \
  void name params {                                                  \
    const DType op_dtype_ = checks::name args;                        \
    backend_of(Op::name, op_dtype_, SYSTOLIC_UNPAREN args).name args; \
  }
SYSTOLIC_OPS(SYSTOLIC_OP_ENTRY)
#undef SYSTOLIC_OP_ENTRY

std::string_view op_name(Op op) {
  switch (op) {
#define SYSTOLIC_OP_NAME(name, params, args) \
  case Op::name:                             \
    return #name;
    SYSTOLIC_OPS(SYSTOLIC_OP_NAME)
#undef SYSTOLIC_OP_NAME
  }
  return "?";
}

DTypes Backend::dtypes(Op op) const {
  switch (op) {
#define SYSTOLIC_OP_DTYPES(name, params, args) \
  case Op::name:                               \
    return name##_dtypes;
    SYSTOLIC_OPS(SYSTOLIC_OP_DTYPES)
#undef SYSTOLIC_OP_DTYPES
  }
  return {};
}

const Backend& backend_for(Device device) {
  if (device.is_cpu()) return cpu::backend();
  if (device.is_xla()) return xla::backend();
#if SYSTOLIC_HAS_CUDA
  return cuda::backend();
#else
  fail("device {} is not available: this build of systolic has no CUDA support", device.str());
#endif
}

bool rnn_sequence_takes(const RnnCellParams& p) {
  if (p.cell == RnnCell::simple)
    return p.activation == Activation::tanh || p.activation == Activation::relu ||
           p.activation == Activation::sigmoid;
  return p.activation == Activation::tanh && p.recurrent_activation == Activation::sigmoid;
}

bool supports(Op op, DType dtype, Device device) {
#if !SYSTOLIC_HAS_CUDA
  if (device.is_cuda()) return false;
#endif
  return backend_for(device).dtypes(op).contains(dtype);
}

void gather_rows(const Tensor& src, const std::vector<std::int64_t>& indices, Tensor& dst) {
  Tensor rows({static_cast<std::int64_t>(indices.size())}, DType::int32);
  auto* p = rows.data<std::int32_t>();
  for (std::size_t i = 0; i < indices.size(); ++i) {
    SYSTOLIC_CHECK(indices[i] >= 0 && indices[i] <= INT32_MAX && (src.rank() == 0 || indices[i] < src.dim(0)),
                   "gather_rows: row {} out of range [0, {})", indices[i], src.rank() ? src.dim(0) : 0);
    p[i] = static_cast<std::int32_t>(indices[i]);
  }
  gather_rows(src, rows.to(dst.defined() ? dst.device() : Device::cpu()), dst);
}

}  // namespace systolic::ops
