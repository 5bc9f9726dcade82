// One step of Keras's recurrent cells for one (row, unit): the formulas of ops::rnn_cell_forward and
// rnn_cell_backward (include/systolic/ops.h), once for the CPU loops (ops/cpu/rnn.cc) and the CUDA kernels
// (ops/cuda/rnn.cu); ops/xla/rnn.cc writes the same with its expressions. Keras 3.15's SimpleRNNCell, LSTMCell
// (implementation 2: one product of the four gates i, f, c, o) and GRUCell with reset_after (gates z, r, h) over the
// TensorFlow backend; the derivatives are those of the same formulas (activation_math.h's backward).
//
// Per row: xp, hp are the row's x_part and h_part (G*u values), zp its saved pre-activations (G*u); j the unit.
#pragma once

#include <systolic/ops.h>

#include "ops/activation_math.h"

namespace systolic::ops::rnn_math {

// The cell's activations as kernel arguments.
template <class T>
struct Acts {
  Activation::Kind act, rec;  // activation (tanh), recurrent_activation (sigmoid)
  activation::Params<T> pa, pr;
  bool reset_after;  // gru (RnnCellParams::reset_after)
};
template <class T>
Acts<T> acts_of(const RnnCellParams& p) {
  return {p.activation.kind, p.recurrent_activation.kind, activation::params_of<T>(p.activation),
          activation::params_of<T>(p.recurrent_activation), p.reset_after};
}

// Gates per cell kind: simple 1, lstm 4, gru 3.
SYSTOLIC_HD int gates(RnnCell k) {
  return k == RnnCell::lstm ? 4 : k == RnnCell::gru ? 3 : 1;
}
// The multiply-adds of a whole forward recurrence (T steps of N rows, F features, u units): per step and row, the
// gates' products with the input and the state. The CPU backend sizes its choices by it.
inline std::int64_t forward_multiply_adds(RnnCell k, std::int64_t T, std::int64_t N, std::int64_t F,
                                          std::int64_t u) {
  return T * N * gates(k) * u * (F + u);
}

// Forward, for a row whose step is not masked: writes the pre-activations zp[g*u + j] and h (c for LSTM).
template <class T>
SYSTOLIC_HD void forward(RnnCell k, const Acts<T>& a, const T* xp, const T* hp, std::int64_t u,
                         std::int64_t j, T h_prev, T c_prev, T* zp, T& h, T& c) {
  using activation::forward;
  if (k == RnnCell::simple) {
    zp[j] = xp[j] + hp[j];
    h = forward<T>(a.act, zp[j], a.pa);
    return;
  }
  if (k == RnnCell::lstm) {
    for (int g = 0; g < 4; ++g) zp[g * u + j] = xp[g * u + j] + hp[g * u + j];
    const T i = forward<T>(a.rec, zp[j], a.pr), f = forward<T>(a.rec, zp[u + j], a.pr);
    const T cc = forward<T>(a.act, zp[2 * u + j], a.pa), o = forward<T>(a.rec, zp[3 * u + j], a.pr);
    c = f * c_prev + i * cc;
    h = o * forward<T>(a.act, c, a.pa);
    return;
  }
  // GRU, reset_after: the reset gate scales the recurrent product of the candidate (its bias included); without
  // it the candidate's recurrent part is the caller's (r * h_prev) @ U_h.
  zp[j] = xp[j] + hp[j];
  zp[u + j] = xp[u + j] + hp[u + j];
  const T z = forward<T>(a.rec, zp[j], a.pr), r = a.reset_after ? forward<T>(a.rec, zp[u + j], a.pr) : T(1);
  zp[2 * u + j] = xp[2 * u + j] + r * hp[2 * u + j];
  const T hh = forward<T>(a.act, zp[2 * u + j], a.pa);
  h = z * h_prev + (T(1) - z) * hh;
}

// Backward, for a row whose step is not masked: given dh (w.r.t. h) and dc (w.r.t. c, from the next step; LSTM),
// writes dxp[g*u + j] (w.r.t. x_part), dhp[g*u + j] (w.r.t. h_part, when not null; the others' equals dxp) and the direct
// parts dh_prev (GRU: through z * h_prev) and dc_prev (LSTM).
template <class T>
SYSTOLIC_HD void backward(RnnCell k, const Acts<T>& a, const T* hp, const T* zp, std::int64_t u,
                          std::int64_t j, T h_prev, T c_prev, T c, T dh, T dc, T* dxp, T* dhp, T& dh_prev,
                          T& dc_prev) {
  using activation::backward;
  using activation::forward;
  if (k == RnnCell::simple) {
    dxp[j] = backward<T>(a.act, zp[j], forward<T>(a.act, zp[j], a.pa), dh, a.pa);
    if (dhp) dhp[j] = dxp[j];
    dh_prev = T(0);
    return;
  }
  if (k == RnnCell::lstm) {
    const T zi = zp[j], zf = zp[u + j], zc = zp[2 * u + j], zo = zp[3 * u + j];
    const T i = forward<T>(a.rec, zi, a.pr), f = forward<T>(a.rec, zf, a.pr);
    const T cc = forward<T>(a.act, zc, a.pa), o = forward<T>(a.rec, zo, a.pr);
    const T tc = forward<T>(a.act, c, a.pa);
    const T dct = dc + backward<T>(a.act, c, tc, dh * o, a.pa);
    dxp[j] = backward<T>(a.rec, zi, i, dct * cc, a.pr);
    dxp[u + j] = backward<T>(a.rec, zf, f, dct * c_prev, a.pr);
    dxp[2 * u + j] = backward<T>(a.act, zc, cc, dct * i, a.pa);
    dxp[3 * u + j] = backward<T>(a.rec, zo, o, dh * tc, a.pr);
    if (dhp)
      for (int g = 0; g < 4; ++g) dhp[g * u + j] = dxp[g * u + j];
    dh_prev = T(0);
    dc_prev = dct * f;
    return;
  }
  const T zz = zp[j], zr = zp[u + j], zh = zp[2 * u + j];
  const T z = forward<T>(a.rec, zz, a.pr), hh = forward<T>(a.act, zh, a.pa);
  const T r = a.reset_after ? forward<T>(a.rec, zr, a.pr) : T(1);
  const T dzh = backward<T>(a.act, zh, hh, dh * (T(1) - z), a.pa);
  const T dzr = a.reset_after ? backward<T>(a.rec, zr, r, dzh * hp[2 * u + j], a.pr) : T(0);
  const T dzz = backward<T>(a.rec, zz, z, dh * (h_prev - hh), a.pr);
  dxp[j] = dhp[j] = dzz;
  dxp[u + j] = dhp[u + j] = dzr;
  dxp[2 * u + j] = dzh;
  dhp[2 * u + j] = dzh * r;
  dh_prev = dh * z;
}

// One (row n, unit j) of rnn_cell_forward and rnn_cell_backward over whole tensors (undefined ones null), the
// mask applied: the CPU's loops and the CUDA kernels call these for every n < N, j < u.
template <class T>
struct ForwardTensors {
  const T *x_part, *h_part, *h_prev, *c_prev, *mask;
  T *h, *c, *z;
};
template <class T>
SYSTOLIC_HD void forward_at(RnnCell k, const Acts<T>& a, const ForwardTensors<T>& t, std::int64_t u,
                            std::int64_t n, std::int64_t j) {
  const std::int64_t G = gates(k), at = n * u + j, row = n * G * u;
  const T cp = t.c_prev ? t.c_prev[at] : T(0);
  if (t.mask && t.mask[n] == T(0)) {  // a masked step keeps the state (its pre-activations are not read)
    for (std::int64_t g = 0; g < G; ++g) t.z[row + g * u + j] = T(0);
    t.h[at] = t.h_prev[at];
    if (t.c) t.c[at] = cp;
    return;
  }
  T hv, cv = T(0);
  forward<T>(k, a, t.x_part + row, t.h_part + row, u, j, t.h_prev[at], cp, t.z + row, hv, cv);
  t.h[at] = hv;
  if (t.c) t.c[at] = cv;
}

template <class T>
struct BackwardTensors {
  const T *h_part, *h_prev, *c_prev, *z, *c, *mask, *dh, *dc;
  T *dx_part, *dh_part, *dh_prev, *dc_prev;
};
template <class T>
SYSTOLIC_HD void backward_at(RnnCell k, const Acts<T>& a, const BackwardTensors<T>& t, std::int64_t u,
                             std::int64_t n, std::int64_t j) {
  const std::int64_t G = gates(k), at = n * u + j, row = n * G * u;
  const T dc = t.dc ? t.dc[at] : T(0);
  if (t.mask && t.mask[n] == T(0)) {  // a masked step passes the state's gradients through
    for (std::int64_t g = 0; g < G; ++g) {
      t.dx_part[row + g * u + j] = T(0);
      if (t.dh_part) t.dh_part[row + g * u + j] = T(0);
    }
    t.dh_prev[at] = t.dh[at];
    if (t.dc_prev) t.dc_prev[at] = dc;
    return;
  }
  T dh_prev = T(0), dc_prev = T(0);
  backward<T>(k, a, t.h_part ? t.h_part + row : nullptr, t.z + row, u, j, t.h_prev ? t.h_prev[at] : T(0),
              t.c_prev ? t.c_prev[at] : T(0), t.c ? t.c[at] : T(0), t.dh[at], dc, t.dx_part + row,
              t.dh_part ? t.dh_part + row : nullptr, dh_prev, dc_prev);
  t.dh_prev[at] = dh_prev;
  if (t.dc_prev) t.dc_prev[at] = dc_prev;
}

}  // namespace systolic::ops::rnn_math
