// Keras 3's `.keras` files: a zip of config.json, metadata.json and model.weights.h5 (keras/src/saving/
// saving_lib.py). Reading applies the rules the data-set archives get (src/io/fetch.cc): regular files only, the
// three known member names and nothing else (no paths, links or duplicates), sizes capped while inflating; all
// checked before anything is parsed. The weights go through the HDF5 layer (hdf5.h) like any other Keras file.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "saving/keras_io.h"

namespace systolic::keras_io {

struct KerasArchive {
  json config;                // config.json: the serialized model with "compile_config"
  json metadata;              // metadata.json: {"keras_version", "date_saved"}
  std::vector<char> weights;  // model.weights.h5, the file's bytes
};

// Caps on what a .keras may hold once inflated.
inline constexpr std::size_t kMaxKerasJsonBytes = std::size_t(64) << 20;     // config.json, metadata.json
inline constexpr std::size_t kMaxKerasWeightsBytes = std::size_t(16) << 30;  // model.weights.h5

// True when the file starts with a zip local header ("PK\3\4").
bool is_zip_file(const std::string& path);
// The members of a .keras held in memory; `source` names it in errors (one line, Error).
KerasArchive read_keras_archive(const void* data, std::size_t size, const std::string& source);
KerasArchive read_keras_archive_file(const std::string& path);
// Writes a .keras zip (members stored, as Keras writes them) atomically.
void write_keras_archive(const std::string& path, const std::string& config, const std::string& metadata,
                         const std::vector<char>& weights);

}  // namespace systolic::keras_io
