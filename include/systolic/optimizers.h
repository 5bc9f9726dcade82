// Optimizers, with Keras's defaults and update formulas. They update a model's flat parameter buffer (all
// trainable weights in one allocation) in one op per step; their slots (m, v, ...) are flat buffers too. Each
// class is listed once, in src/optimizers/registry.cc, which reads and writes their Keras configs.
#pragma once

#include <systolic/schedules.h>
#include <systolic/tensor.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace systolic::ops {
struct UpdateParams;  // ops::optimizer_update's rule and constants (src/ops/optimizer_math.h)
}

namespace systolic::optimizers {

// A number the ops of a training step read on the device (the step count, the learning rate): kept on the host,
// with a float64 [1] copy on the device the steps run on, made there on first use (before any recording: a step
// recorded as a CUDA graph reads it at its address). set() writes both at once, the device copy in place (and
// only when the value changed); it is never called while a step is being recorded, so a replayed step reads the
// value of the moment. A copy (a cloned optimizer's) takes the value, never the device tensor: two owners do not
// share one.
class DeviceScalar {
 public:
  explicit DeviceScalar(double value = 0) : value_(value) {}
  DeviceScalar(const DeviceScalar& other) : value_(other.value_) {}
  DeviceScalar& operator=(const DeviceScalar& other);

  double value() const { return value_; }
  void set(double value);
  // The value as a float64 [1] tensor on `device`, made there on first use.
  const Tensor& on(Device device);
  // Drops the device copy (the model moves to another device; on() makes it there).
  void release() { device_ = Tensor(); }

 private:
  double value_;
  Tensor device_;
};

// DeviceScalar's kind for several numbers: the values of an optimizer's step (ops::optimizer_update's), kept on the
// host with a float64 [n] copy on the device, written in place when they change (never while a step is recorded).
class DeviceValues {
 public:
  DeviceValues() = default;
  DeviceValues(const DeviceValues& other) : values_(other.values_) {}
  DeviceValues& operator=(const DeviceValues& other);

  const std::vector<double>& values() const { return values_; }
  void set(std::vector<double> values);
  // The values as a float64 [n] tensor on `device`, made there on first use; Error while there are none.
  const Tensor& on(Device device);
  void release() { device_ = Tensor(); }

 private:
  std::vector<double> values_;
  Tensor device_;
};

// The training step count (Keras's optimizer.iterations) and its one owner: the count on the host and its device
// copy (a DeviceScalar), which the ops of a step read there (Adam's t, dropout's masks). set() and advance() change
// both at once; nothing else writes either, so they cannot drift apart.
class StepCounter {
 public:
  std::int64_t value() const { return count_; }
  void set(std::int64_t count) {
    count_ = count;
    device_.set(double(count));
  }
  // count += 1, on the host and on the device. Called once a step is over, never while a step is being
  // recorded as a CUDA graph (the host count would not move on replays): the caller advances after each
  // replay.
  void advance() { set(count_ + 1); }
  const Tensor& on(Device device) { return device_.on(device); }
  void release() { device_.release(); }

 private:
  std::int64_t count_ = 0;
  DeviceScalar device_;
};

// One of an optimizer's slots (a flat buffer as large as the parameters) and its names in Keras's files.
struct Slot {
  std::string name;  // systolic's, and tf.keras <= 2.10's (optimizer_weights: "Adam/<layer>/<weight>/m:0")
  std::string tf_keras;  // tf.keras 2.11+'s ("Adam/m/<weight>:0")
  std::string keras3;    // Keras 3's ("adam/<weight>_momentum" in a legacy .h5)
  // Which of the calls of Keras 3's build (add_optimizer_variables) makes it: Keras 3's optimizer/vars (.keras,
  // .weights.h5) hold the slots call by call, each call's slots interleaved per variable (Adam makes momentum and
  // velocity in one call: m0 v0 m1 v1 ...; RMSprop velocity, then momentum: v0 v1 ... m0 m1 ...).
  int keras3_call = 0;
  double initial = 0.0;  // the slot's value before the first update (Adagrad's and Ftrl's accumulators: 0.1)
};

// A trainable variable of the flat parameter buffer, in its order: its shape and Keras's path ("dense/kernel"). Slots
// are shaped by it (Adafactor's factors); Muon chooses its rule by it.
struct TrainableVariable {
  Shape shape;
  std::string path;
  bool operator==(const TrainableVariable&) const = default;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Keras's class name ("Adam"); the registry (src/optimizers/registry.cc) knows its other names.
  virtual std::string name() const = 0;
  virtual std::unique_ptr<Optimizer> clone() const = 0;
  // Keras's get_config() of the class's own arguments, in Keras's order ({"beta_1", "beta_2", "epsilon",
  // "amsgrad"}); the registry writes the base class's (name, learning rate, ...) around them.
  virtual nlohmann::ordered_json get_config() const = 0;
  // The slots this optimizer's class keeps, in Keras's order, with their names in Keras's files.
  virtual std::vector<Slot> slot_specs() const = 0;
  // The shape of slot `slot` for `variable` (the variable's, by default; Adafactor's factors are smaller), or
  // nullopt where the slot has no values for it (Keras makes no variable). A slot's flat buffer holds, variable by
  // variable in order, the values of those it has.
  virtual std::optional<Shape> slot_shape(const Slot& slot, const TrainableVariable& variable) const;
  // Every slot the optimizer keeps: its class's, then with use_ema the weights' moving average ("average"), then with
  // gradient_accumulation_steps the gradients' sum ("gradient_accumulator"): Keras 3's build makes those two first,
  // in that order, before the class's.
  std::vector<Slot> variable_slots() const;
  // The rate of the next update: the constant, or the schedule at iterations() (Keras's
  // optimizer.learning_rate).
  double learning_rate() const { return schedule_ ? (*schedule_)(iterations()) : learning_rate_; }
  // A constant rate (ReduceLROnPlateau, LearningRateScheduler); Error when the optimizer has a schedule, as
  // Keras refuses to assign one.
  void set_learning_rate(double lr);
  // keras.optimizers.schedules: the rate of each update is schedule(iterations); null goes back to the
  // constant rate the optimizer had.
  void set_learning_rate_schedule(Schedule schedule) { schedule_ = std::move(schedule); }
  const Schedule& learning_rate_schedule() const { return schedule_; }
  // The steps applied so far (Keras's optimizer._iterations, saved in Keras files with the slots): the updates, but
  // with gradient_accumulation_steps, which counts each step that only accumulates its gradients too.
  std::int64_t iterations() const { return iterations_.value(); }
  // The updates applied so far (Keras's optimizer.iterations property): iterations() // gradient_accumulation_steps,
  // or iterations(). The bias corrections, Nadam's schedule and the moving average's first step read it; a
  // learning-rate schedule reads iterations(), as Keras's.
  std::int64_t updates() const {
    return accumulation_steps_ ? iterations() / *accumulation_steps_ : iterations();
  }
  void set_iterations(std::int64_t n) { iterations_.set(n); }
  // The counter itself: a model's training step reads its device copy and advances it once per step.
  StepCounter& iterations_counter() { return iterations_; }

  // The rate of the next update where the updates run: the update ops read it on the parameters' device (a
  // DeviceScalar), so a step recorded as a CUDA graph replays with the rate of the moment, not the one it was
  // recorded with. load_learning_rate() writes learning_rate() there (a schedule's rate at the step about to
  // run, or the constant a callback set); load_learning_rate(lr) writes `lr` (under replicas, every replica
  // loads the model's rate). A model's train function loads it before every step, outside what a graph records;
  // Error when the rate is not a finite number.
  void load_learning_rate() { load_learning_rate(learning_rate()); }
  void load_learning_rate(double lr);
  // Makes on `device` every value the update reads there (the loaded rate, the step values, the moving average's,
  // the count of updates), before a step is recorded: a recording reads them there and must not bake their first
  // values in.
  void make_device_values(Device device);
  // The loaded rate as a float64 [1] tensor on `device` (made there on first use).
  const Tensor& learning_rate_on(Device device) { return loaded_rate_.on(device); }
  // The optimizers whose update is a rule of ops::optimizer_update: the values of the step (the rate, bias
  // corrections) that load_learning_rate(lr) computed on the host from lr and updates() and wrote on the
  // device, made there on first use as the rate is (before a step is recorded). Undefined for the others.
  Tensor step_values_on(Device device);

  // Keras's weight_decay (every optimizer takes one; None by default, AdamW's 0.004): before each update,
  // w = w - w * weight_decay * lr on every trainable weight (ops::decay_weights). nullopt is Keras's None.
  std::optional<double> weight_decay() const { return weight_decay_; }
  void set_weight_decay(std::optional<double> decay);

  // Keras's gradient clipping, at most one of the three (as Keras requires; nullopt is Keras's None): clipnorm
  // scales each variable's gradient to an L2 norm of at most clipnorm, global_clipnorm all of them together to a
  // global norm of at most global_clipnorm, clipvalue clips each element to [-clipvalue, clipvalue]. Before the
  // weight decay and the update (ops::clip_gradients).
  std::optional<double> clipnorm() const { return clipnorm_; }
  std::optional<double> global_clipnorm() const { return global_clipnorm_; }
  std::optional<double> clipvalue() const { return clipvalue_; }
  void set_clipping(std::optional<double> clipnorm, std::optional<double> global_clipnorm,
                    std::optional<double> clipvalue);

  // Keras's loss_scale_factor (nullopt is Keras's None): the loss's gradient is computed scaled by it (scale_loss,
  // which the model applies to its loss gradient; the logged loss is not scaled) and the gradients are divided by it
  // before clipping and the update, as Keras's apply() does.
  std::optional<double> loss_scale_factor() const { return loss_scale_factor_; }
  void set_loss_scale_factor(std::optional<double> factor);
  // The gradient scale of a loss whose gradient is scaled by `grad_scale`: grad_scale * loss_scale_factor.
  double scale_loss(double grad_scale) const {
    return loss_scale_factor_ ? grad_scale * *loss_scale_factor_ : grad_scale;
  }

  // Keras's gradient_accumulation_steps (nullopt is Keras's None; else an integer >= 2): a step whose count
  // (iterations() + 1) is not a multiple of it only adds its gradients to the slot "gradient_accumulator"; the next
  // that is updates with the mean of the steps' gradients (its own and the sum), clipped, after the weight decay, and
  // zeroes the sum. The moving average (use_ema) follows every step, as Keras's.
  std::optional<std::int64_t> gradient_accumulation_steps() const { return accumulation_steps_; }
  void set_gradient_accumulation_steps(std::optional<std::int64_t> steps);
  // Whether the step about to run (after iterations() steps) only accumulates its gradients: a model records such a
  // step as a program of its own (a CUDA graph, an XLA program), apart from the updating one.
  bool accumulates_next_step() const {
    return accumulation_steps_ && (iterations() + 1) % *accumulation_steps_ != 0;
  }

  // Keras's use_ema (every optimizer takes it; off by default): after each update the slot "average" becomes
  // ema_momentum * average + (1 - ema_momentum) * weights (the weights themselves after the first update), and
  // every ema_overwrite_frequency updates (none: never) the weights take the average; at the end of a fit the
  // weights take it (finalize_variable_values, as Keras's fit does).
  bool use_ema() const { return use_ema_; }
  double ema_momentum() const { return ema_momentum_; }
  std::optional<std::int64_t> ema_overwrite_frequency() const { return ema_overwrite_frequency_; }
  void set_ema(bool use_ema, double momentum = 0.99, std::optional<std::int64_t> overwrite_frequency = {});
  // With use_ema, params (the trainable weights, flat) take the moving average; nothing without.
  void finalize_variable_values(Tensor& params);
  // The moving average's step values on `device` (made there on first use, before a step is recorded); undefined
  // without use_ema.
  Tensor ema_values_on(Device device);

  // Allocates the slots for a flat parameter buffer holding `variables` in order (empty: those it was built for
  // when their sizes add up to params', else one variable, params' flat shape); idempotent for the same variables.
  void build(const Tensor& params, const std::vector<TrainableVariable>& variables = {});
  // The variables the slots were built for (after build).
  const std::vector<TrainableVariable>& variables() const { return variables_; }
  // One update step: loads the rate, params -= f(grads), iterations += 1. `variables`: as build()'s (clipnorm clips
  // each variable, Lamb's trust ratio and Adafactor's step are per variable).
  void apply(Tensor& params, const Tensor& grads, const std::vector<TrainableVariable>& variables = {});
  // The update alone, reading the loaded rate and the step count from their copies on the parameters' device;
  // the caller loads the rate before and advances the counter once the step is over (a model's train function,
  // which may record the step as a CUDA graph and replay it). Clipping scales `grads` in place.
  void apply_update(Tensor& params, const Tensor& grads,
                    const std::vector<TrainableVariable>& variables = {});
  // Moves the slots to `device` (the model moves its optimizer with its weights).
  void to(Device device);
  // The slot buffers (after build), in slot_specs()'s order, by their names ("m", "v", "momentum", ...).
  const std::vector<std::pair<std::string, Tensor>>& slots() const { return slots_; }
  // The slot buffer named `name` (after build), to restore saved optimizer state.
  Tensor& slot(const std::string& name);
  // Slot `slot` (an index of slots()) of variable `variable` (of variables()), in its slot_shape; undefined where
  // the slot has no values for the variable.
  Tensor slot_view(std::size_t slot, std::size_t variable) const;
  // Keras 3's order of the slot variables (its optimizer.variables after iterations and the rate): the slots of
  // each of its build's add_optimizer_variables calls (Slot::keras3_call), each call's interleaved per variable,
  // those a variable has. Each item: (variable, slot), indices of variables() and slots().
  std::vector<std::pair<std::size_t, std::size_t>> keras3_slot_order() const;
  // Keras 3's variables of the optimizer besides iterations, the rate and the slots, as it saves them after the
  // slots (Nadam's u_product): their values after updates() updates.
  virtual std::vector<double> keras3_scalar_variables() const { return {}; }

 protected:
  explicit Optimizer(double learning_rate) : learning_rate_(learning_rate), loaded_rate_(learning_rate) {}
  // params -= f(grads), reading the rate `lr` and the step count `iterations` on the device.
  virtual void update(Tensor& params, const Tensor& grads, const Tensor& lr, const Tensor& iterations) = 0;
  // Keras's _apply_weight_decay before the update: w -= w weight_decay lr on every variable (Muon's differs by
  // variable).
  virtual void decay_weights(Tensor& params, const Tensor& lr);
  Tensor& slot(std::size_t i) { return slots_[i].second; }
  // The values a rule's step reads (ops::update::step_values for the rate `lr` after updates() updates); empty
  // for an optimizer with its own op.
  virtual std::vector<double> step_values(double /*lr*/) { return {}; }
  // params -= f(grads) by the rule of ops::optimizer_update, with the slots in slot_specs()'s order and the step
  // values that step_values() gave for this step; a rule of a trust ratio (Lamb's), variable by variable.
  void update_by_rule(const ops::UpdateParams& p, Tensor& params, const Tensor& grads);
  // Variable `i` (of variables()) of a flat buffer laid out as the parameters (the parameters, the gradients), in its
  // shape.
  Tensor variable_view(const Tensor& flat, std::size_t i) const;

 private:
  double learning_rate_;
  std::optional<double> weight_decay_;
  std::optional<double> clipnorm_, global_clipnorm_, clipvalue_;
  std::optional<double> loss_scale_factor_;
  bool use_ema_ = false;
  double ema_momentum_ = 0.99;
  std::optional<std::int64_t> ema_overwrite_frequency_;
  std::optional<std::int64_t> accumulation_steps_;
  DeviceScalar updates_;  // updates(), which the update ops read with gradient accumulation
  DeviceValues ema_values_;
  std::vector<double> ema_step_values() const;
  void update_average(Tensor& params, const Tensor& grads);  // use_ema's moving average, after a step
  Schedule schedule_;
  StepCounter iterations_;
  std::vector<TrainableVariable> variables_;
  std::vector<std::int64_t> variable_offsets_;
  // [slot][variable]: where the slot's values for the variable start in its buffer (-1: it has none), their shape.
  struct SlotPart {
    std::int64_t offset = -1;
    Shape shape;
  };
  std::vector<std::vector<SlotPart>> slot_parts_;
  DeviceScalar loaded_rate_;
  DeviceValues step_values_;
  std::vector<std::pair<std::string, Tensor>> slots_;
};

// Keras's optimizers (src/optimizers/<name>.cc), with Keras's defaults.
class Adam : public Optimizer {
 public:
  // The seed's tf.train.AdamOptimizer is the same with epsilon 1e-8.
  explicit Adam(double learning_rate = 0.001, double beta_1 = 0.9, double beta_2 = 0.999,
                double epsilon = 1e-7, bool amsgrad = false)
      : Optimizer(learning_rate), beta_1_(beta_1), beta_2_(beta_2), epsilon_(epsilon), amsgrad_(amsgrad) {}
  std::string name() const override { return "Adam"; }
  std::unique_ptr<Optimizer> clone() const override { return std::make_unique<Adam>(*this); }
  nlohmann::ordered_json get_config() const override;
  std::vector<Slot> slot_specs() const override;
  double beta_1() const { return beta_1_; }
  double beta_2() const { return beta_2_; }
  double epsilon() const { return epsilon_; }
  // AMSGrad: the update divides by the running maximum of v (a third slot, velocity_hat).
  bool amsgrad() const { return amsgrad_; }

 protected:
  void update(Tensor& params, const Tensor& grads, const Tensor& lr, const Tensor& iterations) override;
  std::vector<double> step_values(double lr) override;

 private:
  ops::UpdateParams rule() const;
  double beta_1_, beta_2_, epsilon_;
  bool amsgrad_;
};

// AdamW: Adam with a weight decay of 0.004 unless told otherwise (Keras's keras.optimizers.AdamW).
class AdamW : public Adam {
 public:
  explicit AdamW(double learning_rate = 0.001, double weight_decay = 0.004, double beta_1 = 0.9,
                 double beta_2 = 0.999, double epsilon = 1e-7, bool amsgrad = false)
      : Adam(learning_rate, beta_1, beta_2, epsilon, amsgrad) {
    set_weight_decay(weight_decay);
  }
  std::string name() const override { return "AdamW"; }
  std::unique_ptr<Optimizer> clone() const override { return std::make_unique<AdamW>(*this); }
};

class SGD : public Optimizer {
 public:
  explicit SGD(double learning_rate = 0.01, double momentum = 0.0, bool nesterov = false)
      : Optimizer(learning_rate), momentum_(momentum), nesterov_(nesterov) {}
  std::string name() const override { return "SGD"; }
  std::unique_ptr<Optimizer> clone() const override { return std::make_unique<SGD>(*this); }
  nlohmann::ordered_json get_config() const override;
  std::vector<Slot> slot_specs() const override;
  double momentum() const { return momentum_; }
  bool nesterov() const { return nesterov_; }

 protected:
  void update(Tensor& params, const Tensor& grads, const Tensor& lr, const Tensor& iterations) override;

 private:
  double momentum_;
  bool nesterov_;
};

class RMSprop : public Optimizer {
 public:
  explicit RMSprop(double learning_rate = 0.001, double rho = 0.9, double momentum = 0.0,
                   double epsilon = 1e-7)
      : Optimizer(learning_rate), rho_(rho), momentum_(momentum), epsilon_(epsilon) {}
  std::string name() const override { return "RMSprop"; }
  std::unique_ptr<Optimizer> clone() const override { return std::make_unique<RMSprop>(*this); }
  nlohmann::ordered_json get_config() const override;
  std::vector<Slot> slot_specs() const override;
  double rho() const { return rho_; }
  double momentum() const { return momentum_; }
  double epsilon() const { return epsilon_; }

 protected:
  void update(Tensor& params, const Tensor& grads, const Tensor& lr, const Tensor& iterations) override;

 private:
  double rho_, momentum_, epsilon_;
};

// An optimizer whose update is a rule of ops::optimizer_update (src/ops/optimizer_math.h has each formula): the
// class says its rule and constants, its slots and config (src/optimizers/<name>.cc).
class RuleOptimizer : public Optimizer {
 protected:
  using Optimizer::Optimizer;
  virtual ops::UpdateParams rule() const = 0;
  void update(Tensor& params, const Tensor& grads, const Tensor& lr, const Tensor& iterations) override;
  std::vector<double> step_values(double lr) override;
};

// The rule optimizers whose own arguments are Keras's beta_1, beta_2 and epsilon (Adamax, Nadam, Lamb): their
// config is those three.
class BetasOptimizer : public RuleOptimizer {
 public:
  nlohmann::ordered_json get_config() const override;

 protected:
  BetasOptimizer(double learning_rate, double beta_1, double beta_2, double epsilon)
      : RuleOptimizer(learning_rate), beta_1_(beta_1), beta_2_(beta_2), epsilon_(epsilon) {}
  double beta_1_, beta_2_, epsilon_;
};

// Adamax: Adam with the infinity norm (u = max(beta_2 u, |g|)).
class Adamax : public BetasOptimizer {
 public:
  explicit Adamax(double learning_rate = 0.001, double beta_1 = 0.9, double beta_2 = 0.999,
                  double epsilon = 1e-7)
      : BetasOptimizer(learning_rate, beta_1, beta_2, epsilon) {}
  std::string name() const override { return "Adamax"; }
  std::unique_ptr<Optimizer> clone() const override { return std::make_unique<Adamax>(*this); }
  std::vector<Slot> slot_specs() const override;

 protected:
  ops::UpdateParams rule() const override;
};

// Nadam: Adam with Nesterov momentum and Keras's momentum schedule u_t = beta_1 (1 - 0.5 * 0.96^t).
class Nadam : public BetasOptimizer {
 public:
  explicit Nadam(double learning_rate = 0.001, double beta_1 = 0.9, double beta_2 = 0.999,
                 double epsilon = 1e-7)
      : BetasOptimizer(learning_rate, beta_1, beta_2, epsilon) {}
  std::string name() const override { return "Nadam"; }
  std::unique_ptr<Optimizer> clone() const override { return std::make_unique<Nadam>(*this); }
  std::vector<Slot> slot_specs() const override;
  // u_product, u_1 * ... * u_updates() (Keras's _u_product, which it saves after the slots).
  std::vector<double> keras3_scalar_variables() const override { return {u_product(updates())}; }

 protected:
  ops::UpdateParams rule() const override;
  std::vector<double> step_values(double lr) override;

 private:
  // u_1 * ... * u_t, from the product computed last (training asks for t, t + 1, ...).
  double u_product(std::int64_t t) const;
  mutable std::int64_t product_t_ = 0;
  mutable double product_ = 1.0;
};

// Adagrad: accumulator += g^2; w -= lr g / sqrt(accumulator + epsilon).
class Adagrad : public RuleOptimizer {
 public:
  explicit Adagrad(double learning_rate = 0.001, double initial_accumulator_value = 0.1,
                   double epsilon = 1e-7)
      : RuleOptimizer(learning_rate), initial_(initial_accumulator_value), epsilon_(epsilon) {}
  std::string name() const override { return "Adagrad"; }
  std::unique_ptr<Optimizer> clone() const override { return std::make_unique<Adagrad>(*this); }
  nlohmann::ordered_json get_config() const override;
  std::vector<Slot> slot_specs() const override;

 protected:
  ops::UpdateParams rule() const override;

 private:
  double initial_, epsilon_;
};

// Adadelta: Keras's, with the learning rate scaling its step.
class Adadelta : public RuleOptimizer {
 public:
  explicit Adadelta(double learning_rate = 0.001, double rho = 0.95, double epsilon = 1e-7)
      : RuleOptimizer(learning_rate), rho_(rho), epsilon_(epsilon) {}
  std::string name() const override { return "Adadelta"; }
  std::unique_ptr<Optimizer> clone() const override { return std::make_unique<Adadelta>(*this); }
  nlohmann::ordered_json get_config() const override;
  std::vector<Slot> slot_specs() const override;

 protected:
  ops::UpdateParams rule() const override;

 private:
  double rho_, epsilon_;
};

// Lion: w -= lr sign(beta_1 m + (1 - beta_1) g); m = beta_2 m + (1 - beta_2) g.
class Lion : public RuleOptimizer {
 public:
  explicit Lion(double learning_rate = 0.001, double beta_1 = 0.9, double beta_2 = 0.99)
      : RuleOptimizer(learning_rate), beta_1_(beta_1), beta_2_(beta_2) {}
  std::string name() const override { return "Lion"; }
  std::unique_ptr<Optimizer> clone() const override { return std::make_unique<Lion>(*this); }
  nlohmann::ordered_json get_config() const override;
  std::vector<Slot> slot_specs() const override;

 protected:
  ops::UpdateParams rule() const override;

 private:
  double beta_1_, beta_2_;
};

// Lamb: Adam's moments, and each variable's step m_hat / (sqrt(v_hat) + epsilon) scaled by the trust ratio
// ||w|| / ||step|| (1 where either is 0).
class Lamb : public BetasOptimizer {
 public:
  explicit Lamb(double learning_rate = 0.001, double beta_1 = 0.9, double beta_2 = 0.999,
                double epsilon = 1e-7)
      : BetasOptimizer(learning_rate, beta_1, beta_2, epsilon) {}
  std::string name() const override { return "Lamb"; }
  std::unique_ptr<Optimizer> clone() const override { return std::make_unique<Lamb>(*this); }
  std::vector<Slot> slot_specs() const override;

 protected:
  ops::UpdateParams rule() const override;
};

// Ftrl (follow the regularized leader), with Keras's arguments; Error on those Keras refuses.
class Ftrl : public RuleOptimizer {
 public:
  explicit Ftrl(double learning_rate = 0.001, double learning_rate_power = -0.5,
                double initial_accumulator_value = 0.1, double l1_regularization_strength = 0.0,
                double l2_regularization_strength = 0.0, double l2_shrinkage_regularization_strength = 0.0,
                double beta = 0.0);
  std::string name() const override { return "Ftrl"; }
  std::unique_ptr<Optimizer> clone() const override { return std::make_unique<Ftrl>(*this); }
  nlohmann::ordered_json get_config() const override;
  std::vector<Slot> slot_specs() const override;

 protected:
  ops::UpdateParams rule() const override;

 private:
  double lr_power_, initial_, l1_, l2_, l2_shrinkage_, beta_;
};

// Adafactor (Keras 3): a second moment factored over the last two axes of each variable of rank >= 2 (slots r and c,
// shaped the variable without its last axis and without its second last; scalars, unused, for a variable of lower
// rank), the step scaled by the variable's RMS and clipped by the update's RMS (ops::adafactor_update). relative_step
// is accepted and written back; Keras's update is the same either way.
class Adafactor : public Optimizer {
 public:
  explicit Adafactor(double learning_rate = 0.001, double beta_2_decay = -0.8, double epsilon_1 = 1e-30,
                     double epsilon_2 = 1e-3, double clip_threshold = 1.0, bool relative_step = true);
  std::string name() const override { return "Adafactor"; }
  std::unique_ptr<Optimizer> clone() const override { return std::make_unique<Adafactor>(*this); }
  nlohmann::ordered_json get_config() const override;
  std::vector<Slot> slot_specs() const override;
  std::optional<Shape> slot_shape(const Slot& slot, const TrainableVariable& variable) const override;

 protected:
  void update(Tensor& params, const Tensor& grads, const Tensor& lr, const Tensor& iterations) override;
  std::vector<double> step_values(double lr) override;  // rho and beta (ops::adafactor_update's step)

 private:
  double beta_2_decay_, epsilon_1_, epsilon_2_, clip_threshold_;
  bool relative_step_;
};

// Muon's own arguments, with Keras's defaults.
struct MuonOptions {
  double adam_beta_1 = 0.9, adam_beta_2 = 0.999;
  std::optional<double> adam_weight_decay = 0.004;
  double epsilon = 1e-7;
  std::vector<std::string> exclude_layers;
  bool exclude_embeddings = true;
  double muon_a = 3.4445, muon_b = -4.7750, muon_c = 2.0315;
  double adam_lr_ratio = 1.0;
  double momentum = 0.95;
  int ns_steps = 5;
  bool nesterov = true;
  std::optional<double> rms_rate = 0.2;  // nullopt: Keras's None (the update not scaled)
};

// Muon (Keras 3): each matrix (a variable of rank 2, not an embedding's unless exclude_embeddings is false, nor one
// whose path a regular expression of exclude_layers finds) steps by the Newton-Schulz orthogonalisation of its
// momentum (ops::muon_update); every other variable by AdamW with adam_beta_1, adam_beta_2, epsilon, the rate times
// adam_lr_ratio and adam_weight_decay (the matrices decay by weight_decay). Slots: momentum for every variable,
// velocity for the AdamW ones.
class Muon : public Optimizer {
 public:
  using Options = MuonOptions;
  explicit Muon(double learning_rate = 0.001, Options options = {},
                std::optional<double> weight_decay = 0.004);
  std::string name() const override { return "Muon"; }
  std::unique_ptr<Optimizer> clone() const override { return std::make_unique<Muon>(*this); }
  nlohmann::ordered_json get_config() const override;
  std::vector<Slot> slot_specs() const override;
  std::optional<Shape> slot_shape(const Slot& slot, const TrainableVariable& variable) const override;
  const Options& options() const { return options_; }
  // Whether `variable` steps by AdamW (Keras's _should_use_adamw), not by the orthogonalised momentum.
  bool uses_adamw(const TrainableVariable& variable) const;

 protected:
  void update(Tensor& params, const Tensor& grads, const Tensor& lr, const Tensor& iterations) override;
  void decay_weights(Tensor& params, const Tensor& lr) override;
  std::vector<double> step_values(double lr) override;  // the AdamW variables' rate, lr adam_lr_ratio

 private:
  Options options_;
};

// keras.optimizers.get: a class name or one of the names Keras takes for it, in any case ("adam", "SGD",
// "rmsprop"), with Keras's defaults; Error naming the known ones.
std::unique_ptr<Optimizer> get(const std::string& name);
// The names get() takes, one per class: "adam", "adamw", "sgd", ...
std::vector<std::string> names();

}  // namespace systolic::optimizers
