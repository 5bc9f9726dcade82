// GaussianNoise and GaussianDropout (Keras 3, keras/src/layers/regularization): noise while training, the identity
// at inference. GaussianNoise adds N(0, stddev^2); GaussianDropout multiplies by N(1, rate/(1-rate)). The noise
// comes from Philox at (the layer's seed mixed with the training step, element index), so backward recomputes it
// (ops::gaussian_noise_backward) instead of storing it, and a captured CUDA graph draws fresh noise every replay.
#include <systolic/layers.h>

#include <cmath>

#include "core/philox.h"
#include "layers/config.h"

namespace systolic::layers {

namespace {
class GaussianNoiseLayer final : public Layer {
 public:
  bool output_masked(bool input_masked) const override { return input_masked; }  // Keras passes it on
  // multiplicative: GaussianDropout(rate), `amount` is the rate; else GaussianNoise(stddev).
  GaussianNoiseLayer(const char* class_name, double amount, bool multiplicative,
                     std::optional<std::uint64_t> seed, const std::string& name)
      : Layer(class_name, name),
        amount_(amount),
        multiplicative_(multiplicative),
        seed_(seed ? *seed : global_generator().split()),
        given_seed_(seed) {
    if (multiplicative)
      SYSTOLIC_CHECK(amount >= 0 && amount < 1, "layer '{}': rate must be in [0, 1), got {}", this->name(),
                     amount);
    else
      SYSTOLIC_CHECK(amount >= 0 && amount <= 1, "layer '{}': stddev must be in [0, 1], got {}", this->name(),
                     amount);
    noise_ = {.stddev = multiplicative ? std::sqrt(amount / (1.0 - amount)) : amount,
              .multiplicative = multiplicative};
  }

  Shape compute_output_shape(const std::vector<Shape>& in) const override { return in[0]; }

  void get_config(json& c) const override {
    Layer::get_config(c);
    c[multiplicative_ ? "rate" : "stddev"] = amount_;
    c["seed"] = given_seed_ ? json(*given_seed_) : json(nullptr);
  }

 protected:
  void forward(LayerCall& c) override {
    if (!c.training || amount_ == 0) {
      c.output = c.inputs[0];  // identity: a view, no copy
      return;
    }
    ops::gaussian_noise_forward(c.inputs[0], c.output, noise_, seed_for(c), c.training->counter);
  }
  void backward(LayerCall& c) override {
    if (!c.dinputs[0].defined()) return;
    if (!c.training || amount_ == 0)
      ops::copy(c.doutput, c.dinputs[0]);
    else
      ops::gaussian_noise_backward(c.doutput, c.dinputs[0], noise_, seed_for(c), c.training->counter);
  }

 private:
  // Each replica draws its own noise (as Dropout's masks).
  std::uint64_t seed_for(const LayerCall& c) const {
    return philox::replica_seed(seed_, c.training ? c.training->replica : 0);
  }
  double amount_;
  bool multiplicative_;
  std::uint64_t seed_;
  std::optional<std::uint64_t> given_seed_;
  ops::NoiseParams noise_;
};

std::shared_ptr<Layer> noise_from_config(ConfigReader& r, const char* key, bool multiplicative) {
  if (!r.has(key)) r.fail_option(key, "missing");
  double amount = r.get_double(key, 0);
  std::optional<std::uint64_t> seed;
  if (auto s = r.get_optional_int("seed")) seed = static_cast<std::uint64_t>(*s);
  return std::make_shared<GaussianNoiseLayer>(r.class_name().c_str(), amount, multiplicative, seed, r.name());
}
}  // namespace

std::shared_ptr<Layer> gaussian_noise_from_config(ConfigReader& r) {
  return noise_from_config(r, "stddev", false);
}
std::shared_ptr<Layer> gaussian_dropout_from_config(ConfigReader& r) {
  return noise_from_config(r, "rate", true);
}

LayerRef GaussianNoise(double stddev, const NoiseOptions& options) {
  return LayerRef(
      std::make_shared<GaussianNoiseLayer>("GaussianNoise", stddev, false, options.seed, options.name));
}
LayerRef GaussianDropout(double rate, const NoiseOptions& options) {
  return LayerRef(
      std::make_shared<GaussianNoiseLayer>("GaussianDropout", rate, true, options.seed, options.name));
}

}  // namespace systolic::layers
