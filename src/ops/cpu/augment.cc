// Image augmentation on the CPU: the math is ops/augment_math.h's, shared with the CUDA kernel. augment_image
// does one image serially (the input pipeline calls it from its own threads, converting uint8 rows on the
// fly); the op augment_images runs a batch over OpenMP threads, one sample per iteration.
#include "ops/augment.h"

#include <vector>

#include "ops/cpu/augment_image.h"
#include "ops/cpu/cpu_backend.h"

namespace systolic::ops::cpu {

template <class S>
void augment_image(const S* in, float* out, std::int64_t H, std::int64_t W, std::int64_t C,
                   const AugmentParams& p, std::uint64_t seed, std::uint64_t index) {
  augment::Config a = augment::config_of(p);
  augment::Draw d = augment::draw(a, H, W, seed, index);
  std::vector<augment::Tap> cols(static_cast<std::size_t>(W));
  for (std::int64_t x = 0; x < W; ++x) cols[x] = augment::tap(W, x, d.cols, d.flip);
  for (std::int64_t y = 0; y < H; ++y) {
    augment::Tap row = augment::tap(H, y, d.rows, false);
    for (std::int64_t x = 0; x < W; ++x) augment::pixel(in, W, C, row, cols[x], a, out + (y * W + x) * C);
  }
}

const DTypes augment_images_dtypes{DType::float32};
void augment_images(const Tensor& x, Tensor& y, const AugmentParams& p, std::uint64_t seed,
                    std::uint64_t first) {
  augment::Dims d = augment::dims_of(x);
  const std::int64_t N = d.N, H = d.H, W = d.W, C = d.C;
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  std::int64_t image = H * W * C;
#pragma omp parallel for
  for (std::int64_t k = 0; k < N; ++k)
    augment_image(xp + k * image, yp + k * image, H, W, C, p, seed, first + static_cast<std::uint64_t>(k));
}

template void augment_image<std::uint8_t>(const std::uint8_t*, float*, std::int64_t, std::int64_t,
                                          std::int64_t, const AugmentParams&, std::uint64_t, std::uint64_t);
template void augment_image<std::int32_t>(const std::int32_t*, float*, std::int64_t, std::int64_t,
                                          std::int64_t, const AugmentParams&, std::uint64_t, std::uint64_t);
template void augment_image<float>(const float*, float*, std::int64_t, std::int64_t, std::int64_t,
                                   const AugmentParams&, std::uint64_t, std::uint64_t);
template void augment_image<double>(const double*, float*, std::int64_t, std::int64_t, std::int64_t,
                                    const AugmentParams&, std::uint64_t, std::uint64_t);

}  // namespace systolic::ops::cpu
