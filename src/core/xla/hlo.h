// StableHLO text, written op by op: the XLA backend's ops emit through a Builder, which names every value (%vN)
// and writes MLIR's generic form ("stablehlo.add"(%a, %b) : (...) -> ...), the one form every op has. A module is
// the body of one function @main whose arguments and results the trace (trace.h) chooses. Floating constants are
// written as their bits (dense<0x3F800000>), so they are exact.
#pragma once

#include <systolic/dtype.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace systolic::xla {

// Element types: the tensors' dtypes, and what the programs need besides (predicates, the counter-based random
// streams' unsigned words, indices).
enum class Elem { f32, f64, bf16, u8, i32, i1, u32, u64, i64 };
Elem elem_of(DType t);
DType dtype_of(Elem e);         // Error for i1, u32, u64, i64
const char* elem_name(Elem e);  // "f32", "ui8", "i1", ...
bool is_float(Elem e);

struct Type {
  Elem elem = Elem::f32;
  std::vector<std::int64_t> dims;
  std::string str() const;  // tensor<2x3xf32>
  std::int64_t numel() const;
  int rank() const { return static_cast<int>(dims.size()); }
  Type with(Elem e) const { return {e, dims}; }
  Type with(std::vector<std::int64_t> d) const { return {elem, std::move(d)}; }
  bool operator==(const Type&) const = default;
};

struct Value {
  std::string name;  // "%v12"
  Type type;
};

enum class Compare { eq, ne, lt, le, gt, ge };

// "array<i64: 1, 2>"; "dense<[1, 2]> : tensor<2xi64>".
std::string i64_array(const std::vector<std::int64_t>& v);
std::string i64_dense(const std::vector<std::int64_t>& v);

class Builder {
 public:
  // A fresh value name (%vN).
  std::string fresh();
  // One op: `name` with operands, one result and attributes (the text inside {...}, without braces), and an
  // optional region (the text of `({ ... })` without the parentheses, from region()).
  Value op(const std::string& name, const std::vector<Value>& operands, const Type& result,
           const std::string& attributes = "", const std::string& region = "");
  std::vector<Value> ops(const std::string& name, const std::vector<Value>& operands,
                         const std::vector<Type>& results, const std::string& attributes = "",
                         const std::string& region = "");
  // A region with one block of scalar (or given) arguments: body(args) returns what "stablehlo.return" returns.
  std::string region(const std::vector<Type>& args,
                     const std::function<std::vector<Value>(Builder&, const std::vector<Value>&)>& body);
  // A region whose block applies one binary op to its two scalar arguments (reduce, all_reduce).
  std::string binary_region(const std::string& op, Elem elem);

  // ---- common ops ----
  Value constant(double value, const Type& type);  // every element `value` (rounded to the element type)
  Value constant_u64(std::uint64_t value, const Type& type);
  // The values, row-major, as a tensor of `type` (a 1-D literal reshaped: weights and indices known when tracing).
  Value constant(const std::vector<double>& values, const Type& type);
  Value iota(const Type& type, int dimension);
  Value unary(const std::string& op, const Value& a);  // "stablehlo.exponential", ...
  Value binary(const std::string& op, const Value& a, const Value& b);
  Value add(const Value& a, const Value& b) { return binary("stablehlo.add", a, b); }
  Value sub(const Value& a, const Value& b) { return binary("stablehlo.subtract", a, b); }
  Value mul(const Value& a, const Value& b) { return binary("stablehlo.multiply", a, b); }
  Value div(const Value& a, const Value& b) { return binary("stablehlo.divide", a, b); }
  Value max(const Value& a, const Value& b) { return binary("stablehlo.maximum", a, b); }
  Value min(const Value& a, const Value& b) { return binary("stablehlo.minimum", a, b); }
  Value neg(const Value& a) { return unary("stablehlo.negate", a); }
  // Bitwise ops of integers (the counter-based random streams' words; and, or, xor also of predicates) and logical
  // shifts (b holds the shift counts, of a's type).
  Value bit_and(const Value& a, const Value& b) { return binary("stablehlo.and", a, b); }
  Value bit_or(const Value& a, const Value& b) { return binary("stablehlo.or", a, b); }
  Value bit_xor(const Value& a, const Value& b) { return binary("stablehlo.xor", a, b); }
  Value shift_left(const Value& a, const Value& b) { return binary("stablehlo.shift_left", a, b); }
  Value shift_right_logical(const Value& a, const Value& b) {
    return binary("stablehlo.shift_right_logical", a, b);
  }
  // a op scalar: the scalar broadcast to a's type.
  Value scalar(double value, const Value& like) { return constant(value, like.type); }
  Value compare(const Value& a, const Value& b, Compare direction);
  Value select(const Value& predicate, const Value& on_true, const Value& on_false);
  Value convert(const Value& a, Elem to);
  Value bitcast(const Value& a, Elem to);  // same element size
  Value reshape(const Value& a, const std::vector<std::int64_t>& dims);
  // a's dimension i becomes dimension map[i] of `dims`.
  Value broadcast(const Value& a, const std::vector<std::int64_t>& dims,
                  const std::vector<std::int64_t>& map);
  Value transpose(const Value& a, const std::vector<std::int64_t>& permutation);
  Value slice(const Value& a, const std::vector<std::int64_t>& start, const std::vector<std::int64_t>& limit,
              std::vector<std::int64_t> strides = {});
  Value pad(const Value& a, const Value& padding_value, const std::vector<std::int64_t>& low,
            const std::vector<std::int64_t>& high, std::vector<std::int64_t> interior = {});
  Value concatenate(const std::vector<Value>& parts, std::int64_t dimension);
  Value dynamic_update_slice(const Value& operand, const Value& update,
                             const std::vector<std::int64_t>& start);
  Value dynamic_update_slice(const Value& operand, const Value& update, const std::vector<Value>& start);
  Value dynamic_slice(const Value& operand, const std::vector<Value>& start,
                      const std::vector<std::int64_t>& sizes);
  // Sum (or "stablehlo.maximum", ...) over `dims`, from `init`; accumulates in a's element type.
  Value reduce(const Value& a, const std::vector<std::int64_t>& dims, const std::string& op = "stablehlo.add",
               double init = 0.0);
  // Batched matrix product: contracts lhs_contract with rhs_contract, batch dims paired.
  Value dot_general(const Value& lhs, const Value& rhs, const std::vector<std::int64_t>& lhs_batch,
                    const std::vector<std::int64_t>& rhs_batch, const std::vector<std::int64_t>& lhs_contract,
                    const std::vector<std::int64_t>& rhs_contract, Elem result);

  const std::string& body() const { return body_; }
  int count() const { return counter_; }

 private:
  std::string body_;
  int counter_ = 0;
  int indent_ = 4;
};

// Writes a value's MLIR literal of `elem` (hex bits for floats).
std::string literal(double value, Elem elem);

}  // namespace systolic::xla
