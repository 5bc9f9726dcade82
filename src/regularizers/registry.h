// The registries of Keras's regularizers and constraints: one entry per class, defined in the class's own file
// (src/regularizers/*.cc) and listed once in src/regularizers/registry.cc. Keras 3's get_config is the class's;
// the entry reads a config back.
#pragma once

#include <systolic/regularizers.h>

#include <string>
#include <vector>

#include "core/keras_object.h"

namespace systolic::regularizers {

struct Entry {
  std::string class_name;            // Keras's class: "L2"
  std::vector<std::string> aliases;  // the other names keras.regularizers.get takes: "l2"
  // The regularizer from its config, read strictly (every argument read, or refused by name by the caller's
  // finish()).
  Regularizer (*from_config)(keras_object::StrictConfig& config);
};

}  // namespace systolic::regularizers

namespace systolic::constraints {

struct Entry {
  std::string class_name;            // "MaxNorm"
  std::vector<std::string> aliases;  // "max_norm"
  Constraint (*from_config)(keras_object::StrictConfig& config);
};

}  // namespace systolic::constraints
