// Image augmentation and noise on the XLA backend (xla_backend.h): the formulas of ops/augment_math.h and
// ops/image_transform_math.h, shared by the CPU loops and the CUDA kernels, written over whole batches. The draws
// are Philox in the program (philox.h), keyed by (seed, step) with the step read on the device, so they are the
// CPU's bits; what follows a draw is float arithmetic, which matches within the harness's tolerance (XLA may fuse
// a multiply and an add into one fma where the CPU rounds twice).
#include "ops/augment.h"

#include <systolic/error.h>

#include "ops/image_transform_math.h"
#include "ops/xla/emit.h"
#include "ops/xla/philox.h"
#include "ops/xla/xla_backend.h"

namespace systolic::ops::xla {

namespace {

// Rows of `table` [R, C] at `index` (int32 [M]): [M, C].
E gather_rows(const E& table, const E& index) {
  const std::int64_t M = index.dims()[0], C = table.dims()[1];
  return hlo().op("stablehlo.gather", {table.v, reshape(index, {M, 1}).v}, Type{table.elem(), {M, C}},
                  "dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], "
                  "start_index_map = [0], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = " +
                      systolic::xla::i64_array({1, C}));
}

// [n] broadcast over `dims`, along axis 0 (one value per image).
E per_image(const E& v, const std::vector<std::int64_t>& dims) {
  return broadcast(v, dims, {0});
}

// Gaussian noise (image::normal_pair, the CPU's noise_loop): element 2g + k takes z_k of pair g, from the words at
// (g, kNoiseSalt); Box-Muller in double, the data's arithmetic in double, rounded to the dtype once.
void noise_apply(const Tensor& in, const Tensor& out, const NoiseParams& p, std::uint64_t seed,
                 const Tensor& step, bool forward) {
  if (!p.multiplicative && !forward) {  // additive noise passes the gradient through
    write(out, read(in));
    return;
  }
  const std::int64_t n = in.numel(), pairs = (n + 1) / 2;
  philox::Words r = philox::random4(philox::dropout_key(seed, step), pairs, image::kNoiseSalt);
  auto bits53 = [](const E& hi, const E& lo) {
    return shift_right(shift_left(convert(hi, Elem::u64), 32) | convert(lo, Elem::u64), 11);
  };
  const double two53 = 9007199254740992.0;
  E u1 = (convert(bits53(r[0], r[1]), Elem::f64) + 1.0) / two53;
  E u2 = convert(bits53(r[2], r[3]), Elem::f64) / two53;
  E radius = sqrt(-2.0 * log(u1));
  E angle = 6.283185307179586 * u2;
  E z0 = reshape(radius * cos(angle), {pairs, 1}), z1 = reshape(radius * sin(angle), {pairs, 1});
  E z = reshape(E(hlo().concatenate({z0.v, z1.v}, 1)), {2 * pairs});
  E e = E(hlo().slice(z.v, {0}, {n})) * p.stddev;
  E x = reshape(read_as(in, Elem::f64), {n});
  write(out, p.multiplicative ? x * (1.0 + e) : x + e);
}

// image::uniform_in: lo + (hi - lo) * unit_float(word), in double.
E uniform_in(const E& word, double lo, double hi) {
  return lo + (hi - lo) * convert(philox::unit_float(word), Elem::f64);
}

}  // namespace

const DTypes augment_images_dtypes{DType::float32};
void augment_images(const Tensor& x, Tensor& y, const AugmentParams& p, std::uint64_t seed,
                    std::uint64_t first) {
  traced([&] {
    // augment::augment_image over the batch: sample k draws at (first + k, 0x5eed) under the key `seed`; each
    // output row and column reads two taps (augment::tap), blended in float32 by augment::lerp.
    const augment::Dims d = augment::dims_of(x);
    const std::int64_t N = d.N, H = d.H, W = d.W, C = d.C;
    const augment::Config a = augment::config_of(p);
    philox::Words r = philox::random4(uconstant(seed, Type{Elem::u64, {}}), N, 0x5eedu, first);
    auto uniform_pm = [](const E& word, double range) {
      return (2.0 * convert(philox::unit_float(word), Elem::f64) + -1.0) * range;
    };
    E rows = constant(0.0, Type{Elem::f64, {N}}), cols = rows;
    if (a.height_shift_range > 0) rows = uniform_pm(r[0], a.height_shift_range);
    if (a.width_shift_range > 0) cols = uniform_pm(r[1], a.width_shift_range);
    if (a.height_shift_range < 1) rows = rows * double(H);
    if (a.width_shift_range < 1) cols = cols * double(W);
    E flip = a.horizontal_flip ? philox::unit_float(r[2]) < 0.5 : constant(0.0, Type{Elem::i1, {N}});
    // One axis's taps for every sample: [N, n] lo, hi (int32), t (float32), outside.
    struct Taps {
      E lo, hi, t, outside;
    };
    auto taps = [&](std::int64_t n, const E& shift, const E* flipped) {
      const std::vector<std::int64_t> dims{N, n};
      E i = iota(dims, 1, Elem::f64);
      E o = flipped ? where(per_image(*flipped, dims), double(n - 1) - i, i) : i;
      E pos = o + per_image(shift, dims);
      const double last = double(n - 1);
      Taps k;
      k.outside = pos < 0.0 || pos > last;
      pos = where(pos < 0.0, 0.0, where(pos > last, last, pos));
      E f = floor(pos);
      k.lo = convert(f, Elem::i32);
      k.hi = minimum(k.lo + 1.0, double(n - 1));
      k.t = convert(pos - f, Elem::f32);
      return k;
    };
    Taps tr = taps(H, rows, nullptr), tc = taps(W, cols, &flip);
    // Every output pixel's four reads: rows of the image table [N*H*W, C].
    const std::vector<std::int64_t> px{N, H, W};
    auto bcast_rows = [&](const E& v) { return broadcast(v, px, {0, 1}); };
    auto bcast_cols = [&](const E& v) { return broadcast(v, px, {0, 2}); };
    E base = broadcast(iota({N}, 0, Elem::i32) * double(H * W), px, {0});
    E table = reshape(read_as(x, Elem::f32), {N * H * W, C});
    auto at = [&](const E& row, const E& col) {
      E idx = base + bcast_rows(row) * double(W) + bcast_cols(col);
      return reshape(gather_rows(table, reshape(idx, {N * H * W})), {N, H, W, C});
    };
    const std::vector<std::int64_t> full{N, H, W, C};
    E tcol = broadcast(tc.t, full, {0, 2}), trow = broadcast(tr.t, full, {0, 1});
    auto lerp = [](const E& lo, const E& hi, const E& t) { return lo + (hi - lo) * t; };
    E top = lerp(at(tr.lo, tc.lo), at(tr.lo, tc.hi), tcol);
    E bottom = lerp(at(tr.hi, tc.lo), at(tr.hi, tc.hi), tcol);
    E v = lerp(top, bottom, trow);
    if (a.fill_constant) {
      E outside = broadcast(bcast_rows(tr.outside) || bcast_cols(tc.outside), full, {0, 1, 2});
      v = where(outside, static_cast<double>(a.cval), v);
    }
    write(y, v);
  });
}

const DTypes gaussian_noise_forward_dtypes = kFloats;
void gaussian_noise_forward(const Tensor& x, Tensor& y, const NoiseParams& p, std::uint64_t seed,
                            const Tensor& step) {
  traced([&] { noise_apply(x, y, p, seed, step, true); });
}

const DTypes gaussian_noise_backward_dtypes = kFloats;
void gaussian_noise_backward(const Tensor& dy, Tensor& dx, const NoiseParams& p, std::uint64_t seed,
                             const Tensor& step) {
  traced([&] { noise_apply(dy, dx, p, seed, step, false); });
}

const DTypes random_image_transforms_dtypes{DType::float32};
void random_image_transforms(Tensor& transforms, const ImageTransformParams& p, std::int64_t height,
                             std::int64_t width, std::uint64_t seed, const Tensor& step) {
  traced([&] {
    // image::draw_transform and image::transform_matrix for every image at once (crop: image 0's draw for all).
    const image::TransformConfig c = augment::transform_config(p);
    const std::int64_t N = transforms.dim(0), H = height, W = width;
    const std::vector<std::int64_t> dims{N};
    const bool crop = c.kind == image::kCrop;
    philox::Words r = philox::random4(philox::dropout_key(seed, step), crop ? 1 : N, image::kTransformSalt);
    if (crop)
      for (E& w : r) w = broadcast(reshape(w, {}), dims, {});
    // The matrix of an undrawn transform (identity; crop's centred window), then the drawn entries.
    double fixed[8];
    image::transform_matrix(c, image::TransformDraw{}, H, W, fixed);
    std::vector<E> m;
    for (double v : fixed) m.push_back(constant(v, Type{Elem::f64, dims}));
    switch (c.kind) {
      case image::kFlip: {
        E flip = philox::unit_float(r[0]) <= 0.5;
        if (c.horizontal) m[0] = where(flip, -1.0, m[0]), m[2] = where(flip, double(W - 1), m[2]);
        if (c.vertical) m[4] = where(flip, -1.0, m[4]), m[5] = where(flip, double(H - 1), m[5]);
        break;
      }
      case image::kTranslation:
        m[5] = -(uniform_in(r[0], c.lower0, c.upper0) * double(H));
        m[2] = -(uniform_in(r[1], c.lower1, c.upper1) * double(W));
        break;
      case image::kRotation: {
        E a = uniform_in(r[0], c.lower0 * 360.0, c.upper0 * 360.0) * (3.141592653589793 / 180.0);
        E cs = cos(a), sn = sin(a);
        const double cx = 0.5 * double(W - 1), cy = 0.5 * double(H - 1);
        m[0] = cs;
        m[1] = -sn;
        m[2] = (cx - cx * m[0]) - cy * m[1];
        m[3] = sn;
        m[4] = cs;
        m[5] = (cy - cx * m[3]) - cy * m[4];
        break;
      }
      case image::kZoom: {
        E zy = 1.0 + uniform_in(r[0], c.lower0, c.upper0);
        E zx = c.same ? zy : 1.0 + uniform_in(r[1], c.lower1, c.upper1);
        m[0] = zx;
        m[2] = (double(W) - 1.0) / 2.0 * (1.0 - zx);
        m[4] = zy;
        m[5] = (double(H) - 1.0) / 2.0 * (1.0 - zy);
        break;
      }
      case image::kCrop:
        if (image::random_window(c, H, W)) {
          m[5] = floor(convert(philox::unit_float(r[0]), Elem::f64) * double(H - c.out_h + 1));
          m[2] = floor(convert(philox::unit_float(r[1]), Elem::f64) * double(W - c.out_w + 1));
        }
        break;
    }
    std::vector<Value> columns;
    for (const E& v : m) columns.push_back(reshape(v, {N, 1}).v);
    write(transforms, hlo().concatenate(columns, 1));
  });
}

const DTypes affine_transform_images_dtypes = kFloats;
void affine_transform_images(const Tensor& x, const Tensor& transforms, Tensor& y,
                             const AffineTransformParams& p) {
  traced([&] {
    // image::sample_pixel for every output pixel: the coordinates in float32 in TensorFlow's order, mapped by the
    // fill mode (image::map_coordinate), then nearest (half away from zero) or bilinear reads, in double.
    const std::int64_t N = x.dim(0), H = x.dim(1), W = x.dim(2), C = x.dim(3), OH = y.dim(1), OW = y.dim(2);
    const image::SampleConfig s = augment::sample_config(p);
    const std::vector<std::int64_t> px{N, OH, OW}, full{N, OH, OW, C};
    E mt = read_as(transforms, Elem::f32);
    auto m = [&](std::int64_t k) {
      return per_image(reshape(E(hlo().slice(mt.v, {0, k}, {N, k + 1})), {N}), px);
    };
    E X = iota(px, 2, Elem::f32), Y = iota(px, 1, Elem::f32);
    E k = (m(6) * X + m(7) * Y) + 1.0;
    E ix = ((m(0) * X + m(1) * Y) + m(2)) / k;
    E iy = ((m(3) * X + m(4) * Y) + m(5)) / k;
    auto map = [&](E c, std::int64_t n) {
      const double len = double(n);
      if (s.fill_mode == image::kConstant) return c;
      if (s.fill_mode == image::kReflect) {
        if (n <= 1) {
          c = where(c < 0.0 || c > len - 1, 0.0, c);
        } else {
          const double sz2 = 2 * len;
          E lo = like(sz2, c) * floor(-c / sz2) + c;  // c < 0 (then always below sz2)
          lo = where(lo < -len, lo + sz2, -lo + -1.0);
          E hi = c + -(like(sz2, c) * floor(c / sz2));
          hi = where(hi >= len, (like(sz2, c) - hi) + -1.0, hi);
          c = where(c < 0.0, lo, where(c > len - 1, hi, c));
        }
      } else if (s.fill_mode == image::kWrap) {
        if (n <= 1) {
          c = where(c < 0.0 || c > len - 1, 0.0, c);
        } else {
          const double sz = len - 1;
          E lo = c + like(len, c) * (floor(-c / sz) + 1.0);
          E hi = c + -(like(len, c) * floor(c / sz));
          c = where(c < 0.0, lo, where(c > len - 1, hi, c));
        }
      }
      return where(c < 0.0, 0.0, where(c > len - 1, len - 1, c));
    };
    ix = map(ix, W);
    iy = map(iy, H);
    // The pixel reads: rows of the image table [N*H*W, C], fill_value outside the image.
    E table = reshape(read_as(x, Elem::f64), {N * H * W, C});
    E base = broadcast(iota({N}, 0, Elem::i32) * double(H * W), px, {0});
    auto read_at = [&](const E& fy, const E& fx) {  // integral float32 coordinates
      E inside = fy >= 0.0 && fy <= double(H - 1) && fx >= 0.0 && fx <= double(W - 1);
      E ry = convert(clip(fy, 0.0, double(H - 1)), Elem::i32),
        rx = convert(clip(fx, 0.0, double(W - 1)), Elem::i32);
      E v = reshape(gather_rows(table, reshape(base + ry * double(W) + rx, {N * OH * OW})), full);
      return where(broadcast(inside, full, {0, 1, 2}), v, s.fill_value);
    };
    E v;
    if (!s.bilinear) {
      auto round_afz = [](const E& c) { return E(hlo().unary("stablehlo.round_nearest_afz", c.v)); };
      v = read_at(round_afz(iy), round_afz(ix));
    } else {
      E fy = floor(iy), fx = floor(ix);
      E wy1 = broadcast(convert(iy, Elem::f64) - convert(fy, Elem::f64), full, {0, 1, 2});
      E wx1 = broadcast(convert(ix, Elem::f64) - convert(fx, Elem::f64), full, {0, 1, 2});
      E wy0 = 1.0 - wy1, wx0 = 1.0 - wx1;
      E top = wx0 * read_at(fy, fx) + wx1 * read_at(fy, fx + 1.0);
      E bottom = wx0 * read_at(fy + 1.0, fx) + wx1 * read_at(fy + 1.0, fx + 1.0);
      v = wy0 * top + wy1 * bottom;
    }
    v = where(broadcast(eq(k, 0.0), full, {0, 1, 2}), s.fill_value, v);
    write(y, v);
  });
}

const DTypes random_contrast_dtypes = kFloats;
void random_contrast(const Tensor& x, Tensor& y, const ContrastParams& p, std::uint64_t seed,
                     const Tensor& step) {
  traced([&] {
    // The CPU's contrast_loop: the mean over H and W per image and channel, in double; image n's factor from the
    // word at (n, kContrastSalt).
    const std::int64_t N = x.dim(0), HW = x.dim(1) * x.dim(2);
    philox::Words r = philox::random4(philox::dropout_key(seed, step), N, image::kContrastSalt);
    E f = uniform_in(r[0], p.lower, p.upper);
    E v = read_as(x, Elem::f64);
    E mean = broadcast(sum(v, {1, 2}) / double(HW), v.dims(), {0, 3});
    write(y, clip((v - mean) * per_image(f, v.dims()) + mean, p.value_min, p.value_max));
  });
}

}  // namespace systolic::ops::xla
