// Losses, as Keras computes them. Each adds the batch's summed per-sample losses to a float64 total (the epoch
// mean is total / samples) and writes the gradient of the mean. When the model's output layer ends in softmax
// and a crossentropy is not from_logits, the crossentropy is computed from the logits (as Keras does): stable,
// and the gradient skips the softmax.
#pragma once

#include <systolic/tensor.h>

#include <memory>
#include <string>

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
  virtual std::string name() const = 0;
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
  std::unique_ptr<Loss> clone() const override { return std::make_unique<CategoricalCrossentropy>(*this); }
  bool from_logits() const override { return options_.from_logits; }
  bool compute(LossArgs& args) const override;

 private:
  CrossentropyOptions options_;
};

class MeanSquaredError : public Loss {
 public:
  std::string name() const override { return "mean_squared_error"; }
  std::unique_ptr<Loss> clone() const override { return std::make_unique<MeanSquaredError>(*this); }
  bool compute(LossArgs& args) const override;
};

// "sparse_categorical_crossentropy", "categorical_crossentropy", "mean_squared_error" / "mse".
std::unique_ptr<Loss> get(const std::string& name);

}  // namespace systolic::losses
