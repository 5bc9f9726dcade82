// The activations' formulas, once for every backend: the CPU loops (ops/cpu/activations.cc) and the CUDA kernels
// (ops/cuda/activations.cu) call these. Keras 3's definitions (keras/src/activations/activations.py over the
// TensorFlow backend's keras/src/backend/tensorflow/nn.py); derivatives are those of the same formulas,
// matching TensorFlow's gradients. Elementwise kinds only: softmax and log_softmax work on rows (their loops
// are in the backends).
//
// forward(k, x, p) = f(x). backward(k, x, y, dy, p) = dy * f'(x), given the input x and the output y = f(x); a
// kind for which Activation::backward_needs_input() is false reads only y (x is then any value).
#pragma once

#include <systolic/ops.h>

#include <cmath>

#if defined(__CUDACC__)
#define SYSTOLIC_HD __host__ __device__ __forceinline__
#else
#define SYSTOLIC_HD inline
#endif

namespace systolic::ops::activation {

// An activation's parameters as values of the compute type (a kernel argument).
template <class T>
struct Params {
  T alpha, max_value, threshold;
  bool approximate;
};
template <class T>
Params<T> params_of(const Activation& a) {
  return {T(a.alpha), T(a.max_value), T(a.threshold), a.approximate};
}

// The math functions in float and double, on the host and the device.
SYSTOLIC_HD float exp_(float x) {
  return expf(x);
}
SYSTOLIC_HD double exp_(double x) {
  return exp(x);
}
SYSTOLIC_HD float expm1_(float x) {
  return expm1f(x);
}
SYSTOLIC_HD double expm1_(double x) {
  return expm1(x);
}
SYSTOLIC_HD float log1p_(float x) {
  return log1pf(x);
}
SYSTOLIC_HD double log1p_(double x) {
  return log1p(x);
}
// tanh in float: CUDA's tanhf on the device; on the host an odd polynomial below |x| = 0.55 (a least-squares fit of
// tanh(x)/x in x^2, relative error 1e-9) and (1 - e) / (1 + e), e = exp(-2|x|), above it (no cancellation there):
// within 2 ulp of tanh (tests/test_activations.cc), in a third of glibc's tanhf's time (its expm1f), which the
// recurrent cells' loops spent most of theirs in.
// Its two forms, which the CPU's vectorised recurrent cells (ops/cpu/rnn.cc) share: the polynomial for |x| below
// kTanhPolyBound, and tanh from e = exp(-2|x|) above it.
constexpr float kTanhPolyBound = 0.55f;
SYSTOLIC_HD float tanh_poly_(float x) {
  const float t = x * x;
  return x * (1.0f + t * (-3.333331048e-01f +
                          t * (1.333246082e-01f +
                               t * (-5.384270474e-02f + t * (2.103966847e-02f + t * -6.235557608e-03f)))));
}
SYSTOLIC_HD float tanh_from_exp_(float x, float e) {
  return copysignf((1.0f - e) / (1.0f + e), x);
}
SYSTOLIC_HD float tanh_(float x) {
#ifdef __CUDA_ARCH__
  return tanhf(x);
#else
  const float a = x < 0.0f ? -x : x;
  if (a < kTanhPolyBound) return tanh_poly_(x);
  return tanh_from_exp_(x, expf(-2.0f * a));
#endif
}
SYSTOLIC_HD double tanh_(double x) {
  return tanh(x);
}
SYSTOLIC_HD float erf_(float x) {
  return erff(x);
}
SYSTOLIC_HD double erf_(double x) {
  return erf(x);
}
SYSTOLIC_HD float sqrt_(float x) {
  return sqrtf(x);
}
SYSTOLIC_HD double sqrt_(double x) {
  return sqrt(x);
}

template <class T>
SYSTOLIC_HD T sigmoid_(T x) {
  return T(1) / (T(1) + exp_(-x));
}
// TensorFlow's softplus: log(1 + exp(x)) without overflow.
template <class T>
SYSTOLIC_HD T softplus_(T x) {
  return log1p_(exp_(-(x < T(0) ? -x : x))) + (x > T(0) ? x : T(0));
}

constexpr double kSeluAlpha = 1.6732632423543772848170429916717;
constexpr double kSeluScale = 1.0507009873554804934193349852946;
constexpr double kSqrt2OverPi = 0.7978845608028654;  // sqrt(2 / pi)
constexpr double kInvSqrt2 = 0.7071067811865476;     // 1 / sqrt(2)
constexpr double kInvSqrt2Pi = 0.3989422804014327;   // 1 / sqrt(2 pi)
constexpr double kGeluCubic = 0.044715;

// relu with Keras's parameters (ReLU.static_call): where(x > threshold, x, 0), clipped to [0, max_value] when there
// is one, minus negative_slope * relu(threshold - x).
template <class T>
SYSTOLIC_HD T relu_(T x, const Params<T>& p) {
  T a = x > p.threshold ? x : T(0);
  if (a > p.max_value) a = p.max_value;
  if (p.max_value < T(INFINITY) && a < T(0)) a = T(0);
  T neg = p.threshold - x > T(0) ? p.threshold - x : T(0);
  return a - p.alpha * neg;
}
template <class T>
SYSTOLIC_HD T relu_grad_(T x, const Params<T>& p) {
  const bool leaky = p.threshold == T(0) && !(p.max_value < T(INFINITY));
  if (leaky) return x > T(0) ? T(1) : p.alpha;  // tf.nn.leaky_relu (relu when the slope is 0)
  // relu6's own gradient excludes its bounds; where(x > threshold) then clip_by_value's includes the clip's.
  const bool clip = p.max_value < T(INFINITY);
  const bool relu6 = p.threshold == T(0) && p.max_value == T(6);
  bool pass = relu6 ? x > T(0) && x < T(6) : x > p.threshold && (!clip || (x >= T(0) && x <= p.max_value));
  T g = pass ? T(1) : T(0);
  if (x < p.threshold) g += p.alpha;
  return g;
}

template <class T>
SYSTOLIC_HD T hard_sigmoid_(T x) {
  T r = x + T(3);
  r = r < T(0) ? T(0) : (r > T(6) ? T(6) : r);
  return r / T(6);
}
template <class T>
SYSTOLIC_HD T hard_sigmoid_grad_(T x) {
  return x > T(-3) && x < T(3) ? T(1) / T(6) : T(0);
}

template <class T>
SYSTOLIC_HD T forward(Activation::Kind k, T x, const Params<T>& p) {
  switch (k) {
    case Activation::relu:
      return relu_(x, p);
    case Activation::relu6:
      return x < T(0) ? T(0) : (x > T(6) ? T(6) : x);
    case Activation::leaky_relu:
      return x > T(0) ? x : p.alpha * x;
    case Activation::sigmoid:
      return sigmoid_(x);
    case Activation::tanh:
      return tanh_(x);
    case Activation::elu:
      return x > T(0) ? x : p.alpha * expm1_(x);
    case Activation::selu:
      return T(kSeluScale) * (x > T(0) ? x : T(kSeluAlpha) * expm1_(x));
    case Activation::celu:
      return (x > T(0) ? x : T(0)) + p.alpha * expm1_((x < T(0) ? x : T(0)) / p.alpha);
    case Activation::gelu:
      if (p.approximate)
        return T(0.5) * x * (T(1) + tanh_(T(kSqrt2OverPi) * (x + T(kGeluCubic) * x * x * x)));
      return T(0.5) * x * (T(1) + erf_(x * T(kInvSqrt2)));
    case Activation::silu:
      return x * sigmoid_(x);
    case Activation::mish:
      return x * tanh_(softplus_(x));
    case Activation::softplus:
      return softplus_(x);
    case Activation::softsign:
      return x / (T(1) + (x < T(0) ? -x : x));
    case Activation::exponential:
      return exp_(x);
    case Activation::hard_sigmoid:
      return hard_sigmoid_(x);
    case Activation::hard_silu:
      return x * hard_sigmoid_(x);
    case Activation::hard_tanh:
      return x < T(-1) ? T(-1) : (x > T(1) ? T(1) : x);
    case Activation::log_sigmoid:
      return -softplus_(-x);
    case Activation::tanh_shrink:
      return x - tanh_(x);
    case Activation::soft_shrink:
      return x > p.alpha ? x - p.alpha : (x < -p.alpha ? x + p.alpha : T(0));
    case Activation::hard_shrink:
      return (x < T(0) ? -x : x) > p.alpha ? x : T(0);
    case Activation::squareplus:
      return (x + sqrt_(x * x + p.alpha)) / T(2);
    case Activation::sparse_plus:
      return x <= T(-1) ? T(0) : (x < T(1) ? (x + T(1)) * (x + T(1)) / T(4) : x);
    case Activation::sparse_sigmoid:
      return x <= T(-1) ? T(0) : (x >= T(1) ? T(1) : T(0.5) * (x + T(1)));
    default:  // linear; softmax and log_softmax never get here
      return x;
  }
}

template <class T>
SYSTOLIC_HD T backward(Activation::Kind k, T x, T y, T dy, const Params<T>& p) {
  switch (k) {
    case Activation::relu:
      return dy * relu_grad_(x, p);
    case Activation::relu6:
      return y > T(0) && y < T(6) ? dy : T(0);
    case Activation::leaky_relu:
      return x > T(0) ? dy : dy * p.alpha;
    case Activation::sigmoid:
      return dy * y * (T(1) - y);
    case Activation::tanh:
      return dy * (T(1) - y * y);
    case Activation::elu:
      return x > T(0) ? dy : dy * p.alpha * exp_(x);
    case Activation::selu:  // TensorFlow's SeluGrad: the positive branch at 0
      return dy * T(kSeluScale) * (x < T(0) ? T(kSeluAlpha) * exp_(x) : T(1));
    case Activation::
        celu:  // max(x, 0) + alpha*expm1(min(x, 0)/alpha): at 0 both branches pass (TensorFlow's)
      return dy * ((x >= T(0) ? T(1) : T(0)) + (x <= T(0) ? exp_(x / p.alpha) : T(0)));
    case Activation::gelu: {
      if (p.approximate) {
        T u = T(kSqrt2OverPi) * (x + T(kGeluCubic) * x * x * x);
        T t = tanh_(u);
        T du = T(kSqrt2OverPi) * (T(1) + T(3 * kGeluCubic) * x * x);
        return dy * (T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * du);
      }
      return dy * (T(0.5) * (T(1) + erf_(x * T(kInvSqrt2))) + x * T(kInvSqrt2Pi) * exp_(T(-0.5) * x * x));
    }
    case Activation::silu: {
      T s = sigmoid_(x);
      return dy * s * (T(1) + x * (T(1) - s));
    }
    case Activation::mish: {
      T t = tanh_(softplus_(x));
      return dy * (t + x * (T(1) - t * t) * sigmoid_(x));
    }
    case Activation::softplus:
      return dy * sigmoid_(x);
    case Activation::softsign: {
      T d = T(1) + (x < T(0) ? -x : x);
      return dy / (d * d);
    }
    case Activation::exponential:
      return dy * y;
    case Activation::hard_sigmoid:
      return dy * hard_sigmoid_grad_(x);
    case Activation::hard_silu:
      return dy * (hard_sigmoid_(x) + x * hard_sigmoid_grad_(x));
    case Activation::hard_tanh:
      return x >= T(-1) && x <= T(1) ? dy : T(0);
    case Activation::log_sigmoid:
      return dy * sigmoid_(-x);
    case Activation::tanh_shrink: {
      T t = tanh_(x);
      return dy * t * t;
    }
    case Activation::soft_shrink:
    case Activation::hard_shrink:
      return (x < T(0) ? -x : x) > p.alpha ? dy : T(0);
    case Activation::squareplus:
      return dy * T(0.5) * (T(1) + x / sqrt_(x * x + p.alpha));
    case Activation::sparse_plus:
      return x <= T(-1) ? T(0) : (x < T(1) ? dy * T(0.5) * (x + T(1)) : dy);
    case Activation::sparse_sigmoid:
      return x > T(-1) && x < T(1) ? dy * T(0.5) : T(0);
    default:  // linear
      return dy;
  }
}

}  // namespace systolic::ops::activation
