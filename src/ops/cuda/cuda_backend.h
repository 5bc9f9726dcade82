// The CUDA op table: one backend for every GPU (each op runs on the device of its tensors, on that device's
// stream). The ops live in several files, by family:
//   elementwise.cu  fill, copy, add_n, accumulate, scale_shift, moving_average, activations, dropout,
//   padding,
//                   concatenation, gathering rows, image augmentation
//   losses.cu       softmax cross entropy, cross entropy from probabilities, mean squared error, accuracy
//   optimizers.cu   Adam, SGD, RMSprop over the flat parameter buffer (one fused kernel each)
//   conv.cc         convolution through cuDNN (NHWC, algorithm chosen once per shape)
//   pool.cc         pooling through cuDNN
//   batch_norm.cu   batch normalisation kernels (entry points: batch_norm_ops.cc)
//   dense.cc        dense layers through cuBLASLt (bias epilogue), bias gradient kernel
//   dnn_kernels.cu  helper kernels of conv, pool and dense: kernel transposes, padding, bias add and gradient
// Contracts: include/systolic/ops.h. This header has no CUDA types, so g++ and nvcc both compile it.
#pragma once

#include "ops/backend.h"

namespace systolic::ops::cuda {

class CudaBackend final : public Backend {
 public:
  std::string name() const override { return "cuda"; }

  void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y,
                      const Conv2DParams& p) override;
  void conv2d_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw, Tensor& db,
                       const Conv2DParams& p) override;
  void pool2d_forward(const Tensor& x, Tensor& y, Tensor& workspace, const Pool2DParams& p) override;
  void pool2d_backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& workspace,
                       Tensor& dx, const Pool2DParams& p) override;
  void batch_norm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                                   Tensor& mean, Tensor& var, double eps) override;
  void batch_norm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                    const Tensor& mean, const Tensor& var, Tensor& y, double eps) override;
  void batch_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& var,
                           const Tensor& dy, Tensor& dx, Tensor& dgamma, Tensor& dbeta, double eps) override;
  void dense_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) override;
  void dense_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw,
                      Tensor& db) override;
  void activation_forward(Activation a, const Tensor& x, Tensor& y) override;
  void activation_backward(Activation a, const Tensor& y, const Tensor& dy, Tensor& dx) override;
  void dropout_forward(const Tensor& x, Tensor& y, double rate, std::uint64_t seed,
                       const Tensor& step) override;
  void dropout_backward(const Tensor& dy, Tensor& dx, double rate, std::uint64_t seed,
                        const Tensor& step) override;
  void pad2d_forward(const Tensor& x, Tensor& y, const Pad2D& p) override;
  void pad2d_backward(const Tensor& dy, Tensor& dx, const Pad2D& p) override;
  void concat_forward(const std::vector<Tensor>& xs, Tensor& y, int axis) override;
  void concat_backward(const Tensor& dy, std::vector<Tensor>& dxs, int axis) override;
  void fill(Tensor& x, double value) override;
  void copy(const Tensor& src, Tensor& dst) override;
  void cast(const Tensor& src, Tensor& dst) override;
  void add_n(const std::vector<Tensor>& xs, Tensor& y) override;
  void accumulate(const Tensor& src, Tensor& dst) override;
  void scale_shift(const Tensor& x, Tensor& y, double scale, double shift) override;
  void moving_average(Tensor& moving, const Tensor& value, double momentum) override;
  void gather_rows(const Tensor& src, const std::vector<std::int64_t>& indices, Tensor& dst) override;
  void gather_rows(const Tensor& src, const Tensor& indices, Tensor& dst) override;
  void augment_images(const Tensor& x, Tensor& y, const AugmentParams& p, std::uint64_t seed,
                      std::uint64_t first) override;
  void softmax_cross_entropy(const Tensor& logits, const Tensor& labels, Tensor& total, Tensor& dlogits,
                             double grad_scale) override;
  void crossentropy_from_probabilities(const Tensor& probs, const Tensor& labels, Tensor& total,
                                       Tensor& dprobs, double grad_scale, double eps) override;
  void mean_squared_error(const Tensor& pred, const Tensor& target, Tensor& total, Tensor& dpred,
                          double grad_scale) override;
  void accuracy_count(const Tensor& pred, const Tensor& labels, Tensor& total) override;
  void adam_update(Tensor& w, const Tensor& g, Tensor& m, Tensor& v, const AdamStep& s,
                   const Tensor& iterations) override;
  void sgd_update(Tensor& w, const Tensor& g, Tensor& velocity, double lr, double momentum,
                  bool nesterov) override;
  void rmsprop_update(Tensor& w, const Tensor& g, Tensor& ms, Tensor& mom, double lr, double rho,
                      double momentum, double epsilon) override;
};

Backend& cuda_backend();

}  // namespace systolic::ops::cuda
