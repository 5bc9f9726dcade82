// The host side of ops::augment_images shared by the backends: the options in the form of ops/augment_math.h
// (which nvcc compiles for the kernel), the images' dimensions, and one image's augmentation on the host, which the
// CPU backend's op and the input pipeline (src/model/pipeline.cc, from its own threads) both run. The arguments
// are checked in ops.cc.
#pragma once

#include <systolic/ops.h>

#include <cstdint>
#include <vector>

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

// One image (H, W, C) augmented serially into `out` (float, same shape), converting `in`'s values (uint8, int32,
// float, double) to float on the fly: ops/augment_math.h's formulas, as the CUDA kernel computes them. Sample
// `index` draws from Philox at (seed, index).
template <class S>
void augment_image(const S* in, float* out, std::int64_t H, std::int64_t W, std::int64_t C,
                   const AugmentParams& p, std::uint64_t seed, std::uint64_t index) {
  Config a = config_of(p);
  Draw d = draw(a, H, W, seed, index);
  std::vector<Tap> cols(static_cast<std::size_t>(W));
  for (std::int64_t x = 0; x < W; ++x) cols[x] = tap(W, x, d.cols, d.flip);
  for (std::int64_t y = 0; y < H; ++y) {
    Tap row = tap(H, y, d.rows, false);
    for (std::int64_t x = 0; x < W; ++x) pixel(in, W, C, row, cols[x], a, out + (y * W + x) * C);
  }
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
