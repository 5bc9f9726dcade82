// Conv2DTranspose (Keras): kernel (KH, KW, filters, C), bias (filters,); strides, padding valid/same,
// output_padding, dilation_rate. Its forward is the data gradient of the convolution whose input has the
// transpose's output shape (conv2d_backward without x: dx = the output, dy = the input, the same kernel), its
// backward that convolution's forward (the input's gradient) and filter gradient (x = the output's gradient,
// dy = the input); the bias is bias_add.
//
// Output size per axis (Keras's deconv_output_length, k_eff = (k-1)*dilation + 1): without output_padding,
// valid: in*s + max(k_eff - s, 0), same: in*s; with it: (in-1)*s + k_eff - 2*pad + output_padding, pad = k_eff/2
// (same) or 0 (valid). The convolution's padding is TensorFlow's for that output size (conv2d_transpose
// computes it as the forward convolution's 'same' or 'valid' padding).
#include <systolic/layers.h>

#include "layers/config.h"
#include "layers/conv_geometry.h"

namespace systolic::layers {

namespace {
class Conv2DTransposeLayer final : public Layer {
 public:
  Conv2DTransposeLayer(int filters, Pair kernel, const Conv2DTransposeOptions& o)
      : Layer("Conv2DTranspose", o.name, activation_from_name(o.activation)),
        filters_(filters),
        kernel_(kernel),
        o_(o),
        geometry_(kernel, o.strides, o.dilation_rate, o.padding) {
    set_activity_regularizer(o.activity_regularizer);
    SYSTOLIC_CHECK(filters > 0, "layer '{}': filters must be positive, got {}", name(), filters);
    geometry_.check(name(), {.strides_with_dilation = true});
    if (o.output_padding)
      for (int a = 0; a < 2; ++a)
        SYSTOLIC_CHECK(
            (*o.output_padding)[a] >= 0 && (*o.output_padding)[a] < o.strides[a],
            "layer '{}': output_padding {} must be at least 0 and less than the stride {} (as in Keras)",
            name(), (*o.output_padding)[a], o.strides[a]);
  }

  // The output extent along axis a for an input extent `in`.
  std::int64_t output_length(std::int64_t in, int a) const {
    std::int64_t k = std::int64_t(kernel_[a] - 1) * o_.dilation_rate[a] + 1, s = o_.strides[a];
    if (!o_.output_padding) return o_.padding == "same" ? in * s : in * s + std::max<std::int64_t>(k - s, 0);
    std::int64_t pad = o_.padding == "same" ? k / 2 : 0;
    return (in - 1) * s + k - 2 * pad + (*o_.output_padding)[a];
  }

  Shape compute_output_shape(const std::vector<Shape>& in) const override {
    if (in[0].rank() != 3) fail_shape("expects input (H, W, C), got " + in[0].keras_str());
    std::int64_t h = output_length(in[0][0], 0), w = output_length(in[0][1], 1);
    if (h <= 0 || w <= 0) fail_shape("no output for the input " + in[0].keras_str());
    // The convolution of the output must give back the input's extent (TensorFlow checks the same).
    for (int a = 0; a < 2; ++a) {
      if (geometry_.pad(a, a ? w : h).out != in[0][a])
        fail_shape("output_padding does not fit the input " + in[0].keras_str());
    }
    return {h, w, filters_};
  }

  void get_config(json& c) const override {
    Layer::get_config(c);
    c["filters"] = filters_;
    c["kernel_size"] = kernel_;
    c["strides"] = o_.strides;
    c["padding"] = o_.padding;
    c["output_padding"] = o_.output_padding ? json(*o_.output_padding) : json(nullptr);
    c["data_format"] = "channels_last";
    c["dilation_rate"] = o_.dilation_rate;
    write_kernel_options(c, {o_.activation,
                             o_.use_bias,
                             o_.kernel_initializer,
                             o_.bias_initializer,
                             {o_.kernel_regularizer, o_.kernel_constraint},
                             {o_.bias_regularizer, o_.bias_constraint}});
  }

 protected:
  void build(const std::vector<Shape>& in) override {
    add_weight("kernel", {kernel_[0], kernel_[1], filters_, in[0][2]}, o_.kernel_initializer, true,
               {o_.kernel_regularizer, o_.kernel_constraint});
    if (o_.use_bias)
      add_weight("bias", {filters_}, o_.bias_initializer, true, {o_.bias_regularizer, o_.bias_constraint});
  }

  // The convolution from the output (y) back to the input's shape.
  ops::Conv2DParams params(const Shape& y) const { return geometry_.conv2d_params(y); }

  void forward(LayerCall& c) override {
    Tensor none;
    ops::conv2d_backward(none, weights()[0].operand(), c.inputs[0], c.output, none, none,
                         params(c.output.shape()));
    if (o_.use_bias) ops::bias_add_forward(c.output, weights()[1].value, c.output);
  }

  void backward(LayerCall& c) override {
    Tensor none;
    auto p = params(c.output.shape());
    if (c.dinputs[0].defined()) ops::conv2d_forward(c.doutput, weights()[0].operand(), none, c.dinputs[0], p);
    if (weights()[0].grad.defined())
      ops::conv2d_backward(c.doutput, weights()[0].operand(), c.inputs[0], none, weights()[0].grad, none, p);
    if (o_.use_bias && weights()[1].grad.defined()) ops::bias_add_backward(c.doutput, weights()[1].grad);
  }

 private:
  int filters_;
  Pair kernel_;
  Conv2DTransposeOptions o_;
  ConvGeometry geometry_;
};
}  // namespace

std::shared_ptr<Layer> conv2d_transpose_from_config(ConfigReader& r) {
  if (!r.has("filters") || !r.has("kernel_size"))
    r.fail_option(r.has("filters") ? "kernel_size" : "filters", "missing");
  int filters = r.get_int("filters", 0);
  Pair kernel = r.get_pair("kernel_size", {0, 0});
  auto k = read_kernel_options(r);
  Conv2DTransposeOptions o{.strides = r.get_pair("strides", {1, 1}),
                           .padding = r.get_string("padding", "valid"),
                           .output_padding = r.get_optional_pair("output_padding"),
                           .dilation_rate = r.get_pair("dilation_rate", {1, 1}),
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
  r.require_value("groups", 1);  // tf.keras writes it
  return std::make_shared<Conv2DTransposeLayer>(filters, kernel, o);
}

LayerRef Conv2DTranspose(int filters, Pair kernel_size, const Conv2DTransposeOptions& options) {
  return LayerRef(std::make_shared<Conv2DTransposeLayer>(filters, kernel_size, options));
}

}  // namespace systolic::layers
