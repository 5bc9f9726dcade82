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
  // The slots this optimizer keeps, in Keras's order, with their names in Keras's files.
  virtual std::vector<Slot> slot_specs() const = 0;
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
  // Keras's optimizer.iterations: the updates applied so far (saved in Keras files with the slots).
  std::int64_t iterations() const { return iterations_.value(); }
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
  // The loaded rate as a float64 [1] tensor on `device` (made there on first use).
  const Tensor& learning_rate_on(Device device) { return loaded_rate_.on(device); }

  // Keras's weight_decay (every optimizer takes one; None by default, AdamW's 0.004): before each update,
  // w = w - w * weight_decay * lr on every trainable weight (ops::decay_weights). nullopt is Keras's None.
  std::optional<double> weight_decay() const { return weight_decay_; }
  void set_weight_decay(std::optional<double> decay);

  // Allocates the slots for a flat parameter buffer (idempotent for the same size).
  void build(const Tensor& params);
  // One update step: loads the rate, params -= f(grads), iterations += 1.
  void apply(Tensor& params, const Tensor& grads);
  // The update alone, reading the loaded rate and the step count from their copies on the parameters' device;
  // the caller loads the rate before and advances the counter once the step is over (a model's train function,
  // which may record the step as a CUDA graph and replay it).
  void apply_update(Tensor& params, const Tensor& grads);
  // Moves the slots to `device` (the model moves its optimizer with its weights).
  void to(Device device);
  // The slot buffers (after build), in slot_specs()'s order, by their names ("m", "v", "momentum", ...).
  const std::vector<std::pair<std::string, Tensor>>& slots() const { return slots_; }
  // The slot buffer named `name` (after build), to restore saved optimizer state.
  Tensor& slot(const std::string& name);

 protected:
  explicit Optimizer(double learning_rate) : learning_rate_(learning_rate), loaded_rate_(learning_rate) {}
  // params -= f(grads), reading the rate `lr` and the step count `iterations` on the device.
  virtual void update(Tensor& params, const Tensor& grads, const Tensor& lr, const Tensor& iterations) = 0;
  Tensor& slot(std::size_t i) { return slots_[i].second; }

 private:
  double learning_rate_;
  std::optional<double> weight_decay_;
  Schedule schedule_;
  StepCounter iterations_;
  DeviceScalar loaded_rate_;
  std::vector<std::pair<std::string, Tensor>> slots_;
};

// Keras's optimizers (src/optimizers/<name>.cc), with Keras's defaults.
class Adam : public Optimizer {
 public:
  // The seed's tf.train.AdamOptimizer is the same with epsilon 1e-8.
  explicit Adam(double learning_rate = 0.001, double beta_1 = 0.9, double beta_2 = 0.999,
                double epsilon = 1e-7)
      : Optimizer(learning_rate), beta_1_(beta_1), beta_2_(beta_2), epsilon_(epsilon) {}
  std::string name() const override { return "Adam"; }
  std::unique_ptr<Optimizer> clone() const override { return std::make_unique<Adam>(*this); }
  nlohmann::ordered_json get_config() const override;
  std::vector<Slot> slot_specs() const override;
  double beta_1() const { return beta_1_; }
  double beta_2() const { return beta_2_; }
  double epsilon() const { return epsilon_; }

 protected:
  void update(Tensor& params, const Tensor& grads, const Tensor& lr, const Tensor& iterations) override;

 private:
  double beta_1_, beta_2_, epsilon_;
};

// AdamW: Adam with a weight decay of 0.004 unless told otherwise (Keras's keras.optimizers.AdamW).
class AdamW : public Adam {
 public:
  explicit AdamW(double learning_rate = 0.001, double weight_decay = 0.004, double beta_1 = 0.9,
                 double beta_2 = 0.999, double epsilon = 1e-7)
      : Adam(learning_rate, beta_1, beta_2, epsilon) {
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

// keras.optimizers.get: a class name or one of the names Keras takes for it, in any case ("adam", "SGD",
// "rmsprop"), with Keras's defaults; Error naming the known ones.
std::unique_ptr<Optimizer> get(const std::string& name);
// The names get() takes, one per class: "adam", "sgd", "rmsprop".
std::vector<std::string> names();

}  // namespace systolic::optimizers
