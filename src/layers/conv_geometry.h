// The geometry of Keras's convolutions and pooling windows, one spatial axis at a time: the layers' kernel_size,
// strides, dilation_rate and padding turned into output extents and the conv2d and pool2d ops' parameters. Conv2D,
// Conv2DTranspose, DepthwiseConv2D, SeparableConv2D and the pooling layers use it; a 1-D layer has one spatial axis,
// which runs as the W axis of the 2-D ops (H = 1, no stride, no padding).
//
// TensorFlow's padding rule, per axis (k_eff = (k-1)*dilation + 1):
//   valid:  out = floor((in - k_eff) / s) + 1 (0 when the kernel does not fit), no padding;
//   same:   out = ceil(in / s), pad = max(0, (out-1)*s + k_eff - in), before = floor(pad/2), after = the rest;
//   causal: out = ceil(in / s), before = k_eff - 1, after = 0 (Keras's 1-D causal padding: left padding, then
//           valid; only a layer that allows it takes it).
#pragma once

#include <systolic/layers.h>
#include <systolic/ops.h>

#include <array>
#include <cstdint>
#include <string>

namespace systolic::layers {

// One spatial axis of a window: its extent (kernel or pool size), stride and dilation.
struct WindowAxis {
  int kernel = 1, stride = 1, dilation = 1;
};

// An axis' output extent and the padding before and after its input.
struct AxisPadding {
  std::int64_t out;
  int before, after;
};

// TensorFlow's padding rule above along one axis of input extent `in`.
AxisPadding pad_axis(std::int64_t in, const WindowAxis& axis, const std::string& padding);

// What a layer's options may hold beyond the common rules.
struct GeometryRules {
  bool causal = false;                 // padding 'causal' (1-D convolutions)
  bool strides_with_dilation = false;  // strides and dilation_rate both above 1 (Conv2DTranspose)
};

// A window over 1 or 2 spatial axes with one padding name.
class ConvGeometry {
 public:
  // The 2-D layers' (H, W) options.
  ConvGeometry(Pair kernel, Pair strides, Pair dilation, std::string padding);
  // A 1-D layer's options.
  ConvGeometry(int kernel, int stride, int dilation, std::string padding);

  int rank() const { return rank_; }
  const WindowAxis& axis(int a) const { return axes_[a]; }
  const std::string& padding() const { return padding_; }

  // Error naming `layer` unless the kernel, strides and dilation are positive, strides and dilation are not both
  // above 1 (as in Keras; unless the rules allow it) and the padding is 'valid' or 'same' (or 'causal' where
  // allowed). Keras's option names in the messages.
  void check(const std::string& layer, GeometryRules rules = {}) const;

  // Padding and output extent along spatial axis a for the input extent `in`.
  AxisPadding pad(int a, std::int64_t in) const { return pad_axis(in, axes_[a], padding_); }

  // The output extents of the spatial axes of a sample shape (spatial axes first, then channels: (H, W, C) or
  // (L, C)); an extent of 0 where the kernel does not fit the input.
  std::array<std::int64_t, 2> output_extents(const Shape& sample) const;
  // Whether every output extent of a sample shape is positive.
  bool fits(const Shape& sample) const;

  // The conv2d ops' parameters for a batch of input shape x: (N, H, W, C), or (N, L, C) for a 1-D geometry,
  // which runs as (N, 1, L, C).
  ops::Conv2DParams conv2d_params(const Shape& x, int groups = 1,
                                  systolic::Activation activation = systolic::Activation::linear) const;
  // The pool2d ops' parameters for a batch of input shape x (as conv2d_params'; the dilation is 1).
  ops::Pool2DParams pool2d_params(const Shape& x, ops::PoolKind kind) const;

 private:
  // The input extents of the 2-D ops' H and W axes and their geometry: a 1-D geometry's axis is W.
  struct Axes2D {
    WindowAxis h, w;
    AxisPadding ph, pw;
  };
  Axes2D axes_2d(const Shape& x) const;

  std::array<WindowAxis, 2> axes_{};
  int rank_;
  std::string padding_;
};

// A batch of sequences (N, L, C) as the 2-D ops' (N, 1, L, C) view (a 1-D layer's axis is W); an undefined tensor
// stays undefined.
Tensor as_2d(const Tensor& t);

class ConfigReader;
// A 1-D pooling layer's data_format: true for "channels_first", false for "channels_last"; another value is an error
// naming the layer. read_data_format_1d reads it from a config (default channels_last).
bool data_format_1d(const std::string& format, const std::string& layer);
bool read_data_format_1d(ConfigReader& r);

// Error naming `layer` unless `padding` is 'valid' or 'same' (or 'causal' where allowed).
void check_padding(const std::string& padding, const std::string& layer, bool causal = false);

// The options DepthwiseConv2D and SeparableConv2D share: the geometry's rules and a positive depth multiplier.
void check_depthwise_options(const std::string& layer, const ConvGeometry& geometry, int depth_multiplier);

}  // namespace systolic::layers
