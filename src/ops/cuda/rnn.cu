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
const T* in(const Tensor& t) {
  return t.defined() ? static_cast<const T*>(t.raw_data()) : nullptr;
}
template <class T>
T* out(Tensor& t) {
  return t.defined() ? static_cast<T*>(t.raw_data()) : nullptr;
}

template <class T>
__global__ void rnn_forward_kernel(RnnCell cell, rnn_math::Acts<T> a, rnn_math::ForwardTensors<T> t,
                                   std::int64_t N, std::int64_t u) {
  SYSTOLIC_GRID_STRIDE(i, N * u) rnn_math::forward_at(cell, a, t, u, i / u, i % u);
}
template <class T>
__global__ void rnn_backward_kernel(RnnCell cell, rnn_math::Acts<T> a, rnn_math::BackwardTensors<T> t,
                                    std::int64_t N, std::int64_t u) {
  SYSTOLIC_GRID_STRIDE(i, N * u) rnn_math::backward_at(cell, a, t, u, i / u, i % u);
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
    const rnn_math::ForwardTensors<T> t{in<T>(x_part), in<T>(h_part), in<T>(h_prev), in<T>(c_prev),
                                        in<T>(mask),   out<T>(h),     out<T>(c),     out<T>(z)};
    return launch_elementwise(rnn_forward_kernel<T>, N * u, ctx.stream, p.cell, rnn_math::acts_of<T>(p), t, N,
                              u);
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
    const rnn_math::BackwardTensors<T> t{in<T>(h_part),   in<T>(h_prev),   in<T>(c_prev),   in<T>(z),
                                         in<T>(c),        in<T>(mask),     in<T>(dh),       in<T>(dc),
                                         out<T>(dx_part), out<T>(dh_part), out<T>(dh_prev), out<T>(dc_prev)};
    return launch_elementwise(rnn_backward_kernel<T>, N * u, ctx.stream, p.cell, rnn_math::acts_of<T>(p), t,
                              N, u);
  })));
}

// The whole recurrence as one op: not on this backend (no dtypes; cuDNN's RNN API is not wired yet), so the layers run
// rnn_cell_forward and rnn_cell_backward step by step here.
const DTypes rnn_sequence_forward_dtypes{};
void rnn_sequence_forward(const RnnCellParams&, bool, const Tensor&, const Tensor&, const Tensor&,
                          const Tensor&, const Tensor&, const Tensor&, Tensor&, Tensor&, Tensor&, Tensor&) {
  throw Error("rnn_sequence_forward: not on the CUDA backend");
}
const DTypes rnn_sequence_backward_dtypes{};
void rnn_sequence_backward(const RnnCellParams&, bool, const Tensor&, const Tensor&, const Tensor&,
                           const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                           const Tensor&, const Tensor&, const Tensor&, Tensor&, Tensor&, Tensor&, Tensor&,
                           Tensor&, Tensor&) {
  throw Error("rnn_sequence_backward: not on the CUDA backend");
}

}  // namespace systolic::ops::cuda
