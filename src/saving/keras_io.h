// Shared pieces of the Keras file formats (HDF5 weights, full models, .keras, compile settings): src/saving, the
// floor above the model. It reads and writes models through their public API, model_config.h (the model's Keras
// config) and model/saving_access.h; who writes and how loaded weights reach every replica is distribute's policy.
#pragma once

#include <systolic/model.h>
#include <systolic/saving.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "model/model_config.h"

namespace systolic::hdf5 {
class ReadGroup;
}

namespace systolic::keras_io {

using keras_config::json;
using keras_config::json_checked;
using keras_config::kKerasVersion;
using keras_config::model_config;
using keras_config::model_from_config;

// The version systolic's .keras files declare in metadata.json (their layout is Keras 3.15's).
inline constexpr const char* kKerasVersion3 = "3.15.1";

// Keras's training_config (loss, metrics, optimizer_config) of a compiled model, and its inverse.
json training_config(const Model& model);
void compile_from_training_config(Model& model, const json& config, const std::string& source);
// Keras 3's compile_config (config.json of a .keras: optimizer, loss, metrics, ...), and its inverse.
json compile_config(const Model& model);
void compile_from_keras3_config(Model& model, const json& config, const std::string& source);

// A .keras file: save_keras_archive writes one (model: on the host); load_keras_archive reads one held in memory
// (`path` names it in errors): the zip's members (keras_zip.h), the model from config.json, its weights from
// model.weights.h5 (Keras 3's layout) and, with options.compile, the optimizer from compile_config and its state.
void save_keras_archive(Model& model, const std::string& path);
Model load_keras_archive(const void* data, std::size_t size, const std::string& path,
                         const LoadModelOptions& options);

// Model::save_weights with string attributes on the file's root and float32 datasets in groups of their own
// ("group/name"): BackupAndRestore's training state, so the weights and what goes with them are one file,
// written atomically.
void save_weights(const Model& model, const std::string& path,
                  const std::vector<std::pair<std::string, std::string>>& root_attributes,
                  const std::vector<std::pair<std::string, Tensor>>& datasets = {});
// Model::load_weights into this process's first replica only (the caller shares them among the replicas); the
// second form from a file already read (hdf5::read_file), whose root is `root`.
void load_weights(Model& model, const std::string& path, const LoadWeightsOptions& options);
void load_weights(Model& model, const hdf5::ReadGroup& root, const LoadWeightsOptions& options);
// load_model of a legacy full-model .h5 already read (hdf5::read_file), whose root is `root`.
Model load_model_h5(const hdf5::ReadGroup& root, const LoadModelOptions& options);

}  // namespace systolic::keras_io
