// Activations on the CPU: oneDNN's eltwise and softmax primitives for float32 (and bfloat16) linear, plain relu, sigmoid, tanh
// and softmax (onednn.cc); loops over activation_math.h's formulas for every other activation and for float64.
// Contracts: include/systolic/ops.h.
#include <algorithm>
#include <cmath>

#include "ops/activation_math.h"
#include "ops/cpu/bf16_emulation.h"
#include "ops/cpu/cpu_backend.h"
#include "ops/cpu/onednn.h"

namespace systolic::ops::cpu {

namespace {

// The activations oneDNN runs for us in float32 and bfloat16 (its backward from the output y).
bool onednn_runs(const Activation& a, DType t) {
  return onednn::takes(t) && (a == Activation::linear || a == Activation::relu || a == Activation::sigmoid ||
                              a == Activation::tanh || a == Activation::softmax);
}

// The element-wise loops, one instance per activation kind: with the kind a constant, activation_math.h's switch
// folds away and the loop vectorises (the switch inside the loop kept MobileNetV2's ReLU(max_value=6) scalar:
// half of its inference time).
template <class T, int K>
void forward_elements(const T* xp, T* yp, std::int64_t n, const activation::Params<T>& p) {
  parallel_ranges(n, n, [&](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t i = i0; i < i1; ++i) yp[i] = activation::forward<T>(Activation::Kind(K), xp[i], p);
  });
}
template <class T, int K>
void backward_elements(const T* xp, const T* yp, const T* gp, T* dxp, std::int64_t n,
                       const activation::Params<T>& p) {
  parallel_ranges(n, n, [&](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t i = i0; i < i1; ++i)
      dxp[i] = activation::backward<T>(Activation::Kind(K), xp[i], yp[i], gp[i], p);
  });
}

template <class T>
void forward_loop(const Activation& a, const Tensor& x, Tensor& y) {
  const std::int64_t n = x.numel();
  const T* xp = x.data<T>();
  T* yp = y.data<T>();
  if (a.over_last_axis()) {
    const std::int64_t C = x.dim(-1), R = n / C;
    const bool log = a.kind == Activation::log_softmax;
    parallel_ranges(R, n, [&](std::int64_t r0, std::int64_t r1) {
      for (std::int64_t r = r0; r < r1; ++r) {
        const T* in = xp + r * C;
        T* out = yp + r * C;
        T mx = in[0];
        for (std::int64_t c = 1; c < C; ++c) mx = in[c] > mx ? in[c] : mx;
        T s = 0;
        for (std::int64_t c = 0; c < C; ++c) s += std::exp(in[c] - mx);
        if (log) {
          const T lse = mx + std::log(s);
          for (std::int64_t c = 0; c < C; ++c) out[c] = in[c] - lse;
        } else {
          for (std::int64_t c = 0; c < C; ++c) out[c] = std::exp(in[c] - mx) / s;
        }
      }
    });
    return;
  }
  const auto p = activation::params_of<T>(a);
  switch (a.kind) {
#define SYSTOLIC_ACTIVATION_CASE(kind, name, alias) \
  case Activation::kind:                            \
    return forward_elements<T, Activation::kind>(xp, yp, n, p);
    SYSTOLIC_ACTIVATIONS(SYSTOLIC_ACTIVATION_CASE)
#undef SYSTOLIC_ACTIVATION_CASE
  }
}

template <class T>
void backward_loop(const Activation& a, const Tensor& x, const Tensor& y, const Tensor& dy, Tensor& dx) {
  const std::int64_t n = y.numel();
  const T* yp = y.data<T>();
  const T* gp = dy.data<T>();
  T* dxp = dx.data<T>();
  if (a.over_last_axis()) {
    const std::int64_t C = y.dim(-1), R = n / C;
    const bool log = a.kind == Activation::log_softmax;
    parallel_ranges(R, n, [&](std::int64_t r0, std::int64_t r1) {
      for (std::int64_t r = r0; r < r1; ++r) {
        const T* yr = yp + r * C;
        const T* gr = gp + r * C;
        T* out = dxp + r * C;
        if (log) {  // dx = dy - softmax * sum(dy), softmax = exp(y)
          T s = 0;
          for (std::int64_t c = 0; c < C; ++c) s += gr[c];
          for (std::int64_t c = 0; c < C; ++c) out[c] = gr[c] - std::exp(yr[c]) * s;
        } else {  // dx = y * (dy - sum(dy * y))
          T dot = 0;
          for (std::int64_t c = 0; c < C; ++c) dot += gr[c] * yr[c];
          for (std::int64_t c = 0; c < C; ++c) out[c] = yr[c] * (gr[c] - dot);
        }
      }
    });
    return;
  }
  const T* xp = x.defined() ? x.data<T>() : yp;  // read only by kinds that need it (x is then defined)
  const auto p = activation::params_of<T>(a);
  switch (a.kind) {
#define SYSTOLIC_ACTIVATION_CASE(kind, name, alias) \
  case Activation::kind:                            \
    return backward_elements<T, Activation::kind>(xp, yp, gp, dxp, n, p);
    SYSTOLIC_ACTIVATIONS(SYSTOLIC_ACTIVATION_CASE)
#undef SYSTOLIC_ACTIVATION_CASE
  }
}

}  // namespace

const DTypes activation_forward_dtypes = kFloatsAndBf16;
void activation_forward(const Activation& a, const Tensor& x, Tensor& y) {
  if (onednn_runs(a, x.dtype()) && (x.dtype() != DType::float32 || x.numel() >= kOneDnnMinWork))
    return onednn::activation_forward(a, x, y);
  if (x.dtype() == DType::bfloat16) return Widened<&activation_forward>::run(a, x, y);
  visit_dtype<float, double>(x.dtype(), [&](auto t) { forward_loop<typename decltype(t)::type>(a, x, y); });
}

const DTypes activation_backward_dtypes = kFloatsAndBf16;
void activation_backward(const Activation& a, const Tensor& x, const Tensor& y, const Tensor& dy,
                         Tensor& dx) {
  if (onednn_runs(a, y.dtype())) return onednn::activation_backward(a, y, dy, dx);
  if (y.dtype() == DType::bfloat16) return Widened<&activation_backward>::run(a, x, y, dy, dx);
  visit_dtype<float, double>(y.dtype(),
                             [&](auto t) { backward_loop<typename decltype(t)::type>(a, x, y, dy, dx); });
}

}  // namespace systolic::ops::cpu
