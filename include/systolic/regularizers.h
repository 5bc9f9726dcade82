// Keras's regularizers (keras.regularizers) and constraints (keras.constraints) as values a layer attaches to
// its weights (Weight::regularizer, Weight::constraint) and to its outputs (Layer::activity_regularizer).
//
// A weight regularizer's penalty is added to the training loss and its gradient to the weight's gradient; an
// activity regularizer's penalty of a layer's output, divided by the batch size, is added to the loss and its
// gradient to the output's gradient (Keras 3: Layer.__call__ records it, Trainer.compute_loss adds
// sum(model.losses) to the compiled loss, in fit and in evaluate). A constraint projects its weight after every
// optimizer update (Keras 3: BaseOptimizer.apply). Model::compile registers them as the model's loss terms and
// post-update hooks (src/model/loss_terms.cc). The math runs on the weights' device through ops
// (ops::regularize, ops::orthogonal_regularize, ops::constrain); formulas in include/systolic/ops.h.
//
// Regularizer and Constraint are values: a shared, immutable object of one of Keras's classes
// (src/regularizers/), or none. The classes are listed once, in src/regularizers/registry.cc.
#pragma once

#include <systolic/tensor.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace systolic {

namespace regularizers {
// Keras's Regularizer base class: a penalty of a tensor.
class RegularizerBase {
 public:
  virtual ~RegularizerBase() = default;
  virtual std::string class_name() const = 0;  // Keras's, e.g. "L2"
  // Keras 3's get_config(), key for key.
  virtual nlohmann::ordered_json get_config() const = 0;
  // Adds total_scale * penalty(x) to total (float64 [1]) and grad_scale * d penalty / dx to dx (either may be
  // undefined), on x's device.
  virtual void apply(const Tensor& x, Tensor& total, Tensor& dx, double total_scale,
                     double grad_scale) const = 0;
};
}  // namespace regularizers

namespace constraints {
// Keras's Constraint base class: a projection of a weight.
class ConstraintBase {
 public:
  virtual ~ConstraintBase() = default;
  virtual std::string class_name() const = 0;  // Keras's, e.g. "MaxNorm"
  virtual nlohmann::ordered_json get_config() const = 0;
  // w = constraint(w), in place on w's device.
  virtual void apply(Tensor& w) const = 0;
};
}  // namespace constraints

// A regularizer, or none (false). Copies share the object; two are equal when their class and config are.
class Regularizer {
 public:
  Regularizer() = default;
  explicit Regularizer(std::shared_ptr<const regularizers::RegularizerBase> object)
      : object_(std::move(object)) {}
  explicit operator bool() const { return object_ != nullptr; }
  const regularizers::RegularizerBase* get() const { return object_.get(); }
  const regularizers::RegularizerBase* operator->() const { return object_.get(); }
  bool operator==(const Regularizer& other) const;

 private:
  std::shared_ptr<const regularizers::RegularizerBase> object_;
};

// A constraint, or none (false); a value as Regularizer is.
class Constraint {
 public:
  Constraint() = default;
  explicit Constraint(std::shared_ptr<const constraints::ConstraintBase> object)
      : object_(std::move(object)) {}
  explicit operator bool() const { return object_ != nullptr; }
  const constraints::ConstraintBase* get() const { return object_.get(); }
  const constraints::ConstraintBase* operator->() const { return object_.get(); }
  bool operator==(const Constraint& other) const;

 private:
  std::shared_ptr<const constraints::ConstraintBase> object_;
};

// What Keras passes a layer for one of its weights: `<name>_regularizer` and `<name>_constraint`
// (kernel_regularizer, bias_constraint, gamma_regularizer, depthwise_constraint, ...).
struct WeightOptions {
  Regularizer regularizer;
  Constraint constraint;
};

namespace regularizers {
// Keras's classes and defaults.
Regularizer L1(double l1 = 0.01);
Regularizer L2(double l2 = 0.01);
Regularizer L1L2(double l1 = 0.0, double l2 = 0.0);
Regularizer OrthogonalRegularizer(double factor = 0.01, const std::string& mode = "rows");

// Adds total_scale * penalty(x) to total and grad_scale * d penalty / dx to dx (none: nothing).
void apply(const Regularizer& r, const Tensor& x, Tensor& total, Tensor& dx, double total_scale,
           double grad_scale);
// penalty(x), computed on x's device and read back (tests; a layer's losses).
double penalty(const Regularizer& r, const Tensor& x);

// keras.regularizers.deserialize / get: null (none), a name ("l2", "L1L2", "orthogonal_regularizer") or a
// serialized object ({"class_name", "config"}, with or without Keras 3's "module" and "registered_name"), read
// strictly; Error naming the class or argument that is not supported.
Regularizer deserialize(const nlohmann::ordered_json& value);
// keras.regularizers.serialize, as Keras 3 writes it (null for none).
nlohmann::ordered_json serialize(const Regularizer& r);
// The class names the registry knows.
std::vector<std::string> names();
}  // namespace regularizers

namespace constraints {
Constraint MaxNorm(double max_value = 2.0, std::vector<int> axis = {0});
Constraint NonNeg();
Constraint UnitNorm(std::vector<int> axis = {0});
Constraint MinMaxNorm(double min_value = 0.0, double max_value = 1.0, double rate = 1.0,
                      std::vector<int> axis = {0});
// w = constraint(w), in place on w's device (none: nothing).
void apply(const Constraint& c, Tensor& w);

// keras.constraints.deserialize / get and serialize, as for regularizers.
Constraint deserialize(const nlohmann::ordered_json& value);
nlohmann::ordered_json serialize(const Constraint& c);
std::vector<std::string> names();
}  // namespace constraints

}  // namespace systolic
