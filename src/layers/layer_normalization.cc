// LayerNormalization (Keras 3) and UnitNormalization (Keras 3): per sample, over a trailing contiguous set of
// axes (ops::layer_norm_forward: statistics in double on the CPU). LayerNormalization: gamma then beta, each of
// the normalised axes' shape; rms_scaling (deprecated in Keras) keeps gamma only and scales x by
// 1/sqrt(var + eps) without centring it. UnitNormalization: x / sqrt(max(sum x^2, 1e-12)), no weights. Axes that
// are not the trailing ones are refused by name.
#include <systolic/layers.h>

#include <algorithm>

#include "layers/config.h"

namespace systolic::layers {

namespace {

// The normalised axes (non-negative, of the full shape with the batch) from Keras's axis option; refuses axes
// that are not the last ones or the batch axis.
int trailing_axes(const Layer& layer, const std::vector<int>& axis, const Shape& in, bool& ok) {
  const int rank = in.rank() + 1;
  std::vector<int> a;
  for (int x : axis) a.push_back(x < 0 ? x + rank : x);
  std::sort(a.begin(), a.end());
  ok = !a.empty() && std::unique(a.begin(), a.end()) == a.end();
  for (std::size_t i = 0; ok && i < a.size(); ++i) ok = a[i] >= 1 && a[i] == rank - int(a.size()) + int(i);
  (void)layer;
  return int(a.size());
}

std::string axis_str(const std::vector<int>& axis) {
  std::string s = "[";
  for (std::size_t i = 0; i < axis.size(); ++i) s += (i ? ", " : "") + std::to_string(axis[i]);
  return s + "]";
}

class LayerNormLayer final : public Layer {
 public:
  LayerNormLayer(std::string cls, ops::NormKind kind, const LayerNormalizationOptions& o)
      : Layer(std::move(cls), o.name), kind_(kind), o_(o) {
    SYSTOLIC_CHECK(kind == ops::NormKind::unit || o.epsilon > 0, "layer '{}': epsilon must be positive",
                   name());
  }

  Shape compute_output_shape(const std::vector<Shape>& in) const override {
    bool ok;
    trailing_axes(*this, o_.axis, in[0], ok);
    if (!ok)
      fail_shape("axis " + axis_str(o_.axis) + " of input " + in[0].keras_str() +
                 ": only a set of trailing axes (not the batch axis) is supported");
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
    if (kind_ == ops::NormKind::unit) return;
    bool ok;
    int axes = trailing_axes(*this, o_.axis, in[0], ok);
    std::vector<std::int64_t> dims;
    for (int i = in[0].rank() - axes; i < in[0].rank(); ++i) dims.push_back(in[0][i]);
    if (o_.scale || o_.rms_scaling)
      add_weight("gamma", Shape(dims), o_.gamma_initializer, true,
                 {o_.gamma_regularizer, o_.gamma_constraint});
    if (o_.center && !o_.rms_scaling)
      add_weight("beta", Shape(dims), o_.beta_initializer, true, {o_.beta_regularizer, o_.beta_constraint});
  }

  int axes() const { return int(o_.axis.size()); }
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
    for (int i = x.rank() - axes(); i < x.rank(); ++i) k *= x.dim(i);
    const std::int64_t m = x.numel() / k;
    DType st = x.dtype() == DType::float64 ? DType::float64 : DType::float32;
    if (c.saved.size() != 2 || c.saved[0].numel() != m || c.saved[0].dtype() != st)
      c.saved = {Tensor({m}, st, x.device()), Tensor({m}, st, x.device())};
    ops::layer_norm_forward(x, gamma() ? gamma()->value : Tensor(), beta() ? beta()->value : Tensor(),
                            c.output, c.saved[0], c.saved[1], axes(), kind_, o_.epsilon);
  }

  void backward(LayerCall& c) override {
    SYSTOLIC_CHECK(c.saved.size() == 2, "layer '{}': backward without a forward", name());
    Tensor none_g, none_b;
    ops::layer_norm_backward(c.inputs[0], gamma() ? gamma()->value : Tensor(), c.saved[0], c.saved[1],
                             c.doutput, c.dinputs[0], gamma() ? gamma()->grad : none_g,
                             beta() ? beta()->grad : none_b, axes(), kind_);
  }

 private:
  ops::NormKind kind_;
  LayerNormalizationOptions o_;
};

// Keras's axis: an int or a list of ints.
std::vector<int> read_axis(ConfigReader& r, int fallback, bool& is_list) {
  is_list = false;
  if (!r.has("axis")) return {fallback};
  auto& a = r.get_raw("axis");
  if (a.is_number_integer()) return {a.get<int>()};
  std::vector<int> axis;
  if (a.is_array())
    for (auto& v : a) {
      if (!v.is_number_integer()) r.fail_option("axis", "expected an int or a list of ints, got " + a.dump());
      axis.push_back(v.get<int>());
    }
  if (!a.is_array() || axis.empty())
    r.fail_option("axis", "expected an int or a list of ints, got " + a.dump());
  is_list = true;
  return axis;
}
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
