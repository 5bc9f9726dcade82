// The scalar math of image augmentation (ops::augment_images, contract in include/systolic/ops.h), shared by
// the host loop (augment::augment_image in ops/augment.h, which the CPU backend's op, ops/cpu/augment.cc, and the
// input pipeline run) and the CUDA kernel (ops/cuda/augment.cu): compiled by g++ and nvcc alike, so the shifts,
// flips and interpolation cannot drift between devices.
//
// Sample `index` draws four Philox words at counter (index, 0x5eed) under key `seed`: word 0 the row shift,
// word 1 the column shift, word 2 the flip. Keras's ImageDataGenerator: tx (rows) from height_shift_range, ty
// (columns) from width_shift_range, each uniform in [-range, range), a range < 1 being a fraction of the
// size. Output pixel (y, x) reads input (y + tx, x' + ty) by bilinear interpolation, x' = x or W-1-x when
// flipped (the flip comes after the shift, as in Keras's apply_transform); positions beyond the edge are
// clamped ("nearest") or give cval ("constant").
#pragma once

#include <cmath>
#include <cstdint>

#include "core/philox.h"

namespace systolic::ops::augment {

// The options of ops::AugmentParams in a form nvcc can take (ops.h includes fmt, which nvcc cannot compile).
struct Config {
  double width_shift_range = 0.0, height_shift_range = 0.0;
  bool horizontal_flip = false;
  bool fill_constant = false;
  float cval = 0.0f;
};

// One sample's draw: the shift of rows and of columns (in pixels) and whether it is flipped.
struct Draw {
  double rows = 0.0, cols = 0.0;
  bool flip = false;
};

// Arithmetic rounded after each operation on every device: nvcc (and ptxas) would fuse a multiply and a
// following add into one fma, rounded once; the host compiler does not on x86-64.
SYSTOLIC_HOST_DEVICE double mul_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
SYSTOLIC_HOST_DEVICE double add_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
SYSTOLIC_HOST_DEVICE float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
SYSTOLIC_HOST_DEVICE float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

// Uniform in [-range, range): (2u - 1) * range.
SYSTOLIC_HOST_DEVICE double uniform_pm(std::uint32_t bits, double range) {
  return mul_rn(add_rn(mul_rn(2.0, double(philox::unit_float(bits))), -1.0), range);
}

SYSTOLIC_HOST_DEVICE Draw draw(const Config& a, std::int64_t H, std::int64_t W, std::uint64_t seed,
                               std::uint64_t index) {
  philox::U32x4 r =
      philox::philox4x32(philox::U32x4{{static_cast<std::uint32_t>(index),
                                        static_cast<std::uint32_t>(index >> 32), 0x5eedu, 0u}},
                         static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32));
  Draw d;
  if (a.height_shift_range > 0) d.rows = uniform_pm(r.v[0], a.height_shift_range);
  if (a.width_shift_range > 0) d.cols = uniform_pm(r.v[1], a.width_shift_range);
  if (a.height_shift_range < 1) d.rows = mul_rn(d.rows, double(H));
  if (a.width_shift_range < 1) d.cols = mul_rn(d.cols, double(W));
  d.flip = a.horizontal_flip && philox::unit_float(r.v[2]) < 0.5f;
  return d;
}

// One axis of the shift: output position i reads input positions lo and hi with weight t on hi (scipy's
// affine_transform, order 1); `outside` when the unclamped position is beyond the edge.
struct Tap {
  std::int64_t lo = 0, hi = 0;
  float t = 0.0f;
  bool outside = false;
};

SYSTOLIC_HOST_DEVICE Tap tap(std::int64_t n, std::int64_t i, double shift, bool flip) {
  std::int64_t o = flip ? n - 1 - i : i;
  double p = add_rn(double(o), shift);
  double last = double(n - 1);
  Tap k;
  k.outside = p < 0 || p > last;
  p = p < 0 ? 0.0 : (p > last ? last : p);
  double f = floor(p);
  k.lo = static_cast<std::int64_t>(f);
  k.hi = k.lo + 1 < n ? k.lo + 1 : n - 1;
  k.t = static_cast<float>(add_rn(p, -f));
  return k;
}

// a + (b - a) * t.
SYSTOLIC_HOST_DEVICE float lerp(float a, float b, float t) {
  return add_rn(a, mul_rn(add_rn(b, -a), t));
}

// Output pixel out[0..C) from an image (H, W, C) of any numeric type, given the taps of its row and column.
template <class S>
SYSTOLIC_HOST_DEVICE void pixel(const S* image, std::int64_t W, std::int64_t C, const Tap& row,
                                const Tap& col, const Config& a, float* out) {
  if (a.fill_constant && (row.outside || col.outside)) {
    for (std::int64_t c = 0; c < C; ++c) out[c] = a.cval;
    return;
  }
  const S* top = image + row.lo * W * C;
  const S* bottom = image + row.hi * W * C;
  for (std::int64_t c = 0; c < C; ++c) {
    float t = lerp(static_cast<float>(top[col.lo * C + c]), static_cast<float>(top[col.hi * C + c]), col.t);
    float b =
        lerp(static_cast<float>(bottom[col.lo * C + c]), static_cast<float>(bottom[col.hi * C + c]), col.t);
    out[c] = lerp(t, b, row.t);
  }
}

}  // namespace systolic::ops::augment
