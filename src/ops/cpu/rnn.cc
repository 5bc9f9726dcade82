// Recurrent cells on the CPU: rnn_math.h's formulas in loops over (row, unit), float32 and float64. Contracts:
// include/systolic/ops.h. Keras's default activations in float32 (tanh, and sigmoid for the gates) run rows at a time
// through vectorised exp, sigmoid and tanh (below): the scalar loops spent most of a recurrent layer's training time
// in libm's expf and the activation switch, one value at a time.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "ops/cpu/cpu_backend.h"
#include "ops/rnn_math.h"

namespace systolic::ops::cpu {

namespace {

template <class T>
const T* in(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}
template <class T>
T* out(Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

// Calls f(n, j) for every row n < N and unit j < u.
template <class F>
void each(std::int64_t N, std::int64_t u, F&& f) {
#pragma omp parallel for if (N * u > kParallelMin / 8)
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t j = 0; j < u; ++j) f(n, j);
}

// exp, sigmoid and tanh in float32 without branches or calls, so that the row loops vectorise. exp(x) = 2^k e^r with
// k = round(x / ln 2) and |r| <= ln 2 / 2, e^r by Cephes's expf polynomial (ln 2 split in two for r), 2^k built in the
// exponent bits; x clamped to [-87.3, 88.3] (no overflow; below, e^x is under 1.2e-38 where the callers add it to 1).
// tanh from activation_math.h's two forms of tanh_ (an odd polynomial below |x| = 0.55, (1 - e) / (1 + e), e =
// exp(-2|x|), above), both computed and one taken.
// tests/test_ops.cc checks them against float64 and the cells against float64 cells.
// c ? a : b by the bits (no branch for the vectoriser to if-convert, which it does not in the target clones).
__attribute__((always_inline)) inline float select_v(bool c, float a, float b) {
  const std::uint32_t m = 0u - static_cast<std::uint32_t>(c);
  return std::bit_cast<float>((std::bit_cast<std::uint32_t>(a) & m) | (std::bit_cast<std::uint32_t>(b) & ~m));
}
__attribute__((always_inline)) inline float exp_v(float x) {
  x = select_v(x < -87.3f, -87.3f, select_v(x > 88.3f, 88.3f, x));
  // k = round(x / ln 2), half away from zero, by a truncating conversion (which vectorises where floor may not).
  const std::int32_t ki = static_cast<std::int32_t>(x * 1.44269504088896341f + std::copysign(0.5f, x));
  const float k = static_cast<float>(ki);
  const float r = (x - k * 0.693359375f) + k * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float er = p * (r * r) + r + 1.0f;
  const std::int32_t bits = (ki + 127) << 23;
  return er * std::bit_cast<float>(bits);
}
__attribute__((always_inline)) inline float sigmoid_v(float x) {
  return 1.0f / (1.0f + exp_v(-x));
}
__attribute__((always_inline)) inline float tanh_v(float x) {
  const float a = std::fabs(x);
  return select_v(a < activation::kTanhPolyBound, activation::tanh_poly_(x),
                  activation::tanh_from_exp_(x, exp_v(-2.0f * a)));
}

// One unmasked row of the cell with tanh and sigmoid, float32: rnn_math::forward and backward for j < u at once,
// every pointer defined (vector_rows checks), the cell a template argument so that the loops hold no branch.
template <RnnCell K, bool ResetAfter>
__attribute__((always_inline)) inline void row_forward(const float* __restrict xp, const float* __restrict hp,
                                                       const float* __restrict h_prev,
                                                       const float* __restrict c_prev, std::int64_t u,
                                                       float* __restrict zp, float* __restrict h,
                                                       float* __restrict c) {
#pragma omp simd
  for (std::int64_t j = 0; j < u; ++j) {
    if constexpr (K == RnnCell::simple) {
      zp[j] = xp[j] + hp[j];
      h[j] = tanh_v(zp[j]);
    } else if constexpr (K == RnnCell::lstm) {
      const float zi = xp[j] + hp[j], zf = xp[u + j] + hp[u + j], zc = xp[2 * u + j] + hp[2 * u + j],
                  zo = xp[3 * u + j] + hp[3 * u + j];
      zp[j] = zi;
      zp[u + j] = zf;
      zp[2 * u + j] = zc;
      zp[3 * u + j] = zo;
      const float cv = sigmoid_v(zf) * c_prev[j] + sigmoid_v(zi) * tanh_v(zc);
      c[j] = cv;
      h[j] = sigmoid_v(zo) * tanh_v(cv);
    } else {
      const float zz = xp[j] + hp[j], zr = xp[u + j] + hp[u + j];
      zp[j] = zz;
      zp[u + j] = zr;
      const float z = sigmoid_v(zz), r = ResetAfter ? sigmoid_v(zr) : 1.0f;
      const float zh = xp[2 * u + j] + r * hp[2 * u + j];
      zp[2 * u + j] = zh;
      h[j] = z * h_prev[j] + (1.0f - z) * tanh_v(zh);
    }
  }
}
template <RnnCell K, bool ResetAfter>
__attribute__((always_inline)) inline void row_backward(
    const float* __restrict hp, const float* __restrict zp, const float* __restrict h_prev,
    const float* __restrict c_prev, const float* __restrict c, const float* __restrict dh,
    const float* __restrict dc, std::int64_t u, float* __restrict dxp, float* __restrict dhp,
    float* __restrict dh_prev, float* __restrict dc_prev) {
#pragma omp simd
  for (std::int64_t j = 0; j < u; ++j) {
    if constexpr (K == RnnCell::simple) {
      const float y = tanh_v(zp[j]), d = dh[j] * (1.0f - y * y);
      dxp[j] = d;
      dhp[j] = d;
      dh_prev[j] = 0.0f;
    } else if constexpr (K == RnnCell::lstm) {
      const float i = sigmoid_v(zp[j]), f = sigmoid_v(zp[u + j]), cc = tanh_v(zp[2 * u + j]),
                  o = sigmoid_v(zp[3 * u + j]), tc = tanh_v(c[j]);
      const float dct = dc[j] + dh[j] * o * (1.0f - tc * tc);
      const float di = dct * cc * i * (1.0f - i), df = dct * c_prev[j] * f * (1.0f - f),
                  dcc = dct * i * (1.0f - cc * cc), dout = dh[j] * tc * o * (1.0f - o);
      dxp[j] = di;
      dxp[u + j] = df;
      dxp[2 * u + j] = dcc;
      dxp[3 * u + j] = dout;
      dhp[j] = di;
      dhp[u + j] = df;
      dhp[2 * u + j] = dcc;
      dhp[3 * u + j] = dout;
      dh_prev[j] = 0.0f;
      dc_prev[j] = dct * f;
    } else {
      const float z = sigmoid_v(zp[j]), hh = tanh_v(zp[2 * u + j]),
                  r = ResetAfter ? sigmoid_v(zp[u + j]) : 1.0f;
      const float dzh = dh[j] * (1.0f - z) * (1.0f - hh * hh);
      const float dzr = ResetAfter ? dzh * hp[2 * u + j] * r * (1.0f - r) : 0.0f;
      const float dzz = dh[j] * (h_prev[j] - hh) * z * (1.0f - z);
      dxp[j] = dzz;
      dhp[j] = dzz;
      dxp[u + j] = dzr;
      dhp[u + j] = dzr;
      dxp[2 * u + j] = dzh;
      dhp[2 * u + j] = dzh * r;
      dh_prev[j] = dh[j] * z;
    }
  }
}
// The rows' loops for each cell, compiled for AVX-512, AVX2 and the baseline.
#define SYSTOLIC_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
SYSTOLIC_VECTOR_CLONES void rows_forward(RnnCell k, bool reset_after, const float* xp, const float* hp,
                                         const float* h_prev, const float* c_prev, std::int64_t u, float* zp,
                                         float* h, float* c) {
  if (k == RnnCell::simple) return row_forward<RnnCell::simple, true>(xp, hp, h_prev, c_prev, u, zp, h, c);
  if (k == RnnCell::lstm) return row_forward<RnnCell::lstm, true>(xp, hp, h_prev, c_prev, u, zp, h, c);
  if (reset_after) return row_forward<RnnCell::gru, true>(xp, hp, h_prev, c_prev, u, zp, h, c);
  row_forward<RnnCell::gru, false>(xp, hp, h_prev, c_prev, u, zp, h, c);
}
SYSTOLIC_VECTOR_CLONES void rows_backward(RnnCell k, bool reset_after, const float* hp, const float* zp,
                                          const float* h_prev, const float* c_prev, const float* c,
                                          const float* dh, const float* dc, std::int64_t u, float* dxp,
                                          float* dhp, float* dh_prev, float* dc_prev) {
  if (k == RnnCell::simple)
    return row_backward<RnnCell::simple, true>(hp, zp, h_prev, c_prev, c, dh, dc, u, dxp, dhp, dh_prev,
                                               dc_prev);
  if (k == RnnCell::lstm)
    return row_backward<RnnCell::lstm, true>(hp, zp, h_prev, c_prev, c, dh, dc, u, dxp, dhp, dh_prev,
                                             dc_prev);
  if (reset_after)
    return row_backward<RnnCell::gru, true>(hp, zp, h_prev, c_prev, c, dh, dc, u, dxp, dhp, dh_prev, dc_prev);
  row_backward<RnnCell::gru, false>(hp, zp, h_prev, c_prev, c, dh, dc, u, dxp, dhp, dh_prev, dc_prev);
}
#undef SYSTOLIC_VECTOR_CLONES

// Whether a cell runs rows at a time: float32 with tanh and (LSTM, GRU) sigmoid gates, and every tensor the rows'
// loops read or write defined (as the recurrent layers pass them).
bool vector_rows(const RnnCellParams& p, DType dtype) {
  return dtype == DType::float32 && p.activation.kind == Activation::tanh &&
         (p.cell == RnnCell::simple || p.recurrent_activation.kind == Activation::sigmoid);
}

// Calls f(n) for every row n < N.
template <class F>
void each_row(std::int64_t N, std::int64_t u, F&& f) {
#pragma omp parallel for if (N * u > kParallelMin / 8)
  for (std::int64_t n = 0; n < N; ++n) f(n);
}

}  // namespace

const DTypes rnn_cell_forward_dtypes{DType::float32, DType::float64};
void rnn_cell_forward(const RnnCellParams& p, const Tensor& x_part, const Tensor& h_part,
                      const Tensor& h_prev, const Tensor& c_prev, const Tensor& mask, Tensor& h, Tensor& c,
                      Tensor& z) {
  visit_dtype<float, double>(h.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const auto a = rnn_math::acts_of<T>(p);
    const rnn_math::ForwardTensors<T> t{in<T>(x_part), in<T>(h_part), in<T>(h_prev), in<T>(c_prev),
                                        in<T>(mask),   out<T>(h),     out<T>(c),     out<T>(z)};
    const std::int64_t u = h.dim(1), G = rnn_math::gates(p.cell);
    if constexpr (std::is_same_v<T, float>) {
      if (vector_rows(p, h.dtype()) && (p.cell != RnnCell::lstm || (t.c_prev && t.c))) {
        each_row(h.dim(0), u, [&](std::int64_t n) {
          if (t.mask && t.mask[n] == 0.0f) {  // a masked row: the state kept, as rnn_math does it
            for (std::int64_t j = 0; j < u; ++j) rnn_math::forward_at(p.cell, a, t, u, n, j);
            return;
          }
          const std::int64_t row = n * G * u;
          rows_forward(p.cell, p.reset_after, t.x_part + row, t.h_part + row, t.h_prev + n * u,
                       t.c_prev ? t.c_prev + n * u : nullptr, u, t.z + row, t.h + n * u,
                       t.c ? t.c + n * u : nullptr);
        });
        return;
      }
    }
    each(h.dim(0), u, [&](std::int64_t n, std::int64_t j) { rnn_math::forward_at(p.cell, a, t, u, n, j); });
  });
}

const DTypes rnn_cell_backward_dtypes{DType::float32, DType::float64};
void rnn_cell_backward(const RnnCellParams& p, const Tensor& h_part, const Tensor& h_prev,
                       const Tensor& c_prev, const Tensor& z, const Tensor& c, const Tensor& mask,
                       const Tensor& dh, const Tensor& dc, Tensor& dx_part, Tensor& dh_part, Tensor& dh_prev,
                       Tensor& dc_prev) {
  visit_dtype<float, double>(dh.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const auto a = rnn_math::acts_of<T>(p);
    const rnn_math::BackwardTensors<T> t{in<T>(h_part),   in<T>(h_prev),   in<T>(c_prev),   in<T>(z),
                                         in<T>(c),        in<T>(mask),     in<T>(dh),       in<T>(dc),
                                         out<T>(dx_part), out<T>(dh_part), out<T>(dh_prev), out<T>(dc_prev)};
    const std::int64_t u = dh.dim(1), G = rnn_math::gates(p.cell);
    if constexpr (std::is_same_v<T, float>) {
      const bool defined = t.dh_part && (p.cell != RnnCell::gru || (t.h_part && t.h_prev)) &&
                           (p.cell != RnnCell::lstm || (t.c_prev && t.c && t.dc && t.dc_prev));
      if (vector_rows(p, dh.dtype()) && defined) {
        each_row(dh.dim(0), u, [&](std::int64_t n) {
          if (t.mask && t.mask[n] == 0.0f) {  // a masked row passes the state's gradients through
            for (std::int64_t j = 0; j < u; ++j) rnn_math::backward_at(p.cell, a, t, u, n, j);
            return;
          }
          const std::int64_t row = n * G * u, at = n * u;
          rows_backward(p.cell, p.reset_after, t.h_part ? t.h_part + row : nullptr, t.z + row,
                        t.h_prev ? t.h_prev + at : nullptr, t.c_prev ? t.c_prev + at : nullptr,
                        t.c ? t.c + at : nullptr, t.dh + at, t.dc ? t.dc + at : nullptr, u, t.dx_part + row,
                        t.dh_part + row, t.dh_prev + at, t.dc_prev ? t.dc_prev + at : nullptr);
        });
        return;
      }
    }
    each(dh.dim(0), u, [&](std::int64_t n, std::int64_t j) { rnn_math::backward_at(p.cell, a, t, u, n, j); });
  });
}

}  // namespace systolic::ops::cpu
