// CPU op table: float32 goes to oneDNN where it has a primitive (onednn.h), everything else to the loops
// (loops.h), templated on float and double. Other dtypes are refused with the op's name.
#include "ops/cpu/cpu_backend.h"

#include "ops/cpu/loops.h"
#include "ops/cpu/onednn.h"

#include "core/philox.h"

#include <cmath>

namespace systolic::ops::cpu {

namespace {

template <class F>
void by_float(const char* op, DType t, F&& f) {
  switch (t) {
    case DType::float32: f(float{}); break;
    case DType::float64: f(double{}); break;
    default: fail("op {} on the cpu backend takes float32 or float64 tensors, not {}", op, dtype_name(t));
  }
}

void check_same(const char* op, const Tensor& a, const Tensor& b) {
  if (!b.defined()) return;
  SYSTOLIC_CHECK(a.dtype() == b.dtype(), "op {}: mixed dtypes {} and {}", op, dtype_name(a.dtype()),
                 dtype_name(b.dtype()));
}

// The value of a float64 [1] counter (the model's step, the optimizer's iterations); 0 when undefined.
double step_value(const Tensor& step) {
  if (!step.defined()) return 0.0;
  SYSTOLIC_CHECK(step.dtype() == DType::float64 && step.numel() == 1, "step counter must be float64 [1], got {} {}",
                 dtype_name(step.dtype()), step.shape().str());
  return step.data<double>()[0];
}

#define SYSTOLIC_LOOP(op, dtype, ...) \
  by_float(#op, dtype, [&](auto tag) { loops::op<decltype(tag)>(__VA_ARGS__); })

class CpuBackend final : public Backend {
 public:
  std::string name() const override { return "cpu"; }

  void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y, const Conv2DParams& p) override {
    SYSTOLIC_CHECK(x.rank() == 4 && w.rank() == 4 && y.rank() == 4 && x.dim(3) == w.dim(2) && y.dim(3) == w.dim(3),
                   "conv2d_forward: x {} and kernel {} and y {} do not fit (NHWC, (KH,KW,C,F))", x.shape().str(),
                   w.shape().str(), y.shape().str());
    check_same("conv2d_forward", x, w);
    SYSTOLIC_CHECK(p.activation == Activation::linear || p.activation == Activation::relu,
                   "conv2d_forward: fuses linear or relu, not {}", activation_name(p.activation));
    if (x.dtype() == DType::float32) return onednn::conv2d_forward(x, w, b, y, p);
    SYSTOLIC_LOOP(conv2d_forward, x.dtype(), x, w, b, y, p);
  }
  void conv2d_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw, Tensor& db,
                       const Conv2DParams& p) override {
    check_same("conv2d_backward", x, dy);
    if (x.dtype() == DType::float32) return onednn::conv2d_backward(x, w, dy, dx, dw, db, p);
    SYSTOLIC_LOOP(conv2d_backward, x.dtype(), x, w, dy, dx, dw, db, p);
  }
  void pool2d_forward(const Tensor& x, Tensor& y, Tensor& workspace, const Pool2DParams& p) override {
    if (x.dtype() == DType::float32) return onednn::pool2d_forward(x, y, workspace, p);
    SYSTOLIC_LOOP(pool2d_forward, x.dtype(), x, y, p);
  }
  void pool2d_backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& workspace, Tensor& dx,
                       const Pool2DParams& p) override {
    if (x.dtype() == DType::float32) return onednn::pool2d_backward(x, y, dy, workspace, dx, p);
    SYSTOLIC_LOOP(pool2d_backward, x.dtype(), x, dy, dx, p);
  }
  void batch_norm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y, Tensor& mean,
                                   Tensor& var, double eps) override {
    if (x.dtype() == DType::float32) return onednn::batch_norm_forward_training(x, gamma, beta, y, mean, var, eps);
    SYSTOLIC_LOOP(batch_norm_forward_training, x.dtype(), x, gamma, beta, y, mean, var, eps);
  }
  void batch_norm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& mean,
                                    const Tensor& var, Tensor& y, double eps) override {
    if (x.dtype() == DType::float32) return onednn::batch_norm_forward_inference(x, gamma, beta, mean, var, y, eps);
    SYSTOLIC_LOOP(batch_norm_forward_inference, x.dtype(), x, gamma, beta, mean, var, y, eps);
  }
  void batch_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& var,
                           const Tensor& dy, Tensor& dx, Tensor& dgamma, Tensor& dbeta, double eps) override {
    if (x.dtype() == DType::float32)
      return onednn::batch_norm_backward(x, gamma, mean, var, dy, dx, dgamma, dbeta, eps);
    SYSTOLIC_LOOP(batch_norm_backward, x.dtype(), x, gamma, mean, var, dy, dx, dgamma, dbeta, eps);
  }
  void dense_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) override {
    SYSTOLIC_CHECK(w.rank() == 2 && x.dim(-1) == w.dim(0) && y.dim(-1) == w.dim(1) &&
                       x.numel() / w.dim(0) == y.numel() / w.dim(1),
                   "dense_forward: x {} and kernel {} and y {} do not fit", x.shape().str(), w.shape().str(),
                   y.shape().str());
    check_same("dense_forward", x, w);
    if (x.dtype() == DType::float32) return onednn::dense_forward(x, w, b, y);
    SYSTOLIC_LOOP(dense_forward, x.dtype(), x, w, b, y);
  }
  void dense_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw,
                      Tensor& db) override {
    if (x.dtype() == DType::float32) return onednn::dense_backward(x, w, dy, dx, dw, db);
    SYSTOLIC_LOOP(dense_backward, x.dtype(), x, w, dy, dx, dw, db);
  }
  void activation_forward(Activation a, const Tensor& x, Tensor& y) override {
    if (x.dtype() == DType::float32) return onednn::activation_forward(a, x, y);
    SYSTOLIC_LOOP(activation_forward, x.dtype(), a, x, y);
  }
  void activation_backward(Activation a, const Tensor& y, const Tensor& dy, Tensor& dx) override {
    if (y.dtype() == DType::float32) return onednn::activation_backward(a, y, dy, dx);
    SYSTOLIC_LOOP(activation_backward, y.dtype(), a, y, dy, dx);
  }
  void dropout_forward(const Tensor& x, Tensor& y, double rate, std::uint64_t seed, const Tensor& step) override {
    SYSTOLIC_LOOP(dropout_forward, x.dtype(), x, y, rate, philox::dropout_key(seed, step_value(step)));
  }
  void dropout_backward(const Tensor& dy, Tensor& dx, double rate, std::uint64_t seed, const Tensor& step) override {
    SYSTOLIC_LOOP(dropout_backward, dy.dtype(), dy, dx, rate, philox::dropout_key(seed, step_value(step)));
  }
  void pad2d_forward(const Tensor& x, Tensor& y, const Pad2D& p) override {
    SYSTOLIC_LOOP(pad2d_forward, x.dtype(), x, y, p);
  }
  void pad2d_backward(const Tensor& dy, Tensor& dx, const Pad2D& p) override {
    SYSTOLIC_LOOP(pad2d_backward, dy.dtype(), dy, dx, p);
  }
  void concat_forward(const std::vector<Tensor>& xs, Tensor& y, int axis) override {
    SYSTOLIC_LOOP(concat_forward, y.dtype(), xs, y, axis);
  }
  void concat_backward(const Tensor& dy, std::vector<Tensor>& dxs, int axis) override {
    SYSTOLIC_LOOP(concat_backward, dy.dtype(), dy, dxs, axis);
  }
  void fill(Tensor& x, double value) override { x.fill(value); }
  void copy(const Tensor& src, Tensor& dst) override { dst.copy_from(src); }
  void cast(const Tensor& src, Tensor& dst) override {
    SYSTOLIC_CHECK(src.numel() == dst.numel(), "cast: {} values into {}", src.numel(), dst.numel());
    for (DType t : {src.dtype(), dst.dtype()})
      SYSTOLIC_CHECK(is_floating(t), "cast: {} is not a float type (float32, float64, bfloat16)", dtype_name(t));
    dst.copy_from(src.to(dst.dtype()));
  }
  void add_n(const std::vector<Tensor>& xs, Tensor& y) override { SYSTOLIC_LOOP(add_n, y.dtype(), xs, y); }
  void accumulate(const Tensor& src, Tensor& dst) override {
    check_same("accumulate", src, dst);
    SYSTOLIC_CHECK(src.numel() == dst.numel(), "accumulate: {} into {}", src.shape().str(), dst.shape().str());
    SYSTOLIC_LOOP(accumulate, dst.dtype(), src, dst);
  }
  void scale_shift(const Tensor& x, Tensor& y, double scale, double shift) override {
    SYSTOLIC_LOOP(scale_shift, x.dtype(), x, y, scale, shift);
  }
  void moving_average(Tensor& moving, const Tensor& value, double momentum) override {
    SYSTOLIC_LOOP(moving_average, moving.dtype(), moving, value, momentum);
  }
  void gather_rows(const Tensor& src, const Tensor& indices, Tensor& dst) override {
    SYSTOLIC_CHECK(indices.dtype() == DType::int32, "gather_rows: indices must be int32, not {}",
                   dtype_name(indices.dtype()));
    const std::int32_t* ip = indices.data<std::int32_t>();
    gather_rows(src, std::vector<std::int64_t>(ip, ip + indices.numel()), dst);
  }
  void gather_rows(const Tensor& src, const std::vector<std::int64_t>& indices, Tensor& dst) override {
    if (dst.dtype() == DType::int32) return loops::gather_rows<std::int32_t>(src, indices, dst);  // labels
    SYSTOLIC_LOOP(gather_rows, dst.dtype(), src, indices, dst);
  }
  void augment_images(const Tensor& x, Tensor& y, const AugmentParams& p, std::uint64_t seed,
                      std::uint64_t first) override {
    loops::augment_images(x, y, p, seed, first);
  }
  void softmax_cross_entropy(const Tensor& logits, const Tensor& labels, Tensor& total, Tensor& dlogits,
                             double grad_scale) override {
    SYSTOLIC_LOOP(softmax_cross_entropy, logits.dtype(), logits, labels, total, dlogits, grad_scale);
  }
  void crossentropy_from_probabilities(const Tensor& probs, const Tensor& labels, Tensor& total, Tensor& dprobs,
                                       double grad_scale, double eps) override {
    SYSTOLIC_LOOP(crossentropy_from_probabilities, probs.dtype(), probs, labels, total, dprobs, grad_scale, eps);
  }
  void mean_squared_error(const Tensor& pred, const Tensor& target, Tensor& total, Tensor& dpred,
                          double grad_scale) override {
    SYSTOLIC_LOOP(mean_squared_error, pred.dtype(), pred, target, total, dpred, grad_scale);
  }
  void accuracy_count(const Tensor& pred, const Tensor& labels, Tensor& total) override {
    SYSTOLIC_LOOP(accuracy_count, pred.dtype(), pred, labels, total);
  }
  void adam_update(Tensor& w, const Tensor& g, Tensor& m, Tensor& v, const AdamStep& s,
                   const Tensor& iterations) override {
    double t = step_value(iterations) + 1.0;
    double lr_t = s.lr * std::sqrt(1.0 - std::pow(s.beta_2, t)) / (1.0 - std::pow(s.beta_1, t));
    SYSTOLIC_LOOP(adam_update, w.dtype(), w, g, m, v, s, lr_t);
  }
  void sgd_update(Tensor& w, const Tensor& g, Tensor& velocity, double lr, double momentum, bool nesterov) override {
    SYSTOLIC_LOOP(sgd_update, w.dtype(), w, g, velocity, lr, momentum, nesterov);
  }
  void rmsprop_update(Tensor& w, const Tensor& g, Tensor& ms, Tensor& mom, double lr, double rho, double momentum,
                      double epsilon) override {
    SYSTOLIC_LOOP(rmsprop_update, w.dtype(), w, g, ms, mom, lr, rho, momentum, epsilon);
  }
};

}  // namespace

Backend& cpu_backend() {
  static CpuBackend backend;
  return backend;
}

}  // namespace systolic::ops::cpu
