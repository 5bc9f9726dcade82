// The per-device op table. ops::* (ops.cc) checks that the tensors of a call share a device and calls that
// device's Backend once. Every method defaults to an Error naming the op and the device, so a backend that
// lacks an op says so instead of falling back elsewhere. Signatures and contracts: include/systolic/ops.h.
#pragma once

#include <systolic/ops.h>

namespace systolic::ops {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;

  virtual void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y, const Conv2DParams& p);
  virtual void conv2d_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw,
                               Tensor& db, const Conv2DParams& p);
  virtual void pool2d_forward(const Tensor& x, Tensor& y, Tensor& workspace, const Pool2DParams& p);
  virtual void pool2d_backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& workspace,
                               Tensor& dx, const Pool2DParams& p);
  virtual void batch_norm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                                           Tensor& mean, Tensor& var, double eps);
  virtual void batch_norm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                            const Tensor& mean, const Tensor& var, Tensor& y, double eps);
  virtual void batch_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& var,
                                   const Tensor& dy, Tensor& dx, Tensor& dgamma, Tensor& dbeta, double eps);
  virtual void dense_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y);
  virtual void dense_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw,
                              Tensor& db);
  virtual void activation_forward(Activation a, const Tensor& x, Tensor& y);
  virtual void activation_backward(Activation a, const Tensor& y, const Tensor& dy, Tensor& dx);
  virtual void dropout_forward(const Tensor& x, Tensor& y, double rate, std::uint64_t seed, const Tensor& step);
  virtual void dropout_backward(const Tensor& dy, Tensor& dx, double rate, std::uint64_t seed, const Tensor& step);
  virtual void pad2d_forward(const Tensor& x, Tensor& y, const Pad2D& p);
  virtual void pad2d_backward(const Tensor& dy, Tensor& dx, const Pad2D& p);
  virtual void concat_forward(const std::vector<Tensor>& xs, Tensor& y, int axis);
  virtual void concat_backward(const Tensor& dy, std::vector<Tensor>& dxs, int axis);
  virtual void fill(Tensor& x, double value);
  virtual void copy(const Tensor& src, Tensor& dst);
  virtual void cast(const Tensor& src, Tensor& dst);
  virtual void add_n(const std::vector<Tensor>& xs, Tensor& y);
  virtual void accumulate(const Tensor& src, Tensor& dst);
  virtual void scale_shift(const Tensor& x, Tensor& y, double scale, double shift);
  virtual void moving_average(Tensor& moving, const Tensor& value, double momentum);
  virtual void gather_rows(const Tensor& src, const std::vector<std::int64_t>& indices, Tensor& dst);
  virtual void gather_rows(const Tensor& src, const Tensor& indices, Tensor& dst);
  virtual void augment_images(const Tensor& x, Tensor& y, const AugmentParams& p, std::uint64_t seed,
                              std::uint64_t first);
  virtual void softmax_cross_entropy(const Tensor& logits, const Tensor& labels, Tensor& total, Tensor& dlogits,
                                     double grad_scale);
  virtual void crossentropy_from_probabilities(const Tensor& probs, const Tensor& labels, Tensor& total,
                                               Tensor& dprobs, double grad_scale, double eps);
  virtual void mean_squared_error(const Tensor& pred, const Tensor& target, Tensor& total, Tensor& dpred,
                                  double grad_scale);
  virtual void accuracy_count(const Tensor& pred, const Tensor& labels, Tensor& total);
  virtual void adam_update(Tensor& w, const Tensor& g, Tensor& m, Tensor& v, const AdamStep& s,
                           const Tensor& iterations);
  virtual void sgd_update(Tensor& w, const Tensor& g, Tensor& velocity, double lr, double momentum, bool nesterov);
  virtual void rmsprop_update(Tensor& w, const Tensor& g, Tensor& ms, Tensor& mom, double lr, double rho,
                              double momentum, double epsilon);

 protected:
  [[noreturn]] void unsupported(const char* op) const;
};

Backend& backend_for(Device device);

}  // namespace systolic::ops
