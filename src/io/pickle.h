// A restricted reader of Python pickles, for the one kind numpy writes into .npy files: an object array
// (numpy.save(..., allow_pickle=True)), as Keras's imdb.npz and reuters.npz hold their ragged sequences. The pickle
// is read as data and never run: its opcodes build a tree of values in an arena (no recursion, cycles harmless),
// and the only callables it may name are those Keras's own restricted unpickler allows (numpy.ndarray,
// numpy.dtype, numpy.core.multiarray._reconstruct and numpy._core.multiarray._reconstruct); any other is an Error
// naming it. Errors name the input and what is wrong: an unknown or truncated opcode, a stack underflow, a memo
// key never stored, an integer too large.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace systolic::io::pickle {

struct Value {
  enum class Kind { none, boolean, integer, floating, string, bytes, list, tuple, dict, global, call };
  Kind kind = Kind::none;
  std::int64_t integer = 0;  // boolean and integer
  double floating = 0;
  std::string text;  // string (UTF-8), bytes, global ("module.name")
  // list and tuple: the items; dict: key, value, key, value, ...; call: the callable, its arguments (a tuple), and
  // its state when a BUILD set one (else no third entry). Indices into Pickle::values.
  std::vector<std::uint32_t> items;
};

struct Pickle {
  std::vector<Value> values;
  std::uint32_t root = 0;
  const Value& at(std::uint32_t i) const { return values[i]; }
};

// Reads the pickle in `data` (protocols 0 to 5, the binary opcodes numpy's pickles use); `name` is how errors call
// it. Stops at STOP; what follows is not read.
Pickle parse(const void* data, std::size_t size, const std::string& name);

}  // namespace systolic::io::pickle
