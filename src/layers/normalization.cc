// Normalization (Keras 3, a preprocessing layer): y = (x - mean) / max(sqrt(variance), 1e-7), or with invert
// y = mean + x * max(sqrt(variance), 1e-7) (ops::normalize_forward). `axis` lists the axes that keep their own
// statistics (default the last; null: one mean and variance for everything). Given in the config, mean and
// variance are constants (a number or nested lists of the kept axes' shape) and written back; otherwise they
// are the layer's non-trainable weights "mean", "variance" (the kept axes' shape) and "count" (a scalar), as
// Keras 3 stores them after adapt(). The kept axes must be the trailing ones (or none); others are refused.
// adapt() is Keras's, not systolic's: the statistics come from the file.
#include <systolic/layers.h>

#include <algorithm>
#include <functional>

#include "layers/config.h"

namespace systolic::layers {

namespace {
class NormalizationLayer final : public Layer {
 public:
  explicit NormalizationLayer(const NormalizationOptions& o) : Layer("Normalization", o.name), o_(o) {
    SYSTOLIC_CHECK(o.mean.has_value() == o.variance.has_value(),
                   "layer '{}': give both mean and variance, or neither", name());
  }

  Shape compute_output_shape(const std::vector<Shape>& in) const override {
    kept_shape(in[0]);
    return in[0];
  }

  void get_config(json& c) const override {
    Layer::get_config(c);
    c["axis"] = o_.axis ? json(*o_.axis) : json(nullptr);
    c["invert"] = o_.invert;
    // As Keras writes what it was given: the config's own values, else a number for one value, else a list.
    auto values = [](const std::optional<std::vector<double>>& v, const json& given) {
      if (!given.is_null()) return given;
      if (!v) return json(nullptr);
      return v->size() == 1 ? json((*v)[0]) : json(*v);
    };
    c["mean"] = values(o_.mean, mean_config);
    c["variance"] = values(o_.variance, variance_config);
  }

  json mean_config, variance_config;  // mean and variance as the config gave them (null: not from a config)

 protected:
  // The kept axes' dims (empty for axis null); throws unless they are the trailing axes.
  Shape kept_shape(const Shape& in) const {
    if (!o_.axis) return Shape{};
    const int rank = in.rank() + 1;
    std::vector<int> a;
    for (int x : *o_.axis) a.push_back(x < 0 ? x + rank : x);
    std::sort(a.begin(), a.end());
    bool ok = std::unique(a.begin(), a.end()) == a.end();
    for (std::size_t i = 0; ok && i < a.size(); ++i) ok = a[i] >= 1 && a[i] == rank - int(a.size()) + int(i);
    if (!ok)
      fail_shape("axis " + json(*o_.axis).dump() + " of input " + in.keras_str() +
                 ": only trailing axes (or null) are supported");
    std::vector<std::int64_t> dims;
    for (int x : a) dims.push_back(in[x - 1]);
    return Shape(dims);
  }

  void build(const std::vector<Shape>& in) override {
    Shape kept = kept_shape(in[0]);
    const std::int64_t k = kept.numel();
    if (!o_.mean) {
      add_weight("mean", kept, "zeros", false);
      add_weight("variance", kept, "ones", false);
      add_weight("count", Shape{}, "zeros", false);
      return;
    }
    // Constants: a number, or k numbers (nested lists flattened row-major), as Keras broadcasts them.
    auto values = [&](const std::vector<double>& v, const char* what) {
      SYSTOLIC_CHECK(v.size() == 1 || std::int64_t(v.size()) == k,
                     "layer '{}': {} has {} values; the kept axes {} take {}", name(), what, v.size(),
                     kept.str(), k);
      std::vector<double> full(k, v[0]);
      if (v.size() != 1) full = v;
      return Tensor::from_vector<double>(full, {k}).to(dtype());
    };
    mean_ = values(*o_.mean, "mean");
    variance_ = values(*o_.variance, "variance");
  }

  // The statistics on the input's device: weights, or the constants copied there once.
  void statistics(const Tensor& x, Tensor& mean, Tensor& variance) {
    if (!o_.mean) {
      mean = weights()[0].value;
      variance = weights()[1].value;
      if (mean.numel() == 0) mean = mean.reshape({1});
      return;
    }
    if (mean_.device() != x.device()) {
      mean_ = mean_.to(x.device());
      variance_ = variance_.to(x.device());
    }
    mean = mean_;
    variance = variance_;
  }

  void forward(LayerCall& c) override {
    Tensor mean, variance;
    statistics(c.inputs[0], mean, variance);
    ops::normalize_forward(c.inputs[0], mean.reshape({mean.numel()}), variance.reshape({variance.numel()}),
                           c.output, o_.invert);
  }
  void backward(LayerCall& c) override {
    if (!c.dinputs[0].defined()) return;
    Tensor mean, variance;
    statistics(c.doutput, mean, variance);
    ops::normalize_backward(variance.reshape({variance.numel()}), c.doutput, c.dinputs[0], o_.invert);
  }

 private:
  NormalizationOptions o_;
  Tensor mean_, variance_;
};

// A number or nested lists of numbers, flattened row-major; null: absent.
std::optional<std::vector<double>> read_values(ConfigReader& r, const char* key) {
  if (!r.has(key)) return std::nullopt;
  auto& v = r.get_raw(key);
  if (v.is_null()) return std::nullopt;
  std::vector<double> out;
  std::function<void(const json&)> walk = [&](const json& j) {
    if (j.is_number())
      out.push_back(j.get<double>());
    else if (j.is_array())
      for (auto& e : j) walk(e);
    else
      r.fail_option(key, "expected a number or lists of numbers, got " + v.dump());
  };
  walk(v);
  if (out.empty()) r.fail_option(key, "expected a number or lists of numbers, got " + v.dump());
  return out;
}
}  // namespace

std::shared_ptr<Layer> normalization_from_config(ConfigReader& r) {
  NormalizationOptions o;
  if (r.has("axis")) {
    auto& a = r.get_raw("axis");
    if (a.is_null())
      o.axis = std::nullopt;
    else if (a.is_number_integer())
      o.axis = std::vector<int>{a.get<int>()};
    else if (a.is_array() &&
             std::all_of(a.begin(), a.end(), [](const json& e) { return e.is_number_integer(); }))
      o.axis = a.get<std::vector<int>>();
    else
      r.fail_option("axis", "expected an int, a list of ints or null, got " + a.dump());
  }
  o.invert = r.get_bool("invert", false);
  o.mean = read_values(r, "mean");
  o.variance = read_values(r, "variance");
  if (o.mean.has_value() != o.variance.has_value())
    r.fail_option(o.mean ? "variance" : "mean", "give both mean and variance, or neither");
  o.name = r.name();
  auto layer = std::make_shared<NormalizationLayer>(o);
  if (o.mean) {
    layer->mean_config = r.get_raw("mean");
    layer->variance_config = r.get_raw("variance");
  }
  return layer;
}

LayerRef Normalization(const NormalizationOptions& options) {
  return LayerRef(std::make_shared<NormalizationLayer>(options));
}

}  // namespace systolic::layers
