// Elementwise and data-movement ops on CUDA, each as kernel -> launcher -> entry (the entry unpacks the checked
// tensors: the checks ran at ops::<name>, src/ops/ops.cc): fill, copy, cast, add_n, accumulate, scale_shift,
// moving_average, dropout, padding, concatenation (strided copies), gathering rows. Grid-stride loops over 64-bit
// indices; bfloat16 computes in float, float64 in double. No entry synchronises or allocates, except gather_rows'
// host-index path in ops.cc, which uploads the indices (not a path of captured training steps).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/philox.h"
#include "ops/concat_layout.h"
#include "ops/cuda/context.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/kernels.cuh"
#include "ops/cuda/rounding.cuh"
#include "ops/double_math.h"

namespace systolic::ops::cuda {

namespace {

// Calls f(Tag<U>{}) with an unsigned integer type of the element's size, for kernels that only move elements.
template <class F>
cudaError_t by_size(int bytes, F&& f) {
  switch (bytes) {
    case 1:
      return f(Tag<std::uint8_t>{});
    case 2:
      return f(Tag<std::uint16_t>{});
    case 4:
      return f(Tag<std::uint32_t>{});
    case 8:
      return f(Tag<std::uint64_t>{});
    default:
      return cudaErrorInvalidValue;
  }
}

// ---- fill

template <class U>
__global__ void fill_kernel(U* x, std::int64_t n, U value) {
  SYSTOLIC_GRID_STRIDE(i, n) x[i] = value;
}

// ---- add_n, accumulate

constexpr int kAddNMax = 8;  // inputs per add_n launch
struct Inputs {
  const void* p[kAddNMax];
};

template <class T>
__global__ void add_n_kernel(Inputs xs, int count, T* y, bool accumulate, std::int64_t n) {
  SYSTOLIC_GRID_STRIDE(i, n) {
    acc_t<T> s = accumulate ? load(y, i) : acc_t<T>(0);
#pragma unroll
    for (int k = 0; k < kAddNMax; ++k)  // unrolled, so the pointers stay in registers (no local copy of xs)
      if (k < count) s += load(static_cast<const T*>(xs.p[k]), i);
    store(y, i, s);
  }
}

// ---- scale_shift, moving_average (rounded as the CPU rounds: see rounding.cuh)

template <class T>
__global__ void scale_shift_kernel(const T* x, T* y, std::int64_t n, acc_t<T> a, acc_t<T> b) {
  SYSTOLIC_GRID_STRIDE(i, n) store(y, i, add_rn(mul_rn(load(x, i), a), b));
}

template <class T>
__global__ void moving_average_kernel(T* m, const T* v, std::int64_t n, acc_t<T> momentum, acc_t<T> rest) {
  SYSTOLIC_GRID_STRIDE(i, n) store(m, i, add_rn(mul_rn(load(m, i), momentum), mul_rn(load(v, i), rest)));
}

// ---- dropout: thread g handles elements 4g .. 4g+3 with the four words of Philox block g, as the CPU loop
// does.

template <class T>
__global__ void dropout_kernel(const T* in, T* out, std::int64_t n, float threshold, float scale,
                               std::uint64_t seed, const double* step) {
  const std::uint64_t key = philox::dropout_key(seed, step ? *step : 0.0);
  const std::int64_t groups = (n + 3) / 4;
  SYSTOLIC_GRID_STRIDE(g, groups) {
    philox::U32x4 r = philox::random4(key, static_cast<std::uint64_t>(g));
    for (int k = 0; k < 4; ++k) {
      std::int64_t i = g * 4 + k;
      if (i < n) store(out, i, philox::unit_float(r.v[k]) >= threshold ? mul_rn(load(in, i), scale) : 0.0f);
    }
  }
}

// ---- padding

template <class U>
__global__ void pad2d_forward_kernel(const U* x, U* y, std::int64_t N, std::int64_t H, std::int64_t W,
                                     std::int64_t C, std::int64_t OH, std::int64_t OW, std::int64_t top,
                                     std::int64_t left) {
  SYSTOLIC_GRID_STRIDE(i, N * OH * OW * C) {
    std::int64_t c = i % C, t = i / C;
    std::int64_t ow = t % OW;
    t /= OW;
    std::int64_t oh = t % OH, n = t / OH;
    std::int64_t ih = oh - top, iw = ow - left;
    y[i] = (ih >= 0 && ih < H && iw >= 0 && iw < W) ? x[((n * H + ih) * W + iw) * C + c] : U(0);
  }
}

template <class U>
__global__ void pad2d_backward_kernel(const U* dy, U* dx, std::int64_t N, std::int64_t H, std::int64_t W,
                                      std::int64_t C, std::int64_t OH, std::int64_t OW, std::int64_t top,
                                      std::int64_t left) {
  SYSTOLIC_GRID_STRIDE(i, N * H * W * C) {
    std::int64_t c = i % C, t = i / C;
    std::int64_t w = t % W;
    t /= W;
    std::int64_t h = t % H, n = t / H;
    dx[i] = dy[((n * OH + h + top) * OW + w + left) * C + c];
  }
}

// ---- strided copies (concatenation)

template <class U>
__global__ void copy_rows_kernel(const U* src, std::int64_t src_pitch, U* dst, std::int64_t dst_pitch,
                                 std::int64_t rows, std::int64_t width) {
  SYSTOLIC_GRID_STRIDE(i, rows * width) {
    std::int64_t r = i / width, j = i - r * width;
    dst[r * dst_pitch + j] = src[r * src_pitch + j];
  }
}

// ---- gathering rows, converting

template <class D, class S>
__device__ __forceinline__ D convert(S v) {
  if constexpr (std::is_same_v<D, __nv_bfloat16>)
    return __float2bfloat16(static_cast<float>(v));
  else
    return static_cast<D>(v);
}

template <class S, class D, class I>
__global__ void gather_rows_kernel(const S* src, std::int64_t src_rows, std::int64_t row, const I* indices,
                                   std::int64_t count, D* dst, int* error_flags, int flag) {
  SYSTOLIC_GRID_STRIDE(i, count * row) {
    std::int64_t k = i / row, j = i - k * row;
    std::int64_t r = static_cast<std::int64_t>(indices[k]);
    if (r >= 0 && r < src_rows) {
      dst[i] = convert<D>(src[r * row + j]);
    } else {
      if (j == 0) atomicOr(error_flags, flag);  // once per row
      dst[i] = convert<D>(0.0f);
    }
  }
}

// ---- casts between float types (through double: exact for float32 and bfloat16 sources)

template <class S>
__device__ __forceinline__ double load_value(S v) {
  return static_cast<double>(v);
}
template <>
__device__ __forceinline__ double load_value<__nv_bfloat16>(__nv_bfloat16 v) {
  return static_cast<double>(__bfloat162float(v));
}
template <class D>
__device__ __forceinline__ D store_value(double v) {
  return static_cast<D>(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 store_value<__nv_bfloat16>(double v) {
  return __float2bfloat16_rn(static_cast<float>(v));
}

template <class S, class D>
__global__ void cast_kernel(const S* src, D* dst, std::int64_t n) {
  SYSTOLIC_GRID_STRIDE(i, n) {
    dst[i] = store_value<D>(load_value(src[i]));
  }
}

// To int32: toward zero, INT32_MIN when not finite or out of range (double_math.h), as the other backends.
template <class S>
__global__ void cast_to_int32_kernel(const S* src, std::int32_t* dst, std::int64_t n) {
  SYSTOLIC_GRID_STRIDE(i, n) {
    dst[i] = truncate_to_int32(load_value(src[i]));
  }
}

// dst[indices[k]] += src[k], rows of `row` values (atomicAdd: repeated indices add up in any order). An index
// out of range is skipped and sets `flag`.
template <class S, class D>
__global__ void scatter_add_rows_kernel(const S* src, const std::int32_t* indices, std::int64_t count,
                                        std::int64_t row, D* dst, std::int64_t dst_rows, int* error_flags,
                                        int flag) {
  SYSTOLIC_GRID_STRIDE(i, count * row) {
    std::int64_t k = i / row, j = i - k * row;
    std::int64_t r = indices[k];
    if (r >= 0 && r < dst_rows) {
      atomicAdd(dst + r * row + j, static_cast<D>(load_value(src[i])));
    } else if (j == 0) {
      atomicOr(error_flags, flag);
    }
  }
}

// ---- launchers

cudaError_t launch_fill(void* x, std::int64_t n, int element_bytes, std::uint64_t bits, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return by_size(element_bytes, [&](auto tag) {
    using U = typename decltype(tag)::type;
    return launch_elementwise(fill_kernel<U>, n, stream, static_cast<U*>(x), n, static_cast<U>(bits));
  });
}

cudaError_t launch_add_n(const void* const* xs, int count, void* y, bool accumulate, std::int64_t n,
                         Element t, cudaStream_t stream) {
  if (count < 0 || count > kAddNMax) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  Inputs in{};
  for (int k = 0; k < count; ++k) in.p[k] = xs[k];
  return visit_element<float, __nv_bfloat16, double>(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return launch_elementwise(add_n_kernel<T>, n, stream, in, count, static_cast<T*>(y), accumulate, n);
  });
}

cudaError_t launch_scale_shift(const void* x, void* y, std::int64_t n, double scale, double shift, Element t,
                               cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return visit_element<float, __nv_bfloat16, double>(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return launch_elementwise(scale_shift_kernel<T>, n, stream, static_cast<const T*>(x), static_cast<T*>(y),
                              n, static_cast<acc_t<T>>(scale), static_cast<acc_t<T>>(shift));
  });
}

cudaError_t launch_moving_average(void* moving, const void* value, std::int64_t n, double momentum, Element t,
                                  cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return visit_element<float, __nv_bfloat16, double>(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return launch_elementwise(moving_average_kernel<T>, n, stream, static_cast<T*>(moving),
                              static_cast<const T*>(value), n, static_cast<acc_t<T>>(momentum),
                              static_cast<acc_t<T>>(1.0 - momentum));
  });
}

cudaError_t launch_dropout(const void* in, void* out, std::int64_t n, float threshold, float scale,
                           std::uint64_t seed, const double* step, Element t, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return visit_element<float, __nv_bfloat16, double>(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, double>) {
      return cudaErrorInvalidValue;
    } else {
      return launch_elementwise(dropout_kernel<T>, (n + 3) / 4, stream, static_cast<const T*>(in),
                                static_cast<T*>(out), n, threshold, scale, seed, step);
    }
  });
}

cudaError_t launch_pad2d_forward(const void* x, void* y, std::int64_t N, std::int64_t H, std::int64_t W,
                                 std::int64_t C, std::int64_t OH, std::int64_t OW, std::int64_t top,
                                 std::int64_t left, int element_bytes, cudaStream_t stream) {
  std::int64_t n = N * OH * OW * C;
  if (n == 0) return cudaSuccess;
  return by_size(element_bytes, [&](auto tag) {
    using U = typename decltype(tag)::type;
    return launch_elementwise(pad2d_forward_kernel<U>, n, stream, static_cast<const U*>(x),
                              static_cast<U*>(y), N, H, W, C, OH, OW, top, left);
  });
}

cudaError_t launch_pad2d_backward(const void* dy, void* dx, std::int64_t N, std::int64_t H, std::int64_t W,
                                  std::int64_t C, std::int64_t OH, std::int64_t OW, std::int64_t top,
                                  std::int64_t left, int element_bytes, cudaStream_t stream) {
  std::int64_t n = N * H * W * C;
  if (n == 0) return cudaSuccess;
  return by_size(element_bytes, [&](auto tag) {
    using U = typename decltype(tag)::type;
    return launch_elementwise(pad2d_backward_kernel<U>, n, stream, static_cast<const U*>(dy),
                              static_cast<U*>(dx), N, H, W, C, OH, OW, top, left);
  });
}

cudaError_t launch_copy_rows(const void* src, std::int64_t src_pitch, void* dst, std::int64_t dst_pitch,
                             std::int64_t rows, std::int64_t width, int element_bytes, cudaStream_t stream) {
  std::int64_t n = rows * width;
  if (n == 0) return cudaSuccess;
  return by_size(element_bytes, [&](auto tag) {
    using U = typename decltype(tag)::type;
    return launch_elementwise(copy_rows_kernel<U>, n, stream, static_cast<const U*>(src), src_pitch,
                              static_cast<U*>(dst), dst_pitch, rows, width);
  });
}

cudaError_t launch_gather_rows(const void* src, Element src_type, std::int64_t src_rows, std::int64_t row,
                               const void* indices, bool indices_64, std::int64_t count, void* dst,
                               Element dst_type, int* error_flags, int flag, cudaStream_t stream) {
  std::int64_t n = count * row;
  if (n == 0) return cudaSuccess;
  return visit_element<std::uint8_t, std::int32_t, float, double>(src_type, [&](auto stag) {
    using S = typename decltype(stag)::type;
    return visit_element<float, __nv_bfloat16, double, std::int32_t>(dst_type, [&](auto dtag) {
      using D = typename decltype(dtag)::type;
      auto sp = static_cast<const S*>(src);
      auto dp = static_cast<D*>(dst);
      if (indices_64)
        return launch_elementwise(gather_rows_kernel<S, D, std::int64_t>, n, stream, sp, src_rows, row,
                                  static_cast<const std::int64_t*>(indices), count, dp, error_flags, flag);
      return launch_elementwise(gather_rows_kernel<S, D, std::int32_t>, n, stream, sp, src_rows, row,
                                static_cast<const std::int32_t*>(indices), count, dp, error_flags, flag);
    });
  });
}

cudaError_t launch_cast(const void* src, Element src_type, void* dst, Element dst_type, std::int64_t n,
                        cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (dst_type == Element::int32)
    return visit_element<float, __nv_bfloat16, double>(src_type, [&](auto s) {
      using S = typename decltype(s)::type;
      return launch_elementwise(cast_to_int32_kernel<S>, n, stream, static_cast<const S*>(src),
                                static_cast<std::int32_t*>(dst), n);
    });
  return visit_element<float, __nv_bfloat16, double>(src_type, [&](auto s) {
    using S = typename decltype(s)::type;
    return visit_element<float, __nv_bfloat16, double>(dst_type, [&](auto d) {
      using D = typename decltype(d)::type;
      return launch_elementwise(cast_kernel<S, D>, n, stream, static_cast<const S*>(src),
                                static_cast<D*>(dst), n);
    });
  });
}

cudaError_t launch_scatter_add_rows(const void* src, Element src_type, const std::int32_t* indices,
                                    std::int64_t count, std::int64_t row, void* dst, Element dst_type,
                                    std::int64_t dst_rows, int* error_flags, int flag, cudaStream_t stream) {
  if (count * row == 0) return cudaSuccess;
  return visit_element<float, __nv_bfloat16, double>(src_type, [&](auto stag) {
    using S = typename decltype(stag)::type;
    return visit_element<float, double>(dst_type, [&](auto dtag) {
      using D = typename decltype(dtag)::type;
      return launch_elementwise(scatter_add_rows_kernel<S, D>, count * row, stream,
                                static_cast<const S*>(src), indices, count, row, static_cast<D*>(dst),
                                dst_rows, error_flags, flag);
    });
  });
}

}  // namespace

namespace {

// The bits of `value` in a tensor of dtype t, rounded as Tensor::fill rounds on the host.
std::uint64_t fill_bits(DType t, double value) {
  return visit_dtype(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Bits = std::conditional_t<
        sizeof(T) == 8, std::uint64_t,
        std::conditional_t<sizeof(T) == 4, std::uint32_t,
                           std::conditional_t<sizeof(T) == 2, std::uint16_t, std::uint8_t>>>;
    const T v = value_as<T>(value);
    Bits bits;
    std::memcpy(&bits, &v, sizeof bits);
    return static_cast<std::uint64_t>(bits);
  });
}

const double* step_pointer(const Tensor& step) {
  return step.defined() ? step.data<double>() : nullptr;
}

constexpr DTypes kFloats{DType::float32, DType::bfloat16, DType::float64};
constexpr DTypes kFloat32Or16{DType::float32, DType::bfloat16};

}  // namespace

const DTypes fill_dtypes = kAllDTypes;
void fill(Tensor& x, double value) {
  Context& c = context(x);
  SYSTOLIC_CUDA_CHECK(launch_fill(x.raw_data(), x.numel(), static_cast<int>(dtype_size(x.dtype())),
                                  fill_bits(x.dtype(), value), c.stream));
}

const DTypes copy_dtypes = kAllDTypes;
void copy(const Tensor& src, Tensor& dst) {
  Context& c = context(dst);
  if (src.raw_data() == dst.raw_data() || dst.nbytes() == 0) return;
  SYSTOLIC_CUDA_CHECK(
      cudaMemcpyAsync(dst.raw_data(), src.raw_data(), dst.nbytes(), cudaMemcpyDeviceToDevice, c.stream));
}

const DTypes cast_dtypes{DType::float32, DType::bfloat16, DType::float64, DType::int32};
void cast(const Tensor& src, Tensor& dst) {
  Context& c = context(dst);
  SYSTOLIC_CUDA_CHECK(launch_cast(src.raw_data(), element_of(src.dtype()), dst.raw_data(),
                                  element_of(dst.dtype()), dst.numel(), c.stream));
}

const DTypes add_n_dtypes = kFloats;
void add_n(const std::vector<Tensor>& xs, Tensor& y) {
  Context& c = context(y);
  if (xs.empty()) {
    SYSTOLIC_CUDA_CHECK(
        launch_fill(y.raw_data(), y.numel(), static_cast<int>(dtype_size(y.dtype())), 0, c.stream));
    return;
  }
  // kAddNMax inputs per launch; later launches add to y (which may alias xs[0] only: the entry's check).
  for (std::size_t start = 0; start < xs.size(); start += kAddNMax) {
    const void* ptrs[kAddNMax];
    int count = static_cast<int>(std::min<std::size_t>(kAddNMax, xs.size() - start));
    for (int k = 0; k < count; ++k) ptrs[k] = xs[start + k].raw_data();
    SYSTOLIC_CUDA_CHECK(
        launch_add_n(ptrs, count, y.raw_data(), start > 0, y.numel(), element_of(y.dtype()), c.stream));
  }
}

const DTypes accumulate_dtypes = kFloats;
void accumulate(const Tensor& src, Tensor& dst) {
  Context& c = context(dst);
  const void* ptrs[1] = {src.raw_data()};
  SYSTOLIC_CUDA_CHECK(
      launch_add_n(ptrs, 1, dst.raw_data(), true, dst.numel(), element_of(dst.dtype()), c.stream));
}

const DTypes scale_shift_dtypes = kFloats;
void scale_shift(const Tensor& x, Tensor& y, double scale, double shift) {
  Context& c = context(y);
  SYSTOLIC_CUDA_CHECK(launch_scale_shift(x.raw_data(), y.raw_data(), x.numel(), scale, shift,
                                         element_of(x.dtype()), c.stream));
}

const DTypes moving_average_dtypes{DType::float32, DType::float64};
void moving_average(Tensor& moving, const Tensor& value, double momentum) {
  Context& c = context(moving);
  SYSTOLIC_CUDA_CHECK(launch_moving_average(moving.raw_data(), value.raw_data(), moving.numel(), momentum,
                                            element_of(moving.dtype()), c.stream));
}

const DTypes dropout_forward_dtypes = kFloat32Or16;
void dropout_forward(const Tensor& x, Tensor& y, double rate, std::uint64_t seed, const Tensor& step) {
  Context& c = context(y);
  SYSTOLIC_CUDA_CHECK(launch_dropout(x.raw_data(), y.raw_data(), x.numel(), static_cast<float>(rate),
                                     static_cast<float>(1.0 / (1.0 - rate)), seed, step_pointer(step),
                                     element_of(x.dtype()), c.stream));
}

const DTypes dropout_backward_dtypes = kFloat32Or16;
void dropout_backward(const Tensor& dy, Tensor& dx, double rate, std::uint64_t seed, const Tensor& step) {
  Context& c = context(dx);
  SYSTOLIC_CUDA_CHECK(launch_dropout(dy.raw_data(), dx.raw_data(), dy.numel(), static_cast<float>(rate),
                                     static_cast<float>(1.0 / (1.0 - rate)), seed, step_pointer(step),
                                     element_of(dy.dtype()), c.stream));
}

const DTypes pad2d_forward_dtypes = kFloats;
void pad2d_forward(const Tensor& x, Tensor& y, const Pad2D& p) {
  Context& c = context(y);
  SYSTOLIC_CUDA_CHECK(launch_pad2d_forward(x.raw_data(), y.raw_data(), x.dim(0), x.dim(1), x.dim(2), x.dim(3),
                                           y.dim(1), y.dim(2), p.top, p.left,
                                           static_cast<int>(dtype_size(x.dtype())), c.stream));
}

const DTypes pad2d_backward_dtypes = kFloats;
void pad2d_backward(const Tensor& dy, Tensor& dx, const Pad2D& p) {
  Context& c = context(dx);
  SYSTOLIC_CUDA_CHECK(launch_pad2d_backward(dy.raw_data(), dx.raw_data(), dx.dim(0), dx.dim(1), dx.dim(2),
                                            dx.dim(3), dy.dim(1), dy.dim(2), p.top, p.left,
                                            static_cast<int>(dtype_size(dx.dtype())), c.stream));
}

const DTypes concat_forward_dtypes = kFloats;
void concat_forward(const std::vector<Tensor>& xs, Tensor& y, int axis) {
  ConcatLayout l = concat_layout(y, xs, axis);
  Context& c = context(y);
  const int bytes = static_cast<int>(dtype_size(y.dtype()));
  for (std::size_t k = 0; k < xs.size(); ++k)
    SYSTOLIC_CUDA_CHECK(launch_copy_rows(xs[k].raw_data(), l.width[k],
                                         static_cast<char*>(y.raw_data()) + l.offset[k] * bytes, l.row,
                                         l.outer, l.width[k], bytes, c.stream));
}

const DTypes concat_backward_dtypes = kFloats;
void concat_backward(const Tensor& dy, std::vector<Tensor>& dxs, int axis) {
  ConcatLayout l = concat_layout(dy, dxs, axis);
  Context& c = context(dy);
  const int bytes = static_cast<int>(dtype_size(dy.dtype()));
  for (std::size_t k = 0; k < dxs.size(); ++k) {
    if (!dxs[k].defined()) continue;
    SYSTOLIC_CUDA_CHECK(launch_copy_rows(static_cast<const char*>(dy.raw_data()) + l.offset[k] * bytes, l.row,
                                         dxs[k].raw_data(), l.width[k], l.outer, l.width[k], bytes,
                                         c.stream));
  }
}

// An index out of range sets kIndexOutOfRange (raised by the next synchronize) and gives a row of zeros.
const DTypes gather_rows_dtypes{DType::float32, DType::bfloat16, DType::float64, DType::int32};
void gather_rows(const Tensor& src, const Tensor& indices, Tensor& dst) {
  Context& c = context(dst);
  const std::int64_t rows = src.dim(0), row = rows ? src.numel() / rows : 0;
  SYSTOLIC_CUDA_CHECK(launch_gather_rows(src.raw_data(), element_of(src.dtype()), rows, row,
                                         indices.raw_data(), false, indices.numel(), dst.raw_data(),
                                         element_of(dst.dtype()), c.error_flags, kIndexOutOfRange, c.stream));
}

namespace {
// One thread per row: whether any of its C values differs from v (in T).
template <class T>
__global__ void compute_mask_kernel(const T* x, T v, T* mask, std::int64_t R, std::int64_t C) {
  SYSTOLIC_GRID_STRIDE(r, R) {
    bool any = false;
    for (std::int64_t k = 0; k < C; ++k) any = any || load(x, r * C + k) != load(&v, 0);
    store(mask, r, acc_t<T>(any ? 1 : 0));
  }
}
}  // namespace

const DTypes compute_mask_dtypes = kFloats;
void compute_mask(const Tensor& x, double value, Tensor& mask) {
  Context& c = context(mask);
  const std::int64_t R = mask.numel(), C = R ? x.numel() / R : 0;
  if (R == 0) return;
  SYSTOLIC_CUDA_CHECK((visit_dtype<float, __nv_bfloat16, double>(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T v;
    if constexpr (std::is_same_v<T, __nv_bfloat16>)
      v = __float2bfloat16_rn(static_cast<float>(value));
    else
      v = static_cast<T>(value);
    return launch_elementwise(compute_mask_kernel<T>, R, c.stream, static_cast<const T*>(x.raw_data()), v,
                              static_cast<T*>(mask.raw_data()), R, C);
  })));
}

// An index out of range sets kIndexOutOfRange (raised by the next synchronize) and adds nothing.
const DTypes scatter_add_rows_dtypes{DType::float32, DType::float64};
void scatter_add_rows(const Tensor& src, const Tensor& indices, Tensor& dst) {
  Context& c = context(dst);
  const std::int64_t rows = dst.dim(0), row = rows ? dst.numel() / rows : 0;
  SYSTOLIC_CUDA_CHECK(launch_scatter_add_rows(
      src.raw_data(), element_of(src.dtype()), indices.data<std::int32_t>(), indices.numel(), row,
      dst.raw_data(), element_of(dst.dtype()), rows, c.error_flags, kIndexOutOfRange, c.stream));
}

}  // namespace systolic::ops::cuda
