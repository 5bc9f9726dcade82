// Dense (Keras): kernel (in, units), bias (units,); applies to the last axis; fused activation.
#include <systolic/layers.h>

#include "layers/config.h"

namespace systolic::layers {

namespace {
class DenseLayer final : public Layer {
 public:
  DenseLayer(int units, const DenseOptions& o)
      : Layer("Dense", o.name, activation_from_name(o.activation)), units_(units), o_(o) {
    SYSTOLIC_CHECK(units > 0, "layer '{}': units must be positive, got {}", name(), units);
  }

  Shape compute_output_shape(const std::vector<Shape>& in) const override {
    if (in[0].rank() < 1) fail_shape("expects an input with at least one axis");
    Shape out = in[0];
    out[-1] = units_;
    return out;
  }

  void get_config(json& c) const override {
    Layer::get_config(c);
    c["units"] = units_;
    c["activation"] = o_.activation;
    c["use_bias"] = o_.use_bias;
    c["kernel_initializer"] = initializer_config(o_.kernel_initializer);
    c["bias_initializer"] = initializer_config(o_.bias_initializer);
    for (auto* k : {"kernel_regularizer", "bias_regularizer", "activity_regularizer", "kernel_constraint",
                    "bias_constraint"})
      c[k] = nullptr;
  }

 protected:
  void build(const std::vector<Shape>& in) override {
    add_weight("kernel", {in[0][-1], units_}, o_.kernel_initializer);
    if (o_.use_bias) add_weight("bias", {units_}, o_.bias_initializer);
  }
  void forward(LayerCall& c) override {
    ops::dense_forward(c.inputs[0], weights()[0].value, o_.use_bias ? weights()[1].value : Tensor(), c.output);
  }
  void backward(LayerCall& c) override {
    Tensor none;
    ops::dense_backward(c.inputs[0], weights()[0].value, c.doutput, c.dinputs[0], weights()[0].grad,
                        o_.use_bias ? weights()[1].grad : none);
  }

 private:
  int units_;
  DenseOptions o_;
};
}  // namespace

std::shared_ptr<Layer> dense_from_config(ConfigReader& r) {
  if (!r.has("units")) r.fail_option("units", "missing");
  int units = r.get_int("units", 0);
  DenseOptions o{.activation = r.get_activation("activation", "linear"),
                 .use_bias = r.get_bool("use_bias", true),
                 .kernel_initializer = r.get_initializer("kernel_initializer", "glorot_uniform"),
                 .bias_initializer = r.get_initializer("bias_initializer", "zeros"),
                 .name = r.name()};
  for (auto* k : {"kernel_regularizer", "bias_regularizer", "activity_regularizer", "kernel_constraint",
                  "bias_constraint", "lora_rank", "quantization_config"})
    r.require_null(k);
  r.ignore("lora_alpha");  // only used with lora_rank
  return std::make_shared<DenseLayer>(units, o);
}

LayerRef Dense(int units, const DenseOptions& options) {
  return LayerRef(std::make_shared<DenseLayer>(units, options));
}

}  // namespace systolic::layers
