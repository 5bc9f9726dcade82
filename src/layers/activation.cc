// The activation layers of Keras: Activation (any activation by name), ReLU (max_value, negative_slope,
// threshold), LeakyReLU (negative_slope), ELU (alpha) and Softmax. Each applies its activation as the Layer base's
// fused activation over its input, whose values the base keeps as the pre-activation ones (a softmax output layer
// hands its logits to the loss like a Dense(..., activation="softmax") does).
#include <systolic/layers.h>

#include <cmath>
#include <limits>

#include "layers/config.h"

namespace systolic::layers {

namespace {
class ActivationLayer final : public Layer {
 public:
  bool output_masked(bool input_masked) const override { return input_masked; }  // Keras passes it on
  ActivationLayer(const char* class_name, const systolic::Activation& activation, const std::string& name)
      : Layer(class_name, name, activation) {
    if (class_name_is("ReLU")) {
      SYSTOLIC_CHECK(!(activation.max_value < 0), "layer '{}' (ReLU): max_value must be >= 0, got {}",
                     this->name(), activation.max_value);
      SYSTOLIC_CHECK(activation.alpha >= 0, "layer '{}' (ReLU): negative_slope must be >= 0, got {}",
                     this->name(), activation.alpha);
      SYSTOLIC_CHECK(activation.threshold >= 0, "layer '{}' (ReLU): threshold must be >= 0, got {}",
                     this->name(), activation.threshold);
    }
    if (class_name_is("LeakyReLU"))
      SYSTOLIC_CHECK(activation.alpha >= 0, "layer '{}' (LeakyReLU): negative_slope must be >= 0, got {}",
                     this->name(), activation.alpha);
  }

  Shape compute_output_shape(const std::vector<Shape>& in) const override { return in[0]; }

  void get_config(json& c) const override {
    Layer::get_config(c);
    const systolic::Activation& a = activation_;
    if (class_name_is("Activation")) {
      SYSTOLIC_CHECK(
          a == systolic::Activation(a.kind),
          "layer '{}' (Activation): {} with non-default parameters has no Keras config (Keras names only "
          "activations with their defaults)",
          name(), activation_name(a));
      c["activation"] = activation_name(a);
    } else if (class_name_is("ReLU")) {
      c["max_value"] = std::isinf(a.max_value) ? json(nullptr) : json(a.max_value);
      c["negative_slope"] = a.alpha;
      c["threshold"] = a.threshold;
    } else if (class_name_is("LeakyReLU") || class_name_is("ELU")) {
      c["alpha"] = a.alpha;  // tf.keras's key; Keras 3 reads it too (LeakyReLU: as negative_slope)
    } else {
      c["axis"] = -1;
    }
  }

 protected:
  // The activation itself (the base's call_backward applies its gradient to doutput, given the input as the
  // pre-activation values).
  bool fuses_activation() const override { return true; }
  void forward(LayerCall& c) override {
    c.preactivation = c.inputs[0];
    ops::activation_forward(activation_, c.inputs[0], c.output);
  }
  void backward(LayerCall& c) override {
    if (c.dinputs[0].defined()) ops::copy(c.doutput, c.dinputs[0]);
  }

 private:
  bool class_name_is(const char* name) const { return class_name() == name; }
};

systolic::Activation relu_with(std::optional<double> max_value, double negative_slope, double threshold) {
  systolic::Activation a = systolic::Activation::relu;
  a.max_value = max_value ? *max_value : INFINITY;
  a.alpha = negative_slope;
  a.threshold = threshold;
  return a;
}
systolic::Activation with_alpha(systolic::Activation::Kind kind, double alpha) {
  systolic::Activation a = kind;
  a.alpha = alpha;
  return a;
}
}  // namespace

std::shared_ptr<Layer> activation_from_config(ConfigReader& r) {
  if (!r.has("activation")) r.fail_option("activation", "missing");
  return std::make_shared<ActivationLayer>(
      "Activation", activation_from_name(r.get_activation("activation", "linear")), r.name());
}
std::shared_ptr<Layer> relu_from_config(ConfigReader& r) {
  std::optional<double> max_value;
  if (r.has("max_value") && !r.get_raw("max_value").is_null())
    max_value = r.get_double("max_value", 0.0);
  else
    r.ignore("max_value");
  return std::make_shared<ActivationLayer>(
      "ReLU", relu_with(max_value, r.get_double("negative_slope", 0.0), r.get_double("threshold", 0.0)),
      r.name());
}
std::shared_ptr<Layer> leaky_relu_from_config(ConfigReader& r) {
  // tf.keras writes alpha, Keras 3 negative_slope (and reads alpha); the defaults are both 0.3.
  double slope = r.has("negative_slope") ? r.get_double("negative_slope", 0.3) : r.get_double("alpha", 0.3);
  return std::make_shared<ActivationLayer>("LeakyReLU", with_alpha(systolic::Activation::leaky_relu, slope),
                                           r.name());
}
std::shared_ptr<Layer> elu_from_config(ConfigReader& r) {
  return std::make_shared<ActivationLayer>(
      "ELU", with_alpha(systolic::Activation::elu, r.get_double("alpha", 1.0)), r.name());
}
std::shared_ptr<Layer> softmax_from_config(ConfigReader& r) {
  r.require_value("axis", -1);
  return std::make_shared<ActivationLayer>("Softmax", systolic::Activation::softmax, r.name());
}

LayerRef Activation(const std::string& activation, const NameOptions& options) {
  return Activation(activation_from_name(activation), options);
}
LayerRef Activation(const systolic::Activation& activation, const NameOptions& options) {
  return LayerRef(std::make_shared<ActivationLayer>("Activation", activation, options.name));
}
LayerRef ReLU(const ReLUOptions& options) {
  return LayerRef(std::make_shared<ActivationLayer>(
      "ReLU", relu_with(options.max_value, options.negative_slope, options.threshold), options.name));
}
LayerRef LeakyReLU(double negative_slope, const NameOptions& options) {
  return LayerRef(std::make_shared<ActivationLayer>(
      "LeakyReLU", with_alpha(systolic::Activation::leaky_relu, negative_slope), options.name));
}
LayerRef ELU(double alpha, const NameOptions& options) {
  return LayerRef(
      std::make_shared<ActivationLayer>("ELU", with_alpha(systolic::Activation::elu, alpha), options.name));
}
LayerRef Softmax(const NameOptions& options) {
  return LayerRef(std::make_shared<ActivationLayer>("Softmax", systolic::Activation::softmax, options.name));
}

}  // namespace systolic::layers
