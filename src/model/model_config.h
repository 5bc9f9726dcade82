// A model's Keras config: the graph as Keras's Functional / Sequential get_config() writes it, and the model a
// config describes (Keras keeps these with the models, keras/src/models/functional.py and sequential.py; the files
// that hold them are src/saving's). to_accelerator copies a model through them.
#pragma once

#include <systolic/error.h>
#include <systolic/model.h>
#include <systolic/saving.h>

#include <nlohmann/json.hpp>
#include <string>

namespace systolic::keras_config {

using json = nlohmann::ordered_json;

// The Keras version the configs and files systolic writes declare (their layout is tf.keras 2.x's, which Keras 3
// reads).
inline constexpr const char* kKerasVersion = "2.15.0";

// {"class_name": "Functional" | "Sequential", "config": {...}} for a model.
json model_config(const Model& model, KerasTarget target = KerasTarget::keras3);
// A model from a serialised model ({"class_name", "config"}); `source` names the file or text in errors.
Model model_from_config(const json& config, const std::string& source);

// Runs f, reporting nlohmann's own exceptions (json::value() on a value that is no object, or on a key whose value
// has another type than the default's) as a malformed config naming `source`: never let through as another
// exception type (found by fuzz_model_json).
template <class F>
auto json_checked(const std::string& source, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const json::exception& e) {
    fail("{}: malformed config: {}", source, e.what());
  }
}

}  // namespace systolic::keras_config
