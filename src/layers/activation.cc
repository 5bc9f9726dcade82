// Activation, ReLU and Softmax (Keras): the identity followed by the Layer base's fused activation, so a
// softmax output layer hands its logits to the loss like a Dense(..., activation="softmax") does.
#include <systolic/layers.h>

namespace systolic::layers {

namespace {
class ActivationLayer final : public Layer {
 public:
  ActivationLayer(const char* class_name, const std::string& activation, const std::string& name)
      : Layer(class_name, name, activation_from_name(activation)) {}

  Shape compute_output_shape(const std::vector<Shape>& in) const override { return in[0]; }

 protected:
  void forward(LayerCall& c) override { ops::copy(c.inputs[0], c.output); }
  void backward(LayerCall& c) override {
    if (c.dinputs[0].defined()) ops::copy(c.doutput, c.dinputs[0]);
  }
};
}  // namespace

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
