#include <systolic/random.h>

#include <cmath>
#include <numbers>

#include "core/philox.h"

namespace systolic {

std::array<std::uint32_t, 4> philox4x32(std::array<std::uint32_t, 4> c, std::array<std::uint32_t, 2> k) {
  auto r = philox::philox4x32(philox::U32x4{{c[0], c[1], c[2], c[3]}}, k[0], k[1]);
  return {r.v[0], r.v[1], r.v[2], r.v[3]};
}

std::uint32_t Generator::next_u32() {
  if (used_ == 4) {
    block_ =
        philox4x32({static_cast<std::uint32_t>(counter_), static_cast<std::uint32_t>(counter_ >> 32), 0, 0},
                   {static_cast<std::uint32_t>(seed_), static_cast<std::uint32_t>(seed_ >> 32)});
    ++counter_;
    used_ = 0;
  }
  return block_[used_++];
}

std::uint64_t Generator::next_u64() {
  std::uint64_t hi = next_u32();
  return (hi << 32) | next_u32();
}

double Generator::uniform() {
  return static_cast<double>(next_u64() >> 11) * 0x1.0p-53;
}

double Generator::normal() {
  double u1 = uniform(), u2 = uniform();
  if (u1 < 1e-300) u1 = 1e-300;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

std::vector<std::int64_t> Generator::permutation(std::int64_t n) {
  std::vector<std::int64_t> p(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) p[i] = i;
  for (std::int64_t i = n - 1; i > 0; --i) {
    // Unbiased bounded draw (Lemire's method would be faster; shuffles are not hot).
    std::uint64_t bound = static_cast<std::uint64_t>(i) + 1;
    std::uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    std::uint64_t r;
    do r = next_u64();
    while (r >= limit);
    std::swap(p[i], p[static_cast<std::int64_t>(r % bound)]);
  }
  return p;
}

Generator& global_generator() {
  static Generator generator(1337);
  return generator;
}

void set_random_seed(std::uint64_t seed) {
  global_generator() = Generator(seed);
}

}  // namespace systolic
