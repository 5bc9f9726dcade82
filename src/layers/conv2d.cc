// Conv2D (Keras): kernel (KH, KW, C/groups, F), bias (F,); strides, dilation, padding valid/same, groups, fused
// activation.
#include <systolic/layers.h>

#include "layers/config.h"
#include "layers/conv_geometry.h"

namespace systolic::layers {

namespace {
class Conv2DLayer final : public Layer {
 public:
  Conv2DLayer(int filters, Pair kernel, const Conv2DOptions& o)
      : Layer("Conv2D", o.name, activation_from_name(o.activation)),
        filters_(filters),
        kernel_(kernel),
        o_(o),
        geometry_(kernel, o.strides, o.dilation_rate, o.padding) {
    SYSTOLIC_CHECK(filters > 0, "layer '{}': filters must be positive, got {}", name(), filters);
    geometry_.check(name());
    SYSTOLIC_CHECK(o.groups > 0 && filters % o.groups == 0,
                   "layer '{}': groups ({}) must be positive and divide filters ({})", name(), o.groups,
                   filters);
    set_activity_regularizer(o.activity_regularizer);
  }

  Shape compute_output_shape(const std::vector<Shape>& in) const override {
    if (in[0].rank() != 3) fail_shape("expects input (H, W, C), got " + in[0].keras_str());
    if (in[0][2] % o_.groups != 0)
      fail_shape("groups " + std::to_string(o_.groups) + " does not divide the input channels of " +
                 in[0].keras_str());
    if (!geometry_.fits(in[0]))
      fail_shape("the kernel does not fit the input " + in[0].keras_str() + " with padding 'valid'");
    auto [h, w] = geometry_.output_extents(in[0]);
    return {h, w, filters_};
  }

  void get_config(json& c) const override {
    Layer::get_config(c);
    c["filters"] = filters_;
    c["kernel_size"] = kernel_;
    c["strides"] = o_.strides;
    c["padding"] = o_.padding;
    c["data_format"] = "channels_last";
    c["dilation_rate"] = o_.dilation_rate;
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
    add_weight("kernel", {kernel_[0], kernel_[1], in[0][2] / o_.groups, filters_}, o_.kernel_initializer,
               true, {o_.kernel_regularizer, o_.kernel_constraint});
    if (o_.use_bias)
      add_weight("bias", {filters_}, o_.bias_initializer, true, {o_.bias_regularizer, o_.bias_constraint});
  }

  ops::Conv2DParams params(const Shape& x) const {
    return geometry_.conv2d_params(x, o_.groups, fuses_activation() ? Activation::relu : Activation::linear);
  }
  bool fuses_activation() const override { return activation_ == Activation::relu; }

  void forward(LayerCall& c) override {
    ops::conv2d_forward(c.inputs[0], weights()[0].operand(), o_.use_bias ? weights()[1].value : Tensor(),
                        c.output, params(c.inputs[0].shape()));
  }

  void backward(LayerCall& c) override {
    Tensor none;
    ops::conv2d_backward(c.inputs[0], weights()[0].operand(), c.doutput, c.dinputs[0], weights()[0].grad,
                         o_.use_bias ? weights()[1].grad : none, params(c.inputs[0].shape()));
  }

 private:
  int filters_;
  Pair kernel_;
  Conv2DOptions o_;
  ConvGeometry geometry_;
};
}  // namespace

std::shared_ptr<Layer> conv2d_from_config(ConfigReader& r) {
  if (!r.has("filters") || !r.has("kernel_size"))
    r.fail_option(r.has("filters") ? "kernel_size" : "filters", "missing");
  int filters = r.get_int("filters", 0);
  Pair kernel = r.get_pair("kernel_size", {0, 0});
  auto k = read_kernel_options(r);
  Conv2DOptions o{.strides = r.get_pair("strides", {1, 1}),
                  .padding = r.get_string("padding", "valid"),
                  .dilation_rate = r.get_pair("dilation_rate", {1, 1}),
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
  return std::make_shared<Conv2DLayer>(filters, kernel, o);
}

LayerRef Conv2D(int filters, Pair kernel_size, const Conv2DOptions& options) {
  return LayerRef(std::make_shared<Conv2DLayer>(filters, kernel_size, options));
}

}  // namespace systolic::layers
