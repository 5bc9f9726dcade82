// Batch normalisation on CUDA (our kernels, batch_norm.cu) over all axes but the last (C). Contract (ops.h):
//   training: mean, var (C) = batch mean and BIASED variance; y = gamma*(x-mean)/sqrt(var+eps) + beta
//   inference: the same y with the given mean and var
//   backward: dx = (=); dgamma, dbeta += (accumulated); any of them may be undefined.
// x, y, dy, dx: float32 or bfloat16 (one dtype); gamma, beta, mean, var, dgamma, dbeta: float32. Reductions
// are deterministic (no atomics); their partial sums live in Context::workspace.
#include "ops/cuda/batch_norm.h"
#include "ops/cuda/context.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/dnn_common.h"

namespace systolic::ops::cuda {

namespace {

struct Rows {
  std::int64_t R, C;
};

// x's dtype and rank, a same-shaped companion (y, dy or dx), and the [R, C] view.
Rows check_data(const char* op, const Tensor& x, const Tensor& other, const char* other_name) {
  check_dtype(op, x, {DType::float32, DType::bfloat16});
  check_same_dtype(op, other_name, other, x.dtype());
  SYSTOLIC_CHECK(x.rank() >= 1 && other.shape() == x.shape(),
                 "{}: x {} and {} {} must have one shape with channels last", op, x.shape().str(), other_name,
                 other.shape().str());
  std::int64_t C = x.dim(-1);
  return {C ? x.numel() / C : 0, C};
}

// A float32 [C] statistic or parameter.
void check_channels(const char* op, const char* name, const Tensor& t, std::int64_t C) {
  SYSTOLIC_CHECK(t.defined(), "{}: {} is undefined", op, name);
  SYSTOLIC_CHECK(t.dtype() == DType::float32, "{}: {} must be float32, not {}", op, name,
                 dtype_name(t.dtype()));
  SYSTOLIC_CHECK(t.numel() == C, "{}: {} {} does not match {} channels", op, name, t.shape().str(), C);
}

}  // namespace

void CudaBackend::batch_norm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                              Tensor& y, Tensor& mean, Tensor& var, double eps) {
  const char* op = "batch_norm_forward_training";
  Rows s = check_data(op, x, y, "y");
  check_channels(op, "gamma", gamma, s.C);
  check_channels(op, "beta", beta, s.C);
  check_channels(op, "mean", mean, s.C);
  check_channels(op, "var", var, s.C);
  if (x.numel() == 0) return;
  Context& c = context(x);
  void* workspace = c.workspace(dnn::batch_norm_workspace_bytes(s.R, s.C));
  SYSTOLIC_CUDA_CHECK(dnn::launch_batch_norm_forward_training(
      x.raw_data(), element_of(x.dtype()), gamma.data<float>(), beta.data<float>(), y.raw_data(),
      mean.data<float>(), var.data<float>(), s.R, s.C, static_cast<float>(eps), workspace, c.stream));
}

void CudaBackend::batch_norm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                               const Tensor& mean, const Tensor& var, Tensor& y, double eps) {
  const char* op = "batch_norm_forward_inference";
  Rows s = check_data(op, x, y, "y");
  check_channels(op, "gamma", gamma, s.C);
  check_channels(op, "beta", beta, s.C);
  check_channels(op, "mean", mean, s.C);
  check_channels(op, "var", var, s.C);
  if (x.numel() == 0) return;
  Context& c = context(x);
  SYSTOLIC_CUDA_CHECK(dnn::launch_batch_norm_forward_inference(
      x.raw_data(), element_of(x.dtype()), gamma.data<float>(), beta.data<float>(), mean.data<float>(),
      var.data<float>(), y.raw_data(), s.R, s.C, static_cast<float>(eps), c.stream));
}

void CudaBackend::batch_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean,
                                      const Tensor& var, const Tensor& dy, Tensor& dx, Tensor& dgamma,
                                      Tensor& dbeta, double eps) {
  const char* op = "batch_norm_backward";
  Rows s = check_data(op, x, dy, "dy");
  check_channels(op, "gamma", gamma, s.C);
  check_channels(op, "mean", mean, s.C);
  check_channels(op, "var", var, s.C);
  if (dx.defined()) check_data(op, x, dx, "dx");
  if (dgamma.defined()) check_channels(op, "dgamma", dgamma, s.C);
  if (dbeta.defined()) check_channels(op, "dbeta", dbeta, s.C);
  if (!dx.defined() && !dgamma.defined() && !dbeta.defined()) return;
  if (x.numel() == 0) return;
  Context& c = context(x);
  void* workspace = c.workspace(dnn::batch_norm_workspace_bytes(s.R, s.C));
  SYSTOLIC_CUDA_CHECK(dnn::launch_batch_norm_backward(
      x.raw_data(), dy.raw_data(), element_of(x.dtype()), gamma.data<float>(), mean.data<float>(),
      var.data<float>(), dx.defined() ? dx.raw_data() : nullptr,
      dgamma.defined() ? dgamma.data<float>() : nullptr, dbeta.defined() ? dbeta.data<float>() : nullptr, s.R,
      s.C, eps, workspace, c.stream));
}

}  // namespace systolic::ops::cuda
