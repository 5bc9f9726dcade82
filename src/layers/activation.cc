// Activation, ReLU and Softmax (Keras): the identity followed by the Layer base's fused activation, so a
// softmax output layer hands its logits to the loss like a Dense(..., activation="softmax") does.
#include <systolic/layers.h>

#include "layers/config.h"

namespace systolic::layers {

namespace {
class ActivationLayer final : public Layer {
 public:
  ActivationLayer(const char* class_name, const std::string& activation, const std::string& name)
      : Layer(class_name, name, activation_from_name(activation)) {}

  Shape compute_output_shape(const std::vector<Shape>& in) const override { return in[0]; }

  void get_config(json& c) const override {
    Layer::get_config(c);
    if (class_name() == "Activation") {
      c["activation"] = activation_name(activation_);
    } else if (class_name() == "ReLU") {
      c["max_value"] = nullptr;
      c["negative_slope"] = 0.0;
      c["threshold"] = 0.0;
    } else {
      c["axis"] = -1;
    }
  }

 protected:
  void forward(LayerCall& c) override { ops::copy(c.inputs[0], c.output); }
  void backward(LayerCall& c) override {
    if (c.dinputs[0].defined()) ops::copy(c.doutput, c.dinputs[0]);
  }
};
}  // namespace

std::shared_ptr<Layer> activation_from_config(ConfigReader& r) {
  if (!r.has("activation")) r.fail_option("activation", "missing");
  return std::make_shared<ActivationLayer>("Activation", r.get_activation("activation", "linear"), r.name());
}
std::shared_ptr<Layer> relu_from_config(ConfigReader& r) {
  r.require_null("max_value");
  r.require_value("negative_slope", 0.0);
  r.require_value("threshold", 0.0);
  return std::make_shared<ActivationLayer>("ReLU", "relu", r.name());
}
std::shared_ptr<Layer> softmax_from_config(ConfigReader& r) {
  r.require_value("axis", -1);
  return std::make_shared<ActivationLayer>("Softmax", "softmax", r.name());
}

LayerRef Activation(const std::string& activation, const NameOptions& options) {
  return LayerRef(std::make_shared<ActivationLayer>("Activation", activation, options.name));
}
LayerRef ReLU(const NameOptions& options) {
  return LayerRef(std::make_shared<ActivationLayer>("ReLU", "relu", options.name));
}
LayerRef Softmax(const NameOptions& options) {
  return LayerRef(std::make_shared<ActivationLayer>("Softmax", "softmax", options.name));
}

}  // namespace systolic::layers
