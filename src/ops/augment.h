// The host side of ops::augment_images shared by the backends: the checks of its tensors and options, and the
// options in the form of ops/augment_math.h (which nvcc compiles, so it cannot see ops.h).
#pragma once

#include <systolic/ops.h>

#include <cmath>

#include "ops/augment_math.h"

namespace systolic::ops::augment {

inline Config config_of(const AugmentParams& p) {
  return {.width_shift_range = p.width_shift_range,
          .height_shift_range = p.height_shift_range,
          .horizontal_flip = p.horizontal_flip,
          .fill_constant = p.fill_constant,
          .cval = static_cast<float>(p.cval)};
}

struct Dims {
  std::int64_t N, H, W, C;
};

// x, y: float32 (n, H, W, C) or (n, H, W), the same shape, not overlapping; shift ranges finite and >= 0.
inline Dims check(const Tensor& x, const Tensor& y, const AugmentParams& p) {
  SYSTOLIC_CHECK(x.defined() && y.defined(), "augment_images: x and y must be defined");
  SYSTOLIC_CHECK(x.dtype() == DType::float32 && y.dtype() == DType::float32,
                 "augment_images takes float32 images, not {} -> {}", dtype_name(x.dtype()),
                 dtype_name(y.dtype()));
  SYSTOLIC_CHECK((x.rank() == 4 || x.rank() == 3) && x.shape() == y.shape(),
                 "augment_images: x {} and y {} must be the same images (N, H, W, C)", x.shape().str(),
                 y.shape().str());
  SYSTOLIC_CHECK(std::isfinite(p.width_shift_range) && p.width_shift_range >= 0 &&
                     std::isfinite(p.height_shift_range) && p.height_shift_range >= 0,
                 "augment_images: shift ranges must be finite and >= 0, got width {} and height {}",
                 p.width_shift_range, p.height_shift_range);
  auto xb = static_cast<const char*>(x.raw_data()), yb = static_cast<const char*>(y.raw_data());
  SYSTOLIC_CHECK(x.numel() == 0 || yb >= xb + x.nbytes() || xb >= yb + y.nbytes(),
                 "augment_images: y must not overlap x");
  return {x.dim(0), x.dim(1), x.dim(2), x.rank() == 4 ? x.dim(3) : 1};
}

}  // namespace systolic::ops::augment
