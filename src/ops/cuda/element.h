// The element types of systolic's CUDA kernels: the storage of a tensor's dtype (bfloat16 computes in float).
// One enum for every family's launchers; the host maps a DType to it with element_of (context.h). No systolic
// header here: nvcc compiles it.
#pragma once

#include <cstddef>

namespace systolic::ops::cuda {

enum class Element : int { float32, bfloat16, float64, int32, uint8 };

inline std::size_t element_size(Element e) {
  switch (e) {
    case Element::float32:
    case Element::int32:
      return 4;
    case Element::bfloat16:
      return 2;
    case Element::float64:
      return 8;
    case Element::uint8:
      return 1;
  }
  return 0;
}

}  // namespace systolic::ops::cuda
