// Losses, as Keras computes them. Each adds the batch's summed per-sample losses to a float64 total (the epoch
// mean is total / samples) and writes the gradient of the mean. When the model's output layer ends in softmax
// and a crossentropy is not from_logits, the crossentropy is computed from the logits (as Keras does): stable,
// and the gradient skips the softmax. Each class is listed once, in src/losses/registry.cc, which reads and writes
// their Keras configs.
#pragma once

#include <systolic/ops.h>
#include <systolic/tensor.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace systolic::losses {

// A buffer a loss keeps for values of its own (CategoricalCrossentropy's smoothed labels): made at the first step
// and reused after, so a step recorded as a CUDA graph reads it where it was; a copy (a cloned loss, a replica's)
// starts without one.
class LossBuffer {
 public:
  LossBuffer() = default;
  LossBuffer(const LossBuffer&) {}
  LossBuffer& operator=(const LossBuffer&) { return *this; }
  // The first shape[0] rows of a buffer of this dtype, device and sample shape (grown for a larger batch).
  Tensor rows(const Shape& shape, DType dtype, Device device);
  Tensor rows_like(const Tensor& like) { return rows(like.shape(), like.dtype(), like.device()); }

 private:
  Tensor buffer_;
};

inline const Tensor kNoMask;

struct LossArgs {
  const Tensor& output;          // the model's output
  const Tensor& logits;          // the output layer's pre-softmax values, or undefined
  const Tensor& sigmoid_logits;  // the output layer's pre-sigmoid values, or undefined
  const Tensor& labels;  // int32 for sparse losses (the output's shape without its last axis), else the
                         // output's shape
  // Keras's sample_weight: [N] float32 (float64 for float64 outputs), or one per row of the loss's values (ops.h),
  // or undefined.
  const Tensor& weights;
  Tensor& total;      // float64 scalar accumulator
  Tensor& doutput;    // gradient w.r.t. output (undefined: no gradient wanted)
  Tensor& dlogits;    // gradient w.r.t. logits, used when computing from logits
  double grad_scale;  // 1 / global batch size
  // The output's Keras mask (one value per row of the loss's values, the output's dtype), or undefined.
  const Tensor& mask = kNoMask;
};

class Loss {
 public:
  virtual ~Loss() = default;
  // Keras's function name ("sparse_categorical_crossentropy"), which compile takes and files write for a loss
  // with Keras's defaults.
  virtual std::string name() const = 0;
  // Keras's class ("SparseCategoricalCrossentropy").
  virtual std::string class_name() const = 0;
  // The class's default `name` in its config: name() but for Huber ("huber_loss").
  virtual std::string config_name() const { return name(); }
  // Keras 3's get_config() of the class's own arguments, in Keras's order ({"from_logits": false, "ignore_class":
  // null}); the registry writes the base class's (name, reduction) before them.
  virtual nlohmann::ordered_json get_config() const { return nlohmann::ordered_json::object(); }
  virtual std::unique_ptr<Loss> clone() const = 0;
  // Whether labels are integer class indices (int32, one per sample).
  virtual bool sparse_labels() const { return false; }
  virtual bool from_logits() const { return false; }
  // Adds the batch's loss to args.total and writes its gradient; returns true when the gradient it wrote is w.r.t.
  // the logits (dlogits), false for doutput. A mask weighs each row as Keras's apply_mask does (ops::mask_weights:
  // the loss means over the unmasked rows), folded into the weights here unless the loss folds it itself.
  bool compute(LossArgs& args) const;

 protected:
  // compute() with args.mask undefined, or defined where folds_mask().
  virtual bool compute_weighted(LossArgs& args) const = 0;
  virtual bool folds_mask() const { return false; }

 private:
  mutable LossBuffer masked_;  // the mask's weights
};

struct CrossentropyOptions {
  bool from_logits = false;
  // CategoricalCrossentropy only (Keras's SparseCategoricalCrossentropy has none): the targets become
  // t (1 - s) + s / classes.
  double label_smoothing = 0.0;
  // SparseCategoricalCrossentropy only: labels of this class count for nothing; the loss is the mean over the
  // others (ops::ignore_class). As Keras's, it is computed from the output's probabilities, not its logits.
  std::optional<std::int32_t> ignore_class;
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

 protected:
  bool compute_weighted(LossArgs& args) const override;
  // ignore_class folds the mask into its own (ops::ignore_class): Keras means over the labels both keep.
  bool folds_mask() const override { return options_.ignore_class.has_value(); }

 private:
  CrossentropyOptions options_;
  mutable LossBuffer kept_, kept_weights_;  // ignore_class's labels and weights
};

class CategoricalCrossentropy : public Loss {
 public:
  explicit CategoricalCrossentropy(const CrossentropyOptions& options = {}) : options_(options) {}
  std::string name() const override { return "categorical_crossentropy"; }
  std::string class_name() const override { return "CategoricalCrossentropy"; }
  nlohmann::ordered_json get_config() const override;
  std::unique_ptr<Loss> clone() const override { return std::make_unique<CategoricalCrossentropy>(*this); }
  bool from_logits() const override { return options_.from_logits; }

 protected:
  bool compute_weighted(LossArgs& args) const override;

 private:
  CrossentropyOptions options_;
  mutable LossBuffer smoothed_;
};

// Keras's losses whose value is the mean (KLDivergence: the sum over the last axis) of an element function of the
// prediction and the target (ops::elementwise_loss, whose ElementLoss kinds give the formulas). The binary
// crossentropies are computed from the logits when the output layer ends in a sigmoid (as Keras's TensorFlow
// backend does) or with from_logits.
class ElementwiseLoss : public Loss {
 public:
  std::string name() const override { return name_; }
  std::string class_name() const override { return class_name_; }
  std::string config_name() const override { return config_name_; }
  nlohmann::ordered_json get_config() const override;
  std::unique_ptr<Loss> clone() const override { return std::make_unique<ElementwiseLoss>(*this); }
  bool from_logits() const override { return params_.from_logits; }

  const ops::ElementLossParams& params() const { return params_; }

 protected:
  bool compute_weighted(LossArgs& args) const override;
  ElementwiseLoss(std::string class_name, std::string name, const ops::ElementLossParams& params,
                  std::string config_name = "")
      : class_name_(std::move(class_name)),
        name_(std::move(name)),
        config_name_(config_name.empty() ? name_ : std::move(config_name)),
        params_(params) {}

 private:
  std::string class_name_, name_, config_name_;
  ops::ElementLossParams params_;
};

// The ones without arguments: MeanSquaredError() ...
#define SYSTOLIC_ELEMENTWISE_LOSS(Class, function, element)                             \
  class Class : public ElementwiseLoss {                                                \
   public:                                                                              \
    Class() : ElementwiseLoss(#Class, function, {.kind = ops::ElementLoss::element}) {} \
  };
SYSTOLIC_ELEMENTWISE_LOSS(MeanSquaredError, "mean_squared_error", squared_error)
SYSTOLIC_ELEMENTWISE_LOSS(MeanAbsoluteError, "mean_absolute_error", absolute_error)
SYSTOLIC_ELEMENTWISE_LOSS(MeanAbsolutePercentageError, "mean_absolute_percentage_error",
                          absolute_percentage_error)
SYSTOLIC_ELEMENTWISE_LOSS(MeanSquaredLogarithmicError, "mean_squared_logarithmic_error",
                          squared_logarithmic_error)
SYSTOLIC_ELEMENTWISE_LOSS(LogCosh, "log_cosh", log_cosh)
SYSTOLIC_ELEMENTWISE_LOSS(Poisson, "poisson", poisson)
SYSTOLIC_ELEMENTWISE_LOSS(Hinge, "hinge", hinge)
SYSTOLIC_ELEMENTWISE_LOSS(SquaredHinge, "squared_hinge", squared_hinge)
SYSTOLIC_ELEMENTWISE_LOSS(KLDivergence, "kl_divergence", kl_divergence)
#undef SYSTOLIC_ELEMENTWISE_LOSS

// Huber(delta): its config name is "huber_loss", its function "huber".
class Huber : public ElementwiseLoss {
 public:
  explicit Huber(double delta = 1.0)
      : ElementwiseLoss("Huber", "huber", {.kind = ops::ElementLoss::huber, .delta = delta}, "huber_loss") {}
};

struct BinaryCrossentropyOptions {
  bool from_logits = false;
  double label_smoothing = 0.0;
};
class BinaryCrossentropy : public ElementwiseLoss {
 public:
  explicit BinaryCrossentropy(const BinaryCrossentropyOptions& o = {})
      : ElementwiseLoss("BinaryCrossentropy", "binary_crossentropy",
                        {.kind = ops::ElementLoss::binary_crossentropy,
                         .from_logits = o.from_logits,
                         .label_smoothing = o.label_smoothing}) {}
};

struct BinaryFocalCrossentropyOptions {
  bool apply_class_balancing = false;
  double alpha = 0.25, gamma = 2.0;
  bool from_logits = false;
  double label_smoothing = 0.0;
};
class BinaryFocalCrossentropy : public ElementwiseLoss {
 public:
  explicit BinaryFocalCrossentropy(const BinaryFocalCrossentropyOptions& o = {})
      : ElementwiseLoss("BinaryFocalCrossentropy", "binary_focal_crossentropy",
                        {.kind = ops::ElementLoss::binary_focal_crossentropy,
                         .from_logits = o.from_logits,
                         .label_smoothing = o.label_smoothing,
                         .alpha = o.alpha,
                         .gamma = o.gamma,
                         .class_balancing = o.apply_class_balancing}) {}
};

// Keras's losses whose value for a row (the last axis) needs the whole row (ops::row_loss, whose RowLoss kinds give
// the formulas); per sample, the mean over its rows. From the output as it is: CategoricalFocalCrossentropy with
// from_logits applies its own softmax, and without it normalises a softmax output's rows again, as Keras does.
class RowwiseLoss : public Loss {
 public:
  std::string name() const override { return name_; }
  std::string class_name() const override { return class_name_; }
  nlohmann::ordered_json get_config() const override;
  std::unique_ptr<Loss> clone() const override { return std::make_unique<RowwiseLoss>(*this); }
  bool from_logits() const override { return params_.from_logits; }

  const ops::RowLossParams& params() const { return params_; }

 protected:
  bool compute_weighted(LossArgs& args) const override;
  RowwiseLoss(std::string class_name, std::string name, const ops::RowLossParams& params)
      : class_name_(std::move(class_name)), name_(std::move(name)), params_(params) {}

 private:
  std::string class_name_, name_;
  ops::RowLossParams params_;
};

class CosineSimilarity : public RowwiseLoss {
 public:
  CosineSimilarity()
      : RowwiseLoss("CosineSimilarity", "cosine_similarity", {.kind = ops::RowLoss::cosine_similarity}) {}
};
class CategoricalHinge : public RowwiseLoss {
 public:
  CategoricalHinge()
      : RowwiseLoss("CategoricalHinge", "categorical_hinge", {.kind = ops::RowLoss::categorical_hinge}) {}
};

struct CategoricalFocalCrossentropyOptions {
  double alpha = 0.25, gamma = 2.0;
  bool from_logits = false;
  double label_smoothing = 0.0;
};
class CategoricalFocalCrossentropy : public RowwiseLoss {
 public:
  explicit CategoricalFocalCrossentropy(const CategoricalFocalCrossentropyOptions& o = {})
      : RowwiseLoss("CategoricalFocalCrossentropy", "categorical_focal_crossentropy",
                    {.kind = ops::RowLoss::categorical_focal_crossentropy,
                     .from_logits = o.from_logits,
                     .label_smoothing = o.label_smoothing,
                     .alpha = o.alpha,
                     .gamma = o.gamma}) {}
};

// keras.losses.get: a class or function name, or one of Keras's aliases ("SparseCategoricalCrossentropy",
// "categorical_crossentropy", "mse"), with Keras's defaults; Error naming the known ones.
std::unique_ptr<Loss> get(const std::string& name);
// The function names get() takes, one per class.
std::vector<std::string> names();

// What compile takes for one output's loss: a name for get(), a loss made with options, or nothing (Keras's None:
// the output has no loss).
class LossArg {
 public:
  LossArg() = default;
  LossArg(const char* name) : name_(name) {}
  LossArg(std::string name) : name_(std::move(name)) {}
  LossArg(const Loss& loss) : loss_(loss.clone()) {}
  bool empty() const { return !loss_ && name_.empty(); }
  // get() of the name, or a copy of the loss; null when empty.
  std::unique_ptr<Loss> make() const { return loss_ ? loss_->clone() : name_.empty() ? nullptr : get(name_); }

 private:
  std::string name_;
  std::shared_ptr<const Loss> loss_;
};

}  // namespace systolic::losses
