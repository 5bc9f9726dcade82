// Learning-rate schedules, as keras.optimizers.schedules: the rate of an update is schedule(step), step being the
// optimizer's iterations before that update (Keras evaluates optimizer.learning_rate at the start of each apply).
// Formulas and config keys are Keras 3.15's (keras/src/optimizers/schedules/learning_rate_schedule.py); an
// optimizer takes one with set_learning_rate_schedule, and Keras files carry it as the optimizer's
// "learning_rate" ({"module": "keras.optimizers.schedules", "class_name": ..., "config": {...}}).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace systolic::optimizers {

class LearningRateSchedule {
 public:
  virtual ~LearningRateSchedule() = default;
  virtual std::string class_name() const = 0;  // Keras's class, e.g. "CosineDecay"
  virtual double operator()(std::int64_t step) const = 0;
  // Keras's get_config(), key for key.
  virtual nlohmann::ordered_json get_config() const = 0;
};
using Schedule = std::shared_ptr<const LearningRateSchedule>;

namespace schedules {

// initial * decay_rate ^ (step / decay_steps), the exponent floored when staircase.
Schedule ExponentialDecay(double initial_learning_rate, double decay_steps, double decay_rate,
                          bool staircase = false);
// values[0] while step <= boundaries[0], values[i] while boundaries[i-1] < step <= boundaries[i], values.back()
// after the last boundary (values has one more entry than boundaries).
Schedule PiecewiseConstantDecay(std::vector<double> boundaries, std::vector<double> values);
// (initial - end) * (1 - step/decay_steps)^power + end, step clipped to decay_steps, or with cycle the decay
// steps stretched to the next multiple of decay_steps (Keras's ceil, 1 at step 0).
Schedule PolynomialDecay(double initial_learning_rate, double decay_steps, double end_learning_rate = 0.0001,
                         double power = 1.0, bool cycle = false);
// initial / (1 + decay_rate * step / decay_steps), the quotient floored when staircase.
Schedule InverseTimeDecay(double initial_learning_rate, double decay_steps, double decay_rate,
                          bool staircase = false);
// Without warmup_target: initial * ((1 - alpha) * 0.5 * (1 + cos(pi * min(step, decay_steps) / decay_steps)) +
// alpha). With it: a linear ramp from initial to warmup_target over warmup_steps, then the cosine from
// warmup_target over decay_steps (step clipped to warmup_steps + decay_steps).
Schedule CosineDecay(double initial_learning_rate, double decay_steps, double alpha = 0.0,
                     std::optional<double> warmup_target = std::nullopt, double warmup_steps = 0);
// SGDR: cosine periods of first_decay_steps * t_mul^i, the i-th scaled by m_mul^i.
Schedule CosineDecayRestarts(double initial_learning_rate, double first_decay_steps, double t_mul = 2.0,
                             double m_mul = 1.0, double alpha = 0.0);

// A schedule from Keras's serialized form ({"class_name", "config"} with or without "module" and
// "registered_name"); Error naming the class or the option that is wrong. `source` names the file in errors.
Schedule from_config(const nlohmann::json& serialized, const std::string& source);
// Keras 3's serialized form.
nlohmann::ordered_json serialize(const LearningRateSchedule& schedule);

}  // namespace schedules
}  // namespace systolic::optimizers
