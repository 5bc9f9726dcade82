// DepthwiseConv2D (Keras): each input channel c convolved with its own depth_multiplier (M) filters; kernel
// "depthwise_kernel" (KH, KW, C, M), bias (C*M,), output channel c*M + m. It is the grouped convolution with
// groups = C and the kernel viewed as (KH, KW, 1, C*M) (the same memory), so it runs on the conv2d ops.
#include <systolic/layers.h>

#include "layers/config.h"
#include "layers/conv_geometry.h"

namespace systolic::layers {

namespace {
Tensor view_or_none(const Tensor& t, const Shape& s) {
  return t.defined() ? t.reshape(s) : Tensor();
}

class DepthwiseConv2DLayer final : public Layer {
 public:
  DepthwiseConv2DLayer(Pair kernel, const DepthwiseConv2DOptions& o)
      : Layer("DepthwiseConv2D", o.name, activation_from_name(o.activation)),
        kernel_(kernel),
        o_(o),
        geometry_(kernel, o.strides, o.dilation_rate, o.padding) {
    set_activity_regularizer(o.activity_regularizer);
    check_depthwise_options(name(), geometry_, o.depth_multiplier);
  }

  Shape compute_output_shape(const std::vector<Shape>& in) const override {
    if (in[0].rank() != 3) fail_shape("expects input (H, W, C), got " + in[0].keras_str());
    if (!geometry_.fits(in[0]))
      fail_shape("the kernel does not fit the input " + in[0].keras_str() + " with padding 'valid'");
    auto [h, w] = geometry_.output_extents(in[0]);
    return {h, w, in[0][2] * o_.depth_multiplier};
  }

  void get_config(json& c) const override {
    Layer::get_config(c);  // then Keras 3's order
    c["depth_multiplier"] = o_.depth_multiplier;
    c["kernel_size"] = kernel_;
    c["strides"] = o_.strides;
    c["padding"] = o_.padding;
    c["data_format"] = "channels_last";
    c["dilation_rate"] = o_.dilation_rate;
    c["activation"] = o_.activation;
    c["use_bias"] = o_.use_bias;
    c["depthwise_initializer"] = initializer_config(o_.depthwise_initializer);
    c["bias_initializer"] = initializer_config(o_.bias_initializer);
    WeightOptions depthwise{o_.depthwise_regularizer, o_.depthwise_constraint},
        bias{o_.bias_regularizer, o_.bias_constraint};
    c["depthwise_regularizer"] = regularizer_config(depthwise.regularizer);
    c["bias_regularizer"] = regularizer_config(bias.regularizer);
    if (!c.contains("activity_regularizer")) c["activity_regularizer"] = nullptr;
    c["depthwise_constraint"] = constraint_config(depthwise.constraint);
    c["bias_constraint"] = constraint_config(bias.constraint);
  }

 protected:
  void build(const std::vector<Shape>& in) override {
    channels_ = in[0][2];
    add_weight("depthwise_kernel", {kernel_[0], kernel_[1], channels_, o_.depth_multiplier},
               o_.depthwise_initializer, true, {o_.depthwise_regularizer, o_.depthwise_constraint});
    if (o_.use_bias)
      add_weight("bias", {channels_ * o_.depth_multiplier}, o_.bias_initializer, true,
                 {o_.bias_regularizer, o_.bias_constraint});
  }

  ops::Conv2DParams params(const Shape& x) const {
    return geometry_.conv2d_params(x, static_cast<int>(channels_),
                                   fuses_activation() ? Activation::relu : Activation::linear);
  }
  bool fuses_activation() const override { return activation_ == Activation::relu; }
  // The kernel (KH, KW, C, M) as the grouped convolution's (KH, KW, 1, C*M).
  Shape grouped_kernel() const { return {kernel_[0], kernel_[1], 1, channels_ * o_.depth_multiplier}; }

  void forward(LayerCall& c) override {
    ops::conv2d_forward(c.inputs[0], weights()[0].operand().reshape(grouped_kernel()),
                        o_.use_bias ? weights()[1].value : Tensor(), c.output, params(c.inputs[0].shape()));
  }

  void backward(LayerCall& c) override {
    Tensor none;
    Tensor dw = view_or_none(weights()[0].grad, grouped_kernel());
    ops::conv2d_backward(c.inputs[0], weights()[0].operand().reshape(grouped_kernel()), c.doutput,
                         c.dinputs[0], dw, o_.use_bias ? weights()[1].grad : none,
                         params(c.inputs[0].shape()));
  }

 private:
  Pair kernel_;
  DepthwiseConv2DOptions o_;
  ConvGeometry geometry_;
  std::int64_t channels_ = 0;
};
}  // namespace

std::shared_ptr<Layer> depthwise_conv2d_from_config(ConfigReader& r) {
  if (!r.has("kernel_size")) r.fail_option("kernel_size", "missing");
  Pair kernel = r.get_pair("kernel_size", {0, 0});
  DepthwiseConv2DOptions o{
      .strides = r.get_pair("strides", {1, 1}),
      .padding = r.get_string("padding", "valid"),
      .depth_multiplier = r.get_int("depth_multiplier", 1),
      .dilation_rate = r.get_pair("dilation_rate", {1, 1}),
      .activation = r.get_activation("activation", "linear"),
      .use_bias = r.get_bool("use_bias", true),
      .depthwise_initializer = r.get_initializer("depthwise_initializer", "glorot_uniform"),
      .bias_initializer = r.get_initializer("bias_initializer", "zeros"),
      .depthwise_regularizer = r.get_regularizer("depthwise_regularizer"),
      .bias_regularizer = r.get_regularizer("bias_regularizer"),
      .depthwise_constraint = r.get_constraint("depthwise_constraint"),
      .bias_constraint = r.get_constraint("bias_constraint"),
      .name = r.name()};
  r.require_value("data_format", "channels_last");
  r.require_value("groups", 1);  // tf.keras writes it
  return std::make_shared<DepthwiseConv2DLayer>(kernel, o);
}

LayerRef DepthwiseConv2D(Pair kernel_size, const DepthwiseConv2DOptions& options) {
  return LayerRef(std::make_shared<DepthwiseConv2DLayer>(kernel_size, options));
}

}  // namespace systolic::layers
