// Elementwise and data-movement ops on the CPU, as OpenMP loops (oneDNN has no primitives for them): fill, copy,
// cast, add_n, accumulate, scale_shift, moving_average, dropout, zero padding, concatenation, gathering rows.
// Contracts: include/systolic/ops.h.
#include <algorithm>
#include <bit>
#include <cmath>
#include <type_traits>
#include <vector>

#include "core/philox.h"
#include "ops/concat_layout.h"
#include "ops/cpu/cpu_backend.h"
#include "ops/double_math.h"

namespace systolic::ops::cpu {

namespace {

// Dropout on the CPU, block by block: a block's random words (random4(key, g) for its groups, 4 words each, in
// element order), 16 groups at a time, then the mask applied. Element i keeps in[i] * scale when word i % 4 of
// random4(key, i / 4), as a unit float, is at least the rate; else it is 0. T is the storage type (float, double
// or bfloat16, which computes in float32 and rounds once: the bits of the float32 loop on widened values, and of
// the CUDA kernel). Each block is compiled for AVX-512, AVX2 and the baseline, picked at load time: Philox's
// multiplies and the conversions are a dropout layer's time, and vectorise.
constexpr int kDropoutLanes = 16;
constexpr std::int64_t kDropoutBlock = 64 * kDropoutLanes;  // groups per block: 4 * kDropoutBlock elements

// v when keep, else +0 (NaN included), without a branch; converted to the storage type T.
template <class T>
__attribute__((always_inline)) inline T keep_or_zero(arithmetic_t<T> v, bool keep) {
  using U = std::conditional_t<sizeof(v) == 8, std::uint64_t, std::uint32_t>;
  const U bits = std::bit_cast<U>(v) & (U(0) - U(keep));
  return T(std::bit_cast<arithmetic_t<T>>(bits));
}

template <class T>
__attribute__((always_inline)) inline void dropout_block_body(const T* in, T* out, std::int64_t n,
                                                              std::uint64_t key, std::int64_t g0,
                                                              std::int64_t groups, arithmetic_t<T> scale,
                                                              float threshold) {
  std::uint32_t words[4 * kDropoutBlock];
  for (std::int64_t g = 0; g < groups; g += kDropoutLanes)  // may draw past `groups`, within `words`
    philox::random4_lanes<kDropoutLanes>(key, static_cast<std::uint64_t>(g0 + g), words + 4 * g);
  // unit_float(w) >= threshold, as (w >> 8) >= threshold * 2^24 (exact: a power-of-two scaling), and the dropped
  // values zeroed by a mask rather than a branch, so that the loop vectorises.
  const float t = threshold * 16777216.0f;
  for (std::int64_t j = 0; j < n; ++j) {
    const bool keep = static_cast<float>(static_cast<std::int32_t>(words[j] >> 8)) >= t;
    out[j] = keep_or_zero<T>(widen(in[j]) * scale, keep);
  }
}
#define SYSTOLIC_DROPOUT_BLOCK(T)                                                                   \
  __attribute__((target_clones("avx512f", "avx2", "default"))) void dropout_block(                  \
      const T* in, T* out, std::int64_t n, std::uint64_t key, std::int64_t g0, std::int64_t groups, \
      arithmetic_t<T> scale, float threshold) {                                                     \
    dropout_block_body(in, out, n, key, g0, groups, scale, threshold);                              \
  }
SYSTOLIC_DROPOUT_BLOCK(float)
SYSTOLIC_DROPOUT_BLOCK(double)
SYSTOLIC_DROPOUT_BLOCK(bfloat16)
#undef SYSTOLIC_DROPOUT_BLOCK

template <class T>
void dropout_apply(const T* in, T* out, std::int64_t n, double rate, std::uint64_t key) {
  const auto scale = arithmetic_t<T>(1.0 / (1.0 - rate));
  const float threshold = static_cast<float>(rate);
  const std::int64_t groups = (n + 3) / 4, blocks = (groups + kDropoutBlock - 1) / kDropoutBlock;
  parallel_ranges(blocks, n, [&](std::int64_t b0, std::int64_t b1) {
    for (std::int64_t b = b0; b < b1; ++b) {
      const std::int64_t g0 = b * kDropoutBlock, i0 = 4 * g0;
      dropout_block(in + i0, out + i0, std::min(4 * kDropoutBlock, n - i0), key, g0,
                    std::min(kDropoutBlock, groups - g0), scale, threshold);
    }
  });
}

template <class T>
void concat_forward_loop(const std::vector<Tensor>& xs, Tensor& y, int axis) {
  ConcatLayout l = concat_layout(y, xs, axis);
  T* yp = y.data<T>();
  for (std::size_t k = 0; k < xs.size(); ++k) {
    const T* xp = xs[k].data<T>();
    const std::int64_t chunk = l.width[k], at = l.offset[k];
    parallel_ranges(l.outer, l.outer * chunk, [&](std::int64_t o0, std::int64_t o1) {
      for (std::int64_t o = o0; o < o1; ++o) std::copy_n(xp + o * chunk, chunk, yp + o * l.row + at);
    });
  }
}

template <class T>
void concat_backward_loop(const Tensor& dy, std::vector<Tensor>& dxs, int axis) {
  ConcatLayout l = concat_layout(dy, dxs, axis);
  const T* gp = dy.data<T>();
  for (std::size_t k = 0; k < dxs.size(); ++k) {
    if (!dxs[k].defined()) continue;
    T* dxp = dxs[k].data<T>();
    const std::int64_t chunk = l.width[k], at = l.offset[k];
    parallel_ranges(l.outer, l.outer * chunk, [&](std::int64_t o0, std::int64_t o1) {
      for (std::int64_t o = o0; o < o1; ++o) std::copy_n(gp + o * l.row + at, chunk, dxp + o * chunk);
    });
  }
}

// add_n, accumulate and scale_shift take bfloat16 storage too (float32 arithmetic, one rounding per result).
template <class T>
void add_n_loop(const std::vector<Tensor>& xs, Tensor& y) {
  using A = arithmetic_t<T>;
  std::int64_t n = y.numel();
  T* yp = y.data<T>();
  std::vector<const T*> ins;
  for (auto& x : xs) ins.push_back(x.data<T>());
  parallel_ranges(n, n, [&](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t i = i0; i < i1; ++i) {
      A s = 0;
      for (auto* p : ins) s += widen(p[i]);
      yp[i] = T(s);
    }
  });
}

template <class T>
void accumulate_loop(const Tensor& src, Tensor& dst) {
  std::int64_t n = dst.numel();
  const T* s = src.data<T>();
  T* d = dst.data<T>();
  parallel_ranges(n, n, [&](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t i = i0; i < i1; ++i) d[i] = T(widen(d[i]) + widen(s[i]));
  });
}

template <class T>
void scale_shift_loop(const Tensor& x, Tensor& y, double scale, double shift) {
  using A = arithmetic_t<T>;
  std::int64_t n = x.numel();
  const T* xp = x.data<T>();
  T* yp = y.data<T>();
  const A a = A(scale), b = A(shift);
  parallel_ranges(n, n, [&](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t i = i0; i < i1; ++i) yp[i] = T(widen(xp[i]) * a + b);
  });
}

template <class T>
void moving_average_loop(Tensor& moving, const Tensor& value, double momentum) {
  T* m = moving.data<T>();
  const T* v = value.data<T>();
  for (std::int64_t i = 0; i < moving.numel(); ++i) m[i] = m[i] * T(momentum) + v[i] * T(1.0 - momentum);
}

// dst[k] = convert(src[indices[k]]): rows of `row` values, any source dtype to T. Indices were checked by the caller.
template <class T>
void gather_rows_loop(const Tensor& src, const std::int32_t* indices, std::int64_t count, Tensor& dst) {
  std::int64_t rows = src.dim(0), row = rows ? src.numel() / rows : 0;
  T* out = dst.data<T>();
  // Sources: uint8, int32, float32, float64 (bfloat16 rows are refused by gather_rows).
  visit_dtype<float, double, std::uint8_t, std::int32_t>(src.dtype(), [&](auto tag) {
    using S = typename decltype(tag)::type;
    const S* in = static_cast<const S*>(src.raw_data());
    parallel_ranges(count, count * row, [&](std::int64_t k0, std::int64_t k1) {
      for (std::int64_t k = k0; k < k1; ++k) {
        const S* s = in + std::int64_t(indices[k]) * row;
        T* d = out + k * row;
        for (std::int64_t j = 0; j < row; ++j) d[j] = static_cast<T>(s[j]);
      }
    });
  });
}

template <class T>
void pad2d_forward_loop(const Tensor& x, Tensor& y, const Pad2D& p) {
  std::int64_t N = x.dim(0), H = x.dim(1), W = x.dim(2), C = x.dim(3), OH = y.dim(1), OW = y.dim(2);
  const T* xp = x.data<T>();
  T* yp = y.data<T>();
  parallel_ranges(N * OH, N * OH * OW * C, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {  // r = n * OH + oh
      const std::int64_t n = r / OH, oh = r % OH;
      T* row = yp + r * OW * C;
      std::int64_t ih = oh - p.top;
      if (ih < 0 || ih >= H) {
        std::fill_n(row, OW * C, T(0));
        continue;
      }
      std::fill_n(row, p.left * C, T(0));
      std::copy_n(xp + (n * H + ih) * W * C, W * C, row + p.left * C);
      std::fill_n(row + (p.left + W) * C, p.right * C, T(0));
    }
  });
}

template <class T>
void pad2d_backward_loop(const Tensor& dy, Tensor& dx, const Pad2D& p) {
  std::int64_t N = dx.dim(0), H = dx.dim(1), W = dx.dim(2), C = dx.dim(3), OH = dy.dim(1), OW = dy.dim(2);
  const T* gp = dy.data<T>();
  T* dxp = dx.data<T>();
  parallel_ranges(N * H, N * H * W * C, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {  // r = n * H + h
      const std::int64_t n = r / H, h = r % H;
      std::copy_n(gp + ((n * OH + h + p.top) * OW + p.left) * C, W * C, dxp + r * W * C);
    }
  });
}

// The value of a float64 [1] counter (the model's step); 0 when undefined.
double step_value(const Tensor& step) {
  return step.defined() ? step.data<double>()[0] : 0.0;
}

}  // namespace

const DTypes fill_dtypes = kAllDTypes;
void fill(Tensor& x, double value) {
  x.fill(value);
}

const DTypes copy_dtypes = kAllDTypes;
void copy(const Tensor& src, Tensor& dst) {
  dst.copy_from(src);
}

const DTypes cast_dtypes{DType::float32, DType::float64, DType::bfloat16, DType::int32};
void cast(const Tensor& src, Tensor& dst) {
  const std::int64_t n = src.numel();
  if (dst.dtype() == DType::int32) {
    std::int32_t* d = dst.data<std::int32_t>();
    visit_dtype<float, double, bfloat16>(src.dtype(), [&](auto tag) {
      using S = typename decltype(tag)::type;
      const S* s = static_cast<const S*>(src.raw_data());
      for (std::int64_t i = 0; i < n; ++i) d[i] = truncate_to_int32(static_cast<double>(widen(s[i])));
    });
    return;
  }
  // The conversions mixed precision runs on every op (bf16_emulation.h, the compute copy of the weights):
  // one parallel pass, rounding as bfloat16's constructor does.
  if (src.dtype() == DType::float32 && dst.dtype() == DType::bfloat16) {
    const float* s = src.data<float>();
    bfloat16* d = dst.data<bfloat16>();
    parallel_ranges(n, n, [&](std::int64_t i0, std::int64_t i1) {
      for (std::int64_t i = i0; i < i1; ++i) d[i] = bfloat16(s[i]);
    });
  } else if (src.dtype() == DType::bfloat16 && dst.dtype() == DType::float32) {
    const bfloat16* s = src.data<bfloat16>();
    float* d = dst.data<float>();
    parallel_ranges(n, n, [&](std::int64_t i0, std::int64_t i1) {
      for (std::int64_t i = i0; i < i1; ++i) d[i] = static_cast<float>(s[i]);
    });
  } else {
    dst.copy_from(src.to(dst.dtype()));
  }
}

const DTypes add_n_dtypes = kFloatsAndBf16;
void add_n(const std::vector<Tensor>& xs, Tensor& y) {
  visit_dtype<float, double, bfloat16>(y.dtype(),
                                       [&](auto t) { add_n_loop<typename decltype(t)::type>(xs, y); });
}

const DTypes accumulate_dtypes = kFloatsAndBf16;
void accumulate(const Tensor& src, Tensor& dst) {
  visit_dtype<float, double, bfloat16>(
      dst.dtype(), [&](auto t) { accumulate_loop<typename decltype(t)::type>(src, dst); });
}

const DTypes scale_shift_dtypes = kFloatsAndBf16;
void scale_shift(const Tensor& x, Tensor& y, double scale, double shift) {
  visit_dtype<float, double, bfloat16>(
      x.dtype(), [&](auto t) { scale_shift_loop<typename decltype(t)::type>(x, y, scale, shift); });
}

const DTypes moving_average_dtypes = kFloats;
void moving_average(Tensor& moving, const Tensor& value, double momentum) {
  visit_dtype<float, double>(moving.dtype(), [&](auto t) {
    moving_average_loop<typename decltype(t)::type>(moving, value, momentum);
  });
}

const DTypes dropout_forward_dtypes = kFloatsAndBf16;
void dropout_forward(const Tensor& x, Tensor& y, double rate, std::uint64_t seed, const Tensor& step) {
  std::uint64_t key = philox::dropout_key(seed, step_value(step));
  visit_dtype<float, double, bfloat16>(x.dtype(), [&](auto t) {
    using T = typename decltype(t)::type;
    dropout_apply(x.data<T>(), y.data<T>(), x.numel(), rate, key);
  });
}

const DTypes dropout_backward_dtypes = kFloatsAndBf16;
void dropout_backward(const Tensor& dy, Tensor& dx, double rate, std::uint64_t seed, const Tensor& step) {
  std::uint64_t key = philox::dropout_key(seed, step_value(step));
  visit_dtype<float, double, bfloat16>(dy.dtype(), [&](auto t) {
    using T = typename decltype(t)::type;
    dropout_apply(dy.data<T>(), dx.data<T>(), dy.numel(), rate, key);
  });
}

const DTypes pad2d_forward_dtypes = kFloats;
void pad2d_forward(const Tensor& x, Tensor& y, const Pad2D& p) {
  visit_dtype<float, double>(x.dtype(),
                             [&](auto t) { pad2d_forward_loop<typename decltype(t)::type>(x, y, p); });
}

const DTypes pad2d_backward_dtypes = kFloats;
void pad2d_backward(const Tensor& dy, Tensor& dx, const Pad2D& p) {
  visit_dtype<float, double>(dy.dtype(),
                             [&](auto t) { pad2d_backward_loop<typename decltype(t)::type>(dy, dx, p); });
}

const DTypes concat_forward_dtypes = kFloats;
void concat_forward(const std::vector<Tensor>& xs, Tensor& y, int axis) {
  visit_dtype<float, double>(y.dtype(),
                             [&](auto t) { concat_forward_loop<typename decltype(t)::type>(xs, y, axis); });
}

const DTypes concat_backward_dtypes = kFloats;
void concat_backward(const Tensor& dy, std::vector<Tensor>& dxs, int axis) {
  visit_dtype<float, double>(
      dy.dtype(), [&](auto t) { concat_backward_loop<typename decltype(t)::type>(dy, dxs, axis); });
}

// Data sets of any dtype into float32, float64, bfloat16 or int32 (labels); indices out of range are an Error here.
const DTypes gather_rows_dtypes{DType::float32, DType::float64, DType::bfloat16, DType::int32};
void gather_rows(const Tensor& src, const Tensor& indices, Tensor& dst) {
  SYSTOLIC_CHECK(src.dtype() != DType::bfloat16, "gather_rows: the cpu backend has no bfloat16 source rows");
  const std::int32_t* ip = indices.data<std::int32_t>();
  const std::int64_t count = indices.numel(), rows = src.dim(0);
  for (std::int64_t k = 0; k < count; ++k)
    SYSTOLIC_CHECK(ip[k] >= 0 && ip[k] < rows, "gather_rows: row {} out of range [0, {})", ip[k], rows);
  // A bfloat16 target: each value rounded once, as the float32 rows cast to bfloat16.
  visit_dtype<float, double, bfloat16, std::int32_t>(
      dst.dtype(), [&](auto tag) { gather_rows_loop<typename decltype(tag)::type>(src, ip, count, dst); });
}

const DTypes compute_mask_dtypes{DType::float32, DType::float64, DType::bfloat16};
void compute_mask(const Tensor& x, double value, Tensor& mask) {
  const std::int64_t R = mask.numel(), C = R ? x.numel() / R : 0;
  visit_dtype<float, double, bfloat16>(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* xp = x.data<T>();
    T* mp = mask.data<T>();
    T v;
    if constexpr (std::is_same_v<T, bfloat16>)
      v = T(static_cast<float>(value));
    else
      v = static_cast<T>(value);
    const auto wv = widen(v);
    for (std::int64_t r = 0; r < R; ++r) {
      bool any = false;
      for (std::int64_t k = 0; k < C; ++k) any = any || widen(xp[r * C + k]) != wv;
      mp[r] = T(any ? 1.0f : 0.0f);
    }
  });
}

const DTypes scatter_add_rows_dtypes{DType::float32, DType::float64};
void scatter_add_rows(const Tensor& src, const Tensor& indices, Tensor& dst) {
  const std::int32_t* ip = indices.data<std::int32_t>();
  const std::int64_t count = indices.numel(), rows = dst.dim(0), row = rows ? dst.numel() / rows : 0;
  for (std::int64_t k = 0; k < count; ++k)
    SYSTOLIC_CHECK(ip[k] >= 0 && ip[k] < rows, "scatter_add_rows: row {} out of range [0, {})", ip[k], rows);
  // In the order of the indices (one thread: repeated indices add up in a fixed order).
  visit_dtype<float, double>(dst.dtype(), [&](auto dtag) {
    using T = typename decltype(dtag)::type;
    T* out = dst.data<T>();
    visit_dtype<float, double, bfloat16>(src.dtype(), [&](auto stag) {
      using S = typename decltype(stag)::type;
      const S* in = static_cast<const S*>(src.raw_data());
      for (std::int64_t k = 0; k < count; ++k) {
        T* d = out + std::int64_t(ip[k]) * row;
        const S* s = in + k * row;
        for (std::int64_t j = 0; j < row; ++j) d[j] += static_cast<T>(widen(s[j]));
      }
    });
  });
}

}  // namespace systolic::ops::cpu
