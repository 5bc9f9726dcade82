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
//
// Conv1DTranspose: kernel (K, filters, C), the 2-D layer along one axis on (N, 1, L, C) views.
#include <systolic/layers.h>

#include "layers/config.h"
#include "layers/conv_geometry.h"

namespace systolic::layers {

namespace {
class Conv2DTransposeLayer final : public Layer {
 public:
  // one_d: Conv1DTranspose, whose options are the 2-D ones with an H axis of size 1 (kernel, strides, dilation
  // and output_padding {1, k}, {1, s}, {1, d}, {0, p}).
  Conv2DTransposeLayer(int filters, Pair kernel, const Conv2DTransposeOptions& o, bool one_d = false)
      : Layer(one_d ? "Conv1DTranspose" : "Conv2DTranspose", o.name, activation_from_name(o.activation)),
        filters_(filters),
        kernel_(kernel),
        o_(o),
        geometry_(kernel, o.strides, o.dilation_rate, o.padding),
        one_d_(one_d) {
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
    if (in[0].rank() != (one_d_ ? 2 : 3))
      fail_shape(std::string("expects input ") + (one_d_ ? "(steps, channels)" : "(H, W, C)") + ", got " +
                 in[0].keras_str());
    const Shape sample = one_d_ ? Shape{1, in[0][0], in[0][1]} : in[0];
    std::int64_t h = output_length(sample[0], 0), w = output_length(sample[1], 1);
    if (h <= 0 || w <= 0) fail_shape("no output for the input " + in[0].keras_str());
    // The convolution of the output must give back the input's extent (TensorFlow checks the same).
    for (int a = 0; a < 2; ++a) {
      if (geometry_.pad(a, a ? w : h).out != sample[a])
        fail_shape("output_padding does not fit the input " + in[0].keras_str());
    }
    if (one_d_) return {w, filters_};
    return {h, w, filters_};
  }

  void get_config(json& c) const override {
    Layer::get_config(c);
    auto sizes = [&](Pair p) { return one_d_ ? json::array({p[1]}) : json(p); };
    c["filters"] = filters_;
    c["kernel_size"] = sizes(kernel_);
    c["strides"] = sizes(o_.strides);
    c["padding"] = o_.padding;
    c["output_padding"] = o_.output_padding ? sizes(*o_.output_padding) : json(nullptr);
    c["data_format"] = "channels_last";
    c["dilation_rate"] = sizes(o_.dilation_rate);
    write_kernel_options(c, {o_.activation,
                             o_.use_bias,
                             o_.kernel_initializer,
                             o_.bias_initializer,
                             {o_.kernel_regularizer, o_.kernel_constraint},
                             {o_.bias_regularizer, o_.bias_constraint}});
  }

 protected:
  void build(const std::vector<Shape>& in) override {
    add_weight(
        "kernel",
        one_d_ ? Shape{kernel_[1], filters_, in[0][1]} : Shape{kernel_[0], kernel_[1], filters_, in[0][2]},
        o_.kernel_initializer, true, {o_.kernel_regularizer, o_.kernel_constraint});
    if (o_.use_bias)
      add_weight("bias", {filters_}, o_.bias_initializer, true, {o_.bias_regularizer, o_.bias_constraint});
  }

  // The convolution from the output (y) back to the input's shape.
  ops::Conv2DParams params(const Shape& y) const { return geometry_.conv2d_params(y); }

  // The tensors as the 2-D ops take them: (N, 1, L, C) views and the kernel (1, K, filters, C).
  Tensor spatial(const Tensor& t) const { return one_d_ ? as_2d(t) : t; }
  Tensor kernel(const Tensor& k) const {
    return one_d_ && k.defined() ? k.reshape({1, k.dim(0), k.dim(1), k.dim(2)}) : k;
  }

  void forward(LayerCall& c) override {
    Tensor none, y = spatial(c.output);
    ops::conv2d_backward(none, kernel(weights()[0].operand()), spatial(c.inputs[0]), y, none, none,
                         params(y.shape()));
    if (o_.use_bias) ops::bias_add_forward(c.output, weights()[1].value, c.output);
  }

  void backward(LayerCall& c) override {
    Tensor none, dy = spatial(c.doutput), x = spatial(c.inputs[0]), dx = spatial(c.dinputs[0]);
    auto p = params(dy.shape());
    const Tensor k = kernel(weights()[0].operand());
    if (dx.defined()) ops::conv2d_forward(dy, k, none, dx, p);
    Tensor dk = kernel(weights()[0].grad);
    if (dk.defined()) ops::conv2d_backward(dy, k, x, none, dk, none, p);
    if (o_.use_bias && weights()[1].grad.defined()) ops::bias_add_backward(c.doutput, weights()[1].grad);
  }

 private:
  int filters_;
  Pair kernel_;
  Conv2DTransposeOptions o_;
  ConvGeometry geometry_;
  bool one_d_ = false;
};
}  // namespace

namespace {
// Conv2DTranspose's and Conv1DTranspose's configs (one_d: sizes are an int or a list of one).
std::shared_ptr<Layer> transpose_from_config(ConfigReader& r, bool one_d) {
  if (!r.has("filters") || !r.has("kernel_size"))
    r.fail_option(r.has("filters") ? "kernel_size" : "filters", "missing");
  auto size = [&](const char* key, int fallback) { return r.get_pair_or_size1(key, fallback, one_d); };
  int filters = r.get_int("filters", 0);
  Pair kernel = size("kernel_size", 0);
  std::optional<Pair> output_padding;
  if (one_d) {
    if (auto p = r.get_optional_size1("output_padding")) output_padding = Pair{0, *p};
  } else {
    output_padding = r.get_optional_pair("output_padding");
  }
  auto k = read_kernel_options(r);
  Conv2DTransposeOptions o{.strides = size("strides", 1),
                           .padding = r.get_string("padding", "valid"),
                           .output_padding = output_padding,
                           .dilation_rate = size("dilation_rate", 1),
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
  return std::make_shared<Conv2DTransposeLayer>(filters, kernel, o, one_d);
}
}  // namespace

std::shared_ptr<Layer> conv2d_transpose_from_config(ConfigReader& r) {
  return transpose_from_config(r, false);
}
std::shared_ptr<Layer> conv1d_transpose_from_config(ConfigReader& r) {
  return transpose_from_config(r, true);
}

LayerRef Conv2DTranspose(int filters, Pair kernel_size, const Conv2DTransposeOptions& options) {
  return LayerRef(std::make_shared<Conv2DTransposeLayer>(filters, kernel_size, options));
}

LayerRef Conv1DTranspose(int filters, int kernel_size, const Conv1DTransposeOptions& o) {
  Conv2DTransposeOptions o2{
      .strides = {1, o.strides},
      .padding = o.padding,
      .output_padding = o.output_padding ? std::optional<Pair>(Pair{0, *o.output_padding}) : std::nullopt,
      .dilation_rate = {1, o.dilation_rate},
      .activation = o.activation,
      .use_bias = o.use_bias,
      .kernel_initializer = o.kernel_initializer,
      .bias_initializer = o.bias_initializer,
      .kernel_regularizer = o.kernel_regularizer,
      .bias_regularizer = o.bias_regularizer,
      .activity_regularizer = o.activity_regularizer,
      .kernel_constraint = o.kernel_constraint,
      .bias_constraint = o.bias_constraint,
      .name = o.name};
  return LayerRef(std::make_shared<Conv2DTransposeLayer>(filters, Pair{1, kernel_size}, o2, true));
}

}  // namespace systolic::layers
