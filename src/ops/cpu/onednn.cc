// TEMPORARY: forwards to the loops until the oneDNN primitives land in this file.
#include "ops/cpu/onednn.h"

#include "ops/cpu/loops.h"

namespace systolic::ops::onednn {
void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y, const Conv2DParams& p) {
  loops::conv2d_forward<float>(x, w, b, y, p);
}
void conv2d_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw, Tensor& db,
                     const Conv2DParams& p) {
  loops::conv2d_backward<float>(x, w, dy, dx, dw, db, p);
}
void pool2d_forward(const Tensor& x, Tensor& y, Tensor&, const Pool2DParams& p) { loops::pool2d_forward<float>(x, y, p); }
void pool2d_backward(const Tensor& x, const Tensor&, const Tensor& dy, const Tensor&, Tensor& dx, const Pool2DParams& p) {
  loops::pool2d_backward<float>(x, dy, dx, p);
}
void batch_norm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y, Tensor& mean,
                                 Tensor& var, double eps) {
  loops::batch_norm_forward_training<float>(x, gamma, beta, y, mean, var, eps);
}
void batch_norm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& mean,
                                  const Tensor& var, Tensor& y, double eps) {
  loops::batch_norm_forward_inference<float>(x, gamma, beta, mean, var, y, eps);
}
void batch_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& var,
                         const Tensor& dy, Tensor& dx, Tensor& dgamma, Tensor& dbeta, double eps) {
  loops::batch_norm_backward<float>(x, gamma, mean, var, dy, dx, dgamma, dbeta, eps);
}
void dense_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) { loops::dense_forward<float>(x, w, b, y); }
void dense_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw, Tensor& db) {
  loops::dense_backward<float>(x, w, dy, dx, dw, db);
}
void activation_forward(Activation a, const Tensor& x, Tensor& y) { loops::activation_forward<float>(a, x, y); }
void activation_backward(Activation a, const Tensor& y, const Tensor& dy, Tensor& dx) {
  loops::activation_backward<float>(a, y, dy, dx);
}
std::string version() { return "none"; }
std::string cpu_isa() { return "none"; }
}  // namespace systolic::ops::onednn
