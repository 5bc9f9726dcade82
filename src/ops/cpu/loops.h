// Plain C++ loops for every CPU op, templated on the element type (float, double). They are the production
// path for ops oneDNN has no primitive for (dropout, padding, concat, losses, metrics, optimizer updates) and
// the reference the oneDNN path is tested against; float64 runs them all (gradient checks).
// Contracts: include/systolic/ops.h.
#pragma once

#include <systolic/ops.h>

namespace systolic::ops::loops {

template <class T>
void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y, const Conv2DParams& p);
template <class T>
void conv2d_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw, Tensor& db,
                     const Conv2DParams& p);
template <class T>
void pool2d_forward(const Tensor& x, Tensor& y, const Pool2DParams& p);
template <class T>
void pool2d_backward(const Tensor& x, const Tensor& dy, Tensor& dx, const Pool2DParams& p);
template <class T>
void batch_norm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y, Tensor& mean,
                                 Tensor& var, double eps);
template <class T>
void batch_norm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& mean,
                                  const Tensor& var, Tensor& y, double eps);
template <class T>
void batch_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& var,
                         const Tensor& dy, Tensor& dx, Tensor& dgamma, Tensor& dbeta, double eps);
template <class T>
void dense_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y);
template <class T>
void dense_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw, Tensor& db);
template <class T>
void activation_forward(Activation a, const Tensor& x, Tensor& y);
template <class T>
void activation_backward(Activation a, const Tensor& y, const Tensor& dy, Tensor& dx);
template <class T>
void dropout_forward(const Tensor& x, Tensor& y, double rate, std::uint64_t key);  // key: philox::dropout_key
template <class T>
void dropout_backward(const Tensor& dy, Tensor& dx, double rate, std::uint64_t key);
template <class T>
void pad2d_forward(const Tensor& x, Tensor& y, const Pad2D& p);
template <class T>
void pad2d_backward(const Tensor& dy, Tensor& dx, const Pad2D& p);
template <class T>
void concat_forward(const std::vector<Tensor>& xs, Tensor& y, int axis);
template <class T>
void concat_backward(const Tensor& dy, std::vector<Tensor>& dxs, int axis);
template <class T>
void add_n(const std::vector<Tensor>& xs, Tensor& y);
template <class T>
void accumulate(const Tensor& src, Tensor& dst);
template <class T>
void scale_shift(const Tensor& x, Tensor& y, double scale, double shift);
template <class T>
void moving_average(Tensor& moving, const Tensor& value, double momentum);
template <class T>
void gather_rows(const Tensor& src, const std::vector<std::int64_t>& indices, Tensor& dst);
template <class T>
void softmax_cross_entropy(const Tensor& logits, const Tensor& labels, Tensor& total, Tensor& dlogits,
                           double grad_scale);
template <class T>
void crossentropy_from_probabilities(const Tensor& probs, const Tensor& labels, Tensor& total, Tensor& dprobs,
                                     double grad_scale, double eps);
template <class T>
void mean_squared_error(const Tensor& pred, const Tensor& target, Tensor& total, Tensor& dpred, double grad_scale);
template <class T>
void accuracy_count(const Tensor& pred, const Tensor& labels, Tensor& total);
template <class T>
void adam_update(Tensor& w, const Tensor& g, Tensor& m, Tensor& v, const AdamStep& s, double lr_t);
template <class T>
void sgd_update(Tensor& w, const Tensor& g, Tensor& velocity, double lr, double momentum, bool nesterov);
template <class T>
void rmsprop_update(Tensor& w, const Tensor& g, Tensor& ms, Tensor& mom, double lr, double rho, double momentum,
                    double epsilon);

// Image augmentation (ops/augment_math.h): one image (H, W, C) of any source type (uint8, int32, float, double)
// to float, serially (the input pipeline calls it from its own threads); a batch over OpenMP threads.
template <class S>
void augment_image(const S* in, float* out, std::int64_t H, std::int64_t W, std::int64_t C, const AugmentParams& p,
                   std::uint64_t seed, std::uint64_t index);
void augment_images(const Tensor& x, Tensor& y, const AugmentParams& p, std::uint64_t seed, std::uint64_t first);

}  // namespace systolic::ops::loops
