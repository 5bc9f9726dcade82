// Philox in StableHLO (philox.h): core/philox.h's formulas, op for op.
#include "ops/xla/philox.h"

#include "core/philox.h"

namespace systolic::ops::xla::philox {

namespace {

E scalar_u(std::uint64_t v, Elem e) {
  return uconstant(v, Type{e, {}});
}
E splat(const E& scalar, const std::vector<std::int64_t>& dims) {
  return broadcast(scalar, dims, {});
}

// The seed as a value. A replica's random layers are given replica_seed(seed, r) (core/philox.h); in an SPMD program
// the replica is stablehlo.replica_id, so the program takes r's stride back out of the seed and adds replica_id's:
// every replica traces the same text and draws its own numbers.
E seed_value(std::uint64_t seed) {
  Trace& t = trace();
  if (t.replicas() == 1) return scalar_u(seed, Elem::u64);
  const std::uint64_t first =
      seed - systolic::philox::kReplicaStride * static_cast<std::uint64_t>(t.replica());
  return scalar_u(first, Elem::u64) +
         scalar_u(systolic::philox::kReplicaStride, Elem::u64) * convert(E(t.replica_id()), Elem::u64);
}

}  // namespace

Words philox4x32(const Words& c0, const E& key0, const E& key1) {
  constexpr std::uint64_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u, W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
  const auto& dims = c0[0].dims();
  const E m0 = uconstant(M0, Type{Elem::u64, dims}), m1 = uconstant(M1, Type{Elem::u64, dims});
  Words c = c0;
  E k0 = key0, k1 = key1;
  for (int round = 0; round < 10; ++round) {
    E p0 = convert(c[0], Elem::u64) * m0;
    E p1 = convert(c[2], Elem::u64) * m1;
    E hi0 = convert(shift_right(p0, 32), Elem::u32), lo0 = convert(p0, Elem::u32);
    E hi1 = convert(shift_right(p1, 32), Elem::u32), lo1 = convert(p1, Elem::u32);
    c = Words{hi1 ^ c[1] ^ splat(k0, dims), lo1, hi0 ^ c[3] ^ splat(k1, dims), lo0};
    k0 = k0 + scalar_u(W0, Elem::u32);
    k1 = k1 + scalar_u(W1, Elem::u32);
  }
  return c;
}

E dropout_key(std::uint64_t seed, const Tensor& step) {
  // mix64(seed + 0x9E3779B97F4A7C15 * (uint64(step) + 1)), splitmix64's finaliser.
  E s = convert(read_scalar(step, Elem::f64, 0.0), Elem::u64);
  E z = seed_value(seed) + scalar_u(0x9E3779B97F4A7C15ull, Elem::u64) * (s + scalar_u(1, Elem::u64));
  z = (z ^ shift_right(z, 30)) * scalar_u(0xBF58476D1CE4E5B9ull, Elem::u64);
  z = (z ^ shift_right(z, 27)) * scalar_u(0x94D049BB133111EBull, Elem::u64);
  return z ^ shift_right(z, 31);
}

Words random4(const E& key, std::int64_t count, std::uint32_t salt, std::uint64_t first) {
  const std::vector<std::int64_t> dims{count};
  E index = iota(dims, 0, Elem::u64);
  if (first) index = index + uconstant(first, Type{Elem::u64, dims});
  const E k0 = convert(key, Elem::u32), k1 = convert(shift_right(key, 32), Elem::u32);
  return philox4x32(Words{convert(index, Elem::u32), convert(shift_right(index, 32), Elem::u32),
                          uconstant(salt, Type{Elem::u32, dims}), uconstant(0, Type{Elem::u32, dims})},
                    k0, k1);
}

E unit_float(const E& word) {
  return convert(shift_right(word, 8), Elem::f32) * (1.0 / 16777216.0);
}

}  // namespace systolic::ops::xla::philox
