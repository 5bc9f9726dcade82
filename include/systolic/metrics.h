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
  // The value shown from the mean of what update() added per sample (total / samples): that mean, or for
  // RootMeanSquaredError its square root.
  virtual double result(double mean) const { return mean; }
};

// The metric compile makes of a name: a class or function name of Keras's ("sparse_categorical_accuracy",
// "CategoricalAccuracy", "mae", "binary_accuracy"), or "accuracy"/"acc", which means, as Keras's compile resolves
// it, binary_accuracy on an output of one unit (binary_output), else the one that fits the loss's labels (sparse
// labels -> sparse_categorical_accuracy). Error when it is unknown or reads other labels than the loss. The
// elementwise metrics (binary_accuracy with threshold 0.5, and the mean of a loss function: mean_squared_error,
// mean_absolute_error, ..., binary_crossentropy from probabilities) are ops::elementwise_loss without a gradient.
std::unique_ptr<Metric> get(const std::string& name, bool loss_has_sparse_labels, bool binary_output = false);
// The names get() takes, one per entry.
std::vector<std::string> names();

}  // namespace systolic::metrics
