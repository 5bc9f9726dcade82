// Image augmentation and noise on the XLA backend (xla_backend.h). NOT YET EMITTED: these ops take no dtype on XLA devices yet
// (ops::supports is false, and a call is refused by name before it gets here).
#include <systolic/error.h>

#include "ops/xla/emit.h"
#include "ops/xla/xla_backend.h"

namespace systolic::ops::xla {

const DTypes augment_images_dtypes{};
void augment_images(const Tensor& x, Tensor& y, const AugmentParams& p, std::uint64_t seed,
                    std::uint64_t first) {
  fail("xla: augment_images is not emitted yet");
}

const DTypes gaussian_noise_forward_dtypes{};
void gaussian_noise_forward(const Tensor& x, Tensor& y, const NoiseParams& p, std::uint64_t seed,
                            const Tensor& step) {
  fail("xla: gaussian_noise_forward is not emitted yet");
}

const DTypes gaussian_noise_backward_dtypes{};
void gaussian_noise_backward(const Tensor& dy, Tensor& dx, const NoiseParams& p, std::uint64_t seed,
                             const Tensor& step) {
  fail("xla: gaussian_noise_backward is not emitted yet");
}

const DTypes random_image_transforms_dtypes{};
void random_image_transforms(Tensor& transforms, const ImageTransformParams& p, std::int64_t height,
                             std::int64_t width, std::uint64_t seed, const Tensor& step) {
  fail("xla: random_image_transforms is not emitted yet");
}

const DTypes affine_transform_images_dtypes{};
void affine_transform_images(const Tensor& x, const Tensor& transforms, Tensor& y,
                             const AffineTransformParams& p) {
  fail("xla: affine_transform_images is not emitted yet");
}

const DTypes random_contrast_dtypes{};
void random_contrast(const Tensor& x, Tensor& y, const ContrastParams& p, std::uint64_t seed,
                     const Tensor& step) {
  fail("xla: random_contrast is not emitted yet");
}

}  // namespace systolic::ops::xla
