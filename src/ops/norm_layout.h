// The layout of norms over a set of axes (ops::constrain): w's elements split into groups (one per coordinate of
// the kept axes) of `reduced` elements each (the coordinates of the norm axes). Shared by the CPU loops and the
// CUDA kernels; no systolic header here: nvcc compiles it.
#pragma once

#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define SYSTOLIC_HOST_DEVICE __host__ __device__
#else
#define SYSTOLIC_HOST_DEVICE
#endif

namespace systolic::ops {

struct NormLayout {
  int kept_rank = 0, reduced_rank = 0;
  std::int64_t kept_dim[8] = {}, kept_stride[8] = {}, reduced_dim[8] = {}, reduced_stride[8] = {};
  std::int64_t groups = 1, reduced = 1;

  // The row-major dims of w (rank <= 8) and the mask of the norm axes.
  static NormLayout of(const std::int64_t* dims, int rank, std::uint32_t axes) {
    NormLayout l;
    std::int64_t stride = 1;
    for (int a = rank - 1; a >= 0; --a) {
      if (axes >> a & 1u) {
        l.reduced_dim[l.reduced_rank] = dims[a];
        l.reduced_stride[l.reduced_rank++] = stride;
        l.reduced *= dims[a];
      } else {
        l.kept_dim[l.kept_rank] = dims[a];
        l.kept_stride[l.kept_rank++] = stride;
        l.groups *= dims[a];
      }
      stride *= dims[a];
    }
    return l;
  }
  // The offset of the g-th group's first element, and of the r-th element within a group.
  SYSTOLIC_HOST_DEVICE std::int64_t group_offset(std::int64_t g) const {
    std::int64_t at = 0;
    for (int k = 0; k < kept_rank; ++k) {
      at += (g % kept_dim[k]) * kept_stride[k];
      g /= kept_dim[k];
    }
    return at;
  }
  SYSTOLIC_HOST_DEVICE std::int64_t reduced_offset(std::int64_t r) const {
    std::int64_t at = 0;
    for (int k = 0; k < reduced_rank; ++k) {
      at += (r % reduced_dim[k]) * reduced_stride[k];
      r /= reduced_dim[k];
    }
    return at;
  }
};

// Keras 3's constraint of one group given its norm (eps = backend.epsilon() = 1e-7): the factor w is multiplied
// by (max_norm, unit_norm, min_max_norm; kind as ops::ConstraintParams::Kind).
SYSTOLIC_HOST_DEVICE inline double constraint_factor(int kind, double norm, double min_value,
                                                     double max_value, double rate) {
  const double eps = 1e-7;
  auto clip = [](double v, double lo, double hi) { return v < lo ? lo : (v > hi ? hi : v); };
  switch (kind) {
    case 0:  // max_norm
      return clip(norm, 0.0, max_value) / (eps + norm);
    case 2:  // unit_norm
      return 1.0 / (eps + norm);
    case 3:  // min_max_norm
      return (rate * clip(norm, min_value, max_value) + (1.0 - rate) * norm) / (eps + norm);
  }
  return 1.0;
}

// Keras's ops.normalize: x * min(rsqrt(sum x^2), 1/eps), eps = 1e-7. The scale of a vector whose squared norm is
// sq, and whether it is the rsqrt branch (else the gradient of the 1/eps branch is plain scaling).
SYSTOLIC_HOST_DEVICE inline double normalize_scale(double sq, bool& rsqrt_branch) {
  const double cap = 1e7;
  double inv = sq > 0 ? 1.0 / std::sqrt(sq) : cap + 1;
  rsqrt_branch = inv < cap;
  return rsqrt_branch ? inv : cap;
}

}  // namespace systolic::ops
