// Element types. float32 is the master and default compute type; float64 exists for gradient checks (CPU
// reference ops); bfloat16 for the mixed precision policy; uint8 for data sets; int32 for labels.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace systolic {

enum class DType : std::uint8_t { float32, float64, bfloat16, uint8, int32 };

std::size_t dtype_size(DType dtype);
std::string_view dtype_name(DType dtype);
DType dtype_from_name(std::string_view name);  // throws Error naming the unknown type
bool is_floating(DType dtype);

// bfloat16 storage: the upper 16 bits of an IEEE float32, rounded to nearest even.
struct bfloat16 {
  std::uint16_t bits = 0;
  bfloat16() = default;
  explicit bfloat16(float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    // Without branches, so that loops converting arrays vectorise.
    const std::uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const std::uint32_t quiet_nan = (u >> 16) | 0x40u;  // keep NaN a NaN
    bits = static_cast<std::uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
  }
  explicit operator float() const {
    std::uint32_t u = static_cast<std::uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

template <class T>
struct dtype_of;
template <>
struct dtype_of<float> {
  static constexpr DType value = DType::float32;
};
template <>
struct dtype_of<double> {
  static constexpr DType value = DType::float64;
};
template <>
struct dtype_of<bfloat16> {
  static constexpr DType value = DType::bfloat16;
};
template <>
struct dtype_of<std::uint8_t> {
  static constexpr DType value = DType::uint8;
};
template <>
struct dtype_of<std::int32_t> {
  static constexpr DType value = DType::int32;
};

}  // namespace systolic
