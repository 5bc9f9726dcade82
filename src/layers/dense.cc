// Dense (Keras): kernel (in, units), bias (units,); applies to the last axis; fused activation.
#include <systolic/layers.h>

#include "layers/config.h"

namespace systolic::layers {

namespace {
class DenseLayer final : public Layer {
 public:
  bool output_masked(bool input_masked) const override { return input_masked; }  // Keras passes it on
  DenseLayer(int units, const DenseOptions& o)
      : Layer("Dense", o.name, activation_from_name(o.activation)), units_(units), o_(o) {
    SYSTOLIC_CHECK(units > 0, "layer '{}': units must be positive, got {}", name(), units);
    set_activity_regularizer(o.activity_regularizer);
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
    write_kernel_options(c, {o_.activation,
                             o_.use_bias,
                             o_.kernel_initializer,
                             o_.bias_initializer,
                             {o_.kernel_regularizer, o_.kernel_constraint},
                             {o_.bias_regularizer, o_.bias_constraint}});
  }

 protected:
  void build(const std::vector<Shape>& in) override {
    add_weight("kernel", {in[0][-1], units_}, o_.kernel_initializer, true,
               {o_.kernel_regularizer, o_.kernel_constraint});
    if (o_.use_bias)
      add_weight("bias", {units_}, o_.bias_initializer, true, {o_.bias_regularizer, o_.bias_constraint});
  }
  void forward(LayerCall& c) override {
    ops::dense_forward(c.inputs[0], weights()[0].operand(), o_.use_bias ? weights()[1].value : Tensor(),
                       c.output);
  }
  void backward(LayerCall& c) override {
    Tensor none;
    ops::dense_backward(c.inputs[0], weights()[0].operand(), c.doutput, c.dinputs[0], weights()[0].grad,
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
  auto k = read_kernel_options(r);
  DenseOptions o{.activation = k.activation,
                 .use_bias = k.use_bias,
                 .kernel_initializer = k.kernel_initializer,
                 .bias_initializer = k.bias_initializer,
                 .kernel_regularizer = k.kernel.regularizer,
                 .bias_regularizer = k.bias.regularizer,
                 .kernel_constraint = k.kernel.constraint,
                 .bias_constraint = k.bias.constraint,
                 .name = r.name()};
  return std::make_shared<DenseLayer>(units, o);
}

LayerRef Dense(int units, const DenseOptions& options) {
  return LayerRef(std::make_shared<DenseLayer>(units, options));
}

}  // namespace systolic::layers
