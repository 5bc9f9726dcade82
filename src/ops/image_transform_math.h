// The scalar math of the augmentation layers' ops (contracts in include/systolic/ops.h: gaussian_noise_*,
// random_image_transforms, affine_transform_images, random_contrast), shared by the CPU loops
// (ops/cpu/augment.cc) and the CUDA kernels (ops/cuda/augment.cu): compiled by g++ and nvcc alike, so the draws
// and the sampling cannot drift between devices. Plain structs only (nvcc compiles this without fmt).
//
// Random numbers: Philox (core/philox.h) under the key philox::dropout_key(seed, step), with a counter word
// naming the use (kNoiseSalt, kTransformSalt, kContrastSalt), so a layer's draws differ at every training step and
// are recomputed, not stored, by backward.
//
// The transforms are Keras's (keras.ops.image.affine_transform, TensorFlow's ImageProjectiveTransformV3): eight
// numbers [a0, a1, a2, b0, b1, b2, c0, c1] per image map an output pixel (x, y) (x the column) to the input
// point ((a0 x + a1 y + a2) / k, (b0 x + b1 y + b2) / k), k = c0 x + c1 y + 1. The point's coordinates are
// mapped by the fill mode (TensorFlow's map_coordinate), then read by nearest (rounded half away from zero) or
// bilinear interpolation; a pixel read outside the image gives fill_value.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/philox.h"
#include "ops/augment_math.h"

namespace systolic::ops::image {

constexpr std::uint32_t kNoiseSalt = 0x6e6f6973u, kTransformSalt = 0x7866726du, kContrastSalt = 0x636f6e74u;

// ---- Gaussian noise

// Two standard normal numbers (Box-Muller, in double) for elements 2g and 2g+1.
struct NormalPair {
  double z0, z1;
};
SYSTOLIC_HOST_DEVICE NormalPair normal_pair(std::uint64_t key, std::uint64_t g) {
  philox::U32x4 r = philox::philox4x32(
      philox::U32x4{{static_cast<std::uint32_t>(g), static_cast<std::uint32_t>(g >> 32), kNoiseSalt, 0u}},
      static_cast<std::uint32_t>(key), static_cast<std::uint32_t>(key >> 32));
  // u1 in (0, 1] from 53 bits (so the log is finite), u2 in [0, 1).
  const double two53 = 9007199254740992.0;
  std::uint64_t b1 = ((static_cast<std::uint64_t>(r.v[0]) << 32) | r.v[1]) >> 11;
  std::uint64_t b2 = ((static_cast<std::uint64_t>(r.v[2]) << 32) | r.v[3]) >> 11;
  double u1 = (static_cast<double>(b1) + 1.0) / two53;
  double u2 = static_cast<double>(b2) / two53;
  double radius = sqrt(-2.0 * log(u1));
  double angle = 6.283185307179586 * u2;
  return {radius * cos(angle), radius * sin(angle)};
}

// ---- Per-image transforms

// What random_image_transforms draws (ops::ImageTransformParams in nvcc's form).
enum TransformKind : int { kFlip = 0, kTranslation = 1, kRotation = 2, kZoom = 3, kCrop = 4 };
struct TransformConfig {
  int kind = kFlip;
  bool horizontal = false, vertical = false;              // flip
  double lower0 = 0, upper0 = 0, lower1 = 0, upper1 = 0;  // the factors' ranges (meaning per kind)
  bool same = false;                  // zoom: no width_factor, the width zoom is the height zoom
  std::int64_t out_h = 0, out_w = 0;  // crop: the output size
  bool center = false;                // crop: the centred window, no draw
};

// RandomCrop's random window: only when the image is larger than the output in both axes (Keras 3).
SYSTOLIC_HOST_DEVICE bool random_window(const TransformConfig& p, std::int64_t H, std::int64_t W) {
  return !p.center && H > p.out_h && W > p.out_w;
}

// The drawn values of one image, in the units Keras's layers draw them.
struct TransformDraw {
  bool flip = false;      // flip: uniform <= 0.5
  double dx = 0, dy = 0;  // translation: pixels (width, height); crop: the window's corner (column, row)
  double angle = 0;       // rotation: degrees
  double zx = 1, zy = 1;  // zoom: width and height zoom
};

SYSTOLIC_HOST_DEVICE double uniform_in(std::uint32_t bits, double lo, double hi) {
  return lo + (hi - lo) * double(philox::unit_float(bits));
}

// Image `index`'s draw (RandomCrop draws one window for the whole batch, as Keras does: index 0's).
SYSTOLIC_HOST_DEVICE TransformDraw draw_transform(const TransformConfig& p, std::int64_t H, std::int64_t W,
                                                  std::uint64_t key, std::uint64_t index) {
  if (p.kind == kCrop) index = 0;
  philox::U32x4 r =
      philox::philox4x32(philox::U32x4{{static_cast<std::uint32_t>(index),
                                        static_cast<std::uint32_t>(index >> 32), kTransformSalt, 0u}},
                         static_cast<std::uint32_t>(key), static_cast<std::uint32_t>(key >> 32));
  TransformDraw d;
  switch (p.kind) {
    case kFlip:
      d.flip = philox::unit_float(r.v[0]) <= 0.5f;
      break;
    case kTranslation:
      d.dy = uniform_in(r.v[0], p.lower0, p.upper0) * double(H);
      d.dx = uniform_in(r.v[1], p.lower1, p.upper1) * double(W);
      break;
    case kRotation:
      d.angle = uniform_in(r.v[0], p.lower0 * 360.0, p.upper0 * 360.0);
      break;
    case kZoom:
      d.zy = 1.0 + uniform_in(r.v[0], p.lower0, p.upper0);
      d.zx = p.same ? d.zy : 1.0 + uniform_in(r.v[1], p.lower1, p.upper1);
      break;
    case kCrop:
      if (random_window(p, H, W)) {
        d.dy = floor(double(philox::unit_float(r.v[0])) * double(H - p.out_h + 1));
        d.dx = floor(double(philox::unit_float(r.v[1])) * double(W - p.out_w + 1));
      }
      break;
  }
  return d;
}

// The eight numbers of a drawn transform (Keras's matrices: RandomFlip's flips written as transforms,
// RandomTranslation's _get_translation_matrix, the rotation of BaseImagePreprocessingLayer._compute_affine_matrix
// about the centre ((W-1)/2, (H-1)/2), RandomZoom's _get_zoom_matrix, RandomCrop's window).
SYSTOLIC_HOST_DEVICE void transform_matrix(const TransformConfig& p, const TransformDraw& d, std::int64_t H,
                                           std::int64_t W, double* m) {
  for (int i = 0; i < 8; ++i) m[i] = 0;
  m[0] = 1;
  m[4] = 1;
  switch (p.kind) {
    case kFlip:
      if (d.flip && p.horizontal) m[0] = -1, m[2] = double(W - 1);
      if (d.flip && p.vertical) m[4] = -1, m[5] = double(H - 1);
      break;
    case kTranslation:
      m[2] = -d.dx;
      m[5] = -d.dy;
      break;
    case kRotation: {
      double a = d.angle * (3.141592653589793 / 180.0);
      double c = cos(a), s = sin(a);
      double cx = 0.5 * double(W - 1), cy = 0.5 * double(H - 1);
      m[0] = c;
      m[1] = -s;
      m[2] = cx - cx * m[0] - cy * m[1];
      m[3] = s;
      m[4] = c;
      m[5] = cy - cx * m[3] - cy * m[4];
      break;
    }
    case kZoom:
      m[0] = d.zx;
      m[2] = (double(W) - 1.0) / 2.0 * (1.0 - d.zx);
      m[4] = d.zy;
      m[5] = (double(H) - 1.0) / 2.0 * (1.0 - d.zy);
      break;
    case kCrop:
      if (random_window(p, H, W)) {
        m[2] = d.dx;
        m[5] = d.dy;
      } else {
        // The largest centred window with the output's aspect ratio, resized (bilinear, half-pixel centres) to the
        // output. Training (Keras 3's fallback when the image is not larger in both axes) slices the window's
        // corner as [start, start + out), so it may be shorter or longer; centre (inference) is tf.keras's
        // smart_resize: the whole window.
        std::int64_t ch = std::int64_t(double(W * p.out_h) / double(p.out_w));
        ch = ch < H ? ch : H;
        ch = ch > 1 ? ch : 1;
        std::int64_t cw = std::int64_t(double(H * p.out_w) / double(p.out_h));
        cw = cw < W ? cw : W;
        cw = cw > 1 ? cw : 1;
        std::int64_t h0 = std::int64_t(double(H - ch) / 2), w0 = std::int64_t(double(W - cw) / 2);
        std::int64_t sh = H - h0 < p.out_h ? H - h0 : p.out_h, sw = W - w0 < p.out_w ? W - w0 : p.out_w;
        if (p.center) sh = ch, sw = cw;
        double sy = double(sh) / double(p.out_h), sx = double(sw) / double(p.out_w);
        m[0] = sx;
        m[2] = 0.5 * sx - 0.5 + double(w0);
        m[4] = sy;
        m[5] = 0.5 * sy - 0.5 + double(h0);
      }
      break;
  }
}

// ---- Sampling

enum FillMode : int { kReflect = 0, kWrap = 1, kConstant = 2, kNearest = 3 };
struct SampleConfig {
  int fill_mode = kReflect;
  bool bilinear = true;
  double fill_value = 0;
};

// TensorFlow's map_coordinate (image_ops.h) for one axis of length n, in float32 as TensorFlow computes it (so a
// coordinate that lands on a rounding tie rounds as there); every operation rounded on its own (no fma on nvcc).
SYSTOLIC_HOST_DEVICE float map_coordinate(float c, std::int64_t n, int mode) {
  using augment::add_rn;
  using augment::mul_rn;
  const float len = float(n);
  if (mode == kReflect) {
    if (c < 0) {
      if (n <= 1) {
        c = 0;
      } else {
        const float sz2 = 2 * len;
        if (c < sz2) c = add_rn(mul_rn(sz2, float(static_cast<std::int64_t>(-c / sz2))), c);
        c = (c < -len) ? add_rn(c, sz2) : add_rn(-c, -1.0f);
      }
    } else if (c > len - 1) {
      if (n <= 1) {
        c = 0;
      } else {
        const float sz2 = 2 * len;
        c = add_rn(c, -mul_rn(sz2, float(static_cast<std::int64_t>(c / sz2))));
        if (c >= len) c = add_rn(add_rn(sz2, -c), -1.0f);
      }
    }
  } else if (mode == kWrap) {
    if (c < 0) {
      if (n <= 1) {
        c = 0;
      } else {
        const float sz = len - 1;
        c = add_rn(c, mul_rn(len, float(static_cast<std::int64_t>(-c / sz)) + 1.0f));
      }
    } else if (c > len - 1) {
      if (n <= 1) {
        c = 0;
      } else {
        const float sz = len - 1;
        c = add_rn(c, -mul_rn(len, float(static_cast<std::int64_t>(c / sz))));
      }
    }
  } else if (mode == kConstant) {
    return c;
  }
  // nearest, and the clamp that ends reflect and wrap
  return c < 0 ? 0.0f : (c > len - 1 ? len - 1 : c);
}

// The value of channel ch at integer (y, x), fill_value outside the image.
template <class T>
SYSTOLIC_HOST_DEVICE double read_pixel(const T* image, std::int64_t H, std::int64_t W, std::int64_t C,
                                       std::int64_t y, std::int64_t x, std::int64_t ch, double fill) {
  if (y < 0 || y >= H || x < 0 || x >= W) return fill;
  return static_cast<double>(image[(y * W + x) * C + ch]);
}

// Output pixel (oy, ox) of an image (H, W, C) under transform m: its C channels into out.
template <class T, class M>
SYSTOLIC_HOST_DEVICE void sample_pixel(const T* image, std::int64_t H, std::int64_t W, std::int64_t C,
                                       const M* m, std::int64_t oy, std::int64_t ox, const SampleConfig& s,
                                       T* out) {
  using augment::add_rn;
  using augment::mul_rn;
  // The coordinates in float32, in TensorFlow's order of operations.
  const float x = float(ox), y = float(oy);
  const float k = add_rn(add_rn(mul_rn(float(m[6]), x), mul_rn(float(m[7]), y)), 1.0f);
  if (k == 0) {
    for (std::int64_t ch = 0; ch < C; ++ch) out[ch] = static_cast<T>(s.fill_value);
    return;
  }
  float ix = add_rn(add_rn(mul_rn(float(m[0]), x), mul_rn(float(m[1]), y)), float(m[2])) / k;
  float iy = add_rn(add_rn(mul_rn(float(m[3]), x), mul_rn(float(m[4]), y)), float(m[5])) / k;
  ix = map_coordinate(ix, W, s.fill_mode);
  iy = map_coordinate(iy, H, s.fill_mode);
  if (!s.bilinear) {
    std::int64_t ry = static_cast<std::int64_t>(roundf(iy)), rx = static_cast<std::int64_t>(roundf(ix));
    for (std::int64_t ch = 0; ch < C; ++ch)
      out[ch] = static_cast<T>(read_pixel(image, H, W, C, ry, rx, ch, s.fill_value));
    return;
  }
  const float fy = floorf(iy), fx = floorf(ix);
  const std::int64_t y0 = static_cast<std::int64_t>(fy), x0 = static_cast<std::int64_t>(fx);
  const double wy1 = double(iy) - double(fy), wy0 = 1 - wy1, wx1 = double(ix) - double(fx), wx0 = 1 - wx1;
  for (std::int64_t ch = 0; ch < C; ++ch) {
    double top = wx0 * read_pixel(image, H, W, C, y0, x0, ch, s.fill_value) +
                 wx1 * read_pixel(image, H, W, C, y0, x0 + 1, ch, s.fill_value);
    double bottom = wx0 * read_pixel(image, H, W, C, y0 + 1, x0, ch, s.fill_value) +
                    wx1 * read_pixel(image, H, W, C, y0 + 1, x0 + 1, ch, s.fill_value);
    out[ch] = static_cast<T>(wy0 * top + wy1 * bottom);
  }
}

// ---- Contrast

// Image `index`'s contrast factor, uniform in [lower, upper).
SYSTOLIC_HOST_DEVICE double contrast_factor(std::uint64_t key, std::uint64_t index, double lower,
                                            double upper) {
  philox::U32x4 r =
      philox::philox4x32(philox::U32x4{{static_cast<std::uint32_t>(index),
                                        static_cast<std::uint32_t>(index >> 32), kContrastSalt, 0u}},
                         static_cast<std::uint32_t>(key), static_cast<std::uint32_t>(key >> 32));
  return uniform_in(r.v[0], lower, upper);
}

}  // namespace systolic::ops::image
