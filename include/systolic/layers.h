// The layers, spelled as in Keras: sy::layers::Conv2D(32, {3, 3}, {.padding = "same", .activation = "relu"}).
// Each factory returns a LayerRef (call it on a SymbolicTensor); Input returns the SymbolicTensor itself.
// Option structs list Keras's arguments in Keras's order, so designated initializers read like keyword args.
#pragma once

#include <systolic/layer.h>
#include <systolic/regularizers.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

namespace systolic::layers {

using Pair = std::array<int, 2>;

struct InputOptions {
  std::string name;
  DType dtype = DType::float32;
  // Keras's Input(batch_size=...) (batch_shape's first dimension): kept in configs, as a stateful RNN needs in
  // Keras; systolic's batches may still be of any size.
  std::optional<std::int64_t> batch_size;
};
// Input(shape without the batch dimension).
SymbolicTensor Input(Shape shape, const InputOptions& options = {});

struct Conv2DOptions {
  Pair strides = {1, 1};
  std::string padding = "valid";  // "valid" or "same"
  Pair dilation_rate = {1, 1};
  int groups = 1;  // divides the input channels and filters; the kernel is (KH, KW, C/groups, filters)
  std::string activation = "linear";
  bool use_bias = true;
  Initializer kernel_initializer = "glorot_uniform";
  Initializer bias_initializer = "zeros";
  Regularizer kernel_regularizer = {}, bias_regularizer = {}, activity_regularizer = {};
  Constraint kernel_constraint = {}, bias_constraint = {};
  std::string name;
};
LayerRef Conv2D(int filters, Pair kernel_size, const Conv2DOptions& options = {});

struct DenseOptions {
  std::string activation = "linear";
  bool use_bias = true;
  Initializer kernel_initializer = "glorot_uniform";
  Initializer bias_initializer = "zeros";
  Regularizer kernel_regularizer = {}, bias_regularizer = {}, activity_regularizer = {};
  Constraint kernel_constraint = {}, bias_constraint = {};
  std::string name;
};
LayerRef Dense(int units, const DenseOptions& options = {});

struct BatchNormalizationOptions {
  int axis = -1;  // only the last axis (channels_last) is supported
  double momentum = 0.99;
  double epsilon = 1e-3;
  bool center = true;
  bool scale = true;
  Initializer beta_initializer = "zeros";
  Initializer gamma_initializer = "ones";
  Initializer moving_mean_initializer = "zeros";
  Initializer moving_variance_initializer = "ones";
  Regularizer beta_regularizer = {}, gamma_regularizer = {};
  Constraint beta_constraint = {}, gamma_constraint = {};
  // Keras's synchronized=True: the global batch's statistics under replicas. One device: no effect (as in Keras);
  // replicas: fit needs a strategy with sync_batch_norm, which synchronises every batch-norm layer.
  bool synchronized = false;
  std::string name;
};
LayerRef BatchNormalization(const BatchNormalizationOptions& options = {});

struct PoolingOptions {
  std::optional<Pair> strides;  // default: the pool size
  std::string padding = "valid";
  std::string name;
};
LayerRef MaxPooling2D(Pair pool_size = {2, 2}, const PoolingOptions& options = {});
LayerRef AveragePooling2D(Pair pool_size = {2, 2}, const PoolingOptions& options = {});

struct NameOptions {
  std::string name;
};
// GlobalAveragePooling2D and GlobalMaxPooling2D: (H, W, C) -> (C,), or (1, 1, C) with keepdims.
struct GlobalPoolingOptions {
  bool keepdims = false;
  std::string data_format = "channels_last";  // the 1-D layers also take "channels_first": (C, L)
  std::string name;
};
LayerRef GlobalAveragePooling2D(const GlobalPoolingOptions& options = {});

struct DropoutOptions {
  std::optional<std::uint64_t> seed;  // default: drawn from the global generator (set_random_seed)
  std::string name;
  // Keras's noise_shape, batch included (nullopt entries: the input's dim), e.g. {nullopt, 1, 1, 1}.
  std::optional<std::vector<std::optional<std::int64_t>>> noise_shape;
};
LayerRef Dropout(double rate, const DropoutOptions& options = {});
LayerRef Flatten(const NameOptions& options = {});
// Activation("gelu"), or one with parameters (systolic::Activation a = systolic::Activation::gelu;
// a.approximate = true; Activation(a)).
LayerRef Activation(const std::string& activation, const NameOptions& options = {});
LayerRef Activation(const systolic::Activation& activation, const NameOptions& options = {});
// Keras's ReLU layer: max_value (none: no maximum), negative_slope, threshold, each >= 0.
struct ReLUOptions {
  std::optional<double> max_value;
  double negative_slope = 0.0;
  double threshold = 0.0;
  std::string name;
};
LayerRef ReLU(const ReLUOptions& options = {});
LayerRef LeakyReLU(double negative_slope = 0.3, const NameOptions& options = {});
LayerRef ELU(double alpha = 1.0, const NameOptions& options = {});
// Keras's Softmax layer: the softmax over `axis` (negative: from the last; several axes: over all of their values
// together, as Keras's logsumexp over them; not the batch axis).
struct SoftmaxOptions {
  std::vector<int> axis{-1};
  std::string name;
};
LayerRef Softmax(const SoftmaxOptions& options = {});

// ZeroPadding2D(1), ZeroPadding2D({1, 2}) (symmetric rows, columns), or ZeroPadding2D({{top, bottom}, {left, right}}).
struct Padding2D {
  int top, bottom, left, right;
  Padding2D(int p) : top(p), bottom(p), left(p), right(p) {}  // NOLINT: implicit like Keras's int
  Padding2D(Pair rows_cols)
      : top(rows_cols[0]), bottom(rows_cols[0]), left(rows_cols[1]), right(rows_cols[1]) {}  // NOLINT
  Padding2D(Pair rows, Pair cols) : top(rows[0]), bottom(rows[1]), left(cols[0]), right(cols[1]) {}
};
LayerRef ZeroPadding2D(Padding2D padding = 1, const NameOptions& options = {});

struct RescalingOptions {
  double offset = 0.0;
  std::string name;
};
LayerRef Rescaling(double scale, const RescalingOptions& options = {});

LayerRef Add(const NameOptions& options = {});
struct ConcatenateOptions {
  int axis = -1;
  std::string name;
};
LayerRef Concatenate(const ConcatenateOptions& options = {});

// norm: normalisations, merges with broadcasting, reshaping, LayerScale, SpatialDropout2D.
struct LayerNormalizationOptions {
  std::vector<int> axis = {-1};  // the normalised axes (of the full shape; not the batch axis)
  bool axis_is_list = false;     // Keras wrote a list (written back as one)
  double epsilon = 1e-3;
  bool center = true;
  bool scale = true;
  bool rms_scaling = false;  // Keras's deprecated option: x * rsqrt(var + eps) * gamma, no beta
  Initializer beta_initializer = "zeros";
  Initializer gamma_initializer = "ones";
  Regularizer beta_regularizer = {}, gamma_regularizer = {};
  Constraint beta_constraint = {}, gamma_constraint = {};
  std::string name;
};
LayerRef LayerNormalization(const LayerNormalizationOptions& options = {});
// x * min(1/sqrt(sum x^2), 1e12) over `axis` (any axes but the batch axis): Keras's ops.normalize.
LayerRef UnitNormalization(std::vector<int> axis = {-1}, const NameOptions& options = {});
struct NormalizationOptions {
  std::optional<std::vector<int>> axis = std::vector<int>{-1};  // kept axes (not the batch); nullopt: None
  bool invert = false;
  // Constants (one value, one per kept value row-major, or a list along the last kept axis, broadcast); absent:
  // weights mean, variance and count, which layer->adapt(data) computes from data.
  std::optional<std::vector<double>> mean, variance;
  std::string name;
};
LayerRef Normalization(const NormalizationOptions& options = {});
LayerRef LayerScale(double init_values, int projection_dim, const NameOptions& options = {});
LayerRef Multiply(const NameOptions& options = {});
LayerRef Subtract(const NameOptions& options = {});
LayerRef Average(const NameOptions& options = {});
LayerRef Maximum(const NameOptions& options = {});
LayerRef Minimum(const NameOptions& options = {});
LayerRef Reshape(std::vector<std::int64_t> target_shape, const NameOptions& options = {});
LayerRef Permute(std::vector<int> dims, const NameOptions& options = {});
LayerRef RepeatVector(int n, const NameOptions& options = {});
LayerRef SpatialDropout2D(double rate, const DropoutOptions& options = {});
// regul: Keras's ActivityRegularization: the identity, whose output's penalty l1*sum|y| + l2*sum y^2, divided
// by the batch size, joins the loss.
struct ActivityRegularizationOptions {
  double l1 = 0.0, l2 = 0.0;
  std::string name;
};
LayerRef ActivityRegularization(const ActivityRegularizationOptions& options = {});

// ---- conv area: depthwise, separable and transposed convolutions, cropping, upsampling, global max pooling.
// DepthwiseConv2D: depthwise_kernel (KH, KW, C, depth_multiplier), bias (C * depth_multiplier).
struct DepthwiseConv2DOptions {
  Pair strides = {1, 1};
  std::string padding = "valid";  // "valid" or "same"
  int depth_multiplier = 1;
  Pair dilation_rate = {1, 1};
  std::string activation = "linear";
  bool use_bias = true;
  Initializer depthwise_initializer = "glorot_uniform";
  Initializer bias_initializer = "zeros";
  Regularizer depthwise_regularizer = {}, bias_regularizer = {}, activity_regularizer = {};
  Constraint depthwise_constraint = {}, bias_constraint = {};
  std::string name;
};
LayerRef DepthwiseConv2D(Pair kernel_size, const DepthwiseConv2DOptions& options = {});
// SeparableConv2D: depthwise_kernel (KH, KW, C, depth_multiplier), pointwise_kernel (1, 1, C * depth_multiplier,
// filters), bias (filters).
struct SeparableConv2DOptions {
  Pair strides = {1, 1};
  std::string padding = "valid";
  Pair dilation_rate = {1, 1};
  int depth_multiplier = 1;
  std::string activation = "linear";
  bool use_bias = true;
  Initializer depthwise_initializer = "glorot_uniform";
  Initializer pointwise_initializer = "glorot_uniform";
  Initializer bias_initializer = "zeros";
  Regularizer depthwise_regularizer = {}, pointwise_regularizer = {}, bias_regularizer = {},
              activity_regularizer = {};
  Constraint depthwise_constraint = {}, pointwise_constraint = {}, bias_constraint = {};
  std::string name;
};
LayerRef SeparableConv2D(int filters, Pair kernel_size, const SeparableConv2DOptions& options = {});
// DepthwiseConv1D and SeparableConv1D over (L, C): the 2-D layers' math along one axis, Keras's 1-D weights
// (depthwise_kernel (K, C, depth_multiplier); pointwise_kernel (1, C * depth_multiplier, filters)).
struct DepthwiseConv1DOptions {
  int strides = 1;
  std::string padding = "valid";  // "valid" or "same"
  int depth_multiplier = 1;
  int dilation_rate = 1;
  std::string activation = "linear";
  bool use_bias = true;
  Initializer depthwise_initializer = "glorot_uniform";
  Initializer bias_initializer = "zeros";
  Regularizer depthwise_regularizer = {}, bias_regularizer = {}, activity_regularizer = {};
  Constraint depthwise_constraint = {}, bias_constraint = {};
  std::string name;
};
LayerRef DepthwiseConv1D(int kernel_size, const DepthwiseConv1DOptions& options = {});
struct SeparableConv1DOptions {
  int strides = 1;
  std::string padding = "valid";
  int dilation_rate = 1;
  int depth_multiplier = 1;
  std::string activation = "linear";
  bool use_bias = true;
  Initializer depthwise_initializer = "glorot_uniform";
  Initializer pointwise_initializer = "glorot_uniform";
  Initializer bias_initializer = "zeros";
  Regularizer depthwise_regularizer = {}, pointwise_regularizer = {}, bias_regularizer = {},
              activity_regularizer = {};
  Constraint depthwise_constraint = {}, pointwise_constraint = {}, bias_constraint = {};
  std::string name;
};
LayerRef SeparableConv1D(int filters, int kernel_size, const SeparableConv1DOptions& options = {});
// Cropping2D(1), Cropping2D({1, 2}) (symmetric rows, columns) or Cropping2D({{top, bottom}, {left, right}}).
LayerRef Cropping2D(Padding2D cropping, const NameOptions& options = {});
LayerRef GlobalMaxPooling2D(const GlobalPoolingOptions& options = {});
// Conv2DTranspose: kernel (KH, KW, filters, C), bias (filters).
struct Conv2DTransposeOptions {
  Pair strides = {1, 1};
  std::string padding = "valid";
  std::optional<Pair> output_padding;  // none: Keras's default output size
  Pair dilation_rate = {1, 1};
  std::string activation = "linear";
  bool use_bias = true;
  Initializer kernel_initializer = "glorot_uniform";
  Initializer bias_initializer = "zeros";
  Regularizer kernel_regularizer = {}, bias_regularizer = {}, activity_regularizer = {};
  Constraint kernel_constraint = {}, bias_constraint = {};
  std::string name;
};
LayerRef Conv2DTranspose(int filters, Pair kernel_size, const Conv2DTransposeOptions& options = {});
// Conv1DTranspose over (L, C): Conv2DTranspose along one axis; kernel (K, filters, C), bias (filters).
struct Conv1DTransposeOptions {
  int strides = 1;
  std::string padding = "valid";
  std::optional<int> output_padding;  // none: Keras's default output length
  int dilation_rate = 1;
  std::string activation = "linear";
  bool use_bias = true;
  Initializer kernel_initializer = "glorot_uniform";
  Initializer bias_initializer = "zeros";
  Regularizer kernel_regularizer = {}, bias_regularizer = {}, activity_regularizer = {};
  Constraint kernel_constraint = {}, bias_constraint = {};
  std::string name;
};
LayerRef Conv1DTranspose(int filters, int kernel_size, const Conv1DTransposeOptions& options = {});
struct UpSampling2DOptions {
  std::string interpolation = "nearest";  // or "bilinear"
  std::string name;
};
LayerRef UpSampling2D(Pair size = {2, 2}, const UpSampling2DOptions& options = {});

// 1-D layers over sequences (L, C) (channels_last), each the 2-D op on an (N, 1, L, C) view.
// Conv1D: kernel (K, C/groups, filters), bias (filters); padding "valid", "same" or "causal" (left padding of
// (K-1)*dilation_rate: the output at step t reads steps <= t).
struct Conv1DOptions {
  int strides = 1;
  std::string padding = "valid";  // "valid", "same" or "causal"
  int dilation_rate = 1;
  int groups = 1;  // divides the input channels and filters
  std::string activation = "linear";
  bool use_bias = true;
  Initializer kernel_initializer = "glorot_uniform";
  Initializer bias_initializer = "zeros";
  Regularizer kernel_regularizer = {}, bias_regularizer = {}, activity_regularizer = {};
  Constraint kernel_constraint = {}, bias_constraint = {};
  std::string name;
};
LayerRef Conv1D(int filters, int kernel_size, const Conv1DOptions& options = {});
struct Pooling1DOptions {
  std::optional<int> strides;  // default: the pool size
  std::string padding = "valid";
  std::string data_format = "channels_last";  // or "channels_first": (C, L)
  std::string name;
};
LayerRef MaxPooling1D(int pool_size = 2, const Pooling1DOptions& options = {});
LayerRef AveragePooling1D(int pool_size = 2, const Pooling1DOptions& options = {});
// GlobalAveragePooling1D and GlobalMaxPooling1D: (L, C) -> (C,), or (1, C) with keepdims; channels_first: (C, L)
// -> (C,), or (C, 1). GlobalAveragePooling1D of a masked input averages the unmasked steps alone (Keras's).
LayerRef GlobalAveragePooling1D(const GlobalPoolingOptions& options = {});
LayerRef GlobalMaxPooling1D(const GlobalPoolingOptions& options = {});
// ZeroPadding1D({before, after}) adds zero steps; Cropping1D({before, after}) removes steps.
LayerRef ZeroPadding1D(Pair padding = {1, 1}, const NameOptions& options = {});
LayerRef Cropping1D(Pair cropping = {1, 1}, const NameOptions& options = {});
// UpSampling1D: each step repeated `size` times.
LayerRef UpSampling1D(int size = 2, const NameOptions& options = {});
// SpatialDropout1D: Dropout of whole channels, the noise shape (N, 1, C).
LayerRef SpatialDropout1D(double rate, const DropoutOptions& options = {});
// Embedding: integer ids (any input shape; float values are truncated toward zero, as Keras casts them) -> their
// rows of embeddings (input_dim, output_dim): (dims...) -> (dims..., output_dim). An id outside [0, input_dim) is an
// error (CPU; CUDA at the next synchronisation; XLA gives NaN rows). Model inputs carry ids as float32, exact below
// 2^24. Its input is not cast under mixed precision (Keras's autocast=False); its output is.
struct EmbeddingOptions {
  Initializer embeddings_initializer = "random_uniform";  // Keras's "uniform": U(-0.05, 0.05)
  Regularizer embeddings_regularizer = {}, activity_regularizer = {};
  Constraint embeddings_constraint = {};
  bool mask_zero =
      false;  // id 0 is padding: the output carries a mask (1 where the id is not 0) for the RNNs
  std::string name;
};
LayerRef Embedding(int input_dim, int output_dim, const EmbeddingOptions& options = {});
// Masking: steps whose features all equal mask_value are padding: the output is the input with those steps zeroed,
// and carries a mask (1 for the other steps) that the recurrent layers skip padded steps by. Keras's masks pass
// through the layers that support them (Dense, activations, dropouts, normalisations, an RNN with
// return_sequences), combine in the merges as Keras 3 combines them (Add, Subtract, Average: the OR of the masks
// when every input has one, else none; Concatenate on the last axis: their OR, all ones where an input has none; on
// another axis: the masks, or ones, joined along it) and stop at the others (GlobalAveragePooling1D reads it).
// Multiply reads a masked input's masked values as 1s and zeroes the steps no input counts (the OR of the masks
// when every input has one), as Keras 3's does; Maximum and Minimum take the extremum of the values that count (the
// first input's where none does). A masked output's loss and metrics count its unmasked steps (Model::fit).
struct MaskingOptions {
  double mask_value = 0.0;
  std::string name;
};
LayerRef Masking(const MaskingOptions& options = {});

// The recurrent layers: SimpleRNN, LSTM and GRU over sequences (steps, features) -> (units,), or (steps, units) with
// return_sequences. The cell's weights, named as Keras names them ("lstm_cell/kernel", ...): kernel (features,
// G*units), recurrent_kernel (units, G*units), bias (G*units; GRU: (2, 3*units), the input's and the recurrent
// product's), the gates in Keras's order (LSTM i, f, c, o; GRU z, r, h).
struct RecurrentOptions {
  std::string activation = "tanh";
  std::string recurrent_activation = "sigmoid";  // LSTM and GRU
  bool use_bias = true;
  Initializer kernel_initializer = "glorot_uniform";
  Initializer recurrent_initializer = "orthogonal";
  Initializer bias_initializer = "zeros";
  bool unit_forget_bias = true;  // LSTM: the forget gate's bias starts at 1
  bool reset_after = true;  // GRU: the reset gate after the recurrent product (Keras 3), or before it (false)
  Regularizer kernel_regularizer = {}, recurrent_regularizer = {}, bias_regularizer = {},
              activity_regularizer = {};
  Constraint kernel_constraint = {}, recurrent_constraint = {}, bias_constraint = {};
  // Keras's dropout while training, masks drawn once per batch and used at every step: `dropout` of the input
  // (one mask, or one per gate with recurrent_dropout), `recurrent_dropout` of the previous state before its
  // product with each gate's recurrent kernel (one mask per gate). Rates are clamped to [0, 1]; 0 and 1 drop
  // nothing, as in Keras. `seed`: of the masks (none: drawn from the global generator).
  double dropout = 0, recurrent_dropout = 0;
  std::optional<std::uint64_t> seed;
  bool return_sequences = false;
  // The final states as outputs after the first: h, and c for an LSTM (Layer::call_all gives them all). The layer
  // also takes initial states as inputs after the sequences (Keras's initial_state): call_all({x, h0, c0}).
  bool return_state = false;
  // Keras's stateful: each call starts from the states the last call ended with (zeros at first), for batches of
  // one size (the first call's); Layer::reset_state() (or Model::reset_states()) puts them back to zeros. No gradient
  // flows from one batch into the last.
  bool stateful = false;
  bool go_backwards = false;          // the steps in reverse (the outputs in that order, as Keras gives them)
  bool unroll = false;                // how Keras builds its graph; the same result
  bool zero_output_for_mask = false;  // with a mask and return_sequences: masked steps output zeros
  std::string name;
};
LayerRef SimpleRNN(int units, const RecurrentOptions& options = {});
LayerRef LSTM(int units, const RecurrentOptions& options = {});
LayerRef GRU(int units, const RecurrentOptions& options = {});
// Bidirectional(LSTM(64, {.return_sequences = true})): the layer run forwards and a copy of it run backwards (or
// backward_layer, which must go the other way), outputs merged by merge_mode: "concat", "sum", "ave" or "mul", or ""
// (Keras's None: two outputs, the forward run's and the backward run's; Layer::call_all gives both). With the layer's
// return_state the runs' final states follow the output(s), the forward run's then the backward run's; initial
// states (inputs after the sequences) split the same way. The weights: the forward copy's
// ("forward_lstm/lstm_cell/kernel", ...), then the backward one's.
struct BidirectionalOptions {
  std::string merge_mode = "concat";
  std::optional<LayerRef> backward_layer;
  std::string name;
};
LayerRef Bidirectional(const LayerRef& layer, const BidirectionalOptions& options = {});
// TimeDistributed(Dense(8)): the layer applied to every step, (T, ...) -> (T, ...'), the steps folded into the
// batch. Its weights are the wrapper's. BatchNormalization is refused (Keras 3 normalises each step apart).
LayerRef TimeDistributed(const LayerRef& layer, const NameOptions& options = {});

// attention: MultiHeadAttention(num_heads, key_dim) called on {query, value} or {query, value, key} (key: value when
// absent): query (T, Cq) -> (T, Cq), or (T, output_shape...). Its weights are Keras's EinsumDense shapes, in Keras's
// order: query kernel (Cq, heads, key_dim) and bias (heads, key_dim), key's (Ck, heads, key_dim) and (heads,
// key_dim), value's (Cv, heads, value_dim) and (heads, value_dim), the output's (heads, value_dim, output_shape...)
// and (output_shape...). Scores scaled by 1/sqrt(key_dim); `dropout` of the probabilities while training. Keras's
// masks: the query's (T) and the value's (S) hide padded positions, the output carries the query's. Inputs of
// higher rank attend over all their axes between the batch and the last (Keras's default attention_axes).
struct MultiHeadAttentionOptions {
  std::optional<int> value_dim;  // default: key_dim
  double dropout = 0.0;
  bool use_bias = true;
  std::optional<std::vector<std::int64_t>> output_shape;  // default: the query's last dimension
  // Keras's attention_axes: the query's axes attended over (none: all between the batch and the last); the
  // others are batch axes of the product (the projections transposed when an attended axis comes before one of
  // them; Keras masks are then refused).
  std::optional<std::vector<int>> attention_axes;
  // Keras's use_gate: a sigmoid gate from the query (an EinsumDense like the value's projection, (Cq, heads,
  // value_dim)) multiplies the attention's output before the output projection.
  bool use_gate = false;
  // Keras's call arguments, one value per layer here: a causal mask (query t sees keys s <= t); a band of keys
  // |t - s| < sliding_window (0: none); an attention mask (T, S) as the last input (1 keeps a pair).
  bool use_causal_mask = false;
  int sliding_window = 0;
  bool attention_mask_input = false;
  // Keras's return_attention_scores: the call's second output (call_all) is the probabilities (heads, T, S),
  // before dropout (for inputs of higher rank: (heads, the query's middle axes..., the value's...)). A gradient
  // that reaches them flows back into the layer.
  bool return_attention_scores = false;
  Initializer kernel_initializer = "glorot_uniform";
  Initializer bias_initializer = "zeros";
  Regularizer kernel_regularizer = {}, bias_regularizer = {}, activity_regularizer = {};
  Constraint kernel_constraint = {}, bias_constraint = {};
  std::optional<std::uint64_t> seed;  // of the dropout's masks (none: drawn from the global generator)
  std::string name;
};
LayerRef MultiHeadAttention(int num_heads, int key_dim, const MultiHeadAttentionOptions& options = {});

// EinsumDense (Keras's keras.layers.EinsumDense): y = activation(einsum(equation, x, kernel) + bias), equations as
// Keras writes them ("ab,bc->ac", "abc,cde->abde", "...b,bc->...c" or "ab...,bc->ac..."; the first input and output
// letters, or the "...", are the batch's). output_shape: the output's axes after the batch's (after the "..."
// with one on the left), each an int, or none where the input gives it. Every letter of the input is either kept
// in the output or summed with the kernel; a letter of the input, the kernel and the output together (a batched
// product) or of the input alone is refused. The kernel's shape is its letters' sizes; bias_axes (letters of the
// output; none: no bias) gives Keras's bias shape (the output's axes from the first of them on, 1 where a letter
// is not one of them).
struct EinsumDenseOptions {
  std::string activation = "linear";
  std::optional<std::string> bias_axes;
  Initializer kernel_initializer = "glorot_uniform";
  Initializer bias_initializer = "zeros";
  Regularizer kernel_regularizer = {}, bias_regularizer = {}, activity_regularizer = {};
  Constraint kernel_constraint = {}, bias_constraint = {};
  std::string name;
};
LayerRef EinsumDense(const std::string& equation,
                     const std::vector<std::optional<std::int64_t>>& output_shape,
                     const EinsumDenseOptions& options = {});

// Attention (Keras's dot-product attention, Luong's): called on {query, value} or {query, value, key} (key: the
// value when absent): query (Tq, dim), value (Tv, dv), key (Tv, dim) -> (Tq, dv). Scores = query . key (times the
// trainable scalar weight `scale`, initialised to 1, with use_scale), the softmax over the keys, `dropout` of the
// probabilities while training. Keras's masks: the value's hides keys, the query's zeroes the output's rows and
// rides on the output. score_mode "concat": scores = concat_score_weight * sum(tanh(scale * (query + key))) over
// the features (both scalar weights initialised to 1; scale with use_scale only).
struct AttentionOptions {
  bool use_scale = false;
  std::string score_mode = "dot";
  double dropout = 0.0;
  bool use_causal_mask = false;  // Keras's call argument, one value per layer here
  // Keras's return_attention_scores: the call's second output (call_all) is the probabilities (Tq, Tv), after the
  // dropout while training (as Keras returns them).
  bool return_attention_scores = false;
  std::optional<std::uint64_t> seed;
  std::string name;
};
LayerRef Attention(const AttentionOptions& options = {});

// AdditiveAttention (Keras's, Bahdanau's): Attention with scores = sum(scale * tanh(query + key)) over the
// features, `scale` a trainable vector of the query's dim (glorot_uniform) with use_scale, else 1.
struct AdditiveAttentionOptions {
  bool use_scale = true;
  double dropout = 0.0;
  bool use_causal_mask = false;
  bool return_attention_scores = false;
  std::optional<std::uint64_t> seed;
  std::string name;
};
LayerRef AdditiveAttention(const AdditiveAttentionOptions& options = {});

// GroupedQueryAttention(head_dim, num_query_heads, num_key_value_heads) (Keras 3's keras.layers.GroupQueryAttention,
// Ainslie et al. 2023): MultiHeadAttention with num_key_value_heads key/value heads shared by the query heads (query
// head h reads key/value head h / (num_query_heads / num_key_value_heads); 1 key/value head: multi-query attention),
// called on {query, value} or {query, value, key}: query (T, C) -> (T, C), the value's features as many as the
// query's. Weights: query kernel (C, query heads, head_dim) and bias (query heads, head_dim), key's (Ck, key/value
// heads, head_dim) and (key/value heads, head_dim), value's likewise, the output's (query heads, head_dim, C) and
// (C). Scores scaled by 1/sqrt(head_dim); masks and call options as MultiHeadAttention's.
struct GroupedQueryAttentionOptions {
  double dropout = 0.0;
  bool use_bias = true;
  bool use_gate = false;  // as MultiHeadAttention's: the gate's kernel (C, query heads, head_dim)
  bool use_causal_mask = false;
  int sliding_window = 0;
  bool attention_mask_input = false;
  bool return_attention_scores = false;  // as MultiHeadAttention's: (query heads, T, S)
  Initializer kernel_initializer = "glorot_uniform";
  Initializer bias_initializer = "zeros";
  Regularizer kernel_regularizer = {}, bias_regularizer = {}, activity_regularizer = {};
  Constraint kernel_constraint = {}, bias_constraint = {};
  std::optional<std::uint64_t> seed;
  std::string name;
};
LayerRef GroupedQueryAttention(int head_dim, int num_query_heads, int num_key_value_heads,
                               const GroupedQueryAttentionOptions& options = {});

// augment (branch augment): noise and image augmentation, active only while training (the identity at inference,
// as in Keras 3; RandomCrop: see below). Random draws are keyed by (seed, training step) and differ per replica;
// without a seed the layer draws one from the global generator (set_random_seed).
struct NoiseOptions {
  std::optional<std::uint64_t> seed;
  std::string name;
};
LayerRef GaussianNoise(double stddev, const NoiseOptions& options = {});  // y = x + N(0, stddev^2)
LayerRef GaussianDropout(double rate, const NoiseOptions& options = {});  // y = x * N(1, rate / (1 - rate))

// A factor as Keras takes it: one number f (the range (-f, f); RandomContrast: (0, f)) or a pair (lower, upper).
struct Factor {
  double lower = 0, upper = 0;
  bool pair = false;                                             // given as a pair (written back as one)
  Factor(double f) : lower(-std::abs(f)), upper(std::abs(f)) {}  // NOLINT: implicit like Keras's float
  Factor(double lo, double hi) : lower(std::min(lo, hi)), upper(std::max(lo, hi)), pair(true) {}
};
// The geometric layers' options: fill_mode "reflect", "wrap", "constant" or "nearest"; interpolation "nearest" or
// "bilinear" (Keras 3's defaults).
struct ImageAugmentOptions {
  std::string fill_mode = "reflect";
  std::string interpolation = "bilinear";
  std::optional<std::uint64_t> seed;
  double fill_value = 0.0;
  std::string name;
};
// mode "horizontal", "vertical" or "horizontal_and_vertical" (one draw flips both axes, as Keras 3 does).
LayerRef RandomFlip(const std::string& mode = "horizontal_and_vertical", const NoiseOptions& options = {});
LayerRef RandomTranslation(Factor height_factor, Factor width_factor,
                           const ImageAugmentOptions& options = {});
LayerRef RandomRotation(Factor factor, const ImageAugmentOptions& options = {});  // fractions of 360 degrees
// width_factor none: the width zoom is the height zoom.
LayerRef RandomZoom(Factor height_factor, std::optional<Factor> width_factor = std::nullopt,
                    const ImageAugmentOptions& options = {});
struct RandomContrastOptions {
  std::array<double, 2> value_range = {0, 255};
  std::optional<std::uint64_t> seed;
  std::string name;
};
LayerRef RandomContrast(Factor factor, const RandomContrastOptions& options = {});  // factor in [0, 1]
// Training: a random window (one per batch, as Keras 3) when the input is larger than (height, width) in both
// axes, else Keras 3's fallback (a window's corner sliced and resized to (height, width)). Inference: the identity
// when the input has the output's size, else tf.keras's smart_resize (the largest centred window with the
// output's aspect ratio, resized bilinearly): Keras 3.15 returns its input unchanged there, which does not have
// the layer's own output shape.
LayerRef RandomCrop(int height, int width, const NoiseOptions& options = {});

}  // namespace systolic::layers
