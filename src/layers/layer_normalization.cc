// LayerNormalization (Keras 3) and UnitNormalization (Keras 3): per sample, over any set of its axes (`axis`: an int
// or a list; ops::layer_norm_forward: statistics in double on the CPU's loops, oneDNN's layer_normalization for
// float32 over trailing axes). LayerNormalization: gamma then beta, of Keras's shape (the normalised axes' dims,
// in the order of Python's sorted(axis), negative axes first), whose values Keras reshapes to the input's rank:
// the op reads them flat, in the normalised axes' ascending order. rms_scaling (deprecated in Keras) keeps gamma
// only and scales x by 1/sqrt(var + eps) without centring it. UnitNormalization: x * min(1/sqrt(sum x^2), 1e12),
// no weights. The batch axis, axes out of range and repeated axes are refused by name, as Keras cannot build them.
#include <systolic/layers.h>

#include <algorithm>

#include "layers/config.h"

namespace systolic::layers {

namespace {

std::string axis_str(const std::vector<int>& axis) {
  std::string s = "[";
  for (std::size_t i = 0; i < axis.size(); ++i) s += (i ? ", " : "") + std::to_string(axis[i]);
  return s + "]";
}

// The normalised axes of an input of shape `in` (without the batch) as a set of the full shape's axes (bit a:
// axis a, the batch axis 0), or 0 when `axis` names the batch axis, an axis out of range or one twice.
std::uint32_t axes_set(const std::vector<int>& axis, const Shape& in) {
  const int rank = in.rank() + 1;
  std::uint32_t set = 0;
  for (int x : axis) {
    const int a = x < 0 ? x + rank : x;
    if (a < 1 || a >= rank || (set >> a) & 1u) return 0;
    set |= 1u << a;
  }
  return set;
}

class LayerNormLayer final : public Layer {
 public:
  bool output_masked(bool input_masked) const override { return input_masked; }  // Keras passes it on
  LayerNormLayer(std::string cls, ops::NormKind kind, const LayerNormalizationOptions& o)
      : Layer(std::move(cls), o.name), kind_(kind), o_(o) {
    SYSTOLIC_CHECK(kind == ops::NormKind::unit || o.epsilon > 0, "layer '{}': epsilon must be positive",
                   name());
  }

  Shape compute_output_shape(const std::vector<Shape>& in) const override {
    if (in[0].rank() + 1 > 8 || axes_set(o_.axis, in[0]) == 0)
      fail_shape("axis " + axis_str(o_.axis) + " of input " + in[0].keras_str() +
                 ": the axes must be distinct axes of the input other than the batch axis (of at most 8)");
    return in[0];
  }

  void get_config(json& c) const override {
    Layer::get_config(c);
    if (kind_ == ops::NormKind::unit) {
      c["axis"] = o_.axis_is_list ? json(o_.axis) : json(o_.axis[0]);
      return;
    }
    // Keras's build turns an int axis into a sorted list, which a built layer writes.
    std::vector<int> sorted = o_.axis;
    if (built()) std::sort(sorted.begin(), sorted.end());
    c["axis"] = o_.axis_is_list || built() ? json(sorted) : json(o_.axis[0]);
    c["epsilon"] = o_.epsilon;
    c["center"] = o_.center;
    c["scale"] = o_.scale;
    c["rms_scaling"] = o_.rms_scaling;
    c["beta_initializer"] = initializer_config(o_.beta_initializer);
    c["gamma_initializer"] = initializer_config(o_.gamma_initializer);
    WeightOptions beta{o_.beta_regularizer, o_.beta_constraint},
        gamma{o_.gamma_regularizer, o_.gamma_constraint};
    write_regularizers(c, {{"beta", &beta}, {"gamma", &gamma}});
  }

 protected:
  void build(const std::vector<Shape>& in) override {
    axes_ = axes_set(o_.axis, in[0]);
    if (kind_ == ops::NormKind::unit) return;
    // Keras's shape: input_shape[dim] for dim in sorted(axis) (Python's sort: negative axes first).
    std::vector<int> sorted = o_.axis;
    std::sort(sorted.begin(), sorted.end());
    std::vector<std::int64_t> dims;
    for (int a : sorted) dims.push_back(in[0][a < 0 ? a + in[0].rank() : a - 1]);
    if (o_.scale || o_.rms_scaling)
      add_weight("gamma", Shape(dims), o_.gamma_initializer, true,
                 {o_.gamma_regularizer, o_.gamma_constraint});
    if (o_.center && !o_.rms_scaling)
      add_weight("beta", Shape(dims), o_.beta_initializer, true, {o_.beta_regularizer, o_.beta_constraint});
  }

  // The weights in Keras's order: gamma (scale or rms_scaling), then beta (center, not rms_scaling).
  Weight* gamma() {
    return kind_ != ops::NormKind::unit && (o_.scale || o_.rms_scaling) ? &weights()[0] : nullptr;
  }
  Weight* beta() {
    if (kind_ != ops::NormKind::layer || !o_.center) return nullptr;
    return &weights()[gamma() ? 1 : 0];
  }

  void forward(LayerCall& c) override {
    const Tensor& x = c.inputs[0];
    std::int64_t k = 1;
    for (int i = 0; i < x.rank(); ++i)
      if ((axes_ >> i) & 1u) k *= x.dim(i);
    const std::int64_t m = k ? x.numel() / k : 0;
    DType st = x.dtype() == DType::float64 ? DType::float64 : DType::float32;
    if (c.saved.size() != 2 || c.saved[0].numel() != m || c.saved[0].dtype() != st)
      c.saved = {Tensor({m}, st, x.device()), Tensor({m}, st, x.device())};
    ops::layer_norm_forward(x, gamma() ? flat(gamma()->value) : Tensor(),
                            beta() ? flat(beta()->value) : Tensor(), c.output, c.saved[0], c.saved[1], axes_,
                            kind_, o_.epsilon);
  }

  void backward(LayerCall& c) override {
    SYSTOLIC_CHECK(c.saved.size() == 2, "layer '{}': backward without a forward", name());
    Tensor dgamma = gamma() && gamma()->grad.defined() ? flat(gamma()->grad) : Tensor();
    Tensor dbeta = beta() && beta()->grad.defined() ? flat(beta()->grad) : Tensor();
    ops::layer_norm_backward(c.inputs[0], gamma() ? flat(gamma()->value) : Tensor(), c.saved[0], c.saved[1],
                             c.doutput, c.dinputs[0], dgamma, dbeta, axes_, kind_);
  }

 private:
  // Keras's gamma and beta reshaped to one dimension: the op's K values, in the normalised axes' ascending order.
  static Tensor flat(const Tensor& t) { return t.reshape({t.numel()}); }

  ops::NormKind kind_;
  LayerNormalizationOptions o_;
  std::uint32_t axes_ = 0;  // the normalised axes of the input with its batch axis (bit a: axis a)
};

// Keras's axis: an int or a list of ints.
}  // namespace

std::shared_ptr<Layer> layer_normalization_from_config(ConfigReader& r) {
  LayerNormalizationOptions o;
  o.axis = read_axis(r, -1, o.axis_is_list);
  o.epsilon = r.get_double("epsilon", 1e-3);
  o.center = r.get_bool("center", true);
  o.scale = r.get_bool("scale", true);
  o.rms_scaling = r.get_bool("rms_scaling", false);
  o.beta_initializer = r.get_initializer("beta_initializer", "zeros");
  o.gamma_initializer = r.get_initializer("gamma_initializer", "ones");
  o.beta_regularizer = r.get_regularizer("beta_regularizer");
  o.gamma_regularizer = r.get_regularizer("gamma_regularizer");
  o.beta_constraint = r.get_constraint("beta_constraint");
  o.gamma_constraint = r.get_constraint("gamma_constraint");
  o.name = r.name();
  return std::make_shared<LayerNormLayer>(
      "LayerNormalization", o.rms_scaling ? ops::NormKind::rms_scaling : ops::NormKind::layer, o);
}

std::shared_ptr<Layer> unit_normalization_from_config(ConfigReader& r) {
  LayerNormalizationOptions o;
  o.axis = read_axis(r, -1, o.axis_is_list);
  o.name = r.name();
  return std::make_shared<LayerNormLayer>("UnitNormalization", ops::NormKind::unit, o);
}

LayerRef LayerNormalization(const LayerNormalizationOptions& options) {
  return LayerRef(std::make_shared<LayerNormLayer>(
      "LayerNormalization", options.rms_scaling ? ops::NormKind::rms_scaling : ops::NormKind::layer,
      options));
}

LayerRef UnitNormalization(std::vector<int> axis, const NameOptions& options) {
  LayerNormalizationOptions o;
  o.axis = std::move(axis);
  o.axis_is_list = o.axis.size() != 1;
  o.name = options.name;
  return LayerRef(std::make_shared<LayerNormLayer>("UnitNormalization", ops::NormKind::unit, o));
}

}  // namespace systolic::layers
