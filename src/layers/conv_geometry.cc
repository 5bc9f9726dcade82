// The convolutions' and pooling windows' geometry (conv_geometry.h): TensorFlow's padding rule per axis.
#include "layers/conv_geometry.h"

#include <systolic/error.h>

#include <algorithm>
#include <utility>

#include "layers/config.h"

namespace systolic::layers {

AxisPadding pad_axis(std::int64_t in, const WindowAxis& axis, const std::string& padding) {
  const std::int64_t k_eff = std::int64_t(axis.kernel - 1) * axis.dilation + 1, s = axis.stride;
  if (padding == "valid") {
    if (in < k_eff) return {0, 0, 0};
    return {(in - k_eff) / s + 1, 0, 0};
  }
  const std::int64_t out = (in + s - 1) / s;
  if (padding == "causal") return {out, static_cast<int>(k_eff - 1), 0};
  const std::int64_t pad = std::max<std::int64_t>(0, (out - 1) * s + k_eff - in);
  return {out, static_cast<int>(pad / 2), static_cast<int>(pad - pad / 2)};
}

ConvGeometry::ConvGeometry(Pair kernel, Pair strides, Pair dilation, std::string padding)
    : axes_{WindowAxis{kernel[0], strides[0], dilation[0]}, WindowAxis{kernel[1], strides[1], dilation[1]}},
      rank_(2),
      padding_(std::move(padding)) {}

ConvGeometry::ConvGeometry(int kernel, int stride, int dilation, std::string padding)
    : axes_{WindowAxis{kernel, stride, dilation}, WindowAxis{}}, rank_(1), padding_(std::move(padding)) {}

void check_padding(const std::string& padding, const std::string& layer, bool causal) {
  if (causal)
    SYSTOLIC_CHECK(padding == "valid" || padding == "same" || padding == "causal",
                   "layer '{}': padding '{}' is not 'valid', 'same' or 'causal'", layer, padding);
  else
    SYSTOLIC_CHECK(padding == "valid" || padding == "same",
                   "layer '{}': padding '{}' is not 'valid' or 'same'", layer, padding);
}

void ConvGeometry::check(const std::string& layer, GeometryRules rules) const {
  const auto every = [&](auto&& positive) {
    for (int a = 0; a < rank_; ++a)
      if (!positive(axes_[a])) return false;
    return true;
  };
  SYSTOLIC_CHECK(every([](const WindowAxis& x) { return x.kernel > 0; }),
                 "layer '{}': kernel_size must be positive", layer);
  SYSTOLIC_CHECK(every([](const WindowAxis& x) { return x.stride > 0; }),
                 "layer '{}': strides must be positive", layer);
  SYSTOLIC_CHECK(every([](const WindowAxis& x) { return x.dilation > 0; }),
                 "layer '{}': dilation_rate must be positive", layer);
  if (!rules.strides_with_dilation)
    SYSTOLIC_CHECK(every([](const WindowAxis& x) { return x.stride == 1; }) ||
                       every([](const WindowAxis& x) { return x.dilation == 1; }),
                   "layer '{}': strides > 1 together with dilation_rate > 1 is not supported (as in Keras)",
                   layer);
  check_padding(padding_, layer, rules.causal);
}

std::array<std::int64_t, 2> ConvGeometry::output_extents(const Shape& sample) const {
  std::array<std::int64_t, 2> out{0, 0};
  for (int a = 0; a < rank_; ++a) out[a] = pad(a, sample[a]).out;
  return out;
}

bool ConvGeometry::fits(const Shape& sample) const {
  auto out = output_extents(sample);
  for (int a = 0; a < rank_; ++a)
    if (out[a] <= 0) return false;
  return true;
}

ConvGeometry::Axes2D ConvGeometry::axes_2d(const Shape& x) const {
  if (rank_ == 1) return {WindowAxis{}, axes_[0], AxisPadding{1, 0, 0}, pad(0, x[1])};
  return {axes_[0], axes_[1], pad(0, x[1]), pad(1, x[2])};
}

ops::Conv2DParams ConvGeometry::conv2d_params(const Shape& x, int groups,
                                              systolic::Activation activation) const {
  const Axes2D g = axes_2d(x);
  return {.stride_h = g.h.stride,
          .stride_w = g.w.stride,
          .dilation_h = g.h.dilation,
          .dilation_w = g.w.dilation,
          .pad_top = g.ph.before,
          .pad_bottom = g.ph.after,
          .pad_left = g.pw.before,
          .pad_right = g.pw.after,
          .groups = groups,
          .activation = activation};
}

ops::Pool2DParams ConvGeometry::pool2d_params(const Shape& x, ops::PoolKind kind) const {
  const Axes2D g = axes_2d(x);
  return {kind,        g.h.kernel, g.w.kernel,  g.h.stride, g.w.stride,
          g.ph.before, g.ph.after, g.pw.before, g.pw.after};
}

Tensor as_2d(const Tensor& t) {
  return t.defined() ? t.reshape({t.dim(0), 1, t.dim(1), t.dim(2)}) : t;
}

bool data_format_1d(const std::string& format, const std::string& layer) {
  SYSTOLIC_CHECK(format == "channels_last" || format == "channels_first",
                 "layer '{}': data_format must be channels_last or channels_first, got '{}'", layer, format);
  return format == "channels_first";
}
bool read_data_format_1d(ConfigReader& r) {
  const std::string f = r.get_string("data_format", "channels_last");
  if (f != "channels_last" && f != "channels_first")
    r.fail_option("data_format", "unsupported value '" + f + "'");
  return f == "channels_first";
}

void check_depthwise_options(const std::string& layer, const ConvGeometry& geometry, int depth_multiplier) {
  geometry.check(layer);
  SYSTOLIC_CHECK(depth_multiplier > 0, "layer '{}': depth_multiplier must be positive", layer);
}

}  // namespace systolic::layers
