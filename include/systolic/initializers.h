// Keras's weight initializers (keras.initializers) with their arguments and seeds. A name converts implicitly
// ("glorot_uniform", "zeros"), so option structs read as in Keras; set the fields for the arguments:
//   Initializer init = "random_normal"; init.stddev = 0.1; init.seed = 42;
// An unseeded initializer draws from the global generator (set_random_seed); a seeded one draws from its own
// generator started at its seed, so the same seed gives the same values (as Keras's seeded initializers do;
// systolic's generator is not TensorFlow's, so the values differ from Keras's).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace systolic {

struct Initializer {
  // Keras's snake_case names: zeros, ones, constant, glorot_uniform, glorot_normal, he_uniform, he_normal,
  // lecun_uniform, lecun_normal, random_uniform, random_normal, truncated_normal, variance_scaling,
  // orthogonal, identity.
  std::string name = "zeros";
  std::optional<std::uint64_t> seed;
  double mean = 0.0, stddev = 0.05;                                // random_normal, truncated_normal
  double minval = -0.05, maxval = 0.05;                            // random_uniform
  double scale = 1.0;                                              // variance_scaling
  std::string mode = "fan_in", distribution = "truncated_normal";  // variance_scaling
  double value = 0.0;                                              // constant
  double gain = 1.0;                                               // orthogonal, identity

  Initializer() = default;
  Initializer(const char* n) : name(n) {}             // NOLINT: implicit, as Keras takes names
  Initializer(std::string n) : name(std::move(n)) {}  // NOLINT
  bool operator==(const Initializer&) const = default;
};

}  // namespace systolic
