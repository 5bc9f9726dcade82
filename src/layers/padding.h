// The TensorFlow padding rule Keras uses for conv and pooling (k_eff = (k-1)*dilation + 1):
// VALID: out = floor((in - k_eff) / s) + 1; SAME: out = ceil(in / s), pad = max(0, (out-1)*s + k_eff - in),
// pad_before = floor(pad/2), pad_after = the rest.
#pragma once

#include <systolic/error.h>

#include <array>
#include <cstdint>
#include <string>

namespace systolic {

struct Padded {
  std::int64_t out;
  int before, after;
};

inline Padded tf_padding(std::int64_t in, int k, int stride, int dilation, const std::string& padding) {
  std::int64_t k_eff = std::int64_t(k - 1) * dilation + 1;
  if (padding == "valid") {
    if (in < k_eff) return {in - k_eff < 0 ? 0 : 1, 0, 0};
    return {(in - k_eff) / stride + 1, 0, 0};
  }
  std::int64_t out = (in + stride - 1) / stride;
  std::int64_t pad = std::max<std::int64_t>(0, (out - 1) * stride + k_eff - in);
  return {out, static_cast<int>(pad / 2), static_cast<int>(pad - pad / 2)};
}

inline void check_padding_name(const std::string& padding, const std::string& layer) {
  SYSTOLIC_CHECK(padding == "valid" || padding == "same", "layer '{}': padding '{}' is not 'valid' or 'same'",
                 layer, padding);
}

// The options DepthwiseConv2D and SeparableConv2D share: positive kernel, strides, dilation and depth
// multiplier, not both strides and dilation above 1 (as in Keras), a known padding.
inline void check_depthwise_options(const std::string& layer, std::array<int, 2> kernel,
                                    std::array<int, 2> strides, std::array<int, 2> dilation,
                                    int depth_multiplier, const std::string& padding) {
  SYSTOLIC_CHECK(kernel[0] > 0 && kernel[1] > 0, "layer '{}': kernel_size must be positive", layer);
  SYSTOLIC_CHECK(depth_multiplier > 0, "layer '{}': depth_multiplier must be positive", layer);
  SYSTOLIC_CHECK(strides[0] > 0 && strides[1] > 0, "layer '{}': strides must be positive", layer);
  SYSTOLIC_CHECK(dilation[0] > 0 && dilation[1] > 0, "layer '{}': dilation_rate must be positive", layer);
  SYSTOLIC_CHECK((strides[0] == 1 && strides[1] == 1) || (dilation[0] == 1 && dilation[1] == 1),
                 "layer '{}': strides > 1 together with dilation_rate > 1 is not supported (as in Keras)",
                 layer);
  check_padding_name(padding, layer);
}

}  // namespace systolic
