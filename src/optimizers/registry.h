// The registry of Keras's optimizers: one entry per class, defined in the class's own file
// (src/optimizers/<name>.cc) and listed once in src/optimizers/registry.cc. Saving and compile's string forms
// read and write optimizers through it; the class says the rest (its arguments' config, its slots' names in
// Keras's files).
#pragma once

#include <systolic/optimizers.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/keras_object.h"

namespace systolic::optimizers {

struct Entry {
  std::string class_name;            // Keras's class: "Adam"
  std::vector<std::string> aliases;  // the other names keras.optimizers.get takes (it lowercases): "adam"
  std::string keras3_name;  // the name Keras 3 gives one made without a name: "adam", "SGD", "rmsprop"
  // The optimizer from its config's own arguments, read strictly. The registry reads the learning rate (the
  // config's, or none: the class's default) before, and after it the base class's other arguments the class did not
  // take (StrictConfig::taken: a class may implement one, as AdamW does weight_decay), refusing those systolic does
  // not implement; then finish().
  std::unique_ptr<Optimizer> (*from_config)(keras_object::StrictConfig& config,
                                            std::optional<double> learning_rate);
};

// An Entry's from_config for a BetasOptimizer class O: its beta_1, beta_2 and epsilon, with Keras's defaults.
template <class O>
std::unique_ptr<Optimizer> betas_from_config(keras_object::StrictConfig& c, std::optional<double> lr) {
  return std::make_unique<O>(lr.value_or(0.001), c.number("beta_1", 0.9), c.number("beta_2", 0.999),
                             c.number("epsilon", 1e-7));
}

// keras.optimizers.deserialize: a name or {"class_name", "config"} as Keras 3, tf.keras 2.11+ ("Custom>Adam") and
// the legacy optimizers write it; Error naming the class or option that is not supported.
std::unique_ptr<Optimizer> deserialize(const keras_object::json& value);
// keras.optimizers.serialize in the form a Keras file holds (keras_object::Form).
keras_object::json serialize(const Optimizer& optimizer, keras_object::Form form);

}  // namespace systolic::optimizers
