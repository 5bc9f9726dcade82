// Keras files: models from Keras JSON (model.to_json()) and from full-model HDF5 files (model.save("m.h5")).
// Weights alone: Model::save_weights / Model::load_weights (model.h).
//
// Supported: Sequential and Functional models, as tf.keras 2.x and Keras 3 write them (and Keras 2.0's
// Sequential list form), made of the layers in layers.h. An unknown layer class or an option systolic does not
// implement is an error that names the layer and the option; nothing is silently ignored.
#pragma once

#include <systolic/model.h>

#include <string>

namespace systolic {

// keras.models.model_from_json(text).
Model model_from_json(const std::string& json_text);
// Reads a file holding Keras model JSON.
Model model_from_json_file(const std::string& path);

struct LoadModelOptions {
  bool compile = true;  // compile with the file's training config (loss, metrics, optimizer and its state)
};
// keras.models.load_model("m.keras" or "m.h5"): architecture, weights, and (when compiled) the optimizer with its state,
// so training resumes where it stopped.
// A .keras (a zip, recognised by its content) or a legacy full-model .h5.
Model load_model(const std::string& path, const LoadModelOptions& options = {});
// True when `path` is a zip (a Keras 3 .keras file), whatever its name.
bool is_keras_zip(const std::string& path);

}  // namespace systolic
