// Image augmentation on CUDA: augment_images (the input pipeline's shifts and flips over batches on the device,
// ops/augment_math.h's formulas) and the noise and augmentation layers' ops (augment branch):
// gaussian_noise_forward/backward, random_image_transforms, affine_transform_images, random_contrast. Plain kernels
// (cuDNN has none of these), the formulas shared with the CPU loops (ops/augment_math.h, ops/image_transform_math.h),
// so the draws equal the CPU's. float32 data. Each reads kernel -> launcher (takes a stream) -> entry.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/philox.h"
#include "ops/augment.h"
#include "ops/cuda/context.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/kernels.cuh"
#include "ops/image_transform_math.h"

namespace systolic::ops::cuda {

namespace {

// ---- kernels

// augment_images: one thread per output pixel (all its channels).

__global__ void augment_kernel(const float* x, float* y, std::int64_t N, std::int64_t H, std::int64_t W,
                               std::int64_t C, augment::Config config, std::uint64_t seed,
                               std::uint64_t first) {
  const std::int64_t pixels = H * W;
  SYSTOLIC_GRID_STRIDE(p, N * pixels) {
    std::int64_t k = p / pixels, rest = p - k * pixels;
    std::int64_t row = rest / W, col = rest - row * W;
    augment::Draw d = augment::draw(config, H, W, seed, first + static_cast<std::uint64_t>(k));
    augment::pixel(x + k * pixels * C, W, C, augment::tap(H, row, d.rows, false),
                   augment::tap(W, col, d.cols, d.flip), config, y + p * C);
  }
}

// Thread g: elements 2g and 2g+1 from one Box-Muller pair, as the CPU loop.
__global__ void noise_kernel(const float* in, float* out, std::int64_t n, double stddev, bool multiplicative,
                             bool forward, std::uint64_t seed, const double* step) {
  const std::uint64_t key = philox::dropout_key(seed, step ? *step : 0.0);
  SYSTOLIC_GRID_STRIDE(g, (n + 1) / 2) {
    image::NormalPair z = image::normal_pair(key, static_cast<std::uint64_t>(g));
    for (int k = 0; k < 2 && 2 * g + k < n; ++k) {
      const std::int64_t i = 2 * g + k;
      const double e = stddev * (k ? z.z1 : z.z0);
      if (multiplicative)
        out[i] = static_cast<float>(double(in[i]) * (1.0 + e));
      else
        out[i] = forward ? static_cast<float>(double(in[i]) + e) : in[i];
    }
  }
}

__global__ void transforms_kernel(float* m, std::int64_t N, image::TransformConfig config, std::int64_t H,
                                  std::int64_t W, std::uint64_t seed, const double* step) {
  const std::uint64_t key = philox::dropout_key(seed, step ? *step : 0.0);
  SYSTOLIC_GRID_STRIDE(n, N) {
    double t[8];
    image::transform_matrix(config, image::draw_transform(config, H, W, key, static_cast<std::uint64_t>(n)),
                            H, W, t);
    for (int k = 0; k < 8; ++k) m[n * 8 + k] = static_cast<float>(t[k]);
  }
}

// One thread per output pixel (all its channels).
__global__ void affine_kernel(const float* x, const float* m, float* y, std::int64_t N, std::int64_t H,
                              std::int64_t W, std::int64_t C, std::int64_t OH, std::int64_t OW,
                              image::SampleConfig s) {
  SYSTOLIC_GRID_STRIDE(p, N * OH * OW) {
    const std::int64_t n = p / (OH * OW), oy = (p / OW) % OH, ox = p % OW;
    image::sample_pixel(x + n * H * W * C, H, W, C, m + n * 8, oy, ox, s, y + p * C);
  }
}

// One thread per (image, channel): its mean over H*W, then its pixels.
__global__ void contrast_kernel(const float* x, float* y, std::int64_t N, std::int64_t HW, std::int64_t C,
                                double lower, double upper, double lo, double hi, std::uint64_t seed,
                                const double* step) {
  const std::uint64_t key = philox::dropout_key(seed, step ? *step : 0.0);
  SYSTOLIC_GRID_STRIDE(q, N * C) {
    const std::int64_t n = q / C, c = q % C;
    const float* in = x + n * HW * C + c;
    float* out = y + n * HW * C + c;
    double sum = 0;
    for (std::int64_t i = 0; i < HW; ++i) sum += double(in[i * C]);
    const double mean = sum / double(HW);
    const double f = image::contrast_factor(key, static_cast<std::uint64_t>(n), lower, upper);
    for (std::int64_t i = 0; i < HW; ++i) {
      double v = (double(in[i * C]) - mean) * f + mean;
      out[i * C] = static_cast<float>(v < lo ? lo : (v > hi ? hi : v));
    }
  }
}

// ---- launchers

cudaError_t launch_augment_images(const float* x, float* y, std::int64_t N, std::int64_t H, std::int64_t W,
                                  std::int64_t C, const augment::Config& config, std::uint64_t seed,
                                  std::uint64_t first, cudaStream_t stream) {
  std::int64_t n = N * H * W;
  if (n == 0 || C == 0) return cudaSuccess;
  return launch_elementwise(augment_kernel, n, stream, x, y, N, H, W, C, config, seed, first);
}

cudaError_t launch_noise(const float* in, float* out, std::int64_t n, const NoiseParams& p, bool forward,
                         std::uint64_t seed, const double* step, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return launch_elementwise(noise_kernel, (n + 1) / 2, stream, in, out, n, p.stddev, p.multiplicative,
                            forward, seed, step);
}

cudaError_t launch_transforms(float* m, std::int64_t N, const image::TransformConfig& config, std::int64_t H,
                              std::int64_t W, std::uint64_t seed, const double* step, cudaStream_t stream) {
  if (N == 0) return cudaSuccess;
  return launch_elementwise(transforms_kernel, N, stream, m, N, config, H, W, seed, step);
}

cudaError_t launch_affine(const float* x, const float* m, float* y, std::int64_t N, std::int64_t H,
                          std::int64_t W, std::int64_t C, std::int64_t OH, std::int64_t OW,
                          const image::SampleConfig& s, cudaStream_t stream) {
  const std::int64_t pixels = N * OH * OW;
  if (pixels == 0 || C == 0) return cudaSuccess;
  return launch_elementwise(affine_kernel, pixels, stream, x, m, y, N, H, W, C, OH, OW, s);
}

cudaError_t launch_contrast(const float* x, float* y, std::int64_t N, std::int64_t HW, std::int64_t C,
                            const ContrastParams& p, std::uint64_t seed, const double* step,
                            cudaStream_t stream) {
  if (N * C == 0 || HW == 0) return cudaSuccess;
  return launch_elementwise(contrast_kernel, N * C, stream, x, y, N, HW, C, p.lower, p.upper, p.value_min,
                            p.value_max, seed, step);
}

const double* step_of(const Tensor& step) {
  return step.defined() ? step.data<double>() : nullptr;
}

}  // namespace

// ---- entries

const DTypes augment_images_dtypes{DType::float32};
void augment_images(const Tensor& x, Tensor& y, const AugmentParams& p, std::uint64_t seed,
                    std::uint64_t first) {
  augment::Dims d = augment::dims_of(x);
  Context& c = context(y);
  SYSTOLIC_CUDA_CHECK(launch_augment_images(x.data<float>(), y.data<float>(), d.N, d.H, d.W, d.C,
                                            augment::config_of(p), seed, first, c.stream));
}

const DTypes gaussian_noise_forward_dtypes{DType::float32};
void gaussian_noise_forward(const Tensor& x, Tensor& y, const NoiseParams& p, std::uint64_t seed,
                            const Tensor& step) {
  Context& c = context(y);
  SYSTOLIC_CUDA_CHECK(
      launch_noise(x.data<float>(), y.data<float>(), x.numel(), p, true, seed, step_of(step), c.stream));
}

const DTypes gaussian_noise_backward_dtypes{DType::float32};
void gaussian_noise_backward(const Tensor& dy, Tensor& dx, const NoiseParams& p, std::uint64_t seed,
                             const Tensor& step) {
  Context& c = context(dx);
  SYSTOLIC_CUDA_CHECK(
      launch_noise(dy.data<float>(), dx.data<float>(), dy.numel(), p, false, seed, step_of(step), c.stream));
}

const DTypes random_image_transforms_dtypes{DType::float32};
void random_image_transforms(Tensor& transforms, const ImageTransformParams& p, std::int64_t height,
                             std::int64_t width, std::uint64_t seed, const Tensor& step) {
  Context& c = context(transforms);
  SYSTOLIC_CUDA_CHECK(launch_transforms(transforms.data<float>(), transforms.dim(0),
                                        augment::transform_config(p), height, width, seed, step_of(step),
                                        c.stream));
}

const DTypes affine_transform_images_dtypes{DType::float32};
void affine_transform_images(const Tensor& x, const Tensor& transforms, Tensor& y,
                             const AffineTransformParams& p) {
  Context& c = context(y);
  SYSTOLIC_CUDA_CHECK(launch_affine(x.data<float>(), transforms.data<float>(), y.data<float>(), x.dim(0),
                                    x.dim(1), x.dim(2), x.dim(3), y.dim(1), y.dim(2),
                                    augment::sample_config(p), c.stream));
}

const DTypes random_contrast_dtypes{DType::float32};
void random_contrast(const Tensor& x, Tensor& y, const ContrastParams& p, std::uint64_t seed,
                     const Tensor& step) {
  Context& c = context(y);
  SYSTOLIC_CUDA_CHECK(launch_contrast(x.data<float>(), y.data<float>(), x.dim(0), x.dim(1) * x.dim(2),
                                      x.dim(3), p, seed, step_of(step), c.stream));
}

}  // namespace systolic::ops::cuda
