// The op interface: the one list of systolic's ops (SYSTOLIC_OPS below) and their contract. From the list come
// the entry points ops::<name>(...) declared here, the op tags (ops::Op), every backend's table and the
// dispatch (src/ops/backend.h, src/ops/ops.cc).
//
// A call of ops::<name> checks its arguments once, for every backend (src/ops/ops.cc: shapes, dtypes, that its
// tensors share one device; every Tensor is contiguous by construction), then asks the backend of that device
// whether it runs the op on the call's dtype (ops::supports) and calls it. An unsupported op or dtype raises
// Error naming the op, the dtype and the device; nothing falls back to another device.
//
// Conventions (every op):
// - Layout NHWC; kernels (KH, KW, C, F) as Keras stores them; dense weights (K, U).
// - Outputs are preallocated by the caller with the shapes stated below.
// - Backward ops write input gradients (=) and ACCUMULATE parameter gradients (+=), so a shared layer or a
//   replica can sum into one buffer. An undefined (default-constructed) gradient argument is skipped.
// - The data dtype is float32 or bfloat16 (mixed precision: parameters and their gradients may then stay
//   float32); the CPU backend also runs float64 (its loops), so gradients can be checked by finite differences
//   in double precision and every backend is tested against float64 (tests/test_ops.cc).
//
// Adding an op: one entry in SYSTOLIC_OPS, its checks in src/ops/ops.cc, its CPU implementation (src/ops/cpu/)
// and its CUDA implementation (src/ops/cuda/), one case in tests/test_ops.cc. docs/architecture.md says more.
#pragma once

#include <systolic/tensor.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace systolic {

// Every Keras activation systolic runs (keras.activations, Keras 3's formulas):
//   X(kind, the name systolic writes, another name it reads or "")
// silu is written "swish", which tf.keras and Keras 3 both read (Keras 3 itself writes "silu").
// An activation is elementwise unless it is `softmax` or `log_softmax` (over the last axis).
// clang-format off
#define SYSTOLIC_ACTIVATIONS(X)         \
  X(linear,         "linear",       "") \
  X(relu,           "relu",         "") \
  X(relu6,          "relu6",        "") \
  X(leaky_relu,     "leaky_relu",   "") \
  X(sigmoid,        "sigmoid",      "") \
  X(tanh,           "tanh",         "") \
  X(softmax,        "softmax",      "") \
  X(log_softmax,    "log_softmax",  "") \
  X(elu,            "elu",          "") \
  X(selu,           "selu",         "") \
  X(celu,           "celu",         "") \
  X(gelu,           "gelu",         "") \
  X(silu,           "swish",        "silu") \
  X(mish,           "mish",         "") \
  X(softplus,       "softplus",     "") \
  X(softsign,       "softsign",     "") \
  X(exponential,    "exponential",  "") \
  X(hard_sigmoid,   "hard_sigmoid", "") \
  X(hard_silu,      "hard_silu",    "hard_swish") \
  X(hard_tanh,      "hard_tanh",    "") \
  X(log_sigmoid,    "log_sigmoid",  "") \
  X(tanh_shrink,    "tanh_shrink",  "") \
  X(soft_shrink,    "soft_shrink",  "") \
  X(hard_shrink,    "hard_shrink",  "") \
  X(squareplus,     "squareplus",   "") \
  X(sparse_plus,    "sparse_plus",  "") \
  X(sparse_sigmoid, "sparse_sigmoid", "")
// clang-format on

// An activation and its parameters (Keras's defaults for its kind unless set). Activation::relu and the other
// kinds convert to an Activation with the defaults, so `Activation a = Activation::gelu;` works and
// `a == Activation::relu` holds only for plain relu. Formulas: src/ops/activation_math.h.
struct Activation {
  enum Kind : int {
#define SYSTOLIC_ACTIVATION_KIND(kind, name, alias) kind,
    SYSTOLIC_ACTIVATIONS(SYSTOLIC_ACTIVATION_KIND)
#undef SYSTOLIC_ACTIVATION_KIND
  };
  Kind kind = linear;
  // relu, leaky_relu: negative_slope (leaky_relu: 0.2); elu, celu: alpha (1); soft_shrink, hard_shrink:
  // threshold (0.5); squareplus: b (4).
  double alpha = 0;
  double max_value = INFINITY;  // relu only (+inf: no maximum)
  double threshold = 0;         // relu only
  bool approximate = false;     // gelu: the tanh approximation instead of erf

  Activation(Kind k = linear);  // NOLINT: implicit, as the kinds are used as values
  bool operator==(const Activation&) const = default;
  // Whether backward reads the forward input x (else only the output y): src/ops/activation_math.h.
  bool backward_needs_input() const;
  // softmax and log_softmax: over the last axis; every other activation is elementwise.
  bool over_last_axis() const {
    return kind == softmax || kind == log_softmax;
  }
};

// Keras names (and aliases: swish, hard_swish) to activations with default parameters; throws Error naming an
// unknown name and listing the known ones.
Activation activation_from_name(const std::string& name);
// The Keras name of the kind ("relu" also for relu with parameters).
std::string activation_name(const Activation& a);

namespace ops {

struct Conv2DParams {
  int stride_h = 1, stride_w = 1;
  int dilation_h = 1, dilation_w = 1;
  int pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  // Grouped convolution (Keras's Conv2D groups; DepthwiseConv2D is groups = C): C and F split into `groups`
  // equal parts, output channel f reads only the input channels of its group, f / (F/groups).
  int groups = 1;
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
  // Padded cells are ignored (max) or not counted (average).
  int pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
};

struct Pad2D {
  int top = 0, bottom = 0, left = 0, right = 0;
};

// Image augmentation (Keras's ImageDataGenerator subset; contract and formulas in pipeline.h's Augmentation).
struct AugmentParams {
  double width_shift_range = 0.0, height_shift_range = 0.0;
  bool horizontal_flip = false;
  bool fill_constant = false;  // fill_mode "constant" (else "nearest")
  double cval = 0.0;
};

// conv area: how resize2d interpolates (tf.image.resize without antialias, half-pixel centres, as Keras 3's
// UpSampling2D and Resizing compute).
enum class Interpolation { nearest, bilinear };

// elementwise_loss: Keras's losses whose per-sample value is a mean (or, for kl_divergence, a sum) over the last
// axis of an element function of (prediction, target), then a mean over the other non-batch axes.
enum class ElementLoss {
  squared_error,              // (p - t)^2
  absolute_error,             // |p - t|
  absolute_percentage_error,  // 100 |p - t| / max(|t|, eps)
  squared_logarithmic_error,  // (log(max(p, eps) + 1) - log(max(t, eps) + 1))^2
  huber,                      // e = p - t: 0.5 e^2 where |e| <= delta, else delta |e| - 0.5 delta^2
  log_cosh,                   // e + softplus(-2e) - log 2
  poisson,                    // p - t log(p + eps)
  hinge,                      // max(1 - t p, 0); 0/1 targets (all of the batch's) taken as -1/1
  squared_hinge,              // max(1 - t p, 0)^2, targets as hinge's
  kl_divergence,  // t' log(t' / p'), t' = clip(t, eps, 1), p' = clip(p, eps, 1); summed over the last axis
  binary_crossentropy,        // -(t log p' + (1-t) log(1-p')), p' = clip(p, eps, 1-eps); from logits z:
                              // max(z, 0) - z t + log(1 + exp(-|z|))
  binary_focal_crossentropy,  // w (1 - p_t)^gamma bce, p_t = t p + (1-t)(1-p), w = t alpha + (1-t)(1-alpha) with
  // class balancing, else 1; bce binary_crossentropy's (from the logits when given them)
  binary_accuracy,  // 1 where t == (p > threshold), else 0 (a metric: no gradient, dpred gets 0)
};
struct ElementLossParams {
  ElementLoss kind = ElementLoss::squared_error;
  bool from_logits = false;      // the binary crossentropies: predictions are logits z, p = sigmoid(z)
  double label_smoothing = 0.0;  // the binary crossentropies: t = t (1 - s) + s / 2
  double delta = 1.0;            // huber
  double alpha = 0.25, gamma = 2.0;
  bool class_balancing = false;  // binary_focal_crossentropy
  double threshold = 0.5;        // binary_accuracy
  double epsilon = 1e-7;         // keras.backend.epsilon()
};

// confusion_counts's thresholds and what it reads. The thresholds: `values` when given (thresholds = their count, in
// any order: Keras's AUC(thresholds=[...]) and Precision's or Recall's lists that are not evenly spaced), else
// `thresholds` of them spaced evenly as Keras's AUC makes them (-epsilon, 1/(T-1), 2/(T-1), ..., (T-2)/(T-1),
// 1+epsilon, epsilon = 1e-7; with exact_ends, 0 and 1 at the ends, as Keras's PrecisionAtRecall and its kin make
// them), or, for thresholds = 1, `threshold` alone (Precision's and Recall's); thresholds and predictions are compared in the predictions' compute type (float32 for
// bfloat16), as Keras compares them in float32.
struct ConfusionParams {
  std::int64_t thresholds = 1;
  double threshold = 0.5;
  std::int64_t class_id = -1;  // >= 0: that column of [N, classes] only (Keras's class_id)
  bool from_logits = false;    // predictions are logits: sigmoid first (AUC's from_logits)
  bool clip = false;  // predictions clipped to [0, 1] first (Keras's AUC on evenly spaced thresholds)
  bool exact_ends = false;
  // > 0: a prediction outside its row's top_k (the largest, ties to the lower index, as tf.math.top_k) counts as
  // -1e10 (Keras's Precision and Recall top_k), before class_id picks a column.
  std::int64_t top_k = 0;
  // Explicit thresholds (the caller keeps them alive during the call), or empty.
  std::span<const double> values;
};

// class_confusion's classes (Keras's IoU metrics): an item's predicted class is the argmax of the predictions' last
// axis (its first maximum: argmax_predictions), 1 where the prediction >= threshold (thresholded, compared in the
// predictions' compute type) and 0 elsewhere, or else its value; its label's class the argmax of the labels' last
// axis (argmax_labels), or else its value (int32, or a float). A value v is class trunc(v) when 0 <= v < classes;
// an item whose label or prediction is outside that, or whose label is ignore_class (when has_ignore_class), counts
// nowhere (Keras's bounds mask).
struct ClassConfusionParams {
  std::int64_t classes = 2;
  bool argmax_predictions = false;
  bool argmax_labels = false;
  bool thresholded = false;
  double threshold = 0.5;
  bool has_ignore_class = false;
  std::int64_t ignore_class = 0;
  // Sample weights cast to Keras's integer dtype (the IoU metrics' int64): each truncated toward 0 (1.7 counts 1).
  bool integer_weights = false;
};

// f_score_counts's rule for a positive prediction (Keras's FBetaScore threshold): `argmax` (threshold None): a
// maximum of its row (every tied maximum) whose |p| > 1e-9 (a row of zeros has none); else p > threshold. Compared
// in the predictions' compute type (float32 for bfloat16), as Keras compares them in float32.
struct FScoreParams {
  bool argmax = true;
  double threshold = 0.5;
};

struct AdamStep {
  double beta_1, beta_2, epsilon;
};
// adafactor_update's constants (Keras's Adafactor epsilon_1, epsilon_2, clip_threshold).
struct AdafactorStep {
  double epsilon_1 = 1e-30, epsilon_2 = 1e-3, clip_threshold = 1.0;
};
// muon_update's constants (Keras's Muon): the Newton-Schulz coefficients a, b, c and steps, the momentum, Nesterov's,
// and rms_rate (scaled = false: Keras's None, the update not scaled by sqrt(max(R, C)) rms_rate).
struct MuonStep {
  double a = 3.4445, b = -4.7750, c = 2.0315;
  int steps = 5;
  double momentum = 0.95;
  bool nesterov = true;
  bool scaled = true;
  double rms_rate = 0.2;
};
// optimizer_update's rule and constants: defined with the rules' formulas in src/ops/optimizer_math.h, where a new
// rule is added without touching this header.
enum class UpdateRule : int;
struct UpdateParams;

// augment (branch augment): the noise and image-augmentation layers' ops.
// Gaussian noise (GaussianNoise: additive, y = x + stddev*z; GaussianDropout: multiplicative, y = x*(1 + stddev*z)).
struct NoiseParams {
  double stddev = 0.0;
  bool multiplicative = false;
};
// What random_image_transforms draws per image, in Keras's layers' terms (their factors already as (lower, upper)).
enum class ImageTransformKind { flip, translation, rotation, zoom, crop };
struct ImageTransformParams {
  ImageTransformKind kind = ImageTransformKind::flip;
  // flip: which axes (one draw flips both in horizontal_and_vertical, as Keras 3 does)
  bool horizontal = false, vertical = false;
  // translation: height (0) and width (1) factors, fractions of H and W; rotation: factor (0), fractions of 360
  // degrees; zoom: height (0) and width (1) factors, zoom = 1 + factor.
  double lower0 = 0, upper0 = 0, lower1 = 0, upper1 = 0;
  bool same_zoom = false;               // zoom without width_factor: the width zoom is the height zoom
  std::int64_t crop_h = 0, crop_w = 0;  // crop: the output size
  bool crop_center = false;             // crop: Keras's centred window (no draw), as at inference
};
enum class FillMode { reflect, wrap, constant, nearest };
struct AffineTransformParams {
  FillMode fill_mode = FillMode::reflect;
  Interpolation interpolation = Interpolation::bilinear;
  double fill_value = 0.0;
};
struct ContrastParams {
  double lower = 1.0, upper = 1.0;            // the factor's range
  double value_min = 0.0, value_max = 255.0;  // the output is clipped to it
};

// The replicas of a synchronised training step (a strategy's sync_batch_norm; Keras's BatchNormalization(
// synchronized=True), whose ops.moments(synchronized=True) sums over replicas): all_reduce sums a float64 tensor
// on the tensors' device over every replica of the step, in place. Every replica calls the same ops in the same
// order. Ops take a null pointer when the batch is this replica's alone.
struct CrossReplica {
  std::function<void(Tensor&)> all_reduce;
};

// norm: the normalisations over sets of axes (layer_norm_*), the broadcasting elementwise binary ops
// (broadcast_*), the per-value normalisation by given statistics (normalize_*), transposes.
// LayerNormalization (Keras 3): layer; its deprecated rms_scaling: rms_scaling; UnitNormalization: unit.
// attention_forward and attention_backward (MultiHeadAttention, GroupedQueryAttention): which keys a query sees,
// the scale of the scores and the dropout of the probabilities.
// How attention_forward scores a query against a key: their dot product (Luong's, MultiHeadAttention's), or
// Bahdanau's additive score, sum_d w[d] tanh(q[d] + k[d]) (Keras's AdditiveAttention and Attention's "concat").
enum class AttentionScore { dot, additive };
struct AttentionParams {
  double scale = 1.0;  // scores = scale * (q . k), or scale * sum_d w[d] tanh(q[d] + k[d])
  AttentionScore score = AttentionScore::dot;
  bool causal = false;      // query t sees key s only when s <= t (Keras's use_causal_mask)
  std::int64_t window = 0;  // > 0: query t sees key s only when |t - s| < window (Keras's sliding_window)
  // A query row with no key kept: probabilities 1/S over every key (Keras's fused dot_product_attention, which
  // MultiHeadAttention runs without dropout), rather than 0 (its masked Softmax). No gradient reaches its scores.
  bool empty_rows_uniform = false;
  double dropout = 0.0;    // the rate of dropout on the probabilities (in training; 0: none)
  std::uint64_t seed = 0;  // dropout's: masks keyed by (seed, step) as ops::dropout_forward's
};
enum class NormKind { layer, rms_scaling, unit };
// Keras's merge layers and LayerScale, with NumPy broadcasting.
enum class BinaryKind { add, subtract, multiply, maximum, minimum, divide };
// regul: the parameters of ops::constrain (Keras's constraints; include/systolic/regularizers.h).
struct ConstraintParams {
  enum Kind : int { max_norm, non_neg, unit_norm, min_max_norm };
  Kind kind = max_norm;
  double min_value = 0, max_value = 0, rate = 1;
  std::uint32_t axes = 1;  // bit a set: the norms are taken over axis a of w (non_neg ignores it)
};

// ---- The ops' contracts, in the list's order.
//
// conv2d_forward    y[N,OH,OW,F] = act(b[f] + sum_{i,j,c} xpad[n, oh*sh + i*dh, ow*sw + j*dw, g*Cg + c]
//                   * w[i,j,c,f]); x (N,H,W,C), w (KH,KW,Cg,F) with G = p.groups dividing C and F, Cg = C/G,
//                   c < Cg and g = f / (F/G) (G = 1: w (KH,KW,C,F), a plain convolution); b (F) or undefined;
//                   act linear or relu.
// conv2d_backward   dx (=), dw, db (+=) of the linear convolution; any of them may be undefined. x may be
//                   undefined when dw is (dx then gives x's shape): Conv2DTranspose's forward is this dx.
// pool2d_forward    max or average over windows of H and W. `workspace` is backend-private state forward fills in
//                   training (argmax indices) for backward; undefined at inference.
// pool2d_backward   dx (=) from dy (and x, y, and the workspace when forward filled one).
// batch_norm_forward_training   over all axes but the last (C): mean, var (C) receive the batch mean and BIASED
//                   variance; y = gamma*(x-mean)/sqrt(var+eps) + beta. With replicas, the batch is every
//                   replica's rows: two all-reduces (the sums of x and the count, then the centred squares).
// batch_norm_forward_inference  the same y with the given mean and var. In the three batch-norm ops an undefined
//                   gamma is 1 and an undefined beta 0 (Keras's scale=False, center=False).
// batch_norm_backward  gradients of the training forward given the statistics it produced: dx (=), dgamma,
//                   dbeta (+=); any of them may be undefined. With replicas, dx is that of the whole batch's loss:
//                   dx = gamma*inv*(dy - B/N - xhat*A/N) with A = sum dy*xhat, B = sum dy and N over every
//                   replica (one all-reduce), while dgamma, dbeta get this replica's sums (the strategy sums
//                   gradients over replicas). Every replica calls it, also one whose dx is undefined.
// dense_forward     x[M,K] (leading dims flattened into M), w[K,U], b[U] -> y[M,U] = x @ w + b.
// dense_backward    dx (=), dw, db (+=).
// activation_forward   y = act(x) (softmax and log_softmax over the last axis); y may alias x.
// activation_backward  dx = dy * act'(x), from the forward input x and output y; x may be undefined when the
//                   activation's gradient is a function of y alone (!a.backward_needs_input()); dx may alias dy.
// dropout_forward   inverted dropout: y = x * keep / (1 - rate), keep = philox(key, element index) >= rate, where
//                   key = dropout_key(seed, step) (src/core/philox.h) and `step` is the model's training-step
//                   counter (float64 [1] on the tensors' device, read by the op, so a captured CUDA graph gets a
//                   fresh mask every replay; undefined: step 0).
// dropout_backward  the same mask recomputed from (seed, step), applied to dy; no mask is stored.
// pad2d_forward     zero padding of H and W: y[N, H+top+bottom, W+left+right, C].
// pad2d_backward    dx = the window of dy that forward filled from x.
// concat_forward    concatenation along `axis` (of the full shape, batch included).
// concat_backward   each defined dxs[k] (=) gets its part of dy; an undefined one is skipped.
// fill              x[:] = value (any dtype, rounded as Tensor::fill rounds).
// copy              dst = src (same numel and dtype).
// cast              dst = src converted to dst's dtype, same numel: between float32, float64 and bfloat16 (to
//                   nearest even); from those to int32 truncated toward zero, as Keras casts ids (a value that is
//                   not finite or outside int32's range becomes INT32_MIN, as x86's conversion gives).
// add_n             y = sum xs (same shapes, at least one; y may alias xs[0]).
// accumulate        dst += src.
// scale_shift       y = x*scale + shift.
// moving_average    moving = moving*momentum + value*(1-momentum).
// gather_rows       dst[i] = src[indices[i]] over src's first dimension, converted to dst's dtype (uint8 images
//                   -> float32, labels -> int32); indices int32 on the tensors' device (a training step on a GPU
//                   reads its batch from a data set resident there). A host overload follows the list. A row index
//                   out of range: the CPU throws, CUDA writes zeros and reports it at the next synchronisation,
//                   XLA writes NaN rows (float dst; its gather would clamp the index).
// compute_mask      mask[r] = 1 where row r of x [R, C] holds a value other than `value` (compared in x's dtype),
//                   else 0; mask [R] in x's dtype (Keras's Masking; Embedding's mask_zero with C = 1).
// rnn_cell_forward  x_part [N, G*u]: the step's input product x W (+ the input bias); h_part [N, G*u]: the state's
//                   product h_prev W_r (gru: + the recurrent bias); h_prev, c_prev [N, u] (c_prev: lstm only). Writes
//                   h [N, u], c [N, u] (lstm) and z [N, G*u], the gates' pre-activations that backward reads. mask [N]
//                   (undefined: every row runs): a row whose mask is 0 keeps h_prev and c_prev (z: zeros).
// rnn_cell_backward dh [N, u]: the gradient w.r.t. h; dc [N, u] (lstm; undefined: zeros) w.r.t. c from the next
//                   step. Writes (=) dx_part [N, G*u] w.r.t. x_part; dh_part [N, G*u] w.r.t. h_part (undefined:
//                   not written; gru needs it; the others' equals dx_part); dh_prev [N, u], the gradient that reaches h_prev other than through
//                   h_part (gru: through z * h_prev; a masked row: dh); dc_prev [N, u] (lstm). Reads h_part and h_prev
//                   (gru), c_prev and c (lstm), and z.
// rnn_sequence_forward  the whole recurrence of a cell, as one op (oneDNN's RNN primitives on the CPU): x [T, N, F]
//                   time-major; kernel [F, G*u], recurrent [u, G*u] and bias ([G*u]; gru with reset_after: [2, G*u],
//                   the input's then the recurrent product's; undefined: none) as Keras stores them; h0, c0 [N, u]
//                   (c0: lstm; undefined: zeros). reverse: the steps run from t = T-1 down (go_backwards). Writes
//                   y [T, N, u], the state after time t's step, in time order, and h_last, c_last [N, u] (undefined:
//                   not wanted), the states after the last step run. workspace: undefined at inference; in
//                   training, backend-private state forward fills (grown as needed) for backward. No masks or
//                   dropout, and only Keras's default activations (RnnCellParams' defaults; simple: tanh, relu or
//                   sigmoid); a backend without the op (no dtypes) leaves the caller to run rnn_cell_forward's steps.
// rnn_sequence_backward  from dy [T, N, u] (time order; undefined: zeros), dh_last and dc_last (undefined: zeros),
//                   writes dx (=), dh0, dc0 (=) and adds to dkernel, drecurrent, dbias (+=); any may be undefined
//                   (not computed). Reads forward's arguments, its y, and its workspace (undefined or not filled by a
//                   training forward: the backend recomputes what it needs).
// scatter_add_rows  dst[indices[i]] += src[i] over dst's first dimension (Embedding's gradient): src [n, row...]
//                   in float32, bfloat16 or float64 added in dst's float32 or float64; repeated indices add up.
//                   A row index out of range: the CPU throws, CUDA skips it and reports it, XLA skips it.
// augment_images    random shifts with bilinear interpolation, fill "nearest" or "constant", then a random
//                   horizontal flip. x, y: float32 [n, H, W, C] (y must not overlap x). Sample i draws its numbers
//                   from Philox at (seed, first + i).
// rnn: one step of a recurrent cell (Keras's SimpleRNNCell, LSTMCell with implementation 2, GRUCell with
// reset_after) for every row of the batch; the formulas are in src/ops/rnn_math.h. u: the units; G: the gates
// (simple 1; lstm 4: i, f, c, o; gru 3: z, r, h), each a block of u columns, in Keras's order.
enum class RnnCell { simple, lstm, gru };
struct RnnCellParams {
  RnnCell cell = RnnCell::lstm;
  Activation activation = Activation::tanh;
  Activation recurrent_activation = Activation::sigmoid;  // lstm and gru
  // gru: false is Keras's reset_after=False, whose candidate reads (r * h_prev) @ U_h: h_part's h block is that
  // product, which the caller computes, so the cell does not multiply it by r, and writes zeros for the r blocks of
  // dx_part and dh_part (the caller adds r's gradient, which passes through that product).
  bool reset_after = true;
};
// row_loss: Keras's losses whose value for a row (the last axis) needs the whole row; the formulas, and their
// gradients, are in src/ops/row_loss_math.h.
enum class RowLoss {
  cosine_similarity,               // -sum(t' p'), t' and p' each times min(rsqrt(sum of its squares), 1/eps)
  categorical_hinge,               // max(max((1 - t) p) - sum(t p) + 1, 0)
  categorical_focal_crossentropy,  // sum(-alpha (1 - o)^gamma t log o), o = clip(p / sum(p), eps, 1 - eps); t smoothed
};
struct RowLossParams {
  RowLoss kind = RowLoss::cosine_similarity;
  bool from_logits = false;          // categorical_focal_crossentropy: predictions are logits, p = softmax(z)
  double label_smoothing = 0.0;      // categorical_focal_crossentropy: t = t (1 - s) + s / classes
  double alpha = 0.25, gamma = 2.0;  // categorical_focal_crossentropy
  double epsilon = 1e-7;             // keras.backend.epsilon()
};

// Losses ADD the sum over the batch of the per-sample losses to `total` (a float64 scalar, so an epoch's mean is
// exact) and write the gradient of (grad_scale * that sum) w.r.t. their prediction input to the gradient
// argument when it is defined (the caller picks grad_scale = 1/global batch for Keras's per-batch mean). A sample's
// loss is the mean over its rows (predictions [N, T, C] are T rows of C per sample), as Keras's sum_over_batch_size
// means its [N, T] losses. With `weights` (Keras's sample_weight: one per sample [N], or one per row of the loss's
// values [N, ...] (predictions' shape without the last axis), as ops::mask_weights writes them; float32, float64
// for float64 predictions) each row's loss counts its weight in the sum and in its gradient; undefined weights
// count 1:
// softmax_cross_entropy  cross entropy from logits[N, ..., C]; labels int32 (one per row) (sparse) or float like
//                   the logits (categorical).
// crossentropy_from_probabilities  Keras's from probabilities p[N, ..., C] (eps: Keras's 1e-7): categorical labels y,
//                   -sum y log clip(p / sum p, eps, 1-eps) (the row normalised, then clipped); a sparse label k,
//                   log(sum c) - log c[k] with c = clip(p, eps, 1-eps) (clipped, then normalised by the softmax
//                   of log c). The two agree for rows that sum to 1 and are not clipped.
// ignore_class      Keras's SparseCategoricalCrossentropy(ignore_class) as weights for the losses above: labels
//                   int32 (one per row); writes `kept` (int32, labels' shape: the label, 0 where it is `ignore`) and
//                   `kept_weights` (labels' shape, float32 or float64, weights' dtype when defined): 0 where the
//                   label is `ignore` or `mask` (undefined, or one value per label, any floating dtype: the output's
//                   Keras mask) is 0, else the label's weight (weights: one per sample or per label; 1 undefined)
//                   times the count of labels / the count kept (0 when none is). A loss of kept with kept_weights is
//                   Keras's masked mean: over the kept labels only.
// mask_weights      Keras's apply_mask: out (mask's element count, float32 or float64: weights' dtype when defined)
//                   is 0 where mask (the output's Keras mask [N, ...], any floating dtype) is 0, else the weight
//                   (weights: one per sample or one per mask value; 1 undefined), with `normalize` (a loss's
//                   sum_over_batch_size) times the count of mask values / the count that are not 0 (0 when none is):
//                   a loss weighted by it means over the unmasked values alone; without it (a metric's), as it is.
// elementwise_loss  ElementLoss's kinds (formulas there): per sample, the element function's mean (kl_divergence:
//                   sum) over the last axis, averaged over the other non-batch axes (Keras's sum_over_batch_size of
//                   its [N, ...] losses, times N); target has pred's numel. The gradient is TensorFlow's of the
//                   same formula (a clip or maximum passes it where its input is selected, at ties too).
// row_loss          RowLoss's kinds (formulas there): per sample, the row function's mean over the rows (the
//                   last axis) of the sample; target has pred's shape.
// accuracy_count    ADDS to `total` (float64 scalar) over the samples the share of each sample's rows whose label
//                   (int32, one per row, or the argmax of labels [N, ..., C]: its first maximum) is predicted:
//                   k = 1, argmax(pred) (its first maximum) is the label; k > 1, the label is in the top k
//                   (TensorFlow's in_top_k: fewer than k predictions of the row are greater than the label's, so
//                   ties at the boundary count as in). An int32 label outside [0, C) is no error: its row is a miss
//                   (as Keras's sparse accuracies count a label of a loss's ignore_class, and in_top_k an
//                   out-of-range target). With `weights` (as the losses') each row counts its weight.
// add_sum           ADDS to `total` (float64 [1]) the sum of x's values (float32 or float64): the sample weights'
//                   sum, a weighted metric's denominator.
// confusion_counts  ADDS to counts (float64 [4, T]) the confusion matrix of every prediction against its label
//                   (labels with pred's numel; non-zero is positive), at each threshold t (ConfusionParams): a
//                   prediction p is positive when p > threshold[t]; rows tp, fp, tn, fn (Keras's
//                   update_confusion_matrix_variables). With `weights` (the losses' sample weights) each prediction
//                   counts its sample's weight, else 1.
// regression_sums   ADDS to sums (float64 [4, C]) per column c of pred [N, C] (C its last axis, N the other
//                   elements over C) and target (pred's numel): the sums of w t, of w t * t and of w (t - p)^2, w
//                   each row's sample's weight with `weights` (the losses' sample weights) or else 1, and the
//                   count of rows N, unweighted (Keras's R2Score state: sum, squared_sum, total_mse, and
//                   num_samples; its count, the weights' sum, is the model's).
// class_confusion   ADDS to counts (float64 [classes, classes]) the confusion matrix of class predictions against
//                   class labels (ClassConfusionParams): one item per row of the predictions' last axis with
//                   argmax_predictions, else per element, and as many label items; counts[label, prediction] += 1,
//                   or with `weights` (the losses' sample weights) the item's sample's weight (Keras's total_cm).
// f_score_counts    ADDS to counts (float64 [4, C]) per class c of pred [N, C] (C its last axis, N the other
//                   elements over C) and labels (pred's numel; their values as they are: 0/1, or smoothed), with
//                   q = 1 for a positive prediction (FScoreParams), else 0: the sums over the rows of q * t (true
//                   positives), q * (1 - t) (false positives), (1 - q) * t (false negatives) and t (the support),
//                   each times its row's sample's weight with `weights` (Keras's FBetaScore state per class).
// Optimizer updates over flat parameter buffers (a model's trainable weights, one allocation). `lr` (float64 [1] on
// w's device) is the learning rate of this update and `iterations` (float64 [1] on w's device, or undefined: 0)
// counts the updates done before this one, as Keras's optimizer.iterations does; the ops read both there (so a
// step captured as a CUDA graph replays with the rate and step of the moment, which the optimizer writes between
// steps) and change neither:
// adam_update       t = iterations + 1; lr_t = lr * sqrt(1 - beta_2^t) / (1 - beta_1^t);
//                   m += (g-m)(1-b1); v += (g*g-v)(1-b2); w -= lr_t * m / (sqrt(v) + eps)
// sgd_update        Keras SGD: velocity = momentum*velocity - lr*g; w += velocity (nesterov: w += momentum*velocity
//                   - lr*g). momentum 0: w -= lr*g (velocity unused, may be undefined).
// decay_weights     Keras 3's weight decay (any optimizer's weight_decay, AdamW's), applied before the update:
//                   w = w - w * decay * lr, in w's type.
// rmsprop_update    Keras RMSprop: ms = rho*ms + (1-rho)*g^2; step = lr*g/sqrt(ms + eps);
//                   momentum > 0: mom = momentum*mom + step, w -= mom; else w -= step.
// clip_gradients    Keras's gradient clipping (an optimizer's clipnorm, global_clipnorm, clipvalue), in place:
//                   by_norm: g *= limit / max(||g||, limit) (||g|| the L2 norm of all of g, summed in double;
//                   NaN when it is not finite); else g = clip(g, -limit, limit).
// optimizer_update  the update rules of src/ops/optimizer_math.h (Adam with amsgrad, Adamax, Nadam, Adagrad,
//                   Adadelta, Lion, Ftrl): w and the rule's slots s0, s1, s2 (update::slot_count of them; the others
//                   may be undefined) from g and `step`, float64 [update::kStepValues] on w's device, the values of
//                   this step that the optimizer computed on the host (update::step_values: the rate, bias
//                   corrections), read there as `lr` is; computed in double on the CPU and CUDA, in the data's
//                   type on XLA.
// adafactor_update  Keras's Adafactor step of one variable (src/ops/optimizer_math.h's adafactor formulas): w, g and
//                   the second moment v of shape [B, R, C] with its factors r [B, R] and c [B, C] (factored: a
//                   variable's last two axes R and C, B the others), or of any shape with r and c undefined
//                   (a variable of rank < 2). step: float64 [2] on w's device, rho and beta of this step
//                   (adafactor::step_values), read there as `lr` is. The sums of squares of w and u in double.
// muon_update       Keras's Muon step of one matrix w [R, C] (muon::newton_schulz in src/ops/optimizer_math.h):
//                   m += g + m (momentum - 1); x = g + momentum m (nesterov) or m; X = x (transposed when R > C)
//                   / (||x||_F + 1e-7); `steps` times: A = X X^T, X = a X + (b A + c A A) X; w -= lr X (X as x was)
//                   sqrt(max(R, C)) rms_rate (not `scaled`: w -= lr X). lr: float64 [1] on w's device. In double
//                   on CUDA and for float64 data on the CPU; float32 data's iterations on the CPU in float32 (oneDNN's
//                   products, as Keras computes a float32 variable's); in float64 on XLA.
// attention (MultiHeadAttention, GroupedQueryAttention): scaled dot-product attention of every head, on Keras's
// projected layouts (an EinsumDense's outputs; no transposes):
// attention_forward  q [B, T, H, D], k [B, S, G, D], v [B, S, G, E] (G key/value heads, H a multiple of G: query
//                   head h reads key/value head h / (H / G)); scores[b,h,t,s] = scale * (q[b,t,h] . k[b,s,g]),
//                   or with p.score additive scale * sum_d w[d] tanh(q[b,t,h,d] + k[b,s,g,d]), w = score_weights
//                   ([D], or [1]: one for every d; undefined: 1; additive only; q's dtype); key
//                   s is kept for query t where every given mask keeps it: query_mask [B, T], key_mask [B, S] and
//                   attention_mask [B, T, S] (non-zero keeps; Keras's masks and attention_mask), p.causal (s <= t)
//                   and p.window (|t - s| < window). probs [B, H, T, S] (written, for backward) = the softmax of a
//                   row's kept scores, 0 at the others; a row with none kept all 0 (Keras's masked Softmax:
//                   -1e9 there, then zeroed), or 1/S with p.empty_rows_uniform (its fused attention). y [B, T, H, E] = sum_s d[b,h,t,s] v[b,s,g], d = probs after dropout
//                   (p.dropout > 0: element i of probs kept, times 1/(1 - rate), as ops::dropout_forward keeps
//                   element i for the key dropout_key(p.seed, step)). Masks of any floating dtype.
// attention_backward dq, dk, dv (=; undefined: skipped) from forward's arguments, its probs and dy [B, T, H, E],
//                   and dprobs [B, H, T, S] (undefined: none): a gradient of the probabilities themselves (before
//                   dropout; Keras's return_attention_scores), added to the one that reaches them through y. A
//                   score that no mask keeps gets no gradient. dscore_weights (=; undefined: skipped): the
//                   additive score's w's gradient, w's shape.
// norm (LayerNormalization, UnitNormalization, LayerScale, the merges, Normalization, Permute):
// layer_norm_forward  over the axes of x in the set `axes` (bit a: axis a of x, any of them; a row is one index
//                   of the other axes, its K values one of each combination of the set's indices, row-major over
//                   the set's axes in ascending order; M rows): Keras 3's ops.layer_normalization. layer: mean,
//                   var (biased) of the row; rstd = 1/sqrt(var + eps); y = (x - mean)*rstd*gamma + beta.
//                   rms_scaling (Keras's deprecated option): y = x*rstd*gamma (rstd from the centred variance, x
//                   not centred; no beta). unit (UnitNormalization, Keras's ops.normalize with epsilon 1e-12):
//                   rstd = min(1/sqrt(sum x^2), 1e12), y = x*rstd (no gamma, beta, eps). gamma, beta: K values
//                   in the columns' order (Keras's parameters reshaped to the set's dims; undefined: 1 and 0);
//                   mean, rstd: [M] float32 (float64 with float64 data), written for backward.
// layer_norm_backward  dx (=), dgamma, dbeta (+=) from x, gamma and the statistics forward wrote.
// broadcast_forward  y = a (op) b with NumPy broadcasting (shapes aligned on the right, each dim equal or 1); y
//                   has the broadcast shape. add, subtract, multiply, maximum, minimum, divide (a / b).
// broadcast_backward  da, db (=, each summed over the axes it was broadcast along; undefined: skipped). maximum
//                   sends dy to a where a >= b, else to b; minimum to a where a <= b (TensorFlow's gradients).
// normalize_forward  Keras's Normalization: with d = max(sqrt(variance), 1e-7) per statistic: y = (x - mean) / d;
//                   invert: y = mean + x * d. mean, variance: K values, one per combination of the indices of
//                   the kept axes of x (the set `axes`, bit a: axis a; row-major over them in ascending order,
//                   as Keras reshapes its statistics); an empty set: one statistic for every value.
// normalize_backward  dx (=) = dy / d (invert: dy * d).
// transpose         y = x with its axes permuted: y.shape[i] = x.shape[perm[i]] (perm of 0..rank-1).
// regul: regularizers and constraints (include/systolic/regularizers.h). total (float64 [1]) and dx (x's shape
// and dtype) may each be undefined; dx is ACCUMULATED (+=):
// regularize        P = l1*sum|x| + l2*sum x^2 (Keras's L1, L2, L1L2); total += total_scale*P;
//                   dx += grad_scale*(l1*sign(x) + 2*l2*x) (sign(0) = 0, as TensorFlow's gradient of abs).
// orthogonal_regularize  x rank 2 (R, C); rows mode: the R rows u_i = x_i * min(1/|x_i|, 1/eps), eps = 1e-7
//                   (Keras's ops.normalize); columns mode: the C columns. n vectors, G_ij = u_i . u_j;
//                   P = factor * 0.5 * sum_{i!=j} |G_ij| / (n(n-1)/2); total += total_scale*P,
//                   dx += grad_scale * dP/dx.
// constrain         w = constraint(w), with norms = sqrt(sum w^2) over p.axes (kept per the other axes) and
//                   eps = 1e-7 (Keras 3): max_norm w *= clip(norms, 0, max)/(eps + norms); non_neg w = max(w, 0);
//                   unit_norm w /= eps + norms; min_max_norm w *= (rate*clip(norms, min, max) +
//                   (1-rate)*norms)/(eps + norms).
// conv area:
// bias_add_forward  y = x + b over the last axis (b has x's last dimension); y may alias x (Conv2DTranspose's
//                   bias; b may be float32 with bfloat16 data).
// bias_add_backward db (+=) the sum of dy over every axis but the last.
// resize2d_forward  y[N,OH,OW,C] from x[N,H,W,C], per axis (half-pixel centres, s = (o + 0.5) * in/out - 0.5):
//                   nearest: x at min(floor((o + 0.5) * in/out), in-1); bilinear: weights 1-f and f on floor(s)
//                   and ceil(s) (f = s - floor(s)), both clamped to [0, in).
// resize2d_backward dx (=): each dy cell spread back on the x cells forward read, with forward's weights.
// augment (branch augment): noise and image augmentation, random draws keyed by (seed, step) as dropout's are
// (philox::dropout_key; formulas in src/ops/image_transform_math.h), recomputed rather than stored:
// gaussian_noise_forward   y = x + stddev*z (additive) or x*(1 + stddev*z) (multiplicative), z standard normal
//                   from Philox at (dropout_key(seed, step), element index), Box-Muller in double.
// gaussian_noise_backward  dx = dy (additive) or dy*(1 + stddev*z) with the same z (multiplicative); dx may
//                   alias dy.
// random_image_transforms  transforms float32 [N, 8]: image i's Keras transform (see affine_transform_images)
//                   drawn from Philox at (dropout_key(seed, step), i) for images (H, W) of the given size
//                   (crop: one draw for the batch, as Keras's RandomCrop).
// affine_transform_images  y[n, oy, ox, c] = x sampled at image n's transform of (ox, oy): [a0 a1 a2 b0 b1 b2 c0
//                   c1] maps to ((a0 ox + a1 oy + a2)/k, (b0 ox + b1 oy + b2)/k), k = c0 ox + c1 oy + 1 (TensorFlow's
//                   ImageProjectiveTransformV3, keras.ops.image.affine_transform); the fill mode maps coordinates
//                   beyond the edge, nearest or bilinear interpolation reads them, fill_value outside. x (N,H,W,C),
//                   y (N,OH,OW,C) (y must not overlap x), transforms float32 [N, 8].
// random_contrast   y = clip((x - mean) * f + mean, value_min, value_max): mean over H and W per image and channel,
//                   f uniform in [lower, upper) per image from Philox at (dropout_key(seed, step), image index).

// The list: X(name, (parameters), (arguments)).
// clang-format off
#define SYSTOLIC_OPS(X)                                                                                          \
  X(conv2d_forward, (const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y, const Conv2DParams& p),      \
    (x, w, b, y, p))                                                                                             \
  X(conv2d_backward, (const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw, Tensor& db,   \
                      const Conv2DParams& p), (x, w, dy, dx, dw, db, p))                                         \
  X(pool2d_forward, (const Tensor& x, Tensor& y, Tensor& workspace, const Pool2DParams& p), (x, y, workspace, p)) \
  X(pool2d_backward, (const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& workspace, Tensor& dx,    \
                      const Pool2DParams& p), (x, y, dy, workspace, dx, p))                                      \
  X(batch_norm_forward_training, (const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,          \
                                  Tensor& mean, Tensor& var, double eps, const CrossReplica* replicas),          \
    (x, gamma, beta, y, mean, var, eps, replicas))                                                               \
  X(batch_norm_forward_inference, (const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& mean, \
                                   const Tensor& var, Tensor& y, double eps), (x, gamma, beta, mean, var, y, eps)) \
  X(batch_norm_backward, (const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& var,          \
                          const Tensor& dy, Tensor& dx, Tensor& dgamma, Tensor& dbeta, double eps,               \
                          const CrossReplica* replicas), (x, gamma, mean, var, dy, dx, dgamma, dbeta, eps, replicas)) \
  X(dense_forward, (const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y), (x, w, b, y))                \
  X(dense_backward, (const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw, Tensor& db),   \
    (x, w, dy, dx, dw, db))                                                                                      \
  X(activation_forward, (const Activation& a, const Tensor& x, Tensor& y), (a, x, y))                           \
  X(activation_backward, (const Activation& a, const Tensor& x, const Tensor& y, const Tensor& dy, Tensor& dx), \
    (a, x, y, dy, dx))                                                                                           \
  X(dropout_forward, (const Tensor& x, Tensor& y, double rate, std::uint64_t seed, const Tensor& step),         \
    (x, y, rate, seed, step))                                                                                    \
  X(dropout_backward, (const Tensor& dy, Tensor& dx, double rate, std::uint64_t seed, const Tensor& step),      \
    (dy, dx, rate, seed, step))                                                                                  \
  X(pad2d_forward, (const Tensor& x, Tensor& y, const Pad2D& p), (x, y, p))                                     \
  X(pad2d_backward, (const Tensor& dy, Tensor& dx, const Pad2D& p), (dy, dx, p))                                \
  X(concat_forward, (const std::vector<Tensor>& xs, Tensor& y, int axis), (xs, y, axis))                        \
  X(concat_backward, (const Tensor& dy, std::vector<Tensor>& dxs, int axis), (dy, dxs, axis))                   \
  X(fill, (Tensor& x, double value), (x, value))                                                                \
  X(copy, (const Tensor& src, Tensor& dst), (src, dst))                                                         \
  X(cast, (const Tensor& src, Tensor& dst), (src, dst))                                                         \
  X(add_n, (const std::vector<Tensor>& xs, Tensor& y), (xs, y))                                                 \
  X(accumulate, (const Tensor& src, Tensor& dst), (src, dst))                                                   \
  X(scale_shift, (const Tensor& x, Tensor& y, double scale, double shift), (x, y, scale, shift))                \
  X(moving_average, (Tensor& moving, const Tensor& value, double momentum), (moving, value, momentum))          \
  X(gather_rows, (const Tensor& src, const Tensor& indices, Tensor& dst), (src, indices, dst))                  \
  X(scatter_add_rows, (const Tensor& src, const Tensor& indices, Tensor& dst), (src, indices, dst))             \
  X(compute_mask, (const Tensor& x, double value, Tensor& mask), (x, value, mask))                                \
  X(rnn_cell_forward, (const RnnCellParams& p, const Tensor& x_part, const Tensor& h_part, const Tensor& h_prev,   \
                        const Tensor& c_prev, const Tensor& mask, Tensor& h, Tensor& c, Tensor& z),                 \
    (p, x_part, h_part, h_prev, c_prev, mask, h, c, z))                                                          \
  X(rnn_cell_backward, (const RnnCellParams& p, const Tensor& h_part, const Tensor& h_prev, const Tensor& c_prev,  \
                         const Tensor& z, const Tensor& c, const Tensor& mask, const Tensor& dh, const Tensor& dc,  \
                         Tensor& dx_part, Tensor& dh_part, Tensor& dh_prev, Tensor& dc_prev),                       \
    (p, h_part, h_prev, c_prev, z, c, mask, dh, dc, dx_part, dh_part, dh_prev, dc_prev))                         \
  X(rnn_sequence_forward, (const RnnCellParams& p, bool reverse, const Tensor& x, const Tensor& kernel,          \
                            const Tensor& recurrent, const Tensor& bias, const Tensor& h0, const Tensor& c0,        \
                            Tensor& y, Tensor& h_last, Tensor& c_last, Tensor& workspace),                          \
    (p, reverse, x, kernel, recurrent, bias, h0, c0, y, h_last, c_last, workspace))                              \
  X(rnn_sequence_backward, (const RnnCellParams& p, bool reverse, const Tensor& x, const Tensor& kernel,         \
                             const Tensor& recurrent, const Tensor& bias, const Tensor& h0, const Tensor& c0,       \
                             const Tensor& y, const Tensor& workspace, const Tensor& dy, const Tensor& dh_last,     \
                             const Tensor& dc_last, Tensor& dx, Tensor& dkernel, Tensor& drecurrent, Tensor& dbias, \
                             Tensor& dh0, Tensor& dc0),                                                             \
    (p, reverse, x, kernel, recurrent, bias, h0, c0, y, workspace, dy, dh_last, dc_last, dx, dkernel, drecurrent,  \
     dbias, dh0, dc0))                                                                                           \
  X(augment_images, (const Tensor& x, Tensor& y, const AugmentParams& p, std::uint64_t seed, std::uint64_t first), \
    (x, y, p, seed, first))                                                                                      \
  X(softmax_cross_entropy, (const Tensor& logits, const Tensor& labels, const Tensor& weights, Tensor& total,   \
                            Tensor& dlogits, double grad_scale), (logits, labels, weights, total, dlogits, grad_scale)) \
  X(crossentropy_from_probabilities, (const Tensor& probs, const Tensor& labels, const Tensor& weights,          \
                                      Tensor& total, Tensor& dprobs, double grad_scale, double eps),              \
    (probs, labels, weights, total, dprobs, grad_scale, eps))                                                    \
  X(ignore_class, (const Tensor& labels, std::int32_t ignore, const Tensor& weights, const Tensor& mask,         \
                   Tensor& kept, Tensor& kept_weights),                                                          \
    (labels, ignore, weights, mask, kept, kept_weights))                                                         \
  X(mask_weights, (const Tensor& mask, const Tensor& weights, bool normalize, Tensor& out),                       \
    (mask, weights, normalize, out))                                                                             \
  X(elementwise_loss, (const Tensor& pred, const Tensor& target, const Tensor& weights, Tensor& total,           \
                       Tensor& dpred, const ElementLossParams& p, double grad_scale),                           \
    (pred, target, weights, total, dpred, p, grad_scale))                                                        \
  X(row_loss, (const Tensor& pred, const Tensor& target, const Tensor& weights, Tensor& total, Tensor& dpred,    \
               const RowLossParams& p, double grad_scale), (pred, target, weights, total, dpred, p, grad_scale))  \
  X(accuracy_count, (const Tensor& pred, const Tensor& labels, const Tensor& weights, Tensor& total, int k),       \
    (pred, labels, weights, total, k))                                                                           \
  X(add_sum, (const Tensor& x, Tensor& total), (x, total))                                                      \
  X(confusion_counts,                                                                                           \
    (const Tensor& pred, const Tensor& labels, const Tensor& weights, Tensor& counts, const ConfusionParams& p), \
    (pred, labels, weights, counts, p))                                                                          \
  X(regression_sums, (const Tensor& pred, const Tensor& target, const Tensor& weights, Tensor& sums),             \
    (pred, target, weights, sums))                                                                               \
  X(class_confusion,                                                                                            \
    (const Tensor& pred, const Tensor& labels, const Tensor& weights, Tensor& counts,                            \
     const ClassConfusionParams& p),                                                                             \
    (pred, labels, weights, counts, p))                                                                          \
  X(f_score_counts,                                                                                             \
    (const Tensor& pred, const Tensor& labels, const Tensor& weights, Tensor& counts, const FScoreParams& p),    \
    (pred, labels, weights, counts, p))                                                                          \
  X(adam_update, (Tensor& w, const Tensor& g, Tensor& m, Tensor& v, const AdamStep& s, const Tensor& lr,        \
                  const Tensor& iterations), (w, g, m, v, s, lr, iterations))                                     \
  X(sgd_update, (Tensor& w, const Tensor& g, Tensor& velocity, const Tensor& lr, double momentum, bool nesterov), \
    (w, g, velocity, lr, momentum, nesterov))                                                                    \
  X(decay_weights, (Tensor& w, const Tensor& lr, double decay), (w, lr, decay))                                 \
  X(rmsprop_update, (Tensor& w, const Tensor& g, Tensor& ms, Tensor& mom, const Tensor& lr, double rho,         \
                     double momentum, double epsilon), (w, g, ms, mom, lr, rho, momentum, epsilon))   \
  X(clip_gradients, (Tensor& g, bool by_norm, double limit), (g, by_norm, limit))                              \
  X(optimizer_update, (Tensor& w, const Tensor& g, Tensor& s0, Tensor& s1, Tensor& s2, const UpdateParams& p,  \
                       const Tensor& step), (w, g, s0, s1, s2, p, step))                                        \
  X(adafactor_update, (Tensor& w, const Tensor& g, Tensor& r, Tensor& c, Tensor& v, const AdafactorStep& s,   \
                       const Tensor& step), (w, g, r, c, v, s, step))                                          \
  X(muon_update, (Tensor& w, const Tensor& g, Tensor& m, const MuonStep& s, const Tensor& lr),                  \
    (w, g, m, s, lr))                                                                                            \
  /* norm: normalisations over sets of axes, broadcasting binary ops, Normalization, transposes */             \
  X(layer_norm_forward, (const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y, Tensor& mean,     \
                         Tensor& rstd, std::uint32_t axes, NormKind kind, double eps),                           \
    (x, gamma, beta, y, mean, rstd, axes, kind, eps))                                                           \
  X(layer_norm_backward, (const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& rstd,          \
                          const Tensor& dy, Tensor& dx, Tensor& dgamma, Tensor& dbeta, std::uint32_t axes,       \
                          NormKind kind),                                                                        \
    (x, gamma, mean, rstd, dy, dx, dgamma, dbeta, axes, kind))                                                   \
  X(broadcast_forward, (BinaryKind kind, const Tensor& a, const Tensor& b, Tensor& y), (kind, a, b, y))         \
  X(broadcast_backward, (BinaryKind kind, const Tensor& a, const Tensor& b, const Tensor& dy, Tensor& da,       \
                         Tensor& db), (kind, a, b, dy, da, db))                                                  \
  X(normalize_forward, (const Tensor& x, const Tensor& mean, const Tensor& variance, Tensor& y,                \
                        std::uint32_t axes, bool invert), (x, mean, variance, y, axes, invert))                  \
  X(normalize_backward, (const Tensor& variance, const Tensor& dy, Tensor& dx, std::uint32_t axes,             \
                         bool invert), (variance, dy, dx, axes, invert))                                         \
  X(transpose, (const Tensor& x, Tensor& y, const std::vector<int>& perm), (x, y, perm))                         \
  /* attention */                                                                                               \
  X(attention_forward, (const AttentionParams& p, const Tensor& q, const Tensor& k, const Tensor& v,            \
                        const Tensor& score_weights, const Tensor& query_mask, const Tensor& key_mask,          \
                        const Tensor& attention_mask, const Tensor& step, Tensor& y, Tensor& probs),            \
    (p, q, k, v, score_weights, query_mask, key_mask, attention_mask, step, y, probs))                          \
  X(attention_backward, (const AttentionParams& p, const Tensor& q, const Tensor& k, const Tensor& v,           \
                         const Tensor& score_weights, const Tensor& query_mask, const Tensor& key_mask,         \
                         const Tensor& attention_mask, const Tensor& step, const Tensor& probs,                 \
                         const Tensor& dy, const Tensor& dprobs, Tensor& dq, Tensor& dk, Tensor& dv,            \
                         Tensor& dscore_weights),                                                               \
    (p, q, k, v, score_weights, query_mask, key_mask, attention_mask, step, probs, dy, dprobs, dq, dk, dv,      \
     dscore_weights))                                                                                            \
  /* regul: regularizers and constraints */                                                                    \
  X(regularize, (const Tensor& x, Tensor& total, Tensor& dx, double l1, double l2, double total_scale,         \
                 double grad_scale), (x, total, dx, l1, l2, total_scale, grad_scale))                          \
  X(orthogonal_regularize, (const Tensor& x, Tensor& total, Tensor& dx, double factor, bool columns,           \
                            double total_scale, double grad_scale),                                            \
    (x, total, dx, factor, columns, total_scale, grad_scale))                                                  \
  X(constrain, (Tensor& w, const ConstraintParams& p), (w, p))                                                 \
  /* conv area */                                                                                                \
  X(bias_add_forward, (const Tensor& x, const Tensor& b, Tensor& y), (x, b, y))                                 \
  X(bias_add_backward, (const Tensor& dy, Tensor& db), (dy, db))                                                \
  X(resize2d_forward, (const Tensor& x, Tensor& y, Interpolation mode), (x, y, mode))                           \
  X(resize2d_backward, (const Tensor& dy, Tensor& dx, Interpolation mode), (dy, dx, mode))                      \
  /* augment (branch augment): noise and image augmentation */                                                \
  X(gaussian_noise_forward, (const Tensor& x, Tensor& y, const NoiseParams& p, std::uint64_t seed,             \
                             const Tensor& step), (x, y, p, seed, step))                                        \
  X(gaussian_noise_backward, (const Tensor& dy, Tensor& dx, const NoiseParams& p, std::uint64_t seed,          \
                              const Tensor& step), (dy, dx, p, seed, step))                                     \
  X(random_image_transforms, (Tensor& transforms, const ImageTransformParams& p, std::int64_t height,          \
                              std::int64_t width, std::uint64_t seed, const Tensor& step),                      \
    (transforms, p, height, width, seed, step))                                                                 \
  X(affine_transform_images, (const Tensor& x, const Tensor& transforms, Tensor& y,                             \
                              const AffineTransformParams& p), (x, transforms, y, p))                           \
  X(random_contrast, (const Tensor& x, Tensor& y, const ContrastParams& p, std::uint64_t seed,                 \
                      const Tensor& step), (x, y, p, seed, step))
// clang-format on

// The op tags, in the list's order.
enum class Op : int {
#define SYSTOLIC_OP_TAG(name, params, args) name,
  SYSTOLIC_OPS(SYSTOLIC_OP_TAG)
#undef SYSTOLIC_OP_TAG
};
#define SYSTOLIC_OP_COUNT(name, params, args) +1
inline constexpr int kOpCount = 0 SYSTOLIC_OPS(SYSTOLIC_OP_COUNT);
#undef SYSTOLIC_OP_COUNT

std::string_view op_name(Op op);

// The entry points.
#define SYSTOLIC_OP_DECLARE(name, params, args) void name params;
SYSTOLIC_OPS(SYSTOLIC_OP_DECLARE)
#undef SYSTOLIC_OP_DECLARE

// Whether the backend of `device` runs `op` on data of `dtype` (false for a device this build cannot use).
bool supports(Op op, DType dtype, Device device);
// Whether rnn_sequence_forward and rnn_sequence_backward take a cell of these activations (Keras's defaults).
bool rnn_sequence_takes(const RnnCellParams& p);

// gather_rows with row indices from the host (copied to the tensors' device first: not for captured steps).
void gather_rows(const Tensor& src, const std::vector<std::int64_t>& indices, Tensor& dst);

}  // namespace ops
}  // namespace systolic
