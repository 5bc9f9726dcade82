// The registry of Keras's metrics: one entry per class (or per name compile resolves, "accuracy"), defined in the
// class's own file (src/metrics/<name>.cc) and listed once in src/metrics/registry.cc. compile's names and saving
// go through it.
#pragma once

#include <systolic/metrics.h>

#include <memory>
#include <string>
#include <vector>

#include "core/keras_object.h"

namespace systolic::metrics {

struct Entry {
  // Keras's class ("SparseCategoricalAccuracy"); empty for a name that compile resolves to a class ("accuracy").
  std::string class_name;
  // The other names keras.metrics.get (or compile) takes: "sparse_categorical_accuracy".
  std::vector<std::string> aliases;
  // The metric, shown as `name`, for a loss that takes integer labels (sparse) or not, on an output whose last
  // axis holds one value (binary) or more.
  std::unique_ptr<Metric> (*make)(const std::string& name, bool sparse, bool binary);
  // The metric of a serialized config's arguments (the metric classes that take some: AUC, Precision), named
  // `name`; null: the class takes none but name and dtype.
  std::unique_ptr<Metric> (*from_config)(keras_object::StrictConfig& config,
                                         const std::string& name) = nullptr;
};

// An Entry's make for a class that needs arguments of its own (PrecisionAtRecall's recall, MeanIoU's num_classes):
// compile refuses its name alone, saying so.
std::unique_ptr<Metric> needs_arguments(const std::string& name, bool sparse, bool binary);
// Defines `const Entry& function_entry()` of such a class, read from its config by `from_config`.
#define SYSTOLIC_METRIC_NEEDING_ARGUMENTS(function, Class, from_config)      \
  const Entry& function##_entry() {                                          \
    static const Entry e{#Class, {#function}, needs_arguments, from_config}; \
    return e;                                                                \
  }

// BinaryAccuracy shown as `name` (what "accuracy" means on an output of one unit).
std::unique_ptr<Metric> binary_accuracy(const std::string& name);

// What compile takes for a metric of a training_config: a name, or a serialized metric ({"class_name",
// "config": {"name", "dtype", ...}}; tf.keras 2.11+'s MeanMetricWrapper with "fn"), whose class (or fn) the registry
// must know (a class with arguments: the metric made of them); Error naming it otherwise.
MetricArg from_config(const keras_object::json& value);
// What a Keras file holds for the metric: in a .h5 the Keras metric object of its class ({"class_name":
// "SparseCategoricalAccuracy", "config": {"name": "accuracy", "dtype": "float32"}}: tf.keras reads a bare
// "accuracy" as categorical accuracy whatever the labels, Keras 3 cannot call tf.keras's MeanMetricWrapper
// form, both read this one right); in a .keras the name, as Keras 3 writes it, or for a metric with arguments of
// its own (AUC) the serialized object.
keras_object::json serialize(const Metric& metric, keras_object::Form form);

}  // namespace systolic::metrics
