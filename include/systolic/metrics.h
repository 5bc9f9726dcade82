// Metrics: each adds its batch count to a float64 total; the shown value is total / samples. Each class is listed
// once, in src/metrics/registry.cc.
#pragma once

#include <systolic/tensor.h>

#include <memory>
#include <string>
#include <vector>

namespace systolic::metrics {

class Metric {
 public:
  virtual ~Metric() = default;
  // The key in logs and History: the name the user gave ("accuracy" or "sparse_categorical_accuracy").
  virtual std::string name() const = 0;
  // Keras's class ("SparseCategoricalAccuracy").
  virtual std::string class_name() const = 0;
  virtual std::unique_ptr<Metric> clone() const = 0;
  // Whether it reads integer labels (true), one-hot labels (false).
  virtual bool sparse_labels() const = 0;
  virtual void update(const Tensor& output, const Tensor& labels, Tensor& total) const = 0;
};

// The metric compile makes of a name: a class or function name of Keras's ("sparse_categorical_accuracy",
// "CategoricalAccuracy"), or "accuracy"/"acc", which means the one that fits the loss's labels (sparse labels ->
// sparse_categorical_accuracy), as Keras's compile resolves it. Error when it is unknown or reads other labels than
// the loss.
std::unique_ptr<Metric> get(const std::string& name, bool loss_has_sparse_labels);
// The names get() takes, one per entry.
std::vector<std::string> names();

}  // namespace systolic::metrics
