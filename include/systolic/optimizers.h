// Optimizers, with Keras's defaults and update formulas. They update a model's flat parameter buffer (all
// trainable weights in one allocation) in one op per step; their slots (m, v, ...) are flat buffers too.
#pragma once

#include <systolic/schedules.h>
#include <systolic/tensor.h>

#include <memory>
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

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual std::string name() const = 0;
  virtual std::unique_ptr<Optimizer> clone() const = 0;
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
  // The slot buffers, named as Keras names them ("m", "v", "momentum", ...).
  const std::vector<std::pair<std::string, Tensor>>& slots() const { return slots_; }
  // The slot buffer named `name` (after build), to restore saved optimizer state.
  Tensor& slot(const std::string& name);

 protected:
  explicit Optimizer(double learning_rate) : learning_rate_(learning_rate), loaded_rate_(learning_rate) {}
  virtual std::vector<std::string> slot_names() const = 0;
  // params -= f(grads), reading the rate `lr` and the step count `iterations` on the device.
  virtual void update(Tensor& params, const Tensor& grads, const Tensor& lr, const Tensor& iterations) = 0;
  Tensor& slot(std::size_t i) { return slots_[i].second; }

 private:
  double learning_rate_;
  Schedule schedule_;
  StepCounter iterations_;
  DeviceScalar loaded_rate_;
  std::vector<std::pair<std::string, Tensor>> slots_;
};

class Adam : public Optimizer {
 public:
  // Keras defaults. The seed's tf.train.AdamOptimizer is the same with epsilon 1e-8.
  explicit Adam(double learning_rate = 0.001, double beta_1 = 0.9, double beta_2 = 0.999,
                double epsilon = 1e-7)
      : Optimizer(learning_rate), beta_1_(beta_1), beta_2_(beta_2), epsilon_(epsilon) {}
  std::string name() const override { return "Adam"; }
  std::unique_ptr<Optimizer> clone() const override { return std::make_unique<Adam>(*this); }
  double beta_1() const { return beta_1_; }
  double beta_2() const { return beta_2_; }
  double epsilon() const { return epsilon_; }

 protected:
  std::vector<std::string> slot_names() const override { return {"m", "v"}; }
  void update(Tensor& params, const Tensor& grads, const Tensor& lr, const Tensor& iterations) override;

 private:
  double beta_1_, beta_2_, epsilon_;
};

class SGD : public Optimizer {
 public:
  explicit SGD(double learning_rate = 0.01, double momentum = 0.0, bool nesterov = false)
      : Optimizer(learning_rate), momentum_(momentum), nesterov_(nesterov) {}
  std::string name() const override { return "SGD"; }
  std::unique_ptr<Optimizer> clone() const override { return std::make_unique<SGD>(*this); }
  double momentum() const { return momentum_; }
  bool nesterov() const { return nesterov_; }

 protected:
  std::vector<std::string> slot_names() const override {
    return momentum_ > 0 ? std::vector<std::string>{"momentum"} : std::vector<std::string>{};
  }
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
  double rho() const { return rho_; }
  double momentum() const { return momentum_; }
  double epsilon() const { return epsilon_; }

 protected:
  std::vector<std::string> slot_names() const override {
    return momentum_ > 0 ? std::vector<std::string>{"rms", "momentum"} : std::vector<std::string>{"rms"};
  }
  void update(Tensor& params, const Tensor& grads, const Tensor& lr, const Tensor& iterations) override;

 private:
  double rho_, momentum_, epsilon_;
};

// "adam", "sgd", "rmsprop" with Keras's defaults.
std::unique_ptr<Optimizer> get(const std::string& name);

}  // namespace systolic::optimizers
