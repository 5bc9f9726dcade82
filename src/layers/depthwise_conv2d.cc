// DepthwiseConv2D (Keras): each input channel c convolved with its own depth_multiplier (M) filters; kernel
// "depthwise_kernel" (KH, KW, C, M), bias (C*M,), output channel c*M + m. It is the grouped convolution with
// groups = C and the kernel viewed as (KH, KW, 1, C*M) (the same memory), so it runs on the conv2d ops.
// DepthwiseConv1D is the same layer over (L, C) with a kernel (K, C, M): it runs as (N, 1, L, C) with the kernel
// viewed as (1, K, 1, C*M).
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
  // one_d: DepthwiseConv1D, whose options are the 2-D ones with the H axis of size 1 (kernel, strides and dilation
  // {1, k}).
  DepthwiseConv2DLayer(Pair kernel, const DepthwiseConv2DOptions& o, bool one_d = false)
      : Layer(one_d ? "DepthwiseConv1D" : "DepthwiseConv2D", o.name, activation_from_name(o.activation)),
        kernel_(kernel),
        o_(o),
        geometry_(one_d ? ConvGeometry(kernel[1], o.strides[1], o.dilation_rate[1], o.padding)
                        : ConvGeometry(kernel, o.strides, o.dilation_rate, o.padding)),
        one_d_(one_d) {
    set_activity_regularizer(o.activity_regularizer);
    check_depthwise_options(name(), geometry_, o.depth_multiplier);
  }

  Shape compute_output_shape(const std::vector<Shape>& in) const override {
    if (in[0].rank() != (one_d_ ? 2 : 3))
      fail_shape(std::string("expects input ") + (one_d_ ? "(steps, channels)" : "(H, W, C)") + ", got " +
                 in[0].keras_str());
    if (!geometry_.fits(in[0]))
      fail_shape("the kernel does not fit the input " + in[0].keras_str() + " with padding 'valid'");
    auto [h, w] = geometry_.output_extents(in[0]);
    if (one_d_) return {h, in[0][1] * o_.depth_multiplier};
    return {h, w, in[0][2] * o_.depth_multiplier};
  }

  void get_config(json& c) const override {
    Layer::get_config(c);  // then Keras 3's order
    c["depth_multiplier"] = o_.depth_multiplier;
    c["kernel_size"] = one_d_ ? json::array({kernel_[1]}) : json(kernel_);
    c["strides"] = one_d_ ? json::array({o_.strides[1]}) : json(o_.strides);
    c["padding"] = o_.padding;
    c["data_format"] = "channels_last";
    c["dilation_rate"] = one_d_ ? json::array({o_.dilation_rate[1]}) : json(o_.dilation_rate);
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
    channels_ = in[0][in[0].rank() - 1];
    add_weight("depthwise_kernel",
               one_d_ ? Shape{kernel_[1], channels_, o_.depth_multiplier}
                      : Shape{kernel_[0], kernel_[1], channels_, o_.depth_multiplier},
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

  // A 1-D layer's (N, L, C) tensors as (N, 1, L, C) views.
  Tensor spatial(const Tensor& t) const { return one_d_ ? as_2d(t) : t; }

  void forward(LayerCall& c) override {
    Tensor y = spatial(c.output);
    ops::conv2d_forward(spatial(c.inputs[0]), weights()[0].operand().reshape(grouped_kernel()),
                        o_.use_bias ? weights()[1].value : Tensor(), y, params(c.inputs[0].shape()));
  }

  void backward(LayerCall& c) override {
    Tensor none;
    Tensor dw = view_or_none(weights()[0].grad, grouped_kernel()), dx = spatial(c.dinputs[0]);
    ops::conv2d_backward(spatial(c.inputs[0]), weights()[0].operand().reshape(grouped_kernel()),
                         spatial(c.doutput), dx, dw, o_.use_bias ? weights()[1].grad : none,
                         params(c.inputs[0].shape()));
  }

 private:
  Pair kernel_;
  DepthwiseConv2DOptions o_;
  ConvGeometry geometry_;
  bool one_d_ = false;
  std::int64_t channels_ = 0;
};
}  // namespace

namespace {
// DepthwiseConv2D's and DepthwiseConv1D's configs (one_d: sizes are an int or a list of one).
std::shared_ptr<Layer> depthwise_from_config(ConfigReader& r, bool one_d) {
  if (!r.has("kernel_size")) r.fail_option("kernel_size", "missing");
  auto size = [&](const char* key, int fallback) { return r.get_pair_or_size1(key, fallback, one_d); };
  Pair kernel = size("kernel_size", 0);
  DepthwiseConv2DOptions o{
      .strides = size("strides", 1),
      .padding = r.get_string("padding", "valid"),
      .depth_multiplier = r.get_int("depth_multiplier", 1),
      .dilation_rate = size("dilation_rate", 1),
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
  return std::make_shared<DepthwiseConv2DLayer>(kernel, o, one_d);
}
}  // namespace

std::shared_ptr<Layer> depthwise_conv2d_from_config(ConfigReader& r) {
  return depthwise_from_config(r, false);
}
std::shared_ptr<Layer> depthwise_conv1d_from_config(ConfigReader& r) {
  return depthwise_from_config(r, true);
}

LayerRef DepthwiseConv2D(Pair kernel_size, const DepthwiseConv2DOptions& options) {
  return LayerRef(std::make_shared<DepthwiseConv2DLayer>(kernel_size, options));
}

LayerRef DepthwiseConv1D(int kernel_size, const DepthwiseConv1DOptions& o) {
  DepthwiseConv2DOptions o2{.strides = {1, o.strides},
                            .padding = o.padding,
                            .depth_multiplier = o.depth_multiplier,
                            .dilation_rate = {1, o.dilation_rate},
                            .activation = o.activation,
                            .use_bias = o.use_bias,
                            .depthwise_initializer = o.depthwise_initializer,
                            .bias_initializer = o.bias_initializer,
                            .depthwise_regularizer = o.depthwise_regularizer,
                            .bias_regularizer = o.bias_regularizer,
                            .activity_regularizer = o.activity_regularizer,
                            .depthwise_constraint = o.depthwise_constraint,
                            .bias_constraint = o.bias_constraint,
                            .name = o.name};
  return LayerRef(std::make_shared<DepthwiseConv2DLayer>(Pair{1, kernel_size}, o2, true));
}

}  // namespace systolic::layers
