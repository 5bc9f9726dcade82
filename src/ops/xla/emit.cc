// E's operators and the tensor reads and writes of the XLA backend (emit.h).
#include "ops/xla/emit.h"

#include <systolic/error.h>

#include <numeric>

namespace systolic::ops::xla {

namespace {

using systolic::xla::is_float;

E bin(const char* op, const E& a, const E& b) {
  return hlo().binary(op, a.v, b.v);
}
E un(const char* op, const E& a) {
  return hlo().unary(op, a.v);
}
E cmp(const E& a, const E& b, Compare c) {
  return hlo().compare(a.v, b.v, c);
}

}  // namespace

E constant(double value, const Type& type) {
  return hlo().constant(value, type);
}

E constant(const std::vector<double>& values, const Type& type) {
  return hlo().constant(values, type);
}

E operator+(const E& a, const E& b) {
  return bin("stablehlo.add", a, b);
}
E operator-(const E& a, const E& b) {
  return bin("stablehlo.subtract", a, b);
}
E operator*(const E& a, const E& b) {
  return bin("stablehlo.multiply", a, b);
}
E operator/(const E& a, const E& b) {
  return bin("stablehlo.divide", a, b);
}
E operator-(const E& a) {
  return un("stablehlo.negate", a);
}
E operator+(const E& a, double b) {
  return a + like(b, a);
}
E operator-(const E& a, double b) {
  return a - like(b, a);
}
E operator*(const E& a, double b) {
  return a * like(b, a);
}
E operator/(const E& a, double b) {
  return a / like(b, a);
}
E operator+(double a, const E& b) {
  return like(a, b) + b;
}
E operator-(double a, const E& b) {
  return like(a, b) - b;
}
E operator*(double a, const E& b) {
  return like(a, b) * b;
}
E operator/(double a, const E& b) {
  return like(a, b) / b;
}
E operator<(const E& a, const E& b) {
  return cmp(a, b, Compare::lt);
}
E operator<=(const E& a, const E& b) {
  return cmp(a, b, Compare::le);
}
E operator>(const E& a, const E& b) {
  return cmp(a, b, Compare::gt);
}
E operator>=(const E& a, const E& b) {
  return cmp(a, b, Compare::ge);
}
E operator<(const E& a, double b) {
  return a < like(b, a);
}
E operator<=(const E& a, double b) {
  return a <= like(b, a);
}
E operator>(const E& a, double b) {
  return a > like(b, a);
}
E operator>=(const E& a, double b) {
  return a >= like(b, a);
}
E eq(const E& a, const E& b) {
  return cmp(a, b, Compare::eq);
}
E eq(const E& a, double b) {
  return eq(a, like(b, a));
}
E operator&&(const E& a, const E& b) {
  return bin("stablehlo.and", a, b);
}
E operator||(const E& a, const E& b) {
  return bin("stablehlo.or", a, b);
}
E operator!(const E& a) {
  return un("stablehlo.not", a);
}

E operator&(const E& a, const E& b) {
  return bin("stablehlo.and", a, b);
}
E operator|(const E& a, const E& b) {
  return bin("stablehlo.or", a, b);
}
E operator^(const E& a, const E& b) {
  return bin("stablehlo.xor", a, b);
}
E shift_left(const E& a, int bits) {
  return hlo().shift_left(a.v, uconstant(static_cast<std::uint64_t>(bits), a.type()).v);
}
E shift_right(const E& a, int bits) {
  return hlo().shift_right_logical(a.v, uconstant(static_cast<std::uint64_t>(bits), a.type()).v);
}
E uconstant(std::uint64_t value, const Type& type) {
  return hlo().constant_u64(value, type);
}

E where(const E& predicate, const E& on_true, const E& on_false) {
  return hlo().select(predicate.v, on_true.v, on_false.v);
}
E where(const E& predicate, const E& on_true, double on_false) {
  return where(predicate, on_true, like(on_false, on_true));
}
E where(const E& predicate, double on_true, const E& on_false) {
  return where(predicate, like(on_true, on_false), on_false);
}
E maximum(const E& a, const E& b) {
  return bin("stablehlo.maximum", a, b);
}
E minimum(const E& a, const E& b) {
  return bin("stablehlo.minimum", a, b);
}
E maximum(const E& a, double b) {
  return maximum(a, like(b, a));
}
E minimum(const E& a, double b) {
  return minimum(a, like(b, a));
}
E clip(const E& x, double lo, double hi) {
  return minimum(maximum(x, lo), hi);
}

E exp(const E& x) {
  return un("stablehlo.exponential", x);
}
E expm1(const E& x) {
  return un("stablehlo.exponential_minus_one", x);
}
E log(const E& x) {
  return un("stablehlo.log", x);
}
E log1p(const E& x) {
  return un("stablehlo.log_plus_one", x);
}
E tanh(const E& x) {
  return un("stablehlo.tanh", x);
}
E sqrt(const E& x) {
  return un("stablehlo.sqrt", x);
}
E rsqrt(const E& x) {
  return un("stablehlo.rsqrt", x);
}
E abs(const E& x) {
  return un("stablehlo.abs", x);
}
E sign(const E& x) {
  return un("stablehlo.sign", x);
}
E floor(const E& x) {
  return un("stablehlo.floor", x);
}
E ceil(const E& x) {
  return un("stablehlo.ceil", x);
}
E round_even(const E& x) {
  return un("stablehlo.round_nearest_even", x);
}
E sigmoid(const E& x) {
  return un("stablehlo.logistic", x);
}
E erf(const E& x) {
  return un("chlo.erf", x);
}
E sin(const E& x) {
  return un("stablehlo.sine", x);
}
E cos(const E& x) {
  return un("stablehlo.cosine", x);
}
E square(const E& x) {
  return x * x;
}
E pow(const E& x, double y) {
  return bin("stablehlo.power", x, like(y, x));
}

E convert(const E& x, Elem to) {
  return hlo().convert(x.v, to);
}
E reshape(const E& x, const std::vector<std::int64_t>& dims) {
  return hlo().reshape(x.v, dims);
}
E broadcast(const E& x, const std::vector<std::int64_t>& dims, const std::vector<std::int64_t>& map) {
  if (x.dims() == dims) return x;
  return hlo().broadcast(x.v, dims, map);
}
E broadcast_rows(const E& x, const std::vector<std::int64_t>& dims) {
  std::vector<std::int64_t> map(dims.size() - 1);
  std::iota(map.begin(), map.end(), 0);
  return broadcast(x, dims, map);
}
E broadcast_last(const E& x, const std::vector<std::int64_t>& dims) {
  return broadcast(x, dims, {static_cast<std::int64_t>(dims.size()) - 1});
}
E sum(const E& x, const std::vector<std::int64_t>& axes) {
  return hlo().reduce(x.v, axes, "stablehlo.add", 0.0);
}
E reduce_max(const E& x, const std::vector<std::int64_t>& axes) {
  return hlo().reduce(x.v, axes, "stablehlo.maximum", is_float(x.elem()) ? -INFINITY : -2147483647.0);
}
E reduce_min(const E& x, const std::vector<std::int64_t>& axes) {
  return hlo().reduce(x.v, axes, "stablehlo.minimum", is_float(x.elem()) ? INFINITY : 2147483647.0);
}
E sum_all(const E& x) {
  std::vector<std::int64_t> axes(x.dims().size());
  std::iota(axes.begin(), axes.end(), 0);
  return sum(x, axes);
}
E iota(const std::vector<std::int64_t>& dims, int dimension, Elem elem) {
  return hlo().iota(Type{elem, dims}, dimension);
}

E read(const Tensor& t) {
  return convert(trace().read(t), compute_elem(t.dtype()));
}
E read_as(const Tensor& t, Elem elem) {
  return convert(trace().read(t), elem);
}
void write(const Tensor& t, const E& x) {
  SYSTOLIC_CHECK(x.type().numel() == t.numel(), "xla: a value of {} written into a tensor of shape {}",
                 x.type().str(), t.shape().str());
  trace().write(t, convert(x, systolic::xla::elem_of(t.dtype())).v);
}
void accumulate_into(const Tensor& t, const E& x) {
  E old = read(t);
  write(t, old + convert(reshape(x, old.dims()), old.elem()));
}

E read_scalar(const Tensor& t, Elem elem, double fallback) {
  if (!t.defined()) return constant(fallback, Type{elem, {}});
  return reshape(read_as(t, elem), {});
}

}  // namespace systolic::ops::xla
