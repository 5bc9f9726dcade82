// What the XLA backend's op files share: reading and writing tensors in the current trace (core/xla/trace.h), and
// E, a value of the program with arithmetic written as C++ expressions (each operator emits one StableHLO op), so
// that the formulas read as the CPU loops' do. Every op file defines its ops as `traced([&] { ... })`: inside a
// trace (a recorded step) they emit, outside one they run at once.
//
// Precision: float32 and float64 data compute in their own type; bfloat16 data computes in float32 and is rounded
// when written, as the other backends do.
#pragma once

#include <systolic/ops.h>

#include <cstdint>
#include <vector>

#include "core/xla/trace.h"
#include "ops/backend.h"

namespace systolic::ops::xla {

using systolic::xla::Builder;
using systolic::xla::Compare;
using systolic::xla::Elem;
using systolic::xla::Trace;
using systolic::xla::traced;
using systolic::xla::Type;
using systolic::xla::Value;

inline constexpr DTypes kFloats{DType::float32, DType::float64};
inline constexpr DTypes kFloatsAndBf16{DType::float32, DType::float64, DType::bfloat16};

inline Trace& trace() {
  return *Trace::current();
}
inline Builder& hlo() {
  return trace().builder();
}

// The element type a dtype computes in (bfloat16: float32).
inline Elem compute_elem(DType t) {
  return t == DType::float64 ? Elem::f64 : t == DType::bfloat16 ? Elem::f32 : systolic::xla::elem_of(t);
}

// A value of the program; operators emit ops in the current trace. Scalars (double) broadcast to the other
// operand's type.
struct E {
  Value v;
  E() = default;
  E(Value value) : v(std::move(value)) {}  // NOLINT: implicit, as values flow into expressions
  const Type& type() const { return v.type; }
  Elem elem() const { return v.type.elem; }
  const std::vector<std::int64_t>& dims() const { return v.type.dims; }
};

E constant(double value, const Type& type);
E constant(const std::vector<double>& values, const Type& type);  // row-major
inline E like(double value, const E& x) {
  return constant(value, x.type());
}

E operator+(const E& a, const E& b);
E operator-(const E& a, const E& b);
E operator*(const E& a, const E& b);
E operator/(const E& a, const E& b);
E operator-(const E& a);
E operator+(const E& a, double b);
E operator-(const E& a, double b);
E operator*(const E& a, double b);
E operator/(const E& a, double b);
E operator+(double a, const E& b);
E operator-(double a, const E& b);
E operator*(double a, const E& b);
E operator/(double a, const E& b);
// Comparisons give predicates (i1).
E operator<(const E& a, const E& b);
E operator<=(const E& a, const E& b);
E operator>(const E& a, const E& b);
E operator>=(const E& a, const E& b);
E operator<(const E& a, double b);
E operator<=(const E& a, double b);
E operator>(const E& a, double b);
E operator>=(const E& a, double b);
E eq(const E& a, const E& b);
E eq(const E& a, double b);
E operator&&(const E& a, const E& b);  // of predicates
E operator||(const E& a, const E& b);
E operator!(const E& a);

// Bitwise ops of integers (unsigned words: ui32, ui64) and logical shifts by a count of bits; integer constants
// exact to 64 bits (constant() takes a double, exact to 53).
E operator&(const E& a, const E& b);
E operator|(const E& a, const E& b);
E operator^(const E& a, const E& b);
E shift_left(const E& a, int bits);
E shift_right(const E& a, int bits);  // logical
E uconstant(std::uint64_t value, const Type& type);
inline E ulike(std::uint64_t value, const E& x) {
  return uconstant(value, x.type());
}

E where(const E& predicate, const E& on_true, const E& on_false);
E where(const E& predicate, const E& on_true, double on_false);
E where(const E& predicate, double on_true, const E& on_false);
E maximum(const E& a, const E& b);
E minimum(const E& a, const E& b);
E maximum(const E& a, double b);
E minimum(const E& a, double b);
E clip(const E& x, double lo, double hi);

E exp(const E& x);
E expm1(const E& x);
E log(const E& x);
E log1p(const E& x);
E tanh(const E& x);
E sqrt(const E& x);
E rsqrt(const E& x);
E abs(const E& x);
E sign(const E& x);
E floor(const E& x);
E ceil(const E& x);
E round_even(const E& x);  // round half to even
E sigmoid(const E& x);
E erf(const E& x);
E sin(const E& x);
E cos(const E& x);
E square(const E& x);
E pow(const E& x, double y);  // x^y, y a constant

E convert(const E& x, Elem to);
E reshape(const E& x, const std::vector<std::int64_t>& dims);
// x broadcast to `dims`, x's dimension i going to map[i].
E broadcast(const E& x, const std::vector<std::int64_t>& dims, const std::vector<std::int64_t>& map);
// x (of `dims` without the trailing axes) broadcast along new trailing axes / leading axes.
E broadcast_rows(const E& x,
                 const std::vector<std::int64_t>& dims);  // x: [dims[0..r-1)] -> dims (last axis added)
E broadcast_last(const E& x, const std::vector<std::int64_t>& dims);  // x: [dims.back()] -> dims
// Sums (max, min) over axes.
E sum(const E& x, const std::vector<std::int64_t>& axes);
E reduce_max(const E& x, const std::vector<std::int64_t>& axes);
E reduce_min(const E& x, const std::vector<std::int64_t>& axes);
E sum_all(const E& x);  // a scalar
// Row-major iota of `dims` along `dimension`, of element type `elem`.
E iota(const std::vector<std::int64_t>& dims, int dimension, Elem elem);

// The tensor's value in its compute type (bfloat16 read as float32) and shape.
E read(const Tensor& t);
// The tensor's value converted to `elem`.
E read_as(const Tensor& t, Elem elem);
// Writes x (converted to t's dtype) into t.
void write(const Tensor& t, const E& x);
// t += x (t read, added in its compute type, written).
void accumulate_into(const Tensor& t, const E& x);

// A float64 [1] tensor (the learning rate, the step counter) as a scalar of `elem`; undefined: `fallback`.
E read_scalar(const Tensor& t, Elem elem, double fallback = 0.0);

// An elementwise activation of x, and dy times its derivative given x and y = activate(a, x): activation_math.h's
// formulas (ops/xla/activations.cc; softmax and log_softmax, over rows, are not among them).
E activate(const Activation& a, const E& x);
E activate_grad(const Activation& a, const E& x, const E& y, const E& dy);

// The Math policy of the formulas written once for every backend (ops/double_math.h has the doubles' one): their
// functions over expressions.
struct Math {
  static E where(const E& c, const E& a, const E& b) { return xla::where(c, a, b); }
  static E where(const E& c, const E& a, double b) { return xla::where(c, a, b); }
  static E like(double value, const E& x) { return xla::like(value, x); }
  static E eq(const E& a, const E& b) { return xla::eq(a, b); }
  static E max(const E& a, double b) { return maximum(a, b); }
  static E max(const E& a, const E& b) { return maximum(a, b); }
  static E clip(const E& x, double lo, double hi) { return xla::clip(x, lo, hi); }
  static E abs(const E& x) { return xla::abs(x); }
  static E sign(const E& x) { return xla::sign(x); }
  static E sqrt(const E& x) { return xla::sqrt(x); }
  static E log(const E& x) { return xla::log(x); }
  static E log1p(const E& x) { return xla::log1p(x); }
  static E exp(const E& x) { return xla::exp(x); }
  static E tanh(const E& x) { return xla::tanh(x); }
  static E sigmoid(const E& x) { return xla::sigmoid(x); }
  static E pow(const E& x, double y) { return xla::pow(x, y); }
};

}  // namespace systolic::ops::xla
