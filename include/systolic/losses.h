// Losses, as Keras computes them. Each adds the batch's summed per-sample losses to a float64 total (the epoch
// mean is total / samples) and writes the gradient of the mean. When the model's output layer ends in softmax
// and a crossentropy is not from_logits, the crossentropy is computed from the logits (as Keras does): stable,
// and the gradient skips the softmax. Each class is listed once, in src/losses/registry.cc, which reads and writes
// their Keras configs.
#pragma once

#include <systolic/tensor.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace systolic::losses {

struct LossArgs {
  const Tensor& output;  // the model's output
  const Tensor& logits;  // the output layer's pre-softmax values, or undefined
  const Tensor& labels;  // int32 [N] for sparse losses, else the output's shape
  Tensor& total;         // float64 scalar accumulator
  Tensor& doutput;       // gradient w.r.t. output (undefined: no gradient wanted)
  Tensor& dlogits;       // gradient w.r.t. logits, used when computing from logits
  double grad_scale;     // 1 / global batch size
};

class Loss {
 public:
  virtual ~Loss() = default;
  // Keras's function name ("sparse_categorical_crossentropy"), which compile takes and files write for a loss
  // with Keras's defaults.
  virtual std::string name() const = 0;
  // Keras's class ("SparseCategoricalCrossentropy").
  virtual std::string class_name() const = 0;
  // Keras 3's get_config() of the class's own arguments, in Keras's order ({"from_logits": false, "ignore_class":
  // null, "axis": -1}); the registry writes the base class's (name, reduction) before them.
  virtual nlohmann::ordered_json get_config() const { return nlohmann::ordered_json::object(); }
  virtual std::unique_ptr<Loss> clone() const = 0;
  // Whether labels are integer class indices (int32, one per sample).
  virtual bool sparse_labels() const { return false; }
  virtual bool from_logits() const { return false; }
  // Returns true when the gradient it wrote is w.r.t. the logits (dlogits), false for doutput.
  virtual bool compute(LossArgs& args) const = 0;
};

struct CrossentropyOptions {
  bool from_logits = false;
};

class SparseCategoricalCrossentropy : public Loss {
 public:
  explicit SparseCategoricalCrossentropy(const CrossentropyOptions& options = {}) : options_(options) {}
  std::string name() const override { return "sparse_categorical_crossentropy"; }
  std::string class_name() const override { return "SparseCategoricalCrossentropy"; }
  nlohmann::ordered_json get_config() const override;
  std::unique_ptr<Loss> clone() const override {
    return std::make_unique<SparseCategoricalCrossentropy>(*this);
  }
  bool sparse_labels() const override { return true; }
  bool from_logits() const override { return options_.from_logits; }
  bool compute(LossArgs& args) const override;

 private:
  CrossentropyOptions options_;
};

class CategoricalCrossentropy : public Loss {
 public:
  explicit CategoricalCrossentropy(const CrossentropyOptions& options = {}) : options_(options) {}
  std::string name() const override { return "categorical_crossentropy"; }
  std::string class_name() const override { return "CategoricalCrossentropy"; }
  nlohmann::ordered_json get_config() const override;
  std::unique_ptr<Loss> clone() const override { return std::make_unique<CategoricalCrossentropy>(*this); }
  bool from_logits() const override { return options_.from_logits; }
  bool compute(LossArgs& args) const override;

 private:
  CrossentropyOptions options_;
};

class MeanSquaredError : public Loss {
 public:
  std::string name() const override { return "mean_squared_error"; }
  std::string class_name() const override { return "MeanSquaredError"; }
  std::unique_ptr<Loss> clone() const override { return std::make_unique<MeanSquaredError>(*this); }
  bool compute(LossArgs& args) const override;
};

// keras.losses.get: a class or function name, or one of Keras's aliases ("SparseCategoricalCrossentropy",
// "categorical_crossentropy", "mse"), with Keras's defaults; Error naming the known ones.
std::unique_ptr<Loss> get(const std::string& name);
// The function names get() takes, one per class.
std::vector<std::string> names();

}  // namespace systolic::losses
