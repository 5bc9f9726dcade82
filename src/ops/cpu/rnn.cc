// Recurrent cells on the CPU: rnn_math.h's formulas in loops over (row, unit), float32 and float64. Contracts:
// include/systolic/ops.h.
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
    each(h.dim(0), h.dim(1),
         [&](std::int64_t n, std::int64_t j) { rnn_math::forward_at(p.cell, a, t, h.dim(1), n, j); });
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
    each(dh.dim(0), dh.dim(1),
         [&](std::int64_t n, std::int64_t j) { rnn_math::backward_at(p.cell, a, t, dh.dim(1), n, j); });
  });
}

}  // namespace systolic::ops::cpu
