// Image augmentation on the CPU: the math is ops/augment_math.h's, shared with the CUDA kernel. The op
// augment_images runs a batch over OpenMP threads, one sample per iteration, each through augment::augment_image
// (ops/augment.h), which the input pipeline also calls, one image at a time, from its own threads.
#include "ops/augment.h"

#include <algorithm>
#include <vector>

#include "ops/cpu/cpu_backend.h"
#include "ops/image_transform_math.h"

namespace systolic::ops::cpu {

const DTypes augment_images_dtypes{DType::float32};
void augment_images(const Tensor& x, Tensor& y, const AugmentParams& p, std::uint64_t seed,
                    std::uint64_t first) {
  augment::Dims d = augment::dims_of(x);
  const std::int64_t N = d.N, H = d.H, W = d.W, C = d.C;
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  std::int64_t image = H * W * C;
  parallel_ranges(N, N * image, [&](std::int64_t k0, std::int64_t k1) {
    for (std::int64_t k = k0; k < k1; ++k)
      augment::augment_image(xp + k * image, yp + k * image, H, W, C, p, seed,
                             first + static_cast<std::uint64_t>(k));
  });
}

// ---- augment (branch augment): the noise and augmentation layers' ops (formulas: ops/image_transform_math.h).
// Loops for float32 and float64 (oneDNN has no such primitives); float64 is the reference.

namespace {

double step_of(const Tensor& step) {
  return step.defined() ? step.data<double>()[0] : 0.0;
}

template <class T>
void noise_loop(const T* in, T* out, std::int64_t n, const NoiseParams& p, std::uint64_t key, bool forward) {
  parallel_ranges((n + 1) / 2, n, [&](std::int64_t g0, std::int64_t g1) {
    for (std::int64_t g = g0; g < g1; ++g) {
      image::NormalPair z = image::normal_pair(key, static_cast<std::uint64_t>(g));
      for (int k = 0; k < 2 && 2 * g + k < n; ++k) {
        const std::int64_t i = 2 * g + k;
        const double e = p.stddev * (k ? z.z1 : z.z0);
        if (p.multiplicative)
          out[i] = static_cast<T>(double(in[i]) * (1.0 + e));
        else
          out[i] = forward ? static_cast<T>(double(in[i]) + e) : in[i];
      }
    }
  });
}

template <class T>
void affine_loop(const Tensor& x, const Tensor& transforms, Tensor& y, const AffineTransformParams& p) {
  const std::int64_t N = x.dim(0), H = x.dim(1), W = x.dim(2), C = x.dim(3), OH = y.dim(1), OW = y.dim(2);
  const image::SampleConfig s = augment::sample_config(p);
  const T* xp = x.data<T>();
  const float* mp = transforms.data<float>();
  T* yp = y.data<T>();
  parallel_ranges(N * OH, N * OH * OW * C, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {  // r = n * OH + oy
      const std::int64_t n = r / OH, oy = r % OH;
      for (std::int64_t ox = 0; ox < OW; ++ox)
        image::sample_pixel(xp + n * H * W * C, H, W, C, mp + n * 8, oy, ox, s, yp + (r * OW + ox) * C);
    }
  });
}

template <class T>
void contrast_loop(const Tensor& x, Tensor& y, const ContrastParams& p, std::uint64_t key) {
  const std::int64_t N = x.dim(0), HW = x.dim(1) * x.dim(2), C = x.dim(3);
  const T* xp = x.data<T>();
  T* yp = y.data<T>();
  parallel_ranges(N * C, N * C * HW, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {  // r = n * C + c
      const std::int64_t n = r / C, c = r % C;
      const T* in = xp + n * HW * C + c;
      T* out = yp + n * HW * C + c;
      double sum = 0;
      for (std::int64_t i = 0; i < HW; ++i) sum += double(in[i * C]);
      const double mean = sum / double(HW);
      const double f = image::contrast_factor(key, static_cast<std::uint64_t>(n), p.lower, p.upper);
      for (std::int64_t i = 0; i < HW; ++i)
        out[i * C] =
            static_cast<T>(std::clamp((double(in[i * C]) - mean) * f + mean, p.value_min, p.value_max));
    }
  });
}

}  // namespace

const DTypes gaussian_noise_forward_dtypes = kFloats;
void gaussian_noise_forward(const Tensor& x, Tensor& y, const NoiseParams& p, std::uint64_t seed,
                            const Tensor& step) {
  std::uint64_t key = philox::dropout_key(seed, step_of(step));
  visit_dtype<float, double>(x.dtype(), [&](auto t) {
    using T = typename decltype(t)::type;
    noise_loop(x.data<T>(), y.data<T>(), x.numel(), p, key, true);
  });
}

const DTypes gaussian_noise_backward_dtypes = kFloats;
void gaussian_noise_backward(const Tensor& dy, Tensor& dx, const NoiseParams& p, std::uint64_t seed,
                             const Tensor& step) {
  std::uint64_t key = philox::dropout_key(seed, step_of(step));
  visit_dtype<float, double>(dy.dtype(), [&](auto t) {
    using T = typename decltype(t)::type;
    noise_loop(dy.data<T>(), dx.data<T>(), dy.numel(), p, key, false);
  });
}

const DTypes random_image_transforms_dtypes{DType::float32};
void random_image_transforms(Tensor& transforms, const ImageTransformParams& p, std::int64_t height,
                             std::int64_t width, std::uint64_t seed, const Tensor& step) {
  const std::uint64_t key = philox::dropout_key(seed, step_of(step));
  const image::TransformConfig config = augment::transform_config(p);
  float* mp = transforms.data<float>();
  for (std::int64_t n = 0; n < transforms.dim(0); ++n) {
    double m[8];
    image::transform_matrix(config,
                            image::draw_transform(config, height, width, key, static_cast<std::uint64_t>(n)),
                            height, width, m);
    for (int k = 0; k < 8; ++k) mp[n * 8 + k] = static_cast<float>(m[k]);
  }
}

const DTypes affine_transform_images_dtypes = kFloats;
void affine_transform_images(const Tensor& x, const Tensor& transforms, Tensor& y,
                             const AffineTransformParams& p) {
  visit_dtype<float, double>(x.dtype(),
                             [&](auto t) { affine_loop<typename decltype(t)::type>(x, transforms, y, p); });
}

const DTypes random_contrast_dtypes = kFloats;
void random_contrast(const Tensor& x, Tensor& y, const ContrastParams& p, std::uint64_t seed,
                     const Tensor& step) {
  const std::uint64_t key = philox::dropout_key(seed, step_of(step));
  visit_dtype<float, double>(x.dtype(),
                             [&](auto t) { contrast_loop<typename decltype(t)::type>(x, y, p, key); });
}

}  // namespace systolic::ops::cpu
