// Repeatable randomness. Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3") is
// counter based: the value at (seed, counter) needs no state, so dropout masks, shuffles and initialisers are
// the same on every device and thread count for a given seed.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace systolic {

std::array<std::uint32_t, 4> philox4x32(std::array<std::uint32_t, 4> counter,
                                        std::array<std::uint32_t, 2> key);

// A stream of random numbers: key = seed, counter advances. Keras's SeedGenerator plays this role.
class Generator {
 public:
  explicit Generator(std::uint64_t seed = 0) : seed_(seed) {}
  std::uint64_t seed() const { return seed_; }
  std::uint32_t next_u32();
  std::uint64_t next_u64();
  double uniform();  // [0, 1) with 53 bits
  double normal();   // standard normal (Box-Muller)
  // A fresh seed for a consumer (a layer, an epoch's shuffle) drawn from this stream.
  std::uint64_t split() { return next_u64(); }
  std::vector<std::int64_t> permutation(std::int64_t n);  // Fisher-Yates

 private:
  std::uint64_t seed_;
  std::uint64_t counter_ = 0;
  std::array<std::uint32_t, 4> block_{};
  int used_ = 4;
};

// The process-wide generator that layers and fit draw seeds from (keras.utils.set_random_seed).
Generator& global_generator();
void set_random_seed(std::uint64_t seed);

}  // namespace systolic
