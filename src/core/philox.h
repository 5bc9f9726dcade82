// Philox4x32-10 and the key mixing of per-step randomness, shared by the CPU code and the CUDA kernels
// (compiled by both g++ and nvcc), so a dropout mask or an augmentation is the same on every device for a
// given seed.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define SYSTOLIC_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define SYSTOLIC_HOST_DEVICE inline
#endif

namespace systolic::philox {

struct U32x4 {
  std::uint32_t v[4];
};

// Each replica of a data-parallel step draws its own random numbers (as each replica of a tf.distribute strategy
// does): replica r's random layers use seed + r * kReplicaStride. On XLA devices the replica is a value of the
// SPMD program (stablehlo.replica_id), so that every replica runs the same program (ops/xla/philox.cc).
constexpr std::uint64_t kReplicaStride = 0xD1B54A32D192ED03ull;
SYSTOLIC_HOST_DEVICE std::uint64_t replica_seed(std::uint64_t seed, int replica) {
  return seed + kReplicaStride * static_cast<std::uint64_t>(replica);
}

// Salmon et al., "Parallel random numbers: as easy as 1, 2, 3": ten rounds over a 128-bit counter, 64-bit
// key.
SYSTOLIC_HOST_DEVICE U32x4 philox4x32(U32x4 c, std::uint32_t k0, std::uint32_t k1) {
  constexpr std::uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u, W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    std::uint64_t p0 = static_cast<std::uint64_t>(M0) * c.v[0];
    std::uint64_t p1 = static_cast<std::uint64_t>(M1) * c.v[2];
    std::uint32_t hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
    std::uint32_t hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
    c = U32x4{{hi1 ^ c.v[1] ^ k0, lo1, hi0 ^ c.v[3] ^ k1, lo0}};
    k0 += W0;
    k1 += W1;
  }
  return c;
}

// The four random words at counter (index, 0) under a 64-bit key.
SYSTOLIC_HOST_DEVICE U32x4 random4(std::uint64_t key, std::uint64_t index) {
  return philox4x32(
      U32x4{{static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(index >> 32), 0u, 0u}},
      static_cast<std::uint32_t>(key), static_cast<std::uint32_t>(key >> 32));
}

#if !defined(__CUDACC__)
// random4(key, first + j) for j = 0 .. L-1 at once, words in element order (out[4*j + k] = word k of group
// first + j): the same bits as L calls of random4, computed lane by lane in each round so that the compiler
// vectorises the multiplies (the CPU's dropout draws millions of words per training step).
template <int L>
__attribute__((always_inline)) inline void random4_lanes(std::uint64_t key, std::uint64_t first,
                                                         std::uint32_t* out) {
  constexpr std::uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u, W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
  std::uint32_t c0[L], c1[L], c2[L], c3[L];
  for (int j = 0; j < L; ++j) {
    c0[j] = static_cast<std::uint32_t>(first + j);
    c1[j] = static_cast<std::uint32_t>((first + j) >> 32);
    c2[j] = c3[j] = 0u;
  }
  std::uint32_t k0 = static_cast<std::uint32_t>(key), k1 = static_cast<std::uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    for (int j = 0; j < L; ++j) {
      std::uint64_t p0 = static_cast<std::uint64_t>(M0) * c0[j];
      std::uint64_t p1 = static_cast<std::uint64_t>(M1) * c2[j];
      std::uint32_t n0 = static_cast<std::uint32_t>(p1 >> 32) ^ c1[j] ^ k0;
      std::uint32_t n2 = static_cast<std::uint32_t>(p0 >> 32) ^ c3[j] ^ k1;
      c1[j] = static_cast<std::uint32_t>(p1);
      c3[j] = static_cast<std::uint32_t>(p0);
      c0[j] = n0;
      c2[j] = n2;
    }
    k0 += W0;
    k1 += W1;
  }
  for (int j = 0; j < L; ++j) {
    out[4 * j] = c0[j];
    out[4 * j + 1] = c1[j];
    out[4 * j + 2] = c2[j];
    out[4 * j + 3] = c3[j];
  }
}
#endif

// Uniform float in [0, 1) from 32 random bits (24 significant bits).
SYSTOLIC_HOST_DEVICE float unit_float(std::uint32_t x) {
  return static_cast<float>(x >> 8) * (1.0f / 16777216.0f);
}

// splitmix64's finaliser: a well-mixed 64-bit value from a weakly varying one.
SYSTOLIC_HOST_DEVICE std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The Philox key of a dropout mask: the layer's seed mixed with the model's training step (read on the
// device, so the step need not be known when a CUDA graph of the step is captured).
SYSTOLIC_HOST_DEVICE std::uint64_t dropout_key(std::uint64_t seed, double step) {
  return mix64(seed + 0x9E3779B97F4A7C15ull * (static_cast<std::uint64_t>(step) + 1));
}

}  // namespace systolic::philox
