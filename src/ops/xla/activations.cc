// The activations on the XLA backend (xla_backend.h): activation_math.h's formulas, written with E's operators
// (a ternary there is a where() here); softmax and log_softmax over the last axis.
#include <cmath>

#include "ops/activation_math.h"
#include "ops/xla/emit.h"
#include "ops/xla/xla_backend.h"

namespace systolic::ops::xla {

namespace {

using namespace systolic::ops::activation;  // the constants

E softplus(const E& x) {  // TensorFlow's: log(1 + exp(-|x|)) + max(x, 0)
  return log1p(exp(-abs(x))) + maximum(x, 0.0);
}
E hard_sigmoid(const E& x) {
  return clip(x + 3.0, 0.0, 6.0) / 6.0;
}
E hard_sigmoid_grad(const E& x) {
  return where(x > -3.0 && x < 3.0, like(1.0 / 6.0, x), 0.0);
}

E relu(const E& x, const Activation& a) {
  E r = where(x > a.threshold, x, 0.0);
  const bool clipped = a.max_value < INFINITY;
  if (clipped) r = maximum(minimum(r, a.max_value), 0.0);
  if (a.alpha != 0) r = r - a.alpha * maximum(a.threshold - x, 0.0);
  return r;
}
E relu_grad(const E& x, const Activation& a) {
  const bool clipped = a.max_value < INFINITY;
  if (a.threshold == 0 && !clipped) return where(x > 0.0, like(1.0, x), like(a.alpha, x));
  const bool relu6 = a.threshold == 0 && a.max_value == 6;
  E pass = relu6     ? (x > 0.0 && x < 6.0)
           : clipped ? (x > a.threshold && x >= 0.0 && x <= a.max_value)
                     : (x > a.threshold);
  E g = where(pass, like(1.0, x), 0.0);
  if (a.alpha != 0) g = g + where(x < a.threshold, like(a.alpha, x), 0.0);
  return g;
}

E forward(const Activation& a, const E& x) {
  const double al = a.alpha;
  switch (a.kind) {
    case Activation::relu:
      return relu(x, a);
    case Activation::relu6:
      return clip(x, 0.0, 6.0);
    case Activation::leaky_relu:
      return where(x > 0.0, x, x * al);
    case Activation::sigmoid:
      return sigmoid(x);
    case Activation::tanh:
      return tanh(x);
    case Activation::elu:
      return where(x > 0.0, x, expm1(x) * al);
    case Activation::selu:
      return where(x > 0.0, x, expm1(x) * kSeluAlpha) * kSeluScale;
    case Activation::celu:
      return maximum(x, 0.0) + expm1(minimum(x, 0.0) / al) * al;
    case Activation::gelu:
      if (a.approximate) return 0.5 * x * (1.0 + tanh(kSqrt2OverPi * (x + kGeluCubic * x * x * x)));
      return 0.5 * x * (1.0 + erf(x * kInvSqrt2));
    case Activation::silu:
      return x * sigmoid(x);
    case Activation::mish:
      return x * tanh(softplus(x));
    case Activation::softplus:
      return softplus(x);
    case Activation::softsign:
      return x / (1.0 + abs(x));
    case Activation::exponential:
      return exp(x);
    case Activation::hard_sigmoid:
      return hard_sigmoid(x);
    case Activation::hard_silu:
      return x * hard_sigmoid(x);
    case Activation::hard_tanh:
      return clip(x, -1.0, 1.0);
    case Activation::log_sigmoid:
      return -softplus(-x);
    case Activation::tanh_shrink:
      return x - tanh(x);
    case Activation::soft_shrink:
      return where(x > al, x - al, where(x < -al, x + al, 0.0));
    case Activation::hard_shrink:
      return where(abs(x) > al, x, 0.0);
    case Activation::squareplus:
      return (x + sqrt(x * x + al)) / 2.0;
    case Activation::sparse_plus:
      return where(x <= -1.0, like(0.0, x), where(x < 1.0, square(x + 1.0) / 4.0, x));
    case Activation::sparse_sigmoid:
      return where(x <= -1.0, like(0.0, x), where(x >= 1.0, like(1.0, x), 0.5 * (x + 1.0)));
    default:
      return x;  // linear
  }
}

E backward(const Activation& a, const E& x, const E& y, const E& dy) {
  const double al = a.alpha;
  switch (a.kind) {
    case Activation::relu:
      return dy * relu_grad(x, a);
    case Activation::relu6:
      return where(y > 0.0 && y < 6.0, dy, 0.0);
    case Activation::leaky_relu:
      return where(x > 0.0, dy, dy * al);
    case Activation::sigmoid:
      return dy * y * (1.0 - y);
    case Activation::tanh:
      return dy * (1.0 - y * y);
    case Activation::elu:
      return where(x > 0.0, dy, dy * exp(x) * al);
    case Activation::selu:
      return dy * kSeluScale * where(x < 0.0, exp(x) * kSeluAlpha, like(1.0, x));
    case Activation::celu:
      return dy * (where(x >= 0.0, like(1.0, x), 0.0) + where(x <= 0.0, exp(x / al), like(0.0, x)));
    case Activation::gelu: {
      if (a.approximate) {
        E u = kSqrt2OverPi * (x + kGeluCubic * x * x * x);
        E t = tanh(u);
        E du = kSqrt2OverPi * (1.0 + (3 * kGeluCubic) * x * x);
        return dy * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du);
      }
      return dy * (0.5 * (1.0 + erf(x * kInvSqrt2)) + x * kInvSqrt2Pi * exp(-0.5 * x * x));
    }
    case Activation::silu: {
      E s = sigmoid(x);
      return dy * s * (1.0 + x * (1.0 - s));
    }
    case Activation::mish: {
      E t = tanh(softplus(x));
      return dy * (t + x * (1.0 - t * t) * sigmoid(x));
    }
    case Activation::softplus:
      return dy * sigmoid(x);
    case Activation::softsign: {
      E d = 1.0 + abs(x);
      return dy / (d * d);
    }
    case Activation::exponential:
      return dy * y;
    case Activation::hard_sigmoid:
      return dy * hard_sigmoid_grad(x);
    case Activation::hard_silu:
      return dy * (hard_sigmoid(x) + x * hard_sigmoid_grad(x));
    case Activation::hard_tanh:
      return where(x >= -1.0 && x <= 1.0, dy, 0.0);
    case Activation::log_sigmoid:
      return dy * sigmoid(-x);
    case Activation::tanh_shrink: {
      E t = tanh(x);
      return dy * t * t;
    }
    case Activation::soft_shrink:
    case Activation::hard_shrink:
      return where(abs(x) > al, dy, 0.0);
    case Activation::squareplus:
      return dy * 0.5 * (1.0 + x / sqrt(x * x + al));
    case Activation::sparse_plus:
      return where(x <= -1.0, like(0.0, x), where(x < 1.0, dy * 0.5 * (x + 1.0), dy));
    case Activation::sparse_sigmoid:
      return where(x > -1.0 && x < 1.0, dy * 0.5, 0.0);
    default:
      return dy;  // linear
  }
}

}  // namespace

E activate(const Activation& a, const E& x) {
  return forward(a, x);
}
E activate_grad(const Activation& a, const E& x, const E& y, const E& dy) {
  return backward(a, x, y, dy);
}

const DTypes activation_forward_dtypes = kFloatsAndBf16;
void activation_forward(const Activation& a, const Tensor& x, Tensor& y) {
  traced([&] {
    E v = read(x);
    if (a.over_last_axis()) {
      const auto& d = v.dims();
      const std::int64_t last = static_cast<std::int64_t>(d.size()) - 1;
      E shifted = v - broadcast_rows(reduce_max(v, {last}), d);
      E total = broadcast_rows(sum(exp(shifted), {last}), d);
      write(y, a.kind == Activation::log_softmax ? shifted - log(total) : exp(shifted) / total);
      return;
    }
    write(y, forward(a, v));
  });
}

const DTypes activation_backward_dtypes = kFloatsAndBf16;
void activation_backward(const Activation& a, const Tensor& x, const Tensor& y, const Tensor& dy,
                         Tensor& dx) {
  traced([&] {
    E g = read(dy), out = reshape(read(y), g.dims());
    if (a.over_last_axis()) {
      const auto& d = g.dims();
      const std::int64_t last = static_cast<std::int64_t>(d.size()) - 1;
      if (a.kind == Activation::log_softmax)
        write(dx, g - exp(out) * broadcast_rows(sum(g, {last}), d));
      else
        write(dx, out * (g - broadcast_rows(sum(g * out, {last}), d)));
      return;
    }
    E in = x.defined() ? reshape(read(x), g.dims()) : out;
    write(dx, backward(a, in, out, g));
  });
}

}  // namespace systolic::ops::xla
