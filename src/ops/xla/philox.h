// Philox4x32-10 and the per-step keys of core/philox.h written in StableHLO integer ops, so that the XLA backend's
// random ops (dropout, noise, augmentation) draw the same bits as the CPU loops and the CUDA kernels for a given
// (seed, step, index). The step is a device tensor read inside the program (a recorded step replays with the
// step of the moment), so the key is a value of the program, never a constant.
//
// The 32x32 -> 64-bit products of a round are ui64 multiplies split into their high and low words (StableHLO has
// no multiply-high); ui64 arithmetic wraps as C++'s does.
#pragma once

#include <array>
#include <cstdint>

#include "ops/xla/emit.h"

namespace systolic::ops::xla::philox {

// Four ui32 words of one shape.
using Words = std::array<E, 4>;

// philox::philox4x32 of the counters `c` under the key (k0, k1) (ui32 scalars), elementwise.
Words philox4x32(const Words& c, const E& k0, const E& k1);

// philox::dropout_key(seed, step): a ui64 scalar, step read from the float64 [1] tensor (undefined: 0).
E dropout_key(std::uint64_t seed, const Tensor& step);

// The four words at counters (index, salt, 0) for index = 0 .. count-1 ([count] each), under a ui64 scalar key:
// philox::random4 (salt 0) and the salted draws of ops/image_transform_math.h and ops/augment_math.h.
Words random4(const E& key, std::int64_t count, std::uint32_t salt = 0, std::uint64_t first = 0);

// philox::unit_float: a float32 in [0, 1) from a word's top 24 bits.
E unit_float(const E& word);

}  // namespace systolic::ops::xla::philox
