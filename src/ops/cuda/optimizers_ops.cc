// CudaBackend's optimizer updates: checks (float32 buffers of one size, Error naming the op), then one fused
// kernel on the device's stream (optimizers.h). Contracts: include/systolic/ops.h.
#include "ops/cuda/context.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/optimizers.h"

namespace systolic::ops::cuda {

namespace {
// A float32 buffer with w's number of elements; `what` names it in the error.
void check_slot(const char* op, const char* what, const Tensor& w, const Tensor& t) {
  SYSTOLIC_CHECK(t.defined(), "{}: {} is undefined", op, what);
  SYSTOLIC_CHECK(t.dtype() == DType::float32 && t.numel() == w.numel(),
                 "{}: {} is {} {}, the weights float32 {}", op, what, dtype_name(t.dtype()), t.shape().str(),
                 w.shape().str());
}
}  // namespace

void CudaBackend::adam_update(Tensor& w, const Tensor& g, Tensor& m, Tensor& v, const AdamStep& s,
                              const Tensor& iterations) {
  check_dtype("adam_update", w, {DType::float32});
  check_slot("adam_update", "the gradient", w, g);
  check_slot("adam_update", "m", w, m);
  check_slot("adam_update", "v", w, v);
  const double* it = nullptr;
  if (iterations.defined()) {
    SYSTOLIC_CHECK(iterations.dtype() == DType::float64 && iterations.numel() == 1,
                   "adam_update: iterations must be float64 [1], not {} {}", dtype_name(iterations.dtype()),
                   iterations.shape().str());
    it = iterations.data<double>();
  }
  Context& c = context(w);
  SYSTOLIC_CUDA_CHECK(launch_adam_update(w.data<float>(), g.data<float>(), m.data<float>(), v.data<float>(),
                                         w.numel(), s.lr, s.beta_1, s.beta_2, s.epsilon, it, c.stream));
}

void CudaBackend::sgd_update(Tensor& w, const Tensor& g, Tensor& velocity, double lr, double momentum,
                             bool nesterov) {
  check_dtype("sgd_update", w, {DType::float32});
  check_slot("sgd_update", "the gradient", w, g);
  float* vp = nullptr;
  if (momentum != 0.0) {
    check_slot("sgd_update", "the velocity", w, velocity);
    vp = velocity.data<float>();
  }
  Context& c = context(w);
  SYSTOLIC_CUDA_CHECK(
      launch_sgd_update(w.data<float>(), g.data<float>(), vp, w.numel(), lr, momentum, nesterov, c.stream));
}

void CudaBackend::rmsprop_update(Tensor& w, const Tensor& g, Tensor& ms, Tensor& mom, double lr, double rho,
                                 double momentum, double epsilon) {
  check_dtype("rmsprop_update", w, {DType::float32});
  check_slot("rmsprop_update", "the gradient", w, g);
  check_slot("rmsprop_update", "the mean square", w, ms);
  float* mp = nullptr;
  if (momentum > 0) {
    check_slot("rmsprop_update", "the momentum", w, mom);
    mp = mom.data<float>();
  }
  Context& c = context(w);
  SYSTOLIC_CUDA_CHECK(launch_rmsprop_update(w.data<float>(), g.data<float>(), ms.data<float>(), mp, w.numel(),
                                            lr, rho, momentum, epsilon, c.stream));
}

}  // namespace systolic::ops::cuda
