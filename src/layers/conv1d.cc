// Conv1D (Keras): kernel (K, C/groups, F), bias (F,) over (L, C); strides, dilation, padding valid/same/causal,
// groups, fused activation. It runs the conv2d ops on (N, 1, L, C) views, its kernel viewed as (1, K, C/groups, F).
#include <systolic/layers.h>

#include "layers/config.h"
#include "layers/conv_geometry.h"

namespace systolic::layers {

namespace {
class Conv1DLayer final : public Layer {
 public:
  Conv1DLayer(int filters, int kernel, const Conv1DOptions& o)
      : Layer("Conv1D", o.name, activation_from_name(o.activation)),
        filters_(filters),
        kernel_(kernel),
        o_(o),
        geometry_(kernel, o.strides, o.dilation_rate, o.padding) {
    SYSTOLIC_CHECK(filters > 0, "layer '{}': filters must be positive, got {}", name(), filters);
    geometry_.check(name(), {.causal = true});
    SYSTOLIC_CHECK(o.groups > 0 && filters % o.groups == 0,
                   "layer '{}': groups ({}) must be positive and divide filters ({})", name(), o.groups,
                   filters);
    set_activity_regularizer(o.activity_regularizer);
  }

  Shape compute_output_shape(const std::vector<Shape>& in) const override {
    if (in[0].rank() != 2) fail_shape("expects input (steps, channels), got " + in[0].keras_str());
    if (in[0][1] % o_.groups != 0)
      fail_shape("groups " + std::to_string(o_.groups) + " does not divide the input channels of " +
                 in[0].keras_str());
    if (!geometry_.fits(in[0]))
      fail_shape("the kernel does not fit the input " + in[0].keras_str() + " with padding 'valid'");
    return {geometry_.output_extents(in[0])[0], filters_};
  }

  void get_config(json& c) const override {
    Layer::get_config(c);
    c["filters"] = filters_;
    c["kernel_size"] = {kernel_};
    c["strides"] = {o_.strides};
    c["padding"] = o_.padding;
    c["data_format"] = "channels_last";
    c["dilation_rate"] = {o_.dilation_rate};
    c["groups"] = o_.groups;
    write_kernel_options(c, {o_.activation,
                             o_.use_bias,
                             o_.kernel_initializer,
                             o_.bias_initializer,
                             {o_.kernel_regularizer, o_.kernel_constraint},
                             {o_.bias_regularizer, o_.bias_constraint}});
  }

 protected:
  void build(const std::vector<Shape>& in) override {
    add_weight("kernel", {kernel_, in[0][1] / o_.groups, filters_}, o_.kernel_initializer, true,
               {o_.kernel_regularizer, o_.kernel_constraint});
    if (o_.use_bias)
      add_weight("bias", {filters_}, o_.bias_initializer, true, {o_.bias_regularizer, o_.bias_constraint});
  }

  ops::Conv2DParams params(const Shape& x) const {
    return geometry_.conv2d_params(x, o_.groups, fuses_activation() ? Activation::relu : Activation::linear);
  }
  bool fuses_activation() const override { return activation_ == Activation::relu; }
  Tensor kernel_2d(const Tensor& k) const {
    return k.defined() ? k.reshape({1, k.dim(0), k.dim(1), k.dim(2)}) : k;
  }

  void forward(LayerCall& c) override {
    Tensor y = as_2d(c.output);
    ops::conv2d_forward(as_2d(c.inputs[0]), kernel_2d(weights()[0].operand()),
                        o_.use_bias ? weights()[1].value : Tensor(), y, params(c.inputs[0].shape()));
  }

  void backward(LayerCall& c) override {
    Tensor none, dx = as_2d(c.dinputs[0]), dk = kernel_2d(weights()[0].grad);
    ops::conv2d_backward(as_2d(c.inputs[0]), kernel_2d(weights()[0].operand()), as_2d(c.doutput), dx, dk,
                         o_.use_bias ? weights()[1].grad : none, params(c.inputs[0].shape()));
  }

 private:
  int filters_, kernel_;
  Conv1DOptions o_;
  ConvGeometry geometry_;
};
}  // namespace

std::shared_ptr<Layer> conv1d_from_config(ConfigReader& r) {
  if (!r.has("filters") || !r.has("kernel_size"))
    r.fail_option(r.has("filters") ? "kernel_size" : "filters", "missing");
  int filters = r.get_int("filters", 0);
  int kernel = r.get_size1("kernel_size", 0);
  auto k = read_kernel_options(r);
  Conv1DOptions o{.strides = r.get_size1("strides", 1),
                  .padding = r.get_string("padding", "valid"),
                  .dilation_rate = r.get_size1("dilation_rate", 1),
                  .groups = r.get_int("groups", 1),
                  .activation = k.activation,
                  .use_bias = k.use_bias,
                  .kernel_initializer = k.kernel_initializer,
                  .bias_initializer = k.bias_initializer,
                  .kernel_regularizer = k.kernel.regularizer,
                  .bias_regularizer = k.bias.regularizer,
                  .kernel_constraint = k.kernel.constraint,
                  .bias_constraint = k.bias.constraint,
                  .name = r.name()};
  r.require_value("data_format", "channels_last");
  return std::make_shared<Conv1DLayer>(filters, kernel, o);
}

LayerRef Conv1D(int filters, int kernel_size, const Conv1DOptions& options) {
  return LayerRef(std::make_shared<Conv1DLayer>(filters, kernel_size, options));
}

}  // namespace systolic::layers
