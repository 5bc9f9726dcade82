// The norm family's shared pieces, for the CPU loops and the CUDA kernels alike (host and device): the index
// layout of a broadcasting binary op (and of a transpose), the binary ops' values and gradients, Keras
// Normalization's divisor. No systolic error formatting here: CUDA files include it.
#pragma once

#include <systolic/ops.h>
#include <systolic/tensor.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#ifdef __CUDACC__
#define SYSTOLIC_NORM_HD __host__ __device__ __forceinline__
#else
#define SYSTOLIC_NORM_HD inline
#endif

namespace systolic::ops {

inline constexpr int kMaxBroadcastRank = 8;

// y's dims and, over y's multi-index, the strides of a and b (0 along the axes they are broadcast along), all
// padded on the left to one rank. For a transpose, `a` is x read in y's order and `b` is unused.
struct BroadcastLayout {
  int rank = 0;
  std::int64_t dims[kMaxBroadcastRank] = {};
  std::int64_t a_dims[kMaxBroadcastRank] = {}, b_dims[kMaxBroadcastRank] = {};
  std::int64_t a_stride[kMaxBroadcastRank] = {}, b_stride[kMaxBroadcastRank] = {};
  std::int64_t y_stride[kMaxBroadcastRank] = {};

  // The offsets in a and b of y's element i.
  SYSTOLIC_NORM_HD void offsets(std::int64_t i, std::int64_t& oa, std::int64_t& ob) const {
    oa = 0, ob = 0;
    for (int d = rank - 1; d >= 0; --d) {
      std::int64_t k = i % dims[d];
      i /= dims[d];
      oa += k * a_stride[d];
      ob += k * b_stride[d];
    }
  }
  // How many elements of y feed one element of operand `which` (0: a, 1: b).
  SYSTOLIC_NORM_HD std::int64_t fan(int which) const {
    std::int64_t n = 1;
    for (int d = 0; d < rank; ++d)
      if ((which ? b_dims[d] : a_dims[d]) == 1) n *= dims[d];
    return n;
  }
  // Calls f(y offset, the other operand's offset) for each y element that feeds element i of operand `which`.
  template <class F>
  SYSTOLIC_NORM_HD void for_each_source(int which, std::int64_t i, F&& f) const {
    const std::int64_t* own = which ? b_dims : a_dims;
    const std::int64_t* other = which ? a_stride : b_stride;
    std::int64_t idx[kMaxBroadcastRank];
    for (int d = rank - 1; d >= 0; --d) {
      idx[d] = i % own[d];
      i /= own[d];
    }
    const std::int64_t n = fan(which);
    for (std::int64_t r = 0; r < n; ++r) {
      std::int64_t rr = r, oy = 0, oo = 0;
      for (int d = rank - 1; d >= 0; --d) {
        std::int64_t k = idx[d];
        if (own[d] == 1) {
          k = rr % dims[d];
          rr /= dims[d];
        }
        oy += k * y_stride[d];
        oo += k * other[d];
      }
      f(oy, oo);
    }
  }
};

inline BroadcastLayout broadcast_layout(const Shape& a, const Shape& b, const Shape& y) {
  BroadcastLayout l;
  l.rank = std::max(1, y.rank());
  auto pad = [&](const Shape& s, std::int64_t* dims, std::int64_t* stride) {
    std::int64_t st = 1;
    for (int d = l.rank - 1; d >= 0; --d) {
      int k = d - (l.rank - s.rank());
      dims[d] = k >= 0 ? s[k] : 1;
      stride[d] = dims[d] == 1 ? 0 : st;
      st *= dims[d];
    }
  };
  pad(a, l.a_dims, l.a_stride);
  pad(b, l.b_dims, l.b_stride);
  std::int64_t st = 1;
  for (int d = l.rank - 1; d >= 0; --d) {
    int k = d - (l.rank - y.rank());
    l.dims[d] = k >= 0 ? y[k] : 1;
    l.y_stride[d] = st;
    st *= l.dims[d];
  }
  return l;
}

// A transpose as a layout: y's element i reads x at offset `a` (offsets()).
inline BroadcastLayout transpose_layout(const Shape& x, const std::vector<int>& perm) {
  BroadcastLayout l;
  l.rank = std::max(1, x.rank());
  std::vector<std::int64_t> x_stride(x.rank(), 1);
  for (int d = x.rank() - 2; d >= 0; --d) x_stride[d] = x_stride[d + 1] * x[d + 1];
  for (int d = 0; d < l.rank; ++d) {
    l.dims[d] = x.rank() ? x[perm[d]] : 1;
    l.a_stride[d] = x.rank() ? x_stride[perm[d]] : 0;
    l.a_dims[d] = l.b_dims[d] = l.dims[d];
  }
  return l;
}

// x's elements as rows and columns by a set of its axes (bit a: axis a of x; at most 8 axes): a column is one
// combination of the set's indices, taken row-major over the set's axes in ascending order, a row one
// combination of the other axes'. The layer norms normalise each row over its columns (gamma and beta: one
// value per column, Keras's parameters reshaped to x's rank); Normalization keeps one statistic per column.
// When the set is x's last axes (the usual case), row m starts at m * cols and its columns are contiguous.
struct AxesLayout {
  int rank = 0;
  std::int64_t dims[kMaxBroadcastRank] = {}, strides[kMaxBroadcastRank] = {};
  std::uint32_t set = 0;
  std::int64_t rows = 1, cols = 1;
  bool trailing = true;

  SYSTOLIC_NORM_HD bool in_set(int d) const { return (set >> d) & 1u; }
  // x's offset of index `i` of the axes in the set (columns) or of the others (rows), row-major over them.
  SYSTOLIC_NORM_HD std::int64_t offset_of(std::int64_t i, bool columns) const {
    std::int64_t o = 0;
    for (int d = rank - 1; d >= 0; --d)
      if (in_set(d) == columns) {
        o += (i % dims[d]) * strides[d];
        i /= dims[d];
      }
    return o;
  }
  SYSTOLIC_NORM_HD std::int64_t row_offset(std::int64_t m) const {
    return trailing ? m * cols : offset_of(m, false);
  }
  SYSTOLIC_NORM_HD std::int64_t col_offset(std::int64_t k) const { return trailing ? k : offset_of(k, true); }
  // The column of x's element at offset i.
  SYSTOLIC_NORM_HD std::int64_t column_of(std::int64_t i) const {
    if (trailing) return i % cols;
    std::int64_t k = 0, scale = 1;
    for (int d = rank - 1; d >= 0; --d) {
      const std::int64_t idx = i % dims[d];
      i /= dims[d];
      if (in_set(d)) {
        k += idx * scale;
        scale *= dims[d];
      }
    }
    return k;
  }
};

// The layout of x (rank <= 8, checked by the ops' entries) by the axes in `set`.
inline AxesLayout axes_layout(const Shape& x, std::uint32_t set) {
  AxesLayout l;
  l.rank = x.rank();
  l.set = set;
  std::int64_t st = 1;
  bool tail = true;  // still inside the trailing run of the set, walking from the last axis
  for (int d = l.rank - 1; d >= 0; --d) {
    l.dims[d] = x[d];
    l.strides[d] = st;
    st *= x[d];
    if (l.in_set(d))
      l.cols *= x[d];
    else
      l.rows *= x[d];
    if (!l.in_set(d))
      tail = false;
    else if (!tail)
      l.trailing = false;
  }
  return l;
}

template <class T>
SYSTOLIC_NORM_HD T binary_value(BinaryKind k, T a, T b) {
  switch (k) {
    case BinaryKind::add:
      return a + b;
    case BinaryKind::subtract:
      return a - b;
    case BinaryKind::multiply:
      return a * b;
    case BinaryKind::maximum:
      return a >= b ? a : b;
    case BinaryKind::minimum:
      return a <= b ? a : b;
    case BinaryKind::divide:
      return a / b;
  }
  return a;
}

// d(a op b)/d(operand) * g, for operand a (which 0) or b (which 1); maximum and minimum route ties to a.
template <class T>
SYSTOLIC_NORM_HD T binary_gradient(BinaryKind k, int which, T a, T b, T g) {
  switch (k) {
    case BinaryKind::add:
      return g;
    case BinaryKind::subtract:
      return which ? -g : g;
    case BinaryKind::multiply:
      return which ? g * a : g * b;
    case BinaryKind::maximum:
      return (a >= b) == (which == 0) ? g : T(0);
    case BinaryKind::minimum:
      return (a <= b) == (which == 0) ? g : T(0);
    case BinaryKind::divide:
      return which ? -g * a / (b * b) : g / b;
  }
  return g;
}

// UnitNormalization's 1/|x| from a row's sum of squares s: Keras's ops.normalize, min(rsqrt(s), 1/epsilon) with
// epsilon 1e-12 (s = 0 gives the cap). At the cap the gradient through it is zero.
inline constexpr double kUnitMaxInverse = 1e12;
SYSTOLIC_NORM_HD double unit_inverse(double s) {
  const double r = 1.0 / std::sqrt(s);
  return r < kUnitMaxInverse ? r : kUnitMaxInverse;
}

// Keras Normalization's divisor, in the statistics' precision: max(sqrt(variance), epsilon 1e-7).
template <class T>
SYSTOLIC_NORM_HD T normalization_divisor(T variance) {
  T d = std::sqrt(variance);
  return d > T(1e-7) ? d : T(1e-7);
}

}  // namespace systolic::ops
