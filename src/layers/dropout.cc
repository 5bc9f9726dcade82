// Dropout (Keras): inverted dropout while training (survivors scaled by 1/(1-rate)), identity at inference.
// The mask comes from Philox at (seed of this call, element index), so backward regenerates it.
#include <systolic/layers.h>

#include "layers/config.h"

namespace systolic::layers {

namespace {
class DropoutLayer final : public Layer {
 public:
  DropoutLayer(double rate, const DropoutOptions& o)
      : Layer("Dropout", o.name),
        rate_(rate),
        seed_(o.seed ? *o.seed : global_generator().split()),
        given_seed_(o.seed) {
    SYSTOLIC_CHECK(rate >= 0 && rate < 1, "layer '{}': rate must be in [0, 1), got {}", name(), rate);
  }

  Shape compute_output_shape(const std::vector<Shape>& in) const override { return in[0]; }

  void get_config(json& c) const override {
    Layer::get_config(c);
    c["rate"] = rate_;
    c["noise_shape"] = nullptr;
    c["seed"] = given_seed_ ? json(*given_seed_) : json(nullptr);
  }

 protected:
  void forward(LayerCall& c) override {
    if (!c.training || rate_ == 0) {
      c.output = c.inputs[0];  // identity: a view, no copy
      return;
    }
    // A fresh mask per training step: the op mixes the layer's seed with the model's step counter, which it reads
    // on the device (so a captured CUDA graph draws a new mask on every replay).
    ops::dropout_forward(c.inputs[0], c.output, rate_, seed_for(c), c.training->counter);
  }
  void backward(LayerCall& c) override {
    if (!c.dinputs[0].defined()) return;
    if (!c.training || rate_ == 0)
      ops::copy(c.doutput, c.dinputs[0]);
    else
      ops::dropout_backward(c.doutput, c.dinputs[0], rate_, seed_for(c), c.training->counter);
  }

 private:
  // Replica 0 (and a model without a strategy) uses the layer's seed; replica r a seed of its own, as each replica of
  // a tf.distribute strategy draws its own random numbers.
  std::uint64_t seed_for(const LayerCall& c) const {
    return seed_ + 0xD1B54A32D192ED03ull * static_cast<std::uint64_t>(c.training ? c.training->replica : 0);
  }
  double rate_;
  std::uint64_t seed_;
  std::optional<std::uint64_t> given_seed_;
};
}  // namespace

std::shared_ptr<Layer> dropout_from_config(ConfigReader& r) {
  if (!r.has("rate")) r.fail_option("rate", "missing");
  double rate = r.get_double("rate", 0);
  r.require_null("noise_shape");
  DropoutOptions o{.name = r.name()};
  if (auto seed = r.get_optional_int("seed")) o.seed = static_cast<std::uint64_t>(*seed);
  return std::make_shared<DropoutLayer>(rate, o);
}

LayerRef Dropout(double rate, const DropoutOptions& options) {
  return LayerRef(std::make_shared<DropoutLayer>(rate, options));
}

}  // namespace systolic::layers
