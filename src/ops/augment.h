// The host side of ops::augment_images shared by the backends: the options in the form of ops/augment_math.h
// (which nvcc compiles for the kernel) and the images' dimensions. The arguments are checked in ops.cc.
#pragma once

#include <systolic/ops.h>

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

// Images (N, H, W, C) or (N, H, W).
inline Dims dims_of(const Tensor& x) {
  return {x.dim(0), x.dim(1), x.dim(2), x.rank() == 4 ? x.dim(3) : 1};
}

}  // namespace systolic::ops::augment
