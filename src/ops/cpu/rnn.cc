// Recurrent cells on the CPU: rnn_math.h's formulas in loops over (row, unit), float32 and float64. Contracts:
// include/systolic/ops.h.
#include "ops/cpu/cpu_backend.h"
#include "ops/rnn_math.h"

namespace systolic::ops::cpu {

namespace {

template <class T>
const T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}
template <class T>
T* data_or_null(Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

template <class T>
void forward_loop(const RnnCellParams& p, const Tensor& x_part, const Tensor& h_part, const Tensor& h_prev,
                  const Tensor& c_prev, const Tensor& mask, Tensor& h, Tensor& c, Tensor& z) {
  const std::int64_t N = h.dim(0), u = h.dim(1), G = rnn_math::gates(p.cell);
  const auto a = rnn_math::acts_of<T>(p);
  const T *xp = x_part.data<T>(), *hp = h_part.data<T>(), *hprev = h_prev.data<T>();
  const T *cprev = data_or_null<T>(c_prev), *m = data_or_null<T>(mask);
  T *hout = h.data<T>(), *cout = data_or_null<T>(c), *zp = z.data<T>();
#pragma omp parallel for if (N * u > 4096)
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t j = 0; j < u; ++j) {
      const std::int64_t k = n * u + j;
      const T cp = cprev ? cprev[k] : T(0);
      if (m && m[n] == T(0)) {  // a masked step keeps the state (its pre-activations are not read)
        for (std::int64_t g = 0; g < G; ++g) zp[n * G * u + g * u + j] = T(0);
        hout[k] = hprev[k];
        if (cout) cout[k] = cp;
        continue;
      }
      T hv, cv = T(0);
      rnn_math::forward<T>(p.cell, a, xp + n * G * u, hp + n * G * u, u, j, hprev[k], cp, zp + n * G * u, hv,
                           cv);
      hout[k] = hv;
      if (cout) cout[k] = cv;
    }
}

template <class T>
void backward_loop(const RnnCellParams& p, const Tensor& h_part, const Tensor& h_prev, const Tensor& c_prev,
                   const Tensor& z, const Tensor& c, const Tensor& mask, const Tensor& dh, const Tensor& dc,
                   Tensor& dx_part, Tensor& dh_part, Tensor& dh_prev, Tensor& dc_prev) {
  const std::int64_t N = dh.dim(0), u = dh.dim(1), G = rnn_math::gates(p.cell);
  const auto a = rnn_math::acts_of<T>(p);
  const T *hp = data_or_null<T>(h_part), *hprev = data_or_null<T>(h_prev), *cprev = data_or_null<T>(c_prev);
  const T *zp = z.data<T>(), *cp = data_or_null<T>(c), *m = data_or_null<T>(mask);
  const T *dhp = dh.data<T>(), *dcp = data_or_null<T>(dc);
  T *dxp = dx_part.data<T>(), *dhpart = data_or_null<T>(dh_part), *dhprev = dh_prev.data<T>();
  T* dcprev = data_or_null<T>(dc_prev);
#pragma omp parallel for if (N * u > 4096)
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t j = 0; j < u; ++j) {
      const std::int64_t k = n * u + j, row = n * G * u;
      const T dcv = dcp ? dcp[k] : T(0);
      if (m && m[n] == T(0)) {  // a masked step passes the state's gradients through
        for (std::int64_t g = 0; g < G; ++g) {
          dxp[row + g * u + j] = T(0);
          if (dhpart) dhpart[row + g * u + j] = T(0);
        }
        dhprev[k] = dhp[k];
        if (dcprev) dcprev[k] = dcv;
        continue;
      }
      T dhv = T(0), dcv_prev = T(0);
      rnn_math::backward<T>(p.cell, a, hp ? hp + row : nullptr, zp + row, u, j, hprev ? hprev[k] : T(0),
                            cprev ? cprev[k] : T(0), cp ? cp[k] : T(0), dhp[k], dcv, dxp + row,
                            dhpart ? dhpart + row : nullptr, dhv, dcv_prev);
      dhprev[k] = dhv;
      if (dcprev) dcprev[k] = dcv_prev;
    }
}

}  // namespace

const DTypes rnn_cell_forward_dtypes{DType::float32, DType::float64};
void rnn_cell_forward(const RnnCellParams& p, const Tensor& x_part, const Tensor& h_part,
                      const Tensor& h_prev, const Tensor& c_prev, const Tensor& mask, Tensor& h, Tensor& c,
                      Tensor& z) {
  visit_dtype<float, double>(h.dtype(), [&](auto t) {
    forward_loop<typename decltype(t)::type>(p, x_part, h_part, h_prev, c_prev, mask, h, c, z);
  });
}

const DTypes rnn_cell_backward_dtypes{DType::float32, DType::float64};
void rnn_cell_backward(const RnnCellParams& p, const Tensor& h_part, const Tensor& h_prev,
                       const Tensor& c_prev, const Tensor& z, const Tensor& c, const Tensor& mask,
                       const Tensor& dh, const Tensor& dc, Tensor& dx_part, Tensor& dh_part, Tensor& dh_prev,
                       Tensor& dc_prev) {
  visit_dtype<float, double>(dh.dtype(), [&](auto t) {
    backward_loop<typename decltype(t)::type>(p, h_part, h_prev, c_prev, z, c, mask, dh, dc, dx_part, dh_part,
                                              dh_prev, dc_prev);
  });
}

}  // namespace systolic::ops::cpu
