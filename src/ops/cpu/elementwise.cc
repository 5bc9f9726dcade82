// Elementwise and data-movement ops on the CPU, as OpenMP loops (oneDNN has no primitives for them): fill, copy,
// cast, add_n, accumulate, scale_shift, moving_average, dropout, zero padding, concatenation, gathering rows.
// Contracts: include/systolic/ops.h.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/philox.h"
#include "ops/concat_layout.h"
#include "ops/cpu/cpu_backend.h"

namespace systolic::ops::cpu {

namespace {

template <class T>
void dropout_apply(const T* in, T* out, std::int64_t n, double rate, std::uint64_t key) {
  const T scale = T(1.0 / (1.0 - rate));
  const float threshold = static_cast<float>(rate);
#pragma omp parallel for
  for (std::int64_t g = 0; g < (n + 3) / 4; ++g) {
    auto r = philox::random4(key, static_cast<std::uint64_t>(g));
    for (int k = 0; k < 4 && g * 4 + k < n; ++k) {
      std::int64_t i = g * 4 + k;
      out[i] = philox::unit_float(r.v[k]) >= threshold ? in[i] * scale : T(0);
    }
  }
}

template <class T>
void concat_forward_loop(const std::vector<Tensor>& xs, Tensor& y, int axis) {
  ConcatLayout l = concat_layout(y, xs, axis);
  T* yp = y.data<T>();
  for (std::size_t k = 0; k < xs.size(); ++k) {
    const T* xp = xs[k].data<T>();
    const std::int64_t chunk = l.width[k], at = l.offset[k];
#pragma omp parallel for
    for (std::int64_t o = 0; o < l.outer; ++o) std::copy_n(xp + o * chunk, chunk, yp + o * l.row + at);
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
#pragma omp parallel for
    for (std::int64_t o = 0; o < l.outer; ++o) std::copy_n(gp + o * l.row + at, chunk, dxp + o * chunk);
  }
}

template <class T>
void add_n_loop(const std::vector<Tensor>& xs, Tensor& y) {
  std::int64_t n = y.numel();
  T* yp = y.data<T>();
  std::vector<const T*> ins;
  for (auto& x : xs) ins.push_back(x.data<T>());
#pragma omp parallel for
  for (std::int64_t i = 0; i < n; ++i) {
    T s = 0;
    for (auto* p : ins) s += p[i];
    yp[i] = s;
  }
}

template <class T>
void accumulate_loop(const Tensor& src, Tensor& dst) {
  std::int64_t n = dst.numel();
  const T* s = src.data<T>();
  T* d = dst.data<T>();
#pragma omp parallel for
  for (std::int64_t i = 0; i < n; ++i) d[i] += s[i];
}

template <class T>
void scale_shift_loop(const Tensor& x, Tensor& y, double scale, double shift) {
  std::int64_t n = x.numel();
  const T* xp = x.data<T>();
  T* yp = y.data<T>();
  const T a = T(scale), b = T(shift);
#pragma omp parallel for
  for (std::int64_t i = 0; i < n; ++i) yp[i] = xp[i] * a + b;
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
  auto run = [&](auto tag) {
    using S = decltype(tag);
    const S* in = static_cast<const S*>(src.raw_data());
#pragma omp parallel for
    for (std::int64_t k = 0; k < count; ++k) {
      const S* s = in + std::int64_t(indices[k]) * row;
      T* d = out + k * row;
      for (std::int64_t j = 0; j < row; ++j) d[j] = static_cast<T>(s[j]);
    }
  };
  switch (src.dtype()) {
    case DType::uint8:
      run(std::uint8_t{});
      break;
    case DType::int32:
      run(std::int32_t{});
      break;
    case DType::float64:
      run(double{});
      break;
    default:
      run(float{});
      break;
  }
}

template <class T>
void pad2d_forward_loop(const Tensor& x, Tensor& y, const Pad2D& p) {
  std::int64_t N = x.dim(0), H = x.dim(1), W = x.dim(2), C = x.dim(3), OH = y.dim(1), OW = y.dim(2);
  const T* xp = x.data<T>();
  T* yp = y.data<T>();
#pragma omp parallel for collapse(2)
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t oh = 0; oh < OH; ++oh) {
      T* row = yp + (n * OH + oh) * OW * C;
      std::int64_t ih = oh - p.top;
      if (ih < 0 || ih >= H) {
        std::fill_n(row, OW * C, T(0));
        continue;
      }
      std::fill_n(row, p.left * C, T(0));
      std::copy_n(xp + (n * H + ih) * W * C, W * C, row + p.left * C);
      std::fill_n(row + (p.left + W) * C, p.right * C, T(0));
    }
}

template <class T>
void pad2d_backward_loop(const Tensor& dy, Tensor& dx, const Pad2D& p) {
  std::int64_t N = dx.dim(0), H = dx.dim(1), W = dx.dim(2), C = dx.dim(3), OH = dy.dim(1), OW = dy.dim(2);
  const T* gp = dy.data<T>();
  T* dxp = dx.data<T>();
#pragma omp parallel for collapse(2)
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t h = 0; h < H; ++h)
      std::copy_n(gp + ((n * OH + h + p.top) * OW + p.left) * C, W * C, dxp + (n * H + h) * W * C);
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

const DTypes cast_dtypes{DType::float32, DType::float64, DType::bfloat16};
void cast(const Tensor& src, Tensor& dst) {
  const std::int64_t n = src.numel();
  // The conversions mixed precision runs on every op (bf16_emulation.h, the compute copy of the weights):
  // one parallel pass, rounding as bfloat16's constructor does.
  if (src.dtype() == DType::float32 && dst.dtype() == DType::bfloat16) {
    const float* s = src.data<float>();
    bfloat16* d = dst.data<bfloat16>();
#pragma omp parallel for if (n > 32768)
    for (std::int64_t i = 0; i < n; ++i) d[i] = bfloat16(s[i]);
  } else if (src.dtype() == DType::bfloat16 && dst.dtype() == DType::float32) {
    const bfloat16* s = src.data<bfloat16>();
    float* d = dst.data<float>();
#pragma omp parallel for if (n > 32768)
    for (std::int64_t i = 0; i < n; ++i) d[i] = static_cast<float>(s[i]);
  } else {
    dst.copy_from(src.to(dst.dtype()));
  }
}

const DTypes add_n_dtypes = kFloats;
void add_n(const std::vector<Tensor>& xs, Tensor& y) {
  by_float(y.dtype(), [&](auto t) { add_n_loop<decltype(t)>(xs, y); });
}

const DTypes accumulate_dtypes = kFloats;
void accumulate(const Tensor& src, Tensor& dst) {
  by_float(dst.dtype(), [&](auto t) { accumulate_loop<decltype(t)>(src, dst); });
}

const DTypes scale_shift_dtypes = kFloats;
void scale_shift(const Tensor& x, Tensor& y, double scale, double shift) {
  by_float(x.dtype(), [&](auto t) { scale_shift_loop<decltype(t)>(x, y, scale, shift); });
}

const DTypes moving_average_dtypes = kFloats;
void moving_average(Tensor& moving, const Tensor& value, double momentum) {
  by_float(moving.dtype(), [&](auto t) { moving_average_loop<decltype(t)>(moving, value, momentum); });
}

const DTypes dropout_forward_dtypes = kFloats;
void dropout_forward(const Tensor& x, Tensor& y, double rate, std::uint64_t seed, const Tensor& step) {
  std::uint64_t key = philox::dropout_key(seed, step_value(step));
  by_float(x.dtype(), [&](auto t) {
    using T = decltype(t);
    dropout_apply(x.data<T>(), y.data<T>(), x.numel(), rate, key);
  });
}

const DTypes dropout_backward_dtypes = kFloats;
void dropout_backward(const Tensor& dy, Tensor& dx, double rate, std::uint64_t seed, const Tensor& step) {
  std::uint64_t key = philox::dropout_key(seed, step_value(step));
  by_float(dy.dtype(), [&](auto t) {
    using T = decltype(t);
    dropout_apply(dy.data<T>(), dx.data<T>(), dy.numel(), rate, key);
  });
}

const DTypes pad2d_forward_dtypes = kFloats;
void pad2d_forward(const Tensor& x, Tensor& y, const Pad2D& p) {
  by_float(x.dtype(), [&](auto t) { pad2d_forward_loop<decltype(t)>(x, y, p); });
}

const DTypes pad2d_backward_dtypes = kFloats;
void pad2d_backward(const Tensor& dy, Tensor& dx, const Pad2D& p) {
  by_float(dy.dtype(), [&](auto t) { pad2d_backward_loop<decltype(t)>(dy, dx, p); });
}

const DTypes concat_forward_dtypes = kFloats;
void concat_forward(const std::vector<Tensor>& xs, Tensor& y, int axis) {
  by_float(y.dtype(), [&](auto t) { concat_forward_loop<decltype(t)>(xs, y, axis); });
}

const DTypes concat_backward_dtypes = kFloats;
void concat_backward(const Tensor& dy, std::vector<Tensor>& dxs, int axis) {
  by_float(dy.dtype(), [&](auto t) { concat_backward_loop<decltype(t)>(dy, dxs, axis); });
}

// Data sets of any dtype into float32, float64 or int32 (labels); indices out of range are an Error here.
const DTypes gather_rows_dtypes{DType::float32, DType::float64, DType::int32};
void gather_rows(const Tensor& src, const Tensor& indices, Tensor& dst) {
  SYSTOLIC_CHECK(src.dtype() != DType::bfloat16, "gather_rows: the cpu backend has no bfloat16 source rows");
  const std::int32_t* ip = indices.data<std::int32_t>();
  const std::int64_t count = indices.numel(), rows = src.dim(0);
  for (std::int64_t k = 0; k < count; ++k)
    SYSTOLIC_CHECK(ip[k] >= 0 && ip[k] < rows, "gather_rows: row {} out of range [0, {})", ip[k], rows);
  switch (dst.dtype()) {
    case DType::int32:
      return gather_rows_loop<std::int32_t>(src, ip, count, dst);
    case DType::float64:
      return gather_rows_loop<double>(src, ip, count, dst);
    default:
      return gather_rows_loop<float>(src, ip, count, dst);
  }
}

}  // namespace systolic::ops::cpu
