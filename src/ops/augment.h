// The host side of ops::augment_images shared by the backends: the options in the form of ops/augment_math.h
// (which nvcc compiles for the kernel) and the images' dimensions. The arguments are checked in ops.cc.
#pragma once

#include <systolic/ops.h>

#include "ops/augment_math.h"
#include "ops/image_transform_math.h"

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

// Images (N, H, W, C) or (N, H, W).
inline Dims dims_of(const Tensor& x) {
  return {x.dim(0), x.dim(1), x.dim(2), x.rank() == 4 ? x.dim(3) : 1};
}

// The augmentation layers' ops (augment branch): their parameters in ops/image_transform_math.h's form.
inline image::TransformConfig transform_config(const ImageTransformParams& p) {
  return {.kind = static_cast<int>(p.kind),
          .horizontal = p.horizontal,
          .vertical = p.vertical,
          .lower0 = p.lower0,
          .upper0 = p.upper0,
          .lower1 = p.lower1,
          .upper1 = p.upper1,
          .same = p.same_zoom,
          .out_h = p.crop_h,
          .out_w = p.crop_w,
          .center = p.crop_center};
}

inline image::SampleConfig sample_config(const AffineTransformParams& p) {
  return {.fill_mode = static_cast<int>(p.fill_mode),
          .bilinear = p.interpolation == Interpolation::bilinear,
          .fill_value = p.fill_value};
}

}  // namespace systolic::ops::augment
