// Recurrent cells on CUDA (ops::rnn_cell_forward, rnn_cell_backward): rnn_math.h's formulas, one thread per (row,
// unit), float32 and float64 (computed in their own type). No entry synchronises or allocates.
#include <cuda_runtime.h>

#include <cstdint>

#include "ops/cuda/context.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/kernels.cuh"
#include "ops/rnn_math.h"

namespace systolic::ops::cuda {

namespace {

template <class T>
const T* ptr(const Tensor& t) {
  return t.defined() ? static_cast<const T*>(t.raw_data()) : nullptr;
}
template <class T>
T* mut(Tensor& t) {
  return t.defined() ? static_cast<T*>(t.raw_data()) : nullptr;
}

template <class T>
__global__ void rnn_forward_kernel(RnnCell cell, rnn_math::Acts<T> a, const T* xp, const T* hp,
                                   const T* hprev, const T* cprev, const T* m, T* hout, T* cout, T* zp,
                                   std::int64_t N, std::int64_t u) {
  const std::int64_t G = rnn_math::gates(cell);
  SYSTOLIC_GRID_STRIDE(k, N * u) {
    const std::int64_t n = k / u, j = k - n * u, row = n * G * u;
    const T cp = cprev ? cprev[k] : T(0);
    if (m && m[n] == T(0)) {
      for (std::int64_t g = 0; g < G; ++g) zp[row + g * u + j] = T(0);
      hout[k] = hprev[k];
      if (cout) cout[k] = cp;
    } else {
      T hv, cv = T(0);
      rnn_math::forward<T>(cell, a, xp + row, hp + row, u, j, hprev[k], cp, zp + row, hv, cv);
      hout[k] = hv;
      if (cout) cout[k] = cv;
    }
  }
}

template <class T>
__global__ void rnn_backward_kernel(RnnCell cell, rnn_math::Acts<T> a, const T* hp, const T* hprev,
                                    const T* cprev, const T* zp, const T* cp, const T* m, const T* dh,
                                    const T* dc, T* dxp, T* dhpart, T* dhprev, T* dcprev, std::int64_t N,
                                    std::int64_t u) {
  const std::int64_t G = rnn_math::gates(cell);
  SYSTOLIC_GRID_STRIDE(k, N * u) {
    const std::int64_t n = k / u, j = k - n * u, row = n * G * u;
    const T dcv = dc ? dc[k] : T(0);
    if (m && m[n] == T(0)) {
      for (std::int64_t g = 0; g < G; ++g) {
        dxp[row + g * u + j] = T(0);
        if (dhpart) dhpart[row + g * u + j] = T(0);
      }
      dhprev[k] = dh[k];
      if (dcprev) dcprev[k] = dcv;
    } else {
      T dhv = T(0), dcv_prev = T(0);
      rnn_math::backward<T>(cell, a, hp ? hp + row : nullptr, zp + row, u, j, hprev ? hprev[k] : T(0),
                            cprev ? cprev[k] : T(0), cp ? cp[k] : T(0), dh[k], dcv, dxp + row,
                            dhpart ? dhpart + row : nullptr, dhv, dcv_prev);
      dhprev[k] = dhv;
      if (dcprev) dcprev[k] = dcv_prev;
    }
  }
}

}  // namespace

const DTypes rnn_cell_forward_dtypes{DType::float32, DType::float64};
void rnn_cell_forward(const RnnCellParams& p, const Tensor& x_part, const Tensor& h_part,
                      const Tensor& h_prev, const Tensor& c_prev, const Tensor& mask, Tensor& h, Tensor& c,
                      Tensor& z) {
  Context& ctx = context(h);
  const std::int64_t N = h.dim(0), u = h.dim(1);
  if (N * u == 0) return;
  SYSTOLIC_CUDA_CHECK((visit_dtype<float, double>(h.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    return launch_elementwise(rnn_forward_kernel<T>, N * u, ctx.stream, p.cell, rnn_math::acts_of<T>(p),
                              ptr<T>(x_part), ptr<T>(h_part), ptr<T>(h_prev), ptr<T>(c_prev), ptr<T>(mask),
                              mut<T>(h), mut<T>(c), mut<T>(z), N, u);
  })));
}

const DTypes rnn_cell_backward_dtypes{DType::float32, DType::float64};
void rnn_cell_backward(const RnnCellParams& p, const Tensor& h_part, const Tensor& h_prev,
                       const Tensor& c_prev, const Tensor& z, const Tensor& c, const Tensor& mask,
                       const Tensor& dh, const Tensor& dc, Tensor& dx_part, Tensor& dh_part, Tensor& dh_prev,
                       Tensor& dc_prev) {
  Context& ctx = context(dh);
  const std::int64_t N = dh.dim(0), u = dh.dim(1);
  if (N * u == 0) return;
  SYSTOLIC_CUDA_CHECK((visit_dtype<float, double>(dh.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    return launch_elementwise(rnn_backward_kernel<T>, N * u, ctx.stream, p.cell, rnn_math::acts_of<T>(p),
                              ptr<T>(h_part), ptr<T>(h_prev), ptr<T>(c_prev), ptr<T>(z), ptr<T>(c),
                              ptr<T>(mask), ptr<T>(dh), ptr<T>(dc), mut<T>(dx_part), mut<T>(dh_part),
                              mut<T>(dh_prev), mut<T>(dc_prev), N, u);
  })));
}

}  // namespace systolic::ops::cuda
