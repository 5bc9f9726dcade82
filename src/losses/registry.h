// The registry of Keras's losses: one entry per class, defined in the class's own file (src/losses/<name>.cc) and
// listed once in src/losses/registry.cc. compile's string forms and saving read and write losses through it.
#pragma once

#include <systolic/losses.h>

#include <memory>
#include <string>
#include <vector>

#include "core/keras_object.h"

namespace systolic::losses {

struct Entry {
  std::string class_name;  // Keras's class: "MeanSquaredError"
  // The other names keras.losses.get takes, the function's first: "mean_squared_error", "mse", "MSE".
  std::vector<std::string> aliases;
  // The loss from its config's own arguments, read strictly (then the registry reads the base class's the class did
  // not take: name, reduction, dtype; and calls finish()).
  std::unique_ptr<Loss> (*from_config)(keras_object::StrictConfig& config);
};

// keras.losses.deserialize: a name or {"class_name", "config"} (Keras 3's or tf.keras's); Error naming the class
// or argument that is not supported.
std::unique_ptr<Loss> deserialize(const keras_object::json& value);
// What a Keras file holds for the loss: its function name when it has Keras's defaults (as compile(loss="...")
// writes), else the serialized object (Keras 3's get_config; in a .h5, only the arguments that differ from the
// defaults, which tf.keras and Keras 3 both read).
keras_object::json serialize(const Loss& loss, keras_object::Form form);

}  // namespace systolic::losses
