// Metrics: each adds its batch count to a float64 total; the shown value is total / samples.
#pragma once

#include <systolic/tensor.h>

#include <memory>
#include <string>

namespace systolic::metrics {

class Metric {
 public:
  virtual ~Metric() = default;
  // The key in logs and History: the name the user gave ("accuracy" or "sparse_categorical_accuracy").
  virtual std::string name() const = 0;
  virtual std::unique_ptr<Metric> clone() const = 0;
  // Whether it reads integer labels (true), one-hot labels (false).
  virtual bool sparse_labels() const = 0;
  virtual void update(const Tensor& output, const Tensor& labels, Tensor& total) const = 0;
};

// Keras's names: "sparse_categorical_accuracy", "categorical_accuracy", and "accuracy"/"acc", which means the
// one that fits the loss's labels (sparse labels -> sparse_categorical_accuracy).
std::unique_ptr<Metric> get(const std::string& name, bool loss_has_sparse_labels);

}  // namespace systolic::metrics
