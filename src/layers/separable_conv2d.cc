// SeparableConv2D (Keras): a depthwise convolution (kernel "depthwise_kernel" (KH, KW, C, M), strides, padding,
// dilation; no bias) then a pointwise 1x1 convolution ("pointwise_kernel" (1, 1, C*M, F)) with the bias (F,)
// and the activation. Two conv2d op calls: the depthwise one grouped (groups = C, its kernel viewed as
// (KH, KW, 1, C*M)), the pointwise one plain; the intermediate (N, OH, OW, C*M) is kept for backward.
#include <systolic/layers.h>

#include "layers/config.h"
#include "layers/conv_geometry.h"

namespace systolic::layers {

namespace {
class SeparableConv2DLayer final : public Layer {
 public:
  SeparableConv2DLayer(int filters, Pair kernel, const SeparableConv2DOptions& o)
      : Layer("SeparableConv2D", o.name, activation_from_name(o.activation)),
        filters_(filters),
        kernel_(kernel),
        o_(o),
        geometry_(kernel, o.strides, o.dilation_rate, o.padding) {
    set_activity_regularizer(o.activity_regularizer);
    SYSTOLIC_CHECK(filters > 0, "layer '{}': filters must be positive, got {}", name(), filters);
    check_depthwise_options(name(), geometry_, o.depth_multiplier);
  }

  Shape compute_output_shape(const std::vector<Shape>& in) const override {
    if (in[0].rank() != 3) fail_shape("expects input (H, W, C), got " + in[0].keras_str());
    if (!geometry_.fits(in[0]))
      fail_shape("the kernel does not fit the input " + in[0].keras_str() + " with padding 'valid'");
    auto [h, w] = geometry_.output_extents(in[0]);
    return {h, w, filters_};
  }

  void get_config(json& c) const override {
    Layer::get_config(c);  // then Keras 3's order
    c["depth_multiplier"] = o_.depth_multiplier;
    c["filters"] = filters_;
    c["kernel_size"] = kernel_;
    c["strides"] = o_.strides;
    c["padding"] = o_.padding;
    c["data_format"] = "channels_last";
    c["dilation_rate"] = o_.dilation_rate;
    c["activation"] = o_.activation;
    c["use_bias"] = o_.use_bias;
    c["depthwise_initializer"] = initializer_config(o_.depthwise_initializer);
    c["pointwise_initializer"] = initializer_config(o_.pointwise_initializer);
    c["bias_initializer"] = initializer_config(o_.bias_initializer);
    c["depthwise_regularizer"] = regularizer_config(o_.depthwise_regularizer);
    c["pointwise_regularizer"] = regularizer_config(o_.pointwise_regularizer);
    c["bias_regularizer"] = regularizer_config(o_.bias_regularizer);
    if (!c.contains("activity_regularizer")) c["activity_regularizer"] = nullptr;
    c["depthwise_constraint"] = constraint_config(o_.depthwise_constraint);
    c["pointwise_constraint"] = constraint_config(o_.pointwise_constraint);
    c["bias_constraint"] = constraint_config(o_.bias_constraint);
  }

 protected:
  void build(const std::vector<Shape>& in) override {
    channels_ = in[0][2];
    std::int64_t cm = channels_ * o_.depth_multiplier;
    add_weight("depthwise_kernel", {kernel_[0], kernel_[1], channels_, o_.depth_multiplier},
               o_.depthwise_initializer, true, {o_.depthwise_regularizer, o_.depthwise_constraint});
    add_weight("pointwise_kernel", {1, 1, cm, filters_}, o_.pointwise_initializer, true,
               {o_.pointwise_regularizer, o_.pointwise_constraint});
    if (o_.use_bias)
      add_weight("bias", {filters_}, o_.bias_initializer, true, {o_.bias_regularizer, o_.bias_constraint});
  }

  ops::Conv2DParams depthwise_params(const Shape& x) const {
    return geometry_.conv2d_params(x, static_cast<int>(channels_));
  }
  ops::Conv2DParams pointwise_params() const {
    return {.activation = fuses_activation() ? Activation::relu : Activation::linear};
  }
  bool fuses_activation() const override { return activation_ == Activation::relu; }
  Shape grouped_kernel() const { return {kernel_[0], kernel_[1], 1, channels_ * o_.depth_multiplier}; }

  // saved[0]: the depthwise output, (N, OH, OW, C*M), the pointwise convolution's input.
  void forward(LayerCall& c) override {
    const Tensor& x = c.inputs[0];
    Shape mid{c.output.dim(0), c.output.dim(1), c.output.dim(2), channels_ * o_.depth_multiplier};
    if (c.saved.empty() || c.saved[0].shape() != mid || c.saved[0].dtype() != c.output.dtype() ||
        c.saved[0].device() != c.output.device())
      c.saved = {Tensor(mid, c.output.dtype(), c.output.device())};
    ops::conv2d_forward(x, weights()[0].operand().reshape(grouped_kernel()), Tensor(), c.saved[0],
                        depthwise_params(x.shape()));
    ops::conv2d_forward(c.saved[0], weights()[1].operand(), o_.use_bias ? weights()[2].value : Tensor(),
                        c.output, pointwise_params());
  }

  void backward(LayerCall& c) override {
    Tensor none;
    const Tensor& mid = c.saved[0];
    Tensor dmid(mid.shape(), mid.dtype(), mid.device());
    ops::conv2d_backward(mid, weights()[1].operand(), c.doutput, dmid, weights()[1].grad,
                         o_.use_bias ? weights()[2].grad : none, pointwise_params());
    Tensor ddepthwise = weights()[0].grad.defined() ? weights()[0].grad.reshape(grouped_kernel()) : Tensor();
    ops::conv2d_backward(c.inputs[0], weights()[0].operand().reshape(grouped_kernel()), dmid, c.dinputs[0],
                         ddepthwise, none, depthwise_params(c.inputs[0].shape()));
  }

 private:
  int filters_;
  Pair kernel_;
  SeparableConv2DOptions o_;
  ConvGeometry geometry_;
  std::int64_t channels_ = 0;
};
}  // namespace

std::shared_ptr<Layer> separable_conv2d_from_config(ConfigReader& r) {
  if (!r.has("filters") || !r.has("kernel_size"))
    r.fail_option(r.has("filters") ? "kernel_size" : "filters", "missing");
  int filters = r.get_int("filters", 0);
  Pair kernel = r.get_pair("kernel_size", {0, 0});
  SeparableConv2DOptions o{
      .strides = r.get_pair("strides", {1, 1}),
      .padding = r.get_string("padding", "valid"),
      .dilation_rate = r.get_pair("dilation_rate", {1, 1}),
      .depth_multiplier = r.get_int("depth_multiplier", 1),
      .activation = r.get_activation("activation", "linear"),
      .use_bias = r.get_bool("use_bias", true),
      .depthwise_initializer = r.get_initializer("depthwise_initializer", "glorot_uniform"),
      .pointwise_initializer = r.get_initializer("pointwise_initializer", "glorot_uniform"),
      .bias_initializer = r.get_initializer("bias_initializer", "zeros"),
      .depthwise_regularizer = r.get_regularizer("depthwise_regularizer"),
      .pointwise_regularizer = r.get_regularizer("pointwise_regularizer"),
      .bias_regularizer = r.get_regularizer("bias_regularizer"),
      .depthwise_constraint = r.get_constraint("depthwise_constraint"),
      .pointwise_constraint = r.get_constraint("pointwise_constraint"),
      .bias_constraint = r.get_constraint("bias_constraint"),
      .name = r.name()};
  r.require_value("data_format", "channels_last");
  // tf.keras also writes groups 1 and the base convolution's kernel options, which its SeparableConv2D never
  // uses (its kernels are the depthwise and pointwise ones).
  r.require_value("groups", 1);
  r.ignore("kernel_initializer");
  for (auto* k : {"kernel_regularizer", "kernel_constraint"}) r.require_null(k);
  return std::make_shared<SeparableConv2DLayer>(filters, kernel, o);
}

LayerRef SeparableConv2D(int filters, Pair kernel_size, const SeparableConv2DOptions& options) {
  return LayerRef(std::make_shared<SeparableConv2DLayer>(filters, kernel_size, options));
}

}  // namespace systolic::layers
