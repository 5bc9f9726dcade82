// The op interface: one signature per op, the same on every device. Each call dispatches once, through the
// backend of the device its tensors live on (src/ops/backend.h); all tensors of a call must share a device.
// A backend that lacks an op raises Error naming the op and the device; nothing falls back to another device.
//
// Conventions (every op):
// - Layout NHWC; kernels (KH, KW, C, F) as Keras stores them; dense weights (K, U).
// - Tensors are contiguous. Outputs are preallocated by the caller with the shapes stated below.
// - Backward ops write input gradients (=) and ACCUMULATE parameter gradients (+=), so a shared layer or a
//   replica can sum into one buffer. An undefined (default-constructed) gradient argument is skipped.
// - float32 is the working type; the CPU backend also runs float64 (through reference loops) so gradients can
//   be checked by finite differences in double precision.
#pragma once

#include <systolic/tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace systolic {

enum class Activation { linear, relu, sigmoid, tanh, softmax };
Activation activation_from_name(const std::string& name);  // Keras names; throws Error naming an unknown one
std::string activation_name(Activation a);

namespace ops {

struct Conv2DParams {
  int stride_h = 1, stride_w = 1;
  int dilation_h = 1, dilation_w = 1;
  int pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  // Applied to the forward output, y = act(conv + b): linear or relu, fused into the convolution's epilogue
  // (oneDNN post-op; the CUDA bias kernel), which saves a pass over y. Backward ignores it (the layer applies the
  // activation's gradient from y first).
  Activation activation = Activation::linear;
};

enum class PoolKind { max, average };
struct Pool2DParams {
  PoolKind kind = PoolKind::max;
  int window_h = 2, window_w = 2;
  int stride_h = 2, stride_w = 2;
  int pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;  // padded cells are ignored (max) / not counted (avg)
};

struct Pad2D {
  int top = 0, bottom = 0, left = 0, right = 0;
};

// ---- Convolution: y[N,OH,OW,F] = act(sum_{i,j,c} xpad[n, oh*sh + i*dh, ow*sw + j*dw, c] * w[i,j,c,f] + b[f])
void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y, const Conv2DParams& p);
// dx = (=) gradient w.r.t. x; dw, db (+=). Any of dx, dw, db may be undefined.
void conv2d_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw, Tensor& db,
                     const Conv2DParams& p);

// ---- Pooling over windows of H and W. `workspace` is backend-private state that forward fills in training
// (e.g. argmax indices) for backward; pass an undefined tensor at inference.
void pool2d_forward(const Tensor& x, Tensor& y, Tensor& workspace, const Pool2DParams& p);
void pool2d_backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& workspace, Tensor& dx,
                     const Pool2DParams& p);

// ---- Batch normalisation over all axes but the last (C).
// Training: mean, var (C) receive the batch mean and BIASED variance; y = gamma*(x-mean)/sqrt(var+eps) + beta.
void batch_norm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y, Tensor& mean,
                                 Tensor& var, double eps);
void batch_norm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& mean,
                                  const Tensor& var, Tensor& y, double eps);
// Gradients of the training-mode forward, given the batch statistics it produced.
void batch_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& var,
                         const Tensor& dy, Tensor& dx, Tensor& dgamma, Tensor& dbeta, double eps);

// ---- Dense: x[M,K] (any leading dims flattened into M), w[K,U], b[U] -> y[M,U] = x @ w + b.
void dense_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y);
void dense_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw, Tensor& db);

// ---- Activations (softmax over the last axis). y may alias x. Backward takes the forward OUTPUT y (every
// supported activation's derivative is a function of y); dx may alias dy.
void activation_forward(Activation a, const Tensor& x, Tensor& y);
void activation_backward(Activation a, const Tensor& y, const Tensor& dy, Tensor& dx);

// ---- Inverted dropout: y = x * keep / (1 - rate), keep = philox(key, element index) >= rate, where
// key = dropout_key(seed, step) (src/core/philox.h) and `step` is the model's training-step counter (float64 [1] on
// the tensors' device, read by the op, so a captured CUDA graph gets a fresh mask every replay; undefined: step 0).
// Backward recomputes the same mask from (seed, step), so no mask is stored.
void dropout_forward(const Tensor& x, Tensor& y, double rate, std::uint64_t seed, const Tensor& step);
void dropout_backward(const Tensor& dy, Tensor& dx, double rate, std::uint64_t seed, const Tensor& step);

// ---- Zero padding of H and W: y[N, H+top+bottom, W+left+right, C].
void pad2d_forward(const Tensor& x, Tensor& y, const Pad2D& p);
void pad2d_backward(const Tensor& dy, Tensor& dx, const Pad2D& p);

// ---- Concatenation along `axis` (of the full tensor shape, batch included).
void concat_forward(const std::vector<Tensor>& xs, Tensor& y, int axis);
void concat_backward(const Tensor& dy, std::vector<Tensor>& dxs, int axis);

// ---- Elementwise helpers.
void fill(Tensor& x, double value);
void copy(const Tensor& src, Tensor& dst);               // same numel and dtype
// dst = src converted to dst's dtype (float32, float64, bfloat16; rounding to nearest even), same numel.
void cast(const Tensor& src, Tensor& dst);
void add_n(const std::vector<Tensor>& xs, Tensor& y);    // y = sum xs (same shapes)
void accumulate(const Tensor& src, Tensor& dst);         // dst += src
void scale_shift(const Tensor& x, Tensor& y, double scale, double shift);  // y = x*scale + shift
// moving = moving*momentum + value*(1-momentum)
void moving_average(Tensor& moving, const Tensor& value, double momentum);
// Converts a batch of any dtype to dst's dtype (uint8 images -> float32, labels -> int32), gathering rows `indices` of
// src's first dimension: dst[i] = src[indices[i]]. The indices come from the host, or as an int32 tensor on the
// tensors' device (so a training step on a GPU reads its batch from a data set resident there).
void gather_rows(const Tensor& src, const std::vector<std::int64_t>& indices, Tensor& dst);
void gather_rows(const Tensor& src, const Tensor& indices, Tensor& dst);

// ---- Image augmentation (Keras's ImageDataGenerator subset; contract and formulas in pipeline.h's Augmentation):
// random shifts with bilinear interpolation, fill "nearest" or "constant", then a random horizontal flip.
// x, y: float32 [n, H, W, C] (y must not alias x). Sample i draws its numbers from Philox at (seed, first + i).
struct AugmentParams {
  double width_shift_range = 0.0, height_shift_range = 0.0;
  bool horizontal_flip = false;
  bool fill_constant = false;  // fill_mode "constant" (else "nearest")
  double cval = 0.0;
};
void augment_images(const Tensor& x, Tensor& y, const AugmentParams& p, std::uint64_t seed, std::uint64_t first);

// ---- Losses. Each ADDS the sum over the batch of the per-sample losses to `total` (a float64 scalar, so an
// epoch's mean is exact), and writes the gradient of (grad_scale * that sum) w.r.t. its prediction input to
// `dpred` when defined. The caller picks grad_scale = 1/global batch for Keras's per-batch mean.
// Cross entropy from logits[N,C]; labels int32 [N] (sparse) or float [N,C] (categorical, one-hot or soft).
void softmax_cross_entropy(const Tensor& logits, const Tensor& labels, Tensor& total, Tensor& dlogits,
                           double grad_scale);
// Cross entropy from probabilities, clipped to [eps, 1-eps] before the log (Keras, eps = 1e-7).
void crossentropy_from_probabilities(const Tensor& probs, const Tensor& labels, Tensor& total, Tensor& dprobs,
                                     double grad_scale, double eps);
// Mean squared error per sample (mean over the non-batch axes); target has pred's shape.
void mean_squared_error(const Tensor& pred, const Tensor& target, Tensor& total, Tensor& dpred, double grad_scale);

// ---- Metrics: ADDS the count of rows whose argmax(pred) equals the label (int32 [N]) or argmax(labels[N,C])
// to `total` (float64 scalar).
void accuracy_count(const Tensor& pred, const Tensor& labels, Tensor& total);

// ---- Optimizer updates over flat parameter buffers (all of a model's trainable weights, one allocation).
// `iterations` (float64 [1] on w's device) counts the updates done before this one, as Keras's
// optimizer.iterations does; the op reads it, so a captured CUDA graph replays with the right step. It does not
// increment it (the model does, once per step, after every update).
struct AdamStep {
  double lr, beta_1, beta_2, epsilon;
};
// t = iterations + 1; lr_t = lr * sqrt(1 - beta_2^t) / (1 - beta_1^t);
// m += (g-m)(1-b1); v += (g*g-v)(1-b2); w -= lr_t * m / (sqrt(v) + eps)
void adam_update(Tensor& w, const Tensor& g, Tensor& m, Tensor& v, const AdamStep& s, const Tensor& iterations);
// Keras SGD: velocity = momentum*velocity - lr*g; w += velocity (nesterov: w += momentum*velocity - lr*g).
// momentum 0: w -= lr*g (velocity unused, may be undefined).
void sgd_update(Tensor& w, const Tensor& g, Tensor& velocity, double lr, double momentum, bool nesterov);
// Keras RMSprop: ms = rho*ms + (1-rho)*g^2; step = lr*g/(sqrt(ms)+eps);
// momentum > 0: mom = momentum*mom + step, w -= mom; else w -= step.
void rmsprop_update(Tensor& w, const Tensor& g, Tensor& ms, Tensor& mom, double lr, double rho, double momentum,
                    double epsilon);

}  // namespace ops
}  // namespace systolic
