#include <systolic/dtype.h>
#include <systolic/error.h>

#include "core/dtype_dispatch.h"

namespace systolic {

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::float32:
      return 4;
    case DType::float64:
      return 8;
    case DType::bfloat16:
      return 2;
    case DType::uint8:
      return 1;
    case DType::int32:
      return 4;
  }
  return 0;
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::float32:
      return "float32";
    case DType::float64:
      return "float64";
    case DType::bfloat16:
      return "bfloat16";
    case DType::uint8:
      return "uint8";
    case DType::int32:
      return "int32";
  }
  return "?";
}

DType dtype_from_name(std::string_view name) {
  for (DType t : {DType::float32, DType::float64, DType::bfloat16, DType::uint8, DType::int32})
    if (dtype_name(t) == name) return t;
  fail("unknown dtype '{}' (known: float32, float64, bfloat16, uint8, int32)", name);
}

bool is_floating(DType dtype) {
  return dtype == DType::float32 || dtype == DType::float64 || dtype == DType::bfloat16;
}

void detail::unhandled_dtype(DType t) {
  fail("dtype {} is not handled here", dtype_name(t));
}

}  // namespace systolic
