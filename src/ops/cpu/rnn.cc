// Recurrent cells on the CPU: rnn_math.h's formulas in loops over (row, unit), float32 and float64. Contracts:
// include/systolic/ops.h. Keras's default activations in float32 (tanh, and sigmoid for the gates) run rows at a time
// through vectorised exp, sigmoid and tanh (below): the scalar loops spent most of a recurrent layer's training time
// in libm's expf and the activation switch, one value at a time.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "ops/cpu/cpu_backend.h"
#include "ops/cpu/onednn.h"
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
  parallel_ranges(N, 8 * N * u, [&](std::int64_t n0, std::int64_t n1) {
    for (std::int64_t n = n0; n < n1; ++n)
      for (std::int64_t j = 0; j < u; ++j) f(n, j);
  });
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
// y[0, M) += sum over k < K of a[k] * w[k, :] (w [K, M]): a row's product with a matrix as rows of it added up,
// vectorised along M (a recurrent step's products at batch 1, where a matrix product has no rows to block).
SYSTOLIC_VECTOR_CLONES void add_row_products(const float* __restrict a, const float* __restrict w,
                                             std::int64_t K, std::int64_t M, float* __restrict y) {
  for (std::int64_t k = 0; k < K; ++k) {
    const float ak = a[k];
    const float* __restrict row = w + k * M;
#pragma omp simd
    for (std::int64_t m = 0; m < M; ++m) y[m] += ak * row[m];
  }
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
  parallel_ranges(N, 8 * N * u, [&](std::int64_t n0, std::int64_t n1) {
    for (std::int64_t n = n0; n < n1; ++n) f(n);
  });
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

// The whole recurrence: float32 through oneDNN's RNN primitives (onednn_rnn.cc); float64 in the loops below, which
// run the steps with rnn_math.h's formulas (the reference the parity harness holds oneDNN to, and what the
// finite-difference checks of the recurrent layers differentiate).
namespace {

// One sequence's recurrence in T (double), keeping every step's values for backward. Step k runs time t(k).
template <class T>
struct Recurrence {
  std::int64_t steps, N, F, u, G;
  bool reverse;
  // Per step k: the states before it h[k], c[k] ([N, u]; k = steps: the last), the pre-activations z[k] and
  // the products hp[k] [N, G*u]; GRU without reset_after: r[k] [N, u], the reset gate it scaled h[k] by.
  std::vector<T> h, c, z, xp, hp, r;
  std::int64_t t(std::int64_t k) const { return reverse ? steps - 1 - k : k; }
};

// y[n, :] (+)= a[n, :] @ w, a [N, K], w [K, M].
template <class T>
void matmul(const T* a, const T* w, T* y, std::int64_t N, std::int64_t K, std::int64_t M, bool add) {
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t m = 0; m < M; ++m) {
      T sum = add ? y[n * M + m] : T(0);
      for (std::int64_t k = 0; k < K; ++k) sum += a[n * K + k] * w[k * M + m];
      y[n * M + m] = sum;
    }
}

template <class T>
Recurrence<T> run_recurrence(const RnnCellParams& p, bool reverse, const Tensor& x, const Tensor& kernel,
                             const Tensor& recurrent, const Tensor& bias, const Tensor& h0,
                             const Tensor& c0) {
  const std::int64_t S = x.dim(0), N = x.dim(1), F = x.dim(2), u = recurrent.dim(0);
  const std::int64_t G = rnn_math::gates(p.cell) * u;
  Recurrence<T> r{S, N, F, u, G, reverse, {}, {}, {}, {}, {}, {}};
  r.h.assign((S + 1) * N * u, T(0));
  r.c.assign((S + 1) * N * u, T(0));
  r.z.assign(S * N * G, T(0));
  r.xp.assign(S * N * G, T(0));
  r.hp.assign(S * N * G, T(0));
  r.r.assign(S * N * u, T(0));
  if (h0.defined()) std::copy_n(h0.data<T>(), N * u, r.h.data());
  if (c0.defined()) std::copy_n(c0.data<T>(), N * u, r.c.data());
  const T *W = kernel.data<T>(), *U = recurrent.data<T>(), *b = in<T>(bias);
  const bool two = p.cell == RnnCell::gru && p.reset_after, before = p.cell == RnnCell::gru && !p.reset_after;
  const auto a = rnn_math::acts_of<T>(p);
  std::vector<T> rh(N * u);
  for (std::int64_t k = 0; k < S; ++k) {
    const T* hk = r.h.data() + k * N * u;
    T *xp = r.xp.data() + k * N * G, *hp = r.hp.data() + k * N * G;
    matmul(x.data<T>() + r.t(k) * N * F, W, xp, N, F, G, false);
    matmul(hk, U, hp, N, u, G, false);
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t g = 0; g < G; ++g) {
        if (b) xp[n * G + g] += b[g];
        if (two && b) hp[n * G + g] += b[G + g];
      }
    if (before) {  // the candidate's recurrent product reads r * h
      T* rk = r.r.data() + k * N * u;
      for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t j = 0; j < u; ++j) {
          rk[n * u + j] = activation::forward<T>(a.rec, xp[n * G + u + j] + hp[n * G + u + j], a.pr);
          rh[n * u + j] = rk[n * u + j] * hk[n * u + j];
        }
      for (std::int64_t n = 0; n < N; ++n)
        for (std::int64_t j = 0; j < u; ++j) {
          T sum = 0;
          for (std::int64_t i = 0; i < u; ++i) sum += rh[n * u + i] * U[i * G + 2 * u + j];
          hp[n * G + 2 * u + j] = sum;
        }
    }
    for (std::int64_t n = 0; n < N; ++n)
      for (std::int64_t j = 0; j < u; ++j) {
        T hv, cv = T(0);
        rnn_math::forward<T>(p.cell, a, xp + n * G, hp + n * G, u, j, hk[n * u + j],
                             r.c[k * N * u + n * u + j], r.z.data() + k * N * G + n * G, hv, cv);
        r.h[(k + 1) * N * u + n * u + j] = hv;
        r.c[(k + 1) * N * u + n * u + j] = cv;
      }
  }
  return r;
}

// Inference over a few steps of a few rows, float32 (one step of a streaming LSTM(64) at batch 1: 17k
// multiply-adds): the steps on the calling thread, each row's products with the kernels as add_row_products and
// its gates as rows_forward. oneDNN's RNN primitive costs more than that work before it computes anything (on
// the AVX2 VM, 3.3 µs to run one LSTM(64) step of one row, and 2.1 µs more to pack the recurrent kernel into its
// layout on every call); it serves every larger call and every training forward (whose workspace backward
// reads). GRU without reset_after (the state scaled by r before its product) stays with oneDNN.
constexpr std::int64_t kStreamingWork = std::int64_t(1) << 17;
bool streams(const RnnCellParams& p, const Tensor& x, const Tensor& recurrent, const Tensor& workspace) {
  const std::int64_t T = x.dim(0), N = x.dim(1), F = x.dim(2), u = recurrent.dim(0);
  return !workspace.defined() && vector_rows(p, x.dtype()) && !(p.cell == RnnCell::gru && !p.reset_after) &&
         rnn_math::forward_multiply_adds(p.cell, T, N, F, u) <= kStreamingWork;
}
void stream_forward(const RnnCellParams& p, bool reverse, const Tensor& x, const Tensor& kernel,
                    const Tensor& recurrent, const Tensor& bias, const Tensor& h0, const Tensor& c0,
                    Tensor& y, Tensor& h_last, Tensor& c_last) {
  const std::int64_t T = x.dim(0), N = x.dim(1), F = x.dim(2), u = recurrent.dim(0);
  const std::int64_t G = rnn_math::gates(p.cell) * u, n = N * u;
  const bool lstm = p.cell == RnnCell::lstm, two = p.cell == RnnCell::gru && p.reset_after;
  // The states before and after a step ([N, u] each: h, c), then one row's products and pre-activations.
  thread_local std::vector<float> buffer;
  buffer.assign(4 * n + 3 * G, 0.0f);
  float *h = buffer.data(), *c = h + n, *h_next = c + n, *c_next = h_next + n, *xp = c_next + n, *hp = xp + G,
        *z = hp + G;
  if (h0.defined()) std::copy_n(h0.data<float>(), n, h);
  if (lstm && c0.defined()) std::copy_n(c0.data<float>(), n, c);
  const float *W = kernel.data<float>(), *U = recurrent.data<float>(), *b = in<float>(bias);
  for (std::int64_t k = 0; k < T; ++k) {
    const std::int64_t t = reverse ? T - 1 - k : k;
    for (std::int64_t row = 0; row < N; ++row) {
      b ? std::copy_n(b, G, xp) : std::fill_n(xp, G, 0.0f);
      two&& b ? std::copy_n(b + G, G, hp) : std::fill_n(hp, G, 0.0f);
      add_row_products(x.data<float>() + (t * N + row) * F, W, F, G, xp);
      add_row_products(h + row * u, U, u, G, hp);
      rows_forward(p.cell, p.reset_after, xp, hp, h + row * u, c + row * u, u, z, h_next + row * u,
                   c_next + row * u);
    }
    std::swap(h, h_next);
    std::swap(c, c_next);
    if (y.defined()) std::copy_n(h, n, y.data<float>() + t * n);
  }
  if (h_last.defined()) std::copy_n(h, n, h_last.data<float>());
  if (lstm && c_last.defined()) std::copy_n(c, n, c_last.data<float>());
}

}  // namespace

const DTypes rnn_sequence_forward_dtypes{DType::float32, DType::float64};
void rnn_sequence_forward(const RnnCellParams& p, bool reverse, const Tensor& x, const Tensor& kernel,
                          const Tensor& recurrent, const Tensor& bias, const Tensor& h0, const Tensor& c0,
                          Tensor& y, Tensor& h_last, Tensor& c_last, Tensor& workspace) {
  if (x.dtype() == DType::float32) {
    if (streams(p, x, recurrent, workspace))
      return stream_forward(p, reverse, x, kernel, recurrent, bias, h0, c0, y, h_last, c_last);
    return onednn::rnn_sequence_forward(p, reverse, x, kernel, recurrent, bias, h0, c0, y, h_last, c_last,
                                        workspace);
  }
  using T = double;
  const Recurrence<T> r = run_recurrence<T>(p, reverse, x, kernel, recurrent, bias, h0, c0);
  const std::int64_t S = r.steps, n = r.N * r.u;
  for (std::int64_t k = 0; k < S; ++k) std::copy_n(r.h.data() + (k + 1) * n, n, y.data<T>() + r.t(k) * n);
  if (h_last.defined()) std::copy_n(r.h.data() + S * n, n, h_last.data<T>());
  if (c_last.defined()) std::copy_n(r.c.data() + S * n, n, c_last.data<T>());
}

const DTypes rnn_sequence_backward_dtypes{DType::float32, DType::float64};
void rnn_sequence_backward(const RnnCellParams& p, bool reverse, const Tensor& x, const Tensor& kernel,
                           const Tensor& recurrent, const Tensor& bias, const Tensor& h0, const Tensor& c0,
                           const Tensor& y, const Tensor& workspace, const Tensor& dy, const Tensor& dh_last,
                           const Tensor& dc_last, Tensor& dx, Tensor& dkernel, Tensor& drecurrent,
                           Tensor& dbias, Tensor& dh0, Tensor& dc0) {
  if (x.dtype() == DType::float32)
    return onednn::rnn_sequence_backward(p, reverse, x, kernel, recurrent, bias, h0, c0, y, workspace, dy,
                                         dh_last, dc_last, dx, dkernel, drecurrent, dbias, dh0, dc0);
  using T = double;
  // Recomputed: the loops keep no workspace.
  const Recurrence<T> r = run_recurrence<T>(p, reverse, x, kernel, recurrent, bias, h0, c0);
  const std::int64_t S = r.steps, N = r.N, F = r.F, u = r.u, G = r.G, n = N * u;
  const bool lstm = p.cell == RnnCell::lstm, two = p.cell == RnnCell::gru && p.reset_after,
             before = p.cell == RnnCell::gru && !p.reset_after;
  const auto a = rnn_math::acts_of<T>(p);
  const T *W = kernel.data<T>(), *U = recurrent.data<T>();
  std::vector<T> dh(n, T(0)), dc(n, T(0)), dh_prev(n), dc_prev(n), dxp(N * G), dhp(N * G), drh(n);
  if (dh_last.defined()) std::copy_n(dh_last.data<T>(), n, dh.data());
  if (lstm && dc_last.defined()) std::copy_n(dc_last.data<T>(), n, dc.data());
  if (dx.defined()) std::fill_n(dx.data<T>(), dx.numel(), T(0));
  for (std::int64_t k = S - 1; k >= 0; --k) {
    const std::int64_t t = r.t(k);
    if (dy.defined())
      for (std::int64_t i = 0; i < n; ++i) dh[i] += dy.data<T>()[t * n + i];
    const T *hk = r.h.data() + k * n, *ck = r.c.data() + k * n, *cn = r.c.data() + (k + 1) * n;
    const T *zk = r.z.data() + k * N * G, *hpk = r.hp.data() + k * N * G, *rk = r.r.data() + k * n;
    for (std::int64_t row = 0; row < N; ++row)
      for (std::int64_t j = 0; j < u; ++j) {
        const std::int64_t at = row * u + j;
        T dhd = T(0), dcd = T(0);
        rnn_math::backward<T>(p.cell, a, hpk + row * G, zk + row * G, u, j, hk[at], ck[at], cn[at], dh[at],
                              dc[at], dxp.data() + row * G, dhp.data() + row * G, dhd, dcd);
        dh_prev[at] = dhd;
        dc_prev[at] = dcd;
      }
    if (before) {
      // The candidate's product read r * h: its gradient reaches r (then r's pre-activation, the r columns of both
      // products) and h.
      for (std::int64_t row = 0; row < N; ++row)
        for (std::int64_t i = 0; i < u; ++i) {
          T sum = 0;
          for (std::int64_t j = 0; j < u; ++j) sum += dhp[row * G + 2 * u + j] * U[i * G + 2 * u + j];
          drh[row * u + i] = sum;
        }
      for (std::int64_t row = 0; row < N; ++row)
        for (std::int64_t j = 0; j < u; ++j) {
          const std::int64_t at = row * u + j;
          const T rv = rk[at];
          const T dz = activation::backward<T>(a.rec, zk[row * G + u + j], rv, drh[at] * hk[at], a.pr);
          dxp[row * G + u + j] = dhp[row * G + u + j] = dz;
          dh_prev[at] += drh[at] * rv;
        }
    }
    // dh_prev += dhp @ U^T (without reset_after, the candidate's columns went through r * h above).
    for (std::int64_t row = 0; row < N; ++row)
      for (std::int64_t i = 0; i < u; ++i) {
        T sum = 0;
        for (std::int64_t g = 0; g < (before ? 2 * u : G); ++g) sum += dhp[row * G + g] * U[i * G + g];
        dh_prev[row * u + i] += sum;
      }
    const T* xt = x.data<T>() + t * N * F;
    if (dx.defined())
      for (std::int64_t row = 0; row < N; ++row)
        for (std::int64_t f = 0; f < F; ++f) {
          T sum = 0;
          for (std::int64_t g = 0; g < G; ++g) sum += dxp[row * G + g] * W[f * G + g];
          dx.data<T>()[t * N * F + row * F + f] = sum;
        }
    if (dkernel.defined())
      for (std::int64_t row = 0; row < N; ++row)
        for (std::int64_t f = 0; f < F; ++f)
          for (std::int64_t g = 0; g < G; ++g)
            dkernel.data<T>()[f * G + g] += xt[row * F + f] * dxp[row * G + g];
    if (drecurrent.defined())
      for (std::int64_t row = 0; row < N; ++row)
        for (std::int64_t i = 0; i < u; ++i)
          for (std::int64_t g = 0; g < G; ++g) {
            const T state = before && g >= 2 * u ? rk[row * u + i] * hk[row * u + i] : hk[row * u + i];
            drecurrent.data<T>()[i * G + g] += state * dhp[row * G + g];
          }
    if (dbias.defined())
      for (std::int64_t row = 0; row < N; ++row)
        for (std::int64_t g = 0; g < G; ++g) {
          dbias.data<T>()[g] += dxp[row * G + g];
          if (two) dbias.data<T>()[G + g] += dhp[row * G + g];
        }
    dh.swap(dh_prev);
    dc.swap(dc_prev);
  }
  if (dh0.defined()) std::copy_n(dh.data(), n, dh0.data<T>());
  if (dc0.defined()) std::copy_n(dc.data(), n, dc0.data<T>());
}

}  // namespace systolic::ops::cpu
