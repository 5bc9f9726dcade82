// The StableHLO text builder (hlo.h).
#include "core/xla/hlo.h"

#include <fmt/format.h>
#include <systolic/error.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace systolic::xla {

Elem elem_of(DType t) {
  switch (t) {
    case DType::float32:
      return Elem::f32;
    case DType::float64:
      return Elem::f64;
    case DType::bfloat16:
      return Elem::bf16;
    case DType::uint8:
      return Elem::u8;
    case DType::int32:
      return Elem::i32;
  }
  fail("xla: dtype {} has no element type", dtype_name(t));
}

DType dtype_of(Elem e) {
  switch (e) {
    case Elem::f32:
      return DType::float32;
    case Elem::f64:
      return DType::float64;
    case Elem::bf16:
      return DType::bfloat16;
    case Elem::u8:
      return DType::uint8;
    case Elem::i32:
      return DType::int32;
    default:
      fail("xla: element type {} is not a tensor dtype", elem_name(e));
  }
}

const char* elem_name(Elem e) {
  switch (e) {
    case Elem::f32:
      return "f32";
    case Elem::f64:
      return "f64";
    case Elem::bf16:
      return "bf16";
    case Elem::u8:
      return "ui8";
    case Elem::i32:
      return "i32";
    case Elem::i1:
      return "i1";
    case Elem::u32:
      return "ui32";
    case Elem::u64:
      return "ui64";
    case Elem::i64:
      return "i64";
  }
  return "?";
}

bool is_float(Elem e) {
  return e == Elem::f32 || e == Elem::f64 || e == Elem::bf16;
}

std::string Type::str() const {
  std::string s = "tensor<";
  for (auto d : dims) s += std::to_string(d) + "x";
  return s + elem_name(elem) + ">";
}

std::int64_t Type::numel() const {
  std::int64_t n = 1;
  for (auto d : dims) n *= d;
  return n;
}

std::string i64_array(const std::vector<std::int64_t>& v) {
  std::string s = "array<i64";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : ": ") + std::to_string(v[i]);
  return s + ">";
}

std::string i64_dense(const std::vector<std::int64_t>& v) {
  std::string s = "dense<[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]> : tensor<" + std::to_string(v.size()) + "xi64>";
}

std::string literal(double value, Elem elem) {
  switch (elem) {
    case Elem::f32: {
      float f = static_cast<float>(value);
      std::uint32_t bits;
      std::memcpy(&bits, &f, 4);
      return fmt::format("0x{:08X}", bits);
    }
    case Elem::f64: {
      std::uint64_t bits;
      std::memcpy(&bits, &value, 8);
      return fmt::format("0x{:016X}", bits);
    }
    case Elem::bf16: {
      bfloat16 b(static_cast<float>(value));
      std::uint16_t bits;
      std::memcpy(&bits, &b, 2);
      return fmt::format("0x{:04X}", bits);
    }
    case Elem::i1:
      return value != 0 ? "true" : "false";
    // Integers round to nearest, as Tensor::fill rounds (value_as, core/dtype_dispatch.h).
    case Elem::u8:
    case Elem::u32:
    case Elem::u64:
      return fmt::format("{}", static_cast<std::uint64_t>(std::nearbyint(value)));
    case Elem::i32:
    case Elem::i64:
      return fmt::format("{}", static_cast<std::int64_t>(std::nearbyint(value)));
  }
  return "0";
}

namespace {

std::string types_of(const std::vector<Value>& values) {
  std::string s;
  for (std::size_t i = 0; i < values.size(); ++i) s += (i ? ", " : "") + values[i].type.str();
  return s;
}

const char* direction_name(Compare c) {
  switch (c) {
    case Compare::eq:
      return "EQ";
    case Compare::ne:
      return "NE";
    case Compare::lt:
      return "LT";
    case Compare::le:
      return "LE";
    case Compare::gt:
      return "GT";
    case Compare::ge:
      return "GE";
  }
  return "EQ";
}

}  // namespace

std::string Builder::fresh() {
  return "%v" + std::to_string(counter_++);
}

std::vector<Value> Builder::ops(const std::string& name, const std::vector<Value>& operands,
                                const std::vector<Type>& results, const std::string& attributes,
                                const std::string& region) {
  std::vector<Value> out;
  std::string lhs;
  if (results.size() == 1) {
    out.push_back({fresh(), results[0]});
    lhs = out[0].name;
  } else if (!results.empty()) {
    std::string base = fresh();
    lhs = base + ":" + std::to_string(results.size());
    for (std::size_t i = 0; i < results.size(); ++i)
      out.push_back({base + "#" + std::to_string(i), results[i]});
  }
  std::string line(static_cast<std::size_t>(indent_), ' ');
  if (!lhs.empty()) line += lhs + " = ";
  line += "\"" + name + "\"(";
  for (std::size_t i = 0; i < operands.size(); ++i) line += (i ? ", " : "") + operands[i].name;
  line += ")";
  if (!region.empty()) line += " (" + region + ")";
  if (!attributes.empty()) line += " {" + attributes + "}";
  line += " : (" + types_of(operands) + ") -> ";
  if (results.size() == 1) {
    line += results[0].str();
  } else {
    line += "(";
    for (std::size_t i = 0; i < results.size(); ++i) line += (i ? ", " : "") + results[i].str();
    line += ")";
  }
  body_ += line + "\n";
  return out;
}

Value Builder::op(const std::string& name, const std::vector<Value>& operands, const Type& result,
                  const std::string& attributes, const std::string& region) {
  return ops(name, operands, {result}, attributes, region)[0];
}

std::string Builder::region(
    const std::vector<Type>& args,
    const std::function<std::vector<Value>(Builder&, const std::vector<Value>&)>& body) {
  std::string saved;
  std::swap(saved, body_);
  indent_ += 4;
  std::vector<Value> block;
  std::string header = "{\n" + std::string(static_cast<std::size_t>(indent_ - 2), ' ') + "^bb0(";
  for (std::size_t i = 0; i < args.size(); ++i) {
    block.push_back({fresh(), args[i]});
    header += (i ? ", " : "") + block.back().name + ": " + args[i].str();
  }
  header += "):\n";
  std::vector<Value> results = body(*this, block);
  std::string ret = std::string(static_cast<std::size_t>(indent_), ' ') + "\"stablehlo.return\"(";
  for (std::size_t i = 0; i < results.size(); ++i) ret += (i ? ", " : "") + results[i].name;
  ret += ") : (" + types_of(results) + ") -> ()\n";
  std::string text = header + body_ + ret + std::string(static_cast<std::size_t>(indent_ - 4), ' ') + "}";
  indent_ -= 4;
  std::swap(saved, body_);
  return text;
}

std::string Builder::binary_region(const std::string& op, Elem elem) {
  Type scalar{elem, {}};
  return region({scalar, scalar}, [&](Builder& b, const std::vector<Value>& a) {
    return std::vector<Value>{b.binary(op, a[0], a[1])};
  });
}

Value Builder::constant(double value, const Type& type) {
  return op("stablehlo.constant", {}, type,
            "value = dense<" + literal(value, type.elem) + "> : " + type.str());
}

Value Builder::constant(const std::vector<double>& values, const Type& type) {
  SYSTOLIC_CHECK(static_cast<std::int64_t>(values.size()) == type.numel(), "xla: {} values for a constant {}",
                 values.size(), type.str());
  Type flat = type.with(std::vector<std::int64_t>{type.numel()});
  std::string list;
  for (std::size_t i = 0; i < values.size(); ++i) list += (i ? ", " : "") + literal(values[i], type.elem);
  return reshape(op("stablehlo.constant", {}, flat, "value = dense<[" + list + "]> : " + flat.str()),
                 type.dims);
}

Value Builder::constant_u64(std::uint64_t value, const Type& type) {
  return op("stablehlo.constant", {}, type, fmt::format("value = dense<{}> : {}", value, type.str()));
}

Value Builder::iota(const Type& type, int dimension) {
  return op("stablehlo.iota", {}, type, fmt::format("iota_dimension = {} : i64", dimension));
}

Value Builder::unary(const std::string& name, const Value& a) {
  return op(name, {a}, a.type);
}

Value Builder::binary(const std::string& name, const Value& a, const Value& b) {
  SYSTOLIC_CHECK(a.type == b.type, "xla: {} of {} and {}", name, a.type.str(), b.type.str());
  return op(name, {a, b}, a.type);
}

Value Builder::compare(const Value& a, const Value& b, Compare direction) {
  SYSTOLIC_CHECK(a.type == b.type, "xla: compare of {} and {}", a.type.str(), b.type.str());
  Elem e = a.type.elem;
  const char* kind = is_float(e)                                                            ? "FLOAT"
                     : (e == Elem::u8 || e == Elem::u32 || e == Elem::u64 || e == Elem::i1) ? "UNSIGNED"
                                                                                            : "SIGNED";
  return op("stablehlo.compare", {a, b}, a.type.with(Elem::i1),
            fmt::format("comparison_direction = #stablehlo<comparison_direction {}>, compare_type = "
                        "#stablehlo<comparison_type {}>",
                        direction_name(direction), kind));
}

Value Builder::select(const Value& predicate, const Value& on_true, const Value& on_false) {
  return op("stablehlo.select", {predicate, on_true, on_false}, on_true.type);
}

Value Builder::convert(const Value& a, Elem to) {
  if (a.type.elem == to) return a;
  return op("stablehlo.convert", {a}, a.type.with(to));
}

Value Builder::bitcast(const Value& a, Elem to) {
  return op("stablehlo.bitcast_convert", {a}, a.type.with(to));
}

Value Builder::reshape(const Value& a, const std::vector<std::int64_t>& dims) {
  if (a.type.dims == dims) return a;
  return op("stablehlo.reshape", {a}, a.type.with(dims));
}

Value Builder::broadcast(const Value& a, const std::vector<std::int64_t>& dims,
                         const std::vector<std::int64_t>& map) {
  return op("stablehlo.broadcast_in_dim", {a}, a.type.with(dims), "broadcast_dimensions = " + i64_array(map));
}

Value Builder::transpose(const Value& a, const std::vector<std::int64_t>& permutation) {
  std::vector<std::int64_t> dims;
  for (auto p : permutation) dims.push_back(a.type.dims[static_cast<std::size_t>(p)]);
  return op("stablehlo.transpose", {a}, a.type.with(dims), "permutation = " + i64_array(permutation));
}

Value Builder::slice(const Value& a, const std::vector<std::int64_t>& start,
                     const std::vector<std::int64_t>& limit, std::vector<std::int64_t> strides) {
  if (strides.empty()) strides.assign(start.size(), 1);
  std::vector<std::int64_t> dims;
  for (std::size_t i = 0; i < start.size(); ++i)
    dims.push_back((limit[i] - start[i] + strides[i] - 1) / strides[i]);
  if (dims == a.type.dims) return a;
  return op("stablehlo.slice", {a}, a.type.with(dims),
            "start_indices = " + i64_array(start) + ", limit_indices = " + i64_array(limit) +
                ", strides = " + i64_array(strides));
}

Value Builder::pad(const Value& a, const Value& padding_value, const std::vector<std::int64_t>& low,
                   const std::vector<std::int64_t>& high, std::vector<std::int64_t> interior) {
  if (interior.empty()) interior.assign(low.size(), 0);
  std::vector<std::int64_t> dims;
  for (std::size_t i = 0; i < low.size(); ++i) {
    std::int64_t d = a.type.dims[i];
    dims.push_back(low[i] + high[i] + d + (d > 0 ? (d - 1) * interior[i] : 0));
  }
  return op("stablehlo.pad", {a, padding_value}, a.type.with(dims),
            "edge_padding_low = " + i64_array(low) + ", edge_padding_high = " + i64_array(high) +
                ", interior_padding = " + i64_array(interior));
}

Value Builder::concatenate(const std::vector<Value>& parts, std::int64_t dimension) {
  SYSTOLIC_CHECK(!parts.empty(), "xla: concatenate of nothing");
  if (parts.size() == 1) return parts[0];
  Type t = parts[0].type;
  t.dims[static_cast<std::size_t>(dimension)] = 0;
  for (auto& p : parts)
    t.dims[static_cast<std::size_t>(dimension)] += p.type.dims[static_cast<std::size_t>(dimension)];
  return op("stablehlo.concatenate", parts, t, fmt::format("dimension = {} : i64", dimension));
}

Value Builder::dynamic_update_slice(const Value& operand, const Value& update,
                                    const std::vector<std::int64_t>& start) {
  std::vector<Value> starts;
  for (auto s : start) starts.push_back(constant(static_cast<double>(s), Type{Elem::i64, {}}));
  return dynamic_update_slice(operand, update, starts);
}

Value Builder::dynamic_update_slice(const Value& operand, const Value& update,
                                    const std::vector<Value>& start) {
  if (update.type.dims == operand.type.dims) return update;
  std::vector<Value> operands{operand, update};
  operands.insert(operands.end(), start.begin(), start.end());
  return op("stablehlo.dynamic_update_slice", operands, operand.type);
}

Value Builder::dynamic_slice(const Value& operand, const std::vector<Value>& start,
                             const std::vector<std::int64_t>& sizes) {
  std::vector<Value> operands{operand};
  operands.insert(operands.end(), start.begin(), start.end());
  return op("stablehlo.dynamic_slice", operands, operand.type.with(sizes),
            "slice_sizes = " + i64_array(sizes));
}

Value Builder::reduce(const Value& a, const std::vector<std::int64_t>& dims, const std::string& name,
                      double init) {
  if (dims.empty()) return a;
  Type scalar{a.type.elem, {}};
  Value zero = constant(init, scalar);
  std::vector<std::int64_t> kept;
  for (int i = 0; i < a.type.rank(); ++i)
    if (std::find(dims.begin(), dims.end(), i) == dims.end())
      kept.push_back(a.type.dims[static_cast<std::size_t>(i)]);
  return op("stablehlo.reduce", {a, zero}, a.type.with(kept), "dimensions = " + i64_array(dims),
            binary_region(name, a.type.elem));
}

Value Builder::dot_general(const Value& lhs, const Value& rhs, const std::vector<std::int64_t>& lhs_batch,
                           const std::vector<std::int64_t>& rhs_batch,
                           const std::vector<std::int64_t>& lhs_contract,
                           const std::vector<std::int64_t>& rhs_contract, Elem result) {
  auto list = [](const std::vector<std::int64_t>& v) {
    std::string s = "[";
    for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "]";
  };
  auto in = [](const std::vector<std::int64_t>& v, std::int64_t d) {
    return std::find(v.begin(), v.end(), d) != v.end();
  };
  std::vector<std::int64_t> dims;
  for (auto b : lhs_batch) dims.push_back(lhs.type.dims[static_cast<std::size_t>(b)]);
  for (int i = 0; i < lhs.type.rank(); ++i)
    if (!in(lhs_batch, i) && !in(lhs_contract, i)) dims.push_back(lhs.type.dims[static_cast<std::size_t>(i)]);
  for (int i = 0; i < rhs.type.rank(); ++i)
    if (!in(rhs_batch, i) && !in(rhs_contract, i)) dims.push_back(rhs.type.dims[static_cast<std::size_t>(i)]);
  std::string numbers = "dot_dimension_numbers = #stablehlo.dot<";
  std::string sep;
  if (!lhs_batch.empty()) {
    numbers +=
        "lhs_batching_dimensions = " + list(lhs_batch) + ", rhs_batching_dimensions = " + list(rhs_batch);
    sep = ", ";
  }
  numbers += sep + "lhs_contracting_dimensions = " + list(lhs_contract) +
             ", rhs_contracting_dimensions = " + list(rhs_contract) + ">";
  return op("stablehlo.dot_general", {lhs, rhs}, Type{result, dims}, numbers);
}

}  // namespace systolic::xla
