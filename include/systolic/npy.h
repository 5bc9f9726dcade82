// NumPy's array files, where Keras users keep their data: .npy (numpy.save) and .npz (numpy.savez, a zip of .npy
// members, stored or deflated). Read as systolic's dtypes:
//   bool, uint8                        -> uint8
//   int8, int16, uint16, int32         -> int32
//   int64, uint32, uint64              -> int32, Error when a value does not fit
//   float16, float32                   -> float32
//   float64                            -> float64
// in either byte order and in C or Fortran order (returned in C order). Errors name the file (and member) and
// what is wrong: not an .npy array, an unsupported version or dtype, a pickled object array (numpy.save with
// allow_pickle), a structured array, a malformed header, a truncated or oversized body.
// One kind of object array is read, by read_sequences and load_npz_with_sequences: a 1-D array of integer
// sequences, as Keras's imdb.npz and reuters.npz hold their texts.
#pragma once

#include <systolic/tensor.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace systolic::npy {

// The array in the bytes of an .npy file; `name` is how errors call it.
Tensor read(const void* data, std::size_t size, const std::string& name);
// The .npy file at `path`.
Tensor load(const std::string& path);
// Every .npy member of the .npz file at `path`, by name without ".npy" (numpy.load(path)[name]).
std::map<std::string, Tensor> load_npz(const std::string& path);
// A ragged array: each sequence's integers (ids), as int32.
using Sequences = std::vector<std::vector<std::int32_t>>;
// The 1-D object array in the bytes of an .npy file whose elements are lists or tuples of integers or integer
// arrays (numpy.save(..., allow_pickle=True) of Keras's ragged sequences). Its pickle is read as data, never run:
// as Keras's own loader (keras/src/datasets/npz_utils.py), it may name only numpy.ndarray, numpy.dtype and
// multiarray._reconstruct; any other callable, an element that is not a sequence of integers, an integer outside
// int32, or a damaged pickle is an Error naming the file and the element.
Sequences read_sequences(const void* data, std::size_t size, const std::string& name);
// The members of an .npz file that may hold such arrays: numeric ones in `arrays` (as load_npz reads them), object
// arrays of sequences in `sequences`, each by its name without ".npy".
struct NpzContents {
  std::map<std::string, Tensor> arrays;
  std::map<std::string, Sequences> sequences;
};
NpzContents load_npz_with_sequences(const std::string& path);
// The bytes of an .npy file (version 1.0, C order) holding t: float32 '<f4', float64 '<f8', int32 '<i4',
// uint8 '|u1'; bfloat16 is written as float32.
std::string serialize(const Tensor& t);
// Writes serialize(t) to `path` atomically.
void save(const std::string& path, const Tensor& t);
// Writes an .npz (numpy.savez: a zip of stored .npy members, `name`.npy each, in the order given) atomically.
void save_npz(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& arrays);

}  // namespace systolic::npy
