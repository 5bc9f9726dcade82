// The activation layers of Keras: Activation (any activation by name), ReLU (max_value, negative_slope,
// threshold), LeakyReLU (negative_slope), ELU (alpha) and Softmax. Each applies its activation as the Layer base's
// fused activation over its input, whose values the base keeps as the pre-activation ones (a softmax output layer
// hands its logits to the loss like a Dense(..., activation="softmax") does). A Softmax over other axes than the
// last (Keras's axis, an int or a list) moves them last (ops::transpose), takes the softmax over their values as
// rows and moves the result back.
#include <systolic/layers.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "layers/config.h"
#include "layers/permutation.h"

namespace systolic::layers {

namespace {
class ActivationLayer final : public Layer {
 public:
  bool output_masked(bool input_masked) const override { return input_masked; }  // Keras passes it on
  ActivationLayer(const char* class_name, const systolic::Activation& activation, const std::string& name)
      : Layer(class_name, name, activation) {
    if (class_name_is("ReLU")) {
      SYSTOLIC_CHECK(!(activation.max_value < 0), "layer '{}' (ReLU): max_value must be >= 0, got {}",
                     this->name(), activation.max_value);
      SYSTOLIC_CHECK(activation.alpha >= 0, "layer '{}' (ReLU): negative_slope must be >= 0, got {}",
                     this->name(), activation.alpha);
      SYSTOLIC_CHECK(activation.threshold >= 0, "layer '{}' (ReLU): threshold must be >= 0, got {}",
                     this->name(), activation.threshold);
    }
    if (class_name_is("LeakyReLU"))
      SYSTOLIC_CHECK(activation.alpha >= 0, "layer '{}' (LeakyReLU): negative_slope must be >= 0, got {}",
                     this->name(), activation.alpha);
  }

  Shape compute_output_shape(const std::vector<Shape>& in) const override { return in[0]; }

  void get_config(json& c) const override {
    Layer::get_config(c);
    const systolic::Activation& a = activation_;
    if (class_name_is("Activation")) {
      SYSTOLIC_CHECK(
          a == systolic::Activation(a.kind),
          "layer '{}' (Activation): {} with non-default parameters has no Keras config (Keras names only "
          "activations with their defaults)",
          name(), activation_name(a));
      c["activation"] = activation_name(a);
    } else if (class_name_is("ReLU")) {
      c["max_value"] = std::isinf(a.max_value) ? json(nullptr) : json(a.max_value);
      c["negative_slope"] = a.alpha;
      c["threshold"] = a.threshold;
    } else if (class_name_is("LeakyReLU") || class_name_is("ELU")) {
      c["alpha"] = a.alpha;  // tf.keras's key; Keras 3 reads it too (LeakyReLU: as negative_slope)
    } else {
      c["axis"] = -1;
    }
  }

 protected:
  // The activation itself (the base's call_backward applies its gradient to doutput, given the input as the
  // pre-activation values).
  bool fuses_activation() const override { return true; }
  void forward(LayerCall& c) override {
    c.preactivation = c.inputs[0];
    ops::activation_forward(activation_, c.inputs[0], c.output);
  }
  void backward(LayerCall& c) override {
    if (c.dinputs[0].defined()) ops::copy(c.doutput, c.dinputs[0]);
  }

 private:
  bool class_name_is(const char* name) const { return class_name() == name; }
};

// Softmax(axis) where the axis is not -1 alone: Keras's axis as it was given (an int, or a list).
class SoftmaxAxesLayer final : public Layer {
 public:
  SoftmaxAxesLayer(std::vector<int> axis, bool list, const std::string& name)
      : Layer("Softmax", name), axis_(std::move(axis)), list_(list) {
    SYSTOLIC_CHECK(!axis_.empty(), "layer '{}' (Softmax): axis must name at least one axis", this->name());
  }
  bool output_masked(bool input_masked) const override { return input_masked; }  // as the last-axis Softmax

  Shape compute_output_shape(const std::vector<Shape>& in) const override {
    axes_of(in[0].rank() + 1);  // checks the axes against the input
    return in[0];
  }

  void get_config(json& c) const override {
    Layer::get_config(c);
    c["axis"] = list_ ? json(axis_) : json(axis_[0]);
  }

 protected:
  // The axes' move, from the input's shape (the batch's axis 0 stays first: it is never a softmax axis).
  void build(const std::vector<Shape>& in) override {
    const std::vector<int> axes = axes_of(in[0].rank() + 1);
    perm_.clear();
    for (int a = 0; a <= in[0].rank(); ++a)
      if (!std::binary_search(axes.begin(), axes.end(), a)) perm_.push_back(a);
    perm_.insert(perm_.end(), axes.begin(), axes.end());
    inverse_ = inverse_permutation(perm_);
    identity_ = is_identity_permutation(perm_);
    row_ = 1;
    for (int a : axes) row_ *= in[0][a - 1];
  }

  void forward(LayerCall& c) override {
    const Tensor& x = c.inputs[0];
    const Shape rows = rows_of(x);
    if (identity_) {
      Tensor y = c.output.reshape(rows);
      ops::activation_forward(systolic::Activation::softmax, x.reshape(rows), y);
      return;
    }
    Buffers b = buffers(c);
    ops::transpose(x, b.x, perm_);
    Tensor y = b.y.reshape(rows);
    ops::activation_forward(systolic::Activation::softmax, b.x.reshape(rows), y);
    ops::transpose(b.y, c.output, inverse_);
  }
  void backward(LayerCall& c) override {
    if (!c.dinputs[0].defined()) return;
    const Tensor& x = c.inputs[0];
    const Shape rows = rows_of(x);
    if (identity_) {
      Tensor dx = c.dinputs[0].reshape(rows);
      ops::activation_backward(systolic::Activation::softmax, x.reshape(rows), c.output.reshape(rows),
                               c.doutput.reshape(rows), dx);
      return;
    }
    Buffers b = buffers(c);
    ops::transpose(c.doutput, b.dy, perm_);
    Tensor dx = b.dx.reshape(rows);
    ops::activation_backward(systolic::Activation::softmax, b.x.reshape(rows), b.y.reshape(rows),
                             b.dy.reshape(rows), dx);
    ops::transpose(b.dx, c.dinputs[0], inverse_);
  }

 private:
  // The axes of a tensor of `rank` axes (the batch's included) the softmax runs over, ascending.
  std::vector<int> axes_of(int rank) const {
    std::vector<int> axes;
    for (int a : axis_) {
      const int n = a < 0 ? a + rank : a;
      if (n < 0 || n >= rank)
        fail_shape(fmt::format("axis {} is out of range for inputs of rank {}", a, rank));
      if (n == 0) fail_shape("axis " + std::to_string(a) + " is the batch axis");
      if (std::find(axes.begin(), axes.end(), n) != axes.end())
        fail_shape(fmt::format("axis {} is given twice", a));
      axes.push_back(n);
    }
    std::sort(axes.begin(), axes.end());
    return axes;
  }
  // x as rows of the softmax's values (row_ values each).
  Shape rows_of(const Tensor& x) const { return Shape({row_ ? x.numel() / row_ : 0, row_}); }
  // The moved input and output and their gradients, kept in c.saved for the call's batch size.
  struct Buffers {
    Tensor x, y, dy, dx;
  };
  Buffers buffers(LayerCall& c) const {
    const Tensor& x = c.inputs[0];
    std::vector<std::int64_t> dims;
    for (int a : perm_) dims.push_back(x.dim(a));
    const Shape moved(dims);
    bool fresh = c.saved.size() != 4;
    for (std::size_t i = 0; !fresh && i < 4; ++i)
      fresh = c.saved[i].shape() != moved || c.saved[i].dtype() != x.dtype();
    if (fresh) {
      c.saved.clear();
      for (int i = 0; i < 4; ++i) c.saved.emplace_back(moved, x.dtype(), x.device());
    }
    return {c.saved[0], c.saved[1], c.saved[2], c.saved[3]};
  }

  std::vector<int> axis_;
  bool list_;
  // From build: the permutation that moves the softmax's axes last, its inverse, whether it moves nothing, and the
  // number of values a row has (the product of those axes' sizes).
  std::vector<int> perm_, inverse_;
  bool identity_ = true;
  std::int64_t row_ = 1;
};

systolic::Activation relu_with(std::optional<double> max_value, double negative_slope, double threshold) {
  systolic::Activation a = systolic::Activation::relu;
  a.max_value = max_value ? *max_value : INFINITY;
  a.alpha = negative_slope;
  a.threshold = threshold;
  return a;
}
systolic::Activation with_alpha(systolic::Activation::Kind kind, double alpha) {
  systolic::Activation a = kind;
  a.alpha = alpha;
  return a;
}
}  // namespace

std::shared_ptr<Layer> activation_from_config(ConfigReader& r) {
  if (!r.has("activation")) r.fail_option("activation", "missing");
  return std::make_shared<ActivationLayer>(
      "Activation", activation_from_name(r.get_activation("activation", "linear")), r.name());
}
std::shared_ptr<Layer> relu_from_config(ConfigReader& r) {
  std::optional<double> max_value;
  if (r.has("max_value") && !r.get_raw("max_value").is_null())
    max_value = r.get_double("max_value", 0.0);
  else
    r.ignore("max_value");
  return std::make_shared<ActivationLayer>(
      "ReLU", relu_with(max_value, r.get_double("negative_slope", 0.0), r.get_double("threshold", 0.0)),
      r.name());
}
std::shared_ptr<Layer> leaky_relu_from_config(ConfigReader& r) {
  // tf.keras writes alpha, Keras 3 negative_slope (and reads alpha); the defaults are both 0.3.
  double slope = r.has("negative_slope") ? r.get_double("negative_slope", 0.3) : r.get_double("alpha", 0.3);
  return std::make_shared<ActivationLayer>("LeakyReLU", with_alpha(systolic::Activation::leaky_relu, slope),
                                           r.name());
}
std::shared_ptr<Layer> elu_from_config(ConfigReader& r) {
  return std::make_shared<ActivationLayer>(
      "ELU", with_alpha(systolic::Activation::elu, r.get_double("alpha", 1.0)), r.name());
}
std::shared_ptr<Layer> softmax_from_config(ConfigReader& r) {
  bool list = false;
  std::vector<int> axis = read_axis(r, -1, list);
  if (!list && axis == std::vector<int>{-1})
    return std::make_shared<ActivationLayer>("Softmax", systolic::Activation::softmax, r.name());
  return std::make_shared<SoftmaxAxesLayer>(std::move(axis), list, r.name());
}

LayerRef Activation(const std::string& activation, const NameOptions& options) {
  return Activation(activation_from_name(activation), options);
}
LayerRef Activation(const systolic::Activation& activation, const NameOptions& options) {
  return LayerRef(std::make_shared<ActivationLayer>("Activation", activation, options.name));
}
LayerRef ReLU(const ReLUOptions& options) {
  return LayerRef(std::make_shared<ActivationLayer>(
      "ReLU", relu_with(options.max_value, options.negative_slope, options.threshold), options.name));
}
LayerRef LeakyReLU(double negative_slope, const NameOptions& options) {
  return LayerRef(std::make_shared<ActivationLayer>(
      "LeakyReLU", with_alpha(systolic::Activation::leaky_relu, negative_slope), options.name));
}
LayerRef ELU(double alpha, const NameOptions& options) {
  return LayerRef(
      std::make_shared<ActivationLayer>("ELU", with_alpha(systolic::Activation::elu, alpha), options.name));
}
LayerRef Softmax(const SoftmaxOptions& options) {
  if (options.axis == std::vector<int>{-1})
    return LayerRef(
        std::make_shared<ActivationLayer>("Softmax", systolic::Activation::softmax, options.name));
  return LayerRef(std::make_shared<SoftmaxAxesLayer>(options.axis, options.axis.size() != 1, options.name));
}

}  // namespace systolic::layers
