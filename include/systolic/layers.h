// The layers, spelled as in Keras: sy::layers::Conv2D(32, {3, 3}, {.padding = "same", .activation = "relu"}).
// Each factory returns a LayerRef (call it on a SymbolicTensor); Input returns the SymbolicTensor itself.
// Option structs list Keras's arguments in Keras's order, so designated initializers read like keyword args.
#pragma once

#include <systolic/layer.h>

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
};
// Input(shape without the batch dimension).
SymbolicTensor Input(Shape shape, const InputOptions& options = {});

struct Conv2DOptions {
  Pair strides = {1, 1};
  std::string padding = "valid";  // "valid" or "same"
  Pair dilation_rate = {1, 1};
  std::string activation = "linear";
  bool use_bias = true;
  std::string kernel_initializer = "glorot_uniform";
  std::string bias_initializer = "zeros";
  std::string name;
};
LayerRef Conv2D(int filters, Pair kernel_size, const Conv2DOptions& options = {});

struct DenseOptions {
  std::string activation = "linear";
  bool use_bias = true;
  std::string kernel_initializer = "glorot_uniform";
  std::string bias_initializer = "zeros";
  std::string name;
};
LayerRef Dense(int units, const DenseOptions& options = {});

struct BatchNormalizationOptions {
  int axis = -1;  // only the last axis (channels_last) is supported
  double momentum = 0.99;
  double epsilon = 1e-3;
  bool center = true;
  bool scale = true;
  std::string beta_initializer = "zeros";
  std::string gamma_initializer = "ones";
  std::string moving_mean_initializer = "zeros";
  std::string moving_variance_initializer = "ones";
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
LayerRef GlobalAveragePooling2D(const NameOptions& options = {});

struct DropoutOptions {
  std::optional<std::uint64_t> seed;  // default: drawn from the global generator (set_random_seed)
  std::string name;
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
LayerRef Softmax(const NameOptions& options = {});

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
