// SeparableConv2D (Keras): a depthwise convolution (kernel "depthwise_kernel" (KH, KW, C, M), strides, padding,
// dilation; no bias) then a pointwise 1x1 convolution ("pointwise_kernel" (1, 1, C*M, F)) with the bias (F,)
// and the activation. Two conv2d op calls: the depthwise one grouped (groups = C, its kernel viewed as
// (KH, KW, 1, C*M)), the pointwise one plain; the intermediate (N, OH, OW, C*M) is kept for backward.
// SeparableConv1D is the same layer over (L, C), kernels (K, C, M) and (1, C*M, F): it runs as (N, 1, L, C).
#include <systolic/layers.h>

#include "layers/config.h"
#include "layers/conv_geometry.h"

namespace systolic::layers {

namespace {
class SeparableConv2DLayer final : public Layer {
 public:
  // one_d: SeparableConv1D, whose options are the 2-D ones with the H axis of size 1 (kernel, strides and dilation
  // {1, k}).
  SeparableConv2DLayer(int filters, Pair kernel, const SeparableConv2DOptions& o, bool one_d = false)
      : Layer(one_d ? "SeparableConv1D" : "SeparableConv2D", o.name, activation_from_name(o.activation)),
        filters_(filters),
        kernel_(kernel),
        o_(o),
        geometry_(one_d ? ConvGeometry(kernel[1], o.strides[1], o.dilation_rate[1], o.padding)
                        : ConvGeometry(kernel, o.strides, o.dilation_rate, o.padding)),
        one_d_(one_d) {
    set_activity_regularizer(o.activity_regularizer);
    SYSTOLIC_CHECK(filters > 0, "layer '{}': filters must be positive, got {}", name(), filters);
    check_depthwise_options(name(), geometry_, o.depth_multiplier);
  }

  Shape compute_output_shape(const std::vector<Shape>& in) const override {
    if (in[0].rank() != (one_d_ ? 2 : 3))
      fail_shape(std::string("expects input ") + (one_d_ ? "(steps, channels)" : "(H, W, C)") + ", got " +
                 in[0].keras_str());
    if (!geometry_.fits(in[0]))
      fail_shape("the kernel does not fit the input " + in[0].keras_str() + " with padding 'valid'");
    auto [h, w] = geometry_.output_extents(in[0]);
    if (one_d_) return {h, filters_};
    return {h, w, filters_};
  }

  void get_config(json& c) const override {
    Layer::get_config(c);  // then Keras 3's order
    c["depth_multiplier"] = o_.depth_multiplier;
    c["filters"] = filters_;
    c["kernel_size"] = one_d_ ? json::array({kernel_[1]}) : json(kernel_);
    c["strides"] = one_d_ ? json::array({o_.strides[1]}) : json(o_.strides);
    c["padding"] = o_.padding;
    c["data_format"] = "channels_last";
    c["dilation_rate"] = one_d_ ? json::array({o_.dilation_rate[1]}) : json(o_.dilation_rate);
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
    channels_ = in[0][in[0].rank() - 1];
    std::int64_t cm = channels_ * o_.depth_multiplier;
    add_weight("depthwise_kernel",
               one_d_ ? Shape{kernel_[1], channels_, o_.depth_multiplier}
                      : Shape{kernel_[0], kernel_[1], channels_, o_.depth_multiplier},
               o_.depthwise_initializer, true, {o_.depthwise_regularizer, o_.depthwise_constraint});
    add_weight("pointwise_kernel", one_d_ ? Shape{1, cm, filters_} : Shape{1, 1, cm, filters_},
               o_.pointwise_initializer, true, {o_.pointwise_regularizer, o_.pointwise_constraint});
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

  // A 1-D layer's (N, L, C) tensors as (N, 1, L, C) views.
  Tensor spatial(const Tensor& t) const { return one_d_ ? as_2d(t) : t; }
  Shape pointwise_kernel() const { return {1, 1, channels_ * o_.depth_multiplier, filters_}; }

  // saved[0]: the depthwise output, (N, OH, OW, C*M) (1-D: (N, 1, OL, C*M)), the pointwise convolution's input.
  void forward(LayerCall& c) override {
    const Tensor x = spatial(c.inputs[0]);
    Tensor y = spatial(c.output);
    Shape mid{y.dim(0), y.dim(1), y.dim(2), channels_ * o_.depth_multiplier};
    if (c.saved.empty() || c.saved[0].shape() != mid || c.saved[0].dtype() != y.dtype() ||
        c.saved[0].device() != y.device())
      c.saved = {Tensor(mid, y.dtype(), y.device())};
    ops::conv2d_forward(x, weights()[0].operand().reshape(grouped_kernel()), Tensor(), c.saved[0],
                        depthwise_params(c.inputs[0].shape()));
    ops::conv2d_forward(c.saved[0], weights()[1].operand().reshape(pointwise_kernel()),
                        o_.use_bias ? weights()[2].value : Tensor(), y, pointwise_params());
  }

  void backward(LayerCall& c) override {
    Tensor none;
    const Tensor& mid = c.saved[0];
    Tensor dmid(mid.shape(), mid.dtype(), mid.device());
    Tensor dpointwise =
        weights()[1].grad.defined() ? weights()[1].grad.reshape(pointwise_kernel()) : Tensor();
    ops::conv2d_backward(mid, weights()[1].operand().reshape(pointwise_kernel()), spatial(c.doutput), dmid,
                         dpointwise, o_.use_bias ? weights()[2].grad : none, pointwise_params());
    Tensor ddepthwise = weights()[0].grad.defined() ? weights()[0].grad.reshape(grouped_kernel()) : Tensor();
    Tensor dx = spatial(c.dinputs[0]);
    ops::conv2d_backward(spatial(c.inputs[0]), weights()[0].operand().reshape(grouped_kernel()), dmid, dx,
                         ddepthwise, none, depthwise_params(c.inputs[0].shape()));
  }

 private:
  int filters_;
  Pair kernel_;
  SeparableConv2DOptions o_;
  ConvGeometry geometry_;
  bool one_d_ = false;
  std::int64_t channels_ = 0;
};
}  // namespace

namespace {
// SeparableConv2D's and SeparableConv1D's configs (one_d: sizes are an int or a list of one).
std::shared_ptr<Layer> separable_from_config(ConfigReader& r, bool one_d) {
  if (!r.has("filters") || !r.has("kernel_size"))
    r.fail_option(r.has("filters") ? "kernel_size" : "filters", "missing");
  auto size = [&](const char* key, int fallback) { return r.get_pair_or_size1(key, fallback, one_d); };
  int filters = r.get_int("filters", 0);
  Pair kernel = size("kernel_size", 0);
  SeparableConv2DOptions o{
      .strides = size("strides", 1),
      .padding = r.get_string("padding", "valid"),
      .dilation_rate = size("dilation_rate", 1),
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
  return std::make_shared<SeparableConv2DLayer>(filters, kernel, o, one_d);
}
}  // namespace

std::shared_ptr<Layer> separable_conv2d_from_config(ConfigReader& r) {
  return separable_from_config(r, false);
}
std::shared_ptr<Layer> separable_conv1d_from_config(ConfigReader& r) {
  return separable_from_config(r, true);
}

LayerRef SeparableConv2D(int filters, Pair kernel_size, const SeparableConv2DOptions& options) {
  return LayerRef(std::make_shared<SeparableConv2DLayer>(filters, kernel_size, options));
}

LayerRef SeparableConv1D(int filters, int kernel_size, const SeparableConv1DOptions& o) {
  SeparableConv2DOptions o2{.strides = {1, o.strides},
                            .padding = o.padding,
                            .dilation_rate = {1, o.dilation_rate},
                            .depth_multiplier = o.depth_multiplier,
                            .activation = o.activation,
                            .use_bias = o.use_bias,
                            .depthwise_initializer = o.depthwise_initializer,
                            .pointwise_initializer = o.pointwise_initializer,
                            .bias_initializer = o.bias_initializer,
                            .depthwise_regularizer = o.depthwise_regularizer,
                            .pointwise_regularizer = o.pointwise_regularizer,
                            .bias_regularizer = o.bias_regularizer,
                            .activity_regularizer = o.activity_regularizer,
                            .depthwise_constraint = o.depthwise_constraint,
                            .pointwise_constraint = o.pointwise_constraint,
                            .bias_constraint = o.bias_constraint,
                            .name = o.name};
  return LayerRef(std::make_shared<SeparableConv2DLayer>(filters, Pair{1, kernel_size}, o2, true));
}

}  // namespace systolic::layers
