// One image's augmentation on the CPU (ops/augment_math.h's formulas, as the augment_images op and the CUDA
// kernel compute them): the input pipeline calls it from its own threads, converting rows of any source type
// (uint8, int32, float, double) to float on the fly. Image (H, W, C); sample `index` draws from Philox at
// (seed, index).
#pragma once

#include <systolic/ops.h>

#include <cstdint>

namespace systolic::ops::cpu {

template <class S>
void augment_image(const S* in, float* out, std::int64_t H, std::int64_t W, std::int64_t C,
                   const AugmentParams& p, std::uint64_t seed, std::uint64_t index);

}  // namespace systolic::ops::cpu
