// ops::* entry points: check that every tensor of the call is on one device, then dispatch once to that
// device's backend.
#include "ops/backend.h"

#include "ops/cpu/cpu_backend.h"
#if SYSTOLIC_HAS_CUDA
#include "ops/cuda/cuda_backend.h"
#endif

namespace systolic::ops {

namespace {
struct DeviceOf {
  explicit DeviceOf(const char* name) : op(name) {}
  const char* op;
  bool found = false;
  Device device;
  void add(const Tensor& t) {
    if (!t.defined()) return;
    if (!found) { device = t.device(); found = true; return; }
    SYSTOLIC_CHECK(t.device() == device, "{}: tensors on different devices ({} and {})", op, device.str(),
                   t.device().str());
  }
  void add(const std::vector<Tensor>& ts) { for (auto& t : ts) add(t); }
  template <class T> void add(const T&) {}
};
}  // namespace

void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y, const Conv2DParams& p) {
  DeviceOf d("conv2d_forward");
  d.add(x);
  d.add(w);
  d.add(b);
  d.add(y);
  d.add(p);
  backend_for(d.found ? d.device : Device::cpu()).conv2d_forward(x, w, b, y, p);
}

void conv2d_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw, Tensor& db, const Conv2DParams& p) {
  DeviceOf d("conv2d_backward");
  d.add(x);
  d.add(w);
  d.add(dy);
  d.add(dx);
  d.add(dw);
  d.add(db);
  d.add(p);
  backend_for(d.found ? d.device : Device::cpu()).conv2d_backward(x, w, dy, dx, dw, db, p);
}

void pool2d_forward(const Tensor& x, Tensor& y, Tensor& workspace, const Pool2DParams& p) {
  DeviceOf d("pool2d_forward");
  d.add(x);
  d.add(y);
  d.add(workspace);
  d.add(p);
  backend_for(d.found ? d.device : Device::cpu()).pool2d_forward(x, y, workspace, p);
}

void pool2d_backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& workspace, Tensor& dx, const Pool2DParams& p) {
  DeviceOf d("pool2d_backward");
  d.add(x);
  d.add(y);
  d.add(dy);
  d.add(workspace);
  d.add(dx);
  d.add(p);
  backend_for(d.found ? d.device : Device::cpu()).pool2d_backward(x, y, dy, workspace, dx, p);
}

void batch_norm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y, Tensor& mean, Tensor& var, double eps) {
  DeviceOf d("batch_norm_forward_training");
  d.add(x);
  d.add(gamma);
  d.add(beta);
  d.add(y);
  d.add(mean);
  d.add(var);
  d.add(eps);
  backend_for(d.found ? d.device : Device::cpu()).batch_norm_forward_training(x, gamma, beta, y, mean, var, eps);
}

void batch_norm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& mean, const Tensor& var, Tensor& y, double eps) {
  DeviceOf d("batch_norm_forward_inference");
  d.add(x);
  d.add(gamma);
  d.add(beta);
  d.add(mean);
  d.add(var);
  d.add(y);
  d.add(eps);
  backend_for(d.found ? d.device : Device::cpu()).batch_norm_forward_inference(x, gamma, beta, mean, var, y, eps);
}

void batch_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& var, const Tensor& dy, Tensor& dx, Tensor& dgamma, Tensor& dbeta, double eps) {
  DeviceOf d("batch_norm_backward");
  d.add(x);
  d.add(gamma);
  d.add(mean);
  d.add(var);
  d.add(dy);
  d.add(dx);
  d.add(dgamma);
  d.add(dbeta);
  d.add(eps);
  backend_for(d.found ? d.device : Device::cpu()).batch_norm_backward(x, gamma, mean, var, dy, dx, dgamma, dbeta, eps);
}

void dense_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) {
  DeviceOf d("dense_forward");
  d.add(x);
  d.add(w);
  d.add(b);
  d.add(y);
  backend_for(d.found ? d.device : Device::cpu()).dense_forward(x, w, b, y);
}

void dense_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw, Tensor& db) {
  DeviceOf d("dense_backward");
  d.add(x);
  d.add(w);
  d.add(dy);
  d.add(dx);
  d.add(dw);
  d.add(db);
  backend_for(d.found ? d.device : Device::cpu()).dense_backward(x, w, dy, dx, dw, db);
}

void activation_forward(Activation a, const Tensor& x, Tensor& y) {
  DeviceOf d("activation_forward");
  d.add(a);
  d.add(x);
  d.add(y);
  backend_for(d.found ? d.device : Device::cpu()).activation_forward(a, x, y);
}

void activation_backward(Activation a, const Tensor& y, const Tensor& dy, Tensor& dx) {
  DeviceOf d("activation_backward");
  d.add(a);
  d.add(y);
  d.add(dy);
  d.add(dx);
  backend_for(d.found ? d.device : Device::cpu()).activation_backward(a, y, dy, dx);
}

void dropout_forward(const Tensor& x, Tensor& y, double rate, std::uint64_t seed, const Tensor& step) {
  DeviceOf d("dropout_forward");
  d.add(x);
  d.add(y);
  d.add(step);
  backend_for(d.found ? d.device : Device::cpu()).dropout_forward(x, y, rate, seed, step);
}

void dropout_backward(const Tensor& dy, Tensor& dx, double rate, std::uint64_t seed, const Tensor& step) {
  DeviceOf d("dropout_backward");
  d.add(dy);
  d.add(dx);
  d.add(step);
  backend_for(d.found ? d.device : Device::cpu()).dropout_backward(dy, dx, rate, seed, step);
}

void pad2d_forward(const Tensor& x, Tensor& y, const Pad2D& p) {
  DeviceOf d("pad2d_forward");
  d.add(x);
  d.add(y);
  d.add(p);
  backend_for(d.found ? d.device : Device::cpu()).pad2d_forward(x, y, p);
}

void pad2d_backward(const Tensor& dy, Tensor& dx, const Pad2D& p) {
  DeviceOf d("pad2d_backward");
  d.add(dy);
  d.add(dx);
  d.add(p);
  backend_for(d.found ? d.device : Device::cpu()).pad2d_backward(dy, dx, p);
}

void concat_forward(const std::vector<Tensor>& xs, Tensor& y, int axis) {
  DeviceOf d("concat_forward");
  d.add(xs);
  d.add(y);
  d.add(axis);
  backend_for(d.found ? d.device : Device::cpu()).concat_forward(xs, y, axis);
}

void concat_backward(const Tensor& dy, std::vector<Tensor>& dxs, int axis) {
  DeviceOf d("concat_backward");
  d.add(dy);
  d.add(dxs);
  d.add(axis);
  backend_for(d.found ? d.device : Device::cpu()).concat_backward(dy, dxs, axis);
}

void fill(Tensor& x, double value) {
  DeviceOf d("fill");
  d.add(x);
  d.add(value);
  backend_for(d.found ? d.device : Device::cpu()).fill(x, value);
}

void cast(const Tensor& src, Tensor& dst) {
  DeviceOf d("cast");
  d.add(src);
  d.add(dst);
  backend_for(d.found ? d.device : Device::cpu()).cast(src, dst);
}

void copy(const Tensor& src, Tensor& dst) {
  DeviceOf d("copy");
  d.add(src);
  d.add(dst);
  backend_for(d.found ? d.device : Device::cpu()).copy(src, dst);
}

void add_n(const std::vector<Tensor>& xs, Tensor& y) {
  DeviceOf d("add_n");
  d.add(xs);
  d.add(y);
  backend_for(d.found ? d.device : Device::cpu()).add_n(xs, y);
}

void accumulate(const Tensor& src, Tensor& dst) {
  DeviceOf d("accumulate");
  d.add(src);
  d.add(dst);
  backend_for(d.found ? d.device : Device::cpu()).accumulate(src, dst);
}

void scale_shift(const Tensor& x, Tensor& y, double scale, double shift) {
  DeviceOf d("scale_shift");
  d.add(x);
  d.add(y);
  d.add(scale);
  d.add(shift);
  backend_for(d.found ? d.device : Device::cpu()).scale_shift(x, y, scale, shift);
}

void moving_average(Tensor& moving, const Tensor& value, double momentum) {
  DeviceOf d("moving_average");
  d.add(moving);
  d.add(value);
  d.add(momentum);
  backend_for(d.found ? d.device : Device::cpu()).moving_average(moving, value, momentum);
}

void gather_rows(const Tensor& src, const std::vector<std::int64_t>& indices, Tensor& dst) {
  DeviceOf d("gather_rows");
  d.add(src);
  d.add(indices);
  d.add(dst);
  backend_for(d.found ? d.device : Device::cpu()).gather_rows(src, indices, dst);
}

void gather_rows(const Tensor& src, const Tensor& indices, Tensor& dst) {
  DeviceOf d("gather_rows");
  d.add(src);
  d.add(indices);
  d.add(dst);
  backend_for(d.found ? d.device : Device::cpu()).gather_rows(src, indices, dst);
}

void augment_images(const Tensor& x, Tensor& y, const AugmentParams& p, std::uint64_t seed, std::uint64_t first) {
  DeviceOf d("augment_images");
  d.add(x);
  d.add(y);
  backend_for(d.found ? d.device : Device::cpu()).augment_images(x, y, p, seed, first);
}

void softmax_cross_entropy(const Tensor& logits, const Tensor& labels, Tensor& total, Tensor& dlogits, double grad_scale) {
  DeviceOf d("softmax_cross_entropy");
  d.add(logits);
  d.add(labels);
  d.add(total);
  d.add(dlogits);
  d.add(grad_scale);
  backend_for(d.found ? d.device : Device::cpu()).softmax_cross_entropy(logits, labels, total, dlogits, grad_scale);
}

void crossentropy_from_probabilities(const Tensor& probs, const Tensor& labels, Tensor& total, Tensor& dprobs, double grad_scale, double eps) {
  DeviceOf d("crossentropy_from_probabilities");
  d.add(probs);
  d.add(labels);
  d.add(total);
  d.add(dprobs);
  d.add(grad_scale);
  d.add(eps);
  backend_for(d.found ? d.device : Device::cpu()).crossentropy_from_probabilities(probs, labels, total, dprobs, grad_scale, eps);
}

void mean_squared_error(const Tensor& pred, const Tensor& target, Tensor& total, Tensor& dpred, double grad_scale) {
  DeviceOf d("mean_squared_error");
  d.add(pred);
  d.add(target);
  d.add(total);
  d.add(dpred);
  d.add(grad_scale);
  backend_for(d.found ? d.device : Device::cpu()).mean_squared_error(pred, target, total, dpred, grad_scale);
}

void accuracy_count(const Tensor& pred, const Tensor& labels, Tensor& total) {
  DeviceOf d("accuracy_count");
  d.add(pred);
  d.add(labels);
  d.add(total);
  backend_for(d.found ? d.device : Device::cpu()).accuracy_count(pred, labels, total);
}

void adam_update(Tensor& w, const Tensor& g, Tensor& m, Tensor& v, const AdamStep& s, const Tensor& iterations) {
  DeviceOf d("adam_update");
  d.add(w);
  d.add(g);
  d.add(m);
  d.add(v);
  d.add(iterations);
  backend_for(d.found ? d.device : Device::cpu()).adam_update(w, g, m, v, s, iterations);
}

void sgd_update(Tensor& w, const Tensor& g, Tensor& velocity, double lr, double momentum, bool nesterov) {
  DeviceOf d("sgd_update");
  d.add(w);
  d.add(g);
  d.add(velocity);
  d.add(lr);
  d.add(momentum);
  d.add(nesterov);
  backend_for(d.found ? d.device : Device::cpu()).sgd_update(w, g, velocity, lr, momentum, nesterov);
}

void rmsprop_update(Tensor& w, const Tensor& g, Tensor& ms, Tensor& mom, double lr, double rho, double momentum, double epsilon) {
  DeviceOf d("rmsprop_update");
  d.add(w);
  d.add(g);
  d.add(ms);
  d.add(mom);
  d.add(lr);
  d.add(rho);
  d.add(momentum);
  d.add(epsilon);
  backend_for(d.found ? d.device : Device::cpu()).rmsprop_update(w, g, ms, mom, lr, rho, momentum, epsilon);
}

void Backend::unsupported(const char* op) const {
  fail("op {} is not implemented on the {} backend", op, name());
}

// The defaults: a backend that does not override an op refuses it by name.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
void Backend::conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y, const Conv2DParams& p) { unsupported("conv2d_forward"); }
void Backend::conv2d_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw, Tensor& db, const Conv2DParams& p) { unsupported("conv2d_backward"); }
void Backend::pool2d_forward(const Tensor& x, Tensor& y, Tensor& workspace, const Pool2DParams& p) { unsupported("pool2d_forward"); }
void Backend::pool2d_backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& workspace, Tensor& dx, const Pool2DParams& p) { unsupported("pool2d_backward"); }
void Backend::batch_norm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y, Tensor& mean, Tensor& var, double eps) { unsupported("batch_norm_forward_training"); }
void Backend::batch_norm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& mean, const Tensor& var, Tensor& y, double eps) { unsupported("batch_norm_forward_inference"); }
void Backend::batch_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& var, const Tensor& dy, Tensor& dx, Tensor& dgamma, Tensor& dbeta, double eps) { unsupported("batch_norm_backward"); }
void Backend::dense_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) { unsupported("dense_forward"); }
void Backend::dense_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw, Tensor& db) { unsupported("dense_backward"); }
void Backend::activation_forward(Activation a, const Tensor& x, Tensor& y) { unsupported("activation_forward"); }
void Backend::activation_backward(Activation a, const Tensor& y, const Tensor& dy, Tensor& dx) { unsupported("activation_backward"); }
void Backend::dropout_forward(const Tensor& x, Tensor& y, double rate, std::uint64_t seed, const Tensor& step) { unsupported("dropout_forward"); }
void Backend::dropout_backward(const Tensor& dy, Tensor& dx, double rate, std::uint64_t seed, const Tensor& step) { unsupported("dropout_backward"); }
void Backend::pad2d_forward(const Tensor& x, Tensor& y, const Pad2D& p) { unsupported("pad2d_forward"); }
void Backend::pad2d_backward(const Tensor& dy, Tensor& dx, const Pad2D& p) { unsupported("pad2d_backward"); }
void Backend::concat_forward(const std::vector<Tensor>& xs, Tensor& y, int axis) { unsupported("concat_forward"); }
void Backend::concat_backward(const Tensor& dy, std::vector<Tensor>& dxs, int axis) { unsupported("concat_backward"); }
void Backend::fill(Tensor& x, double value) { unsupported("fill"); }
void Backend::copy(const Tensor& src, Tensor& dst) { unsupported("copy"); }
void Backend::add_n(const std::vector<Tensor>& xs, Tensor& y) { unsupported("add_n"); }
void Backend::accumulate(const Tensor& src, Tensor& dst) { unsupported("accumulate"); }
void Backend::scale_shift(const Tensor& x, Tensor& y, double scale, double shift) { unsupported("scale_shift"); }
void Backend::moving_average(Tensor& moving, const Tensor& value, double momentum) { unsupported("moving_average"); }
void Backend::gather_rows(const Tensor& src, const std::vector<std::int64_t>& indices, Tensor& dst) { unsupported("gather_rows"); }
void Backend::gather_rows(const Tensor& src, const Tensor& indices, Tensor& dst) { unsupported("gather_rows"); }
void Backend::cast(const Tensor& src, Tensor& dst) { unsupported("cast"); }
void Backend::augment_images(const Tensor& x, Tensor& y, const AugmentParams& p, std::uint64_t seed, std::uint64_t first) { unsupported("augment_images"); }
void Backend::softmax_cross_entropy(const Tensor& logits, const Tensor& labels, Tensor& total, Tensor& dlogits, double grad_scale) { unsupported("softmax_cross_entropy"); }
void Backend::crossentropy_from_probabilities(const Tensor& probs, const Tensor& labels, Tensor& total, Tensor& dprobs, double grad_scale, double eps) { unsupported("crossentropy_from_probabilities"); }
void Backend::mean_squared_error(const Tensor& pred, const Tensor& target, Tensor& total, Tensor& dpred, double grad_scale) { unsupported("mean_squared_error"); }
void Backend::accuracy_count(const Tensor& pred, const Tensor& labels, Tensor& total) { unsupported("accuracy_count"); }
void Backend::adam_update(Tensor& w, const Tensor& g, Tensor& m, Tensor& v, const AdamStep& s, const Tensor& iterations) { unsupported("adam_update"); }
void Backend::sgd_update(Tensor& w, const Tensor& g, Tensor& velocity, double lr, double momentum, bool nesterov) { unsupported("sgd_update"); }
void Backend::rmsprop_update(Tensor& w, const Tensor& g, Tensor& ms, Tensor& mom, double lr, double rho, double momentum, double epsilon) { unsupported("rmsprop_update"); }

#pragma GCC diagnostic pop

Backend& backend_for(Device device) {
  if (device.is_cpu()) return cpu::cpu_backend();
#if SYSTOLIC_HAS_CUDA
  return cuda::cuda_backend();
#else
  fail("device {} is not available: this build of systolic has no CUDA support", device.str());
#endif
}

}  // namespace systolic::ops
