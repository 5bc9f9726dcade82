// Normalization (Keras 3, a preprocessing layer): y = (x - mean) / max(sqrt(variance), 1e-7), or with invert
// y = mean + x * max(sqrt(variance), 1e-7) (ops::normalize_forward). `axis` lists the axes that keep their own
// statistics (any axes but the batch axis; default the last; null: one mean and variance for everything).
// Given in the config, mean and variance are constants (a number or nested lists, aligned with the kept axes
// from the right and broadcast to their shape, as Keras's build does) and written back as given; otherwise they
// are the layer's non-trainable weights "mean", "variance" (the kept axes' shape) and "count" (a scalar int64
// variable, which Keras 3 keeps for older files and never updates), which adapt() computes from data as Keras's
// adapt() does.
#include <systolic/layers.h>

#include <algorithm>
#include <functional>

#include "layers/config.h"

namespace systolic::layers {

namespace {

// A constant statistic: its values (row-major) and the shape of the nested lists that gave them.
struct Constant {
  std::vector<double> values;
  std::vector<std::int64_t> shape;
};

class NormalizationLayer final : public Layer {
 public:
  bool output_masked(bool input_masked) const override { return input_masked; }  // Keras passes it on
  explicit NormalizationLayer(const NormalizationOptions& o) : Layer("Normalization", o.name), o_(o) {
    SYSTOLIC_CHECK(o.mean.has_value() == o.variance.has_value(),
                   "layer '{}': give both mean and variance, or neither", name());
    // The API's vectors: one value is a number, a value per kept value takes the kept axes' shape (below), any
    // other count is a list along the last kept axis.
    if (o.mean) {
      mean_given_ = {*o.mean,
                     o.mean->size() == 1 ? std::vector<std::int64_t>{} : std::vector<std::int64_t>{-1}};
      variance_given_ = {
          *o.variance, o.variance->size() == 1 ? std::vector<std::int64_t>{} : std::vector<std::int64_t>{-1}};
    }
  }

  Shape compute_output_shape(const std::vector<Shape>& in) const override {
    kept(in[0]);
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

  // Keras's adapt(data) (the array form): mean and biased variance of data over every axis but the kept ones,
  // into the weights (count stays as it is, as in Keras 3). data: [N, input shape...]; builds the layer on its
  // first call, as Keras does.
  void adapt(const Tensor& data) override {
    SYSTOLIC_CHECK(!o_.mean, "layer '{}': adapt() needs a Normalization without a given mean and variance",
                   name());
    SYSTOLIC_CHECK(data.rank() >= 2 && data.dim(0) > 0 && is_floating(data.dtype()),
                   "layer '{}': adapt() takes a non-empty float batch [N, ...] of at least 2 axes, got {} {}",
                   name(), dtype_name(data.dtype()), data.shape().str());
    std::vector<std::int64_t> dims(data.shape().dims().begin() + 1, data.shape().dims().end());
    build_for({Shape(dims)});
    const std::uint32_t keep = kept_axes(Shape(dims));
    // Kept axes last: a transpose of each chunk, then its columns' moments (batch norm's training statistics, in
    // float64), merged over chunks with Keras's formula for batched data.
    std::vector<int> perm;
    for (int a = 0; a < data.rank(); ++a)
      if (!((keep >> a) & 1u)) perm.push_back(a);
    for (int a = 0; a < data.rank(); ++a)
      if ((keep >> a) & 1u) perm.push_back(a);
    const std::int64_t K = weights()[0].value.numel(), per_sample = data.numel() / data.dim(0);
    const std::int64_t chunk =
        std::max<std::int64_t>(1, (std::int64_t(1) << 22) / std::max<std::int64_t>(1, per_sample));
    std::vector<double> mean(K, 0.0), var(K, 0.0);
    double count = 0;
    for (std::int64_t b = 0; b < data.dim(0); b += chunk) {
      Tensor part = data.slice(b, std::min(data.dim(0), b + chunk));
      Tensor x64(part.shape(), DType::float64, part.device());
      ops::cast(part, x64);
      Shape tshape;
      std::vector<std::int64_t> td;
      for (int a : perm) td.push_back(part.dim(a));
      Tensor moved(Shape(td), DType::float64, part.device()), y(Shape(td), DType::float64, part.device());
      ops::transpose(x64, moved, perm);
      Tensor rows = moved.reshape({moved.numel() / K, K}), out = y.reshape({moved.numel() / K, K});
      Tensor m({K}, DType::float64, part.device()), v({K}, DType::float64, part.device());
      ops::batch_norm_forward_training(rows, Tensor(), Tensor(), out, m, v, 1e-3, nullptr);
      Tensor mh = m.to(Device::cpu()), vh = v.to(Device::cpu());
      const double n = double(rows.dim(0));
      count += n;
      const double w = n / count, keep_w = 1.0 - w;
      for (std::int64_t k = 0; k < K; ++k) {
        const double bm = mh.data<double>()[k], bv = vh.data<double>()[k];
        const double nm = mean[k] * keep_w + bm * w;
        var[k] = (var[k] + (mean[k] - nm) * (mean[k] - nm)) * keep_w + (bv + (bm - nm) * (bm - nm)) * w;
        mean[k] = nm;
      }
    }
    for (int i : {0, 1}) {
      Weight& wt = weights()[i];
      Tensor host = Tensor::from_vector<double>(i == 0 ? mean : var, wt.value.shape()).to(wt.value.dtype());
      wt.value.copy_from(host.to(wt.value.device()));
    }
  }

  json mean_config, variance_config;  // mean and variance as the config gave them (null: not from a config)
  void set_constant_shapes(std::vector<std::int64_t> mean_shape, std::vector<std::int64_t> variance_shape) {
    mean_given_.shape = std::move(mean_shape);
    variance_given_.shape = std::move(variance_shape);
  }

 protected:
  // The kept axes of an input of shape `in` (bit a: axis a of [batch, in...]; 0 for axis null); throws unless they
  // are distinct axes other than the batch axis.
  std::uint32_t kept_axes(const Shape& in) const {
    if (!o_.axis) return 0;
    const int rank = in.rank() + 1;
    std::uint32_t set = 0;
    bool ok = rank <= 8;
    for (int x : *o_.axis) {
      const int a = x < 0 ? x + rank : x;
      ok = ok && a >= 1 && a < rank && !((set >> a) & 1u);
      if (ok) set |= 1u << a;
    }
    if (!ok)
      fail_shape(
          "axis " + json(*o_.axis).dump() + " of input " + in.keras_str() +
          ": the kept axes must be distinct axes of the input other than the batch axis (of at most 8)");
    return set;
  }
  // The kept axes' dims, in ascending order (Keras's mean_and_var_shape).
  Shape kept(const Shape& in) const {
    const std::uint32_t set = kept_axes(in);
    std::vector<std::int64_t> dims;
    for (int a = 1; a <= in.rank(); ++a)
      if ((set >> a) & 1u) dims.push_back(in[a - 1]);
    return Shape(dims);
  }

  void build(const std::vector<Shape>& in) override {
    axes_ = kept_axes(in[0]);
    Shape k = kept(in[0]);
    if (!o_.mean) {
      add_weight("mean", k, "zeros", false);
      add_weight("variance", k, "ones", false);
      add_weight("count", Shape{}, "zeros", false).int64 = true;
      return;
    }
    mean_ = broadcast(mean_given_, k, "mean");
    variance_ = broadcast(variance_given_, k, "variance");
  }

  // A constant broadcast to the kept axes' shape: a number to every value; lists aligned with the kept axes from
  // the right, each of their dims 1 or the kept axis's (Keras reshapes them so and broadcasts).
  Tensor broadcast(const Constant& c, const Shape& kept, const char* what) const {
    std::vector<std::int64_t> shape = c.shape;
    if (shape.size() == 1 && shape[0] == -1)  // the API's vector: the kept axes' shape when it fills them
      shape = std::int64_t(c.values.size()) == kept.numel() && kept.rank() > 0
                  ? std::vector<std::int64_t>(kept.dims().begin(), kept.dims().end())
                  : std::vector<std::int64_t>{std::int64_t(c.values.size())};
    const int r = int(shape.size()), kr = kept.rank();
    auto refuse = [&] {
      fail_shape(std::string(what) + " of shape " + Shape(shape).str() +
                 " does not broadcast to the kept axes' " + kept.str());
    };
    if (r > kr) refuse();
    std::vector<std::int64_t> aligned(kr, 1);
    for (int i = 0; i < r; ++i) aligned[kr - r + i] = shape[i];
    for (int i = 0; i < kr; ++i)
      if (aligned[i] != 1 && aligned[i] != kept[i]) refuse();
    const std::int64_t K = kept.numel();
    std::vector<double> full(K);
    for (std::int64_t k = 0; k < K; ++k) {
      std::int64_t rest = k, src = 0, scale = 1;
      for (int i = kr - 1; i >= 0; --i) {
        const std::int64_t idx = rest % kept[i];
        rest /= kept[i];
        if (aligned[i] != 1) src += idx * scale;
        scale *= aligned[i];
      }
      full[k] = c.values[src];
    }
    return Tensor::from_vector<double>(full, {K}).to(dtype());
  }

  // The statistics on the input's device: weights, or the constants copied there once.
  void statistics(const Tensor& x, Tensor& mean, Tensor& variance) {
    if (!o_.mean) {
      mean = weights()[0].value;
      variance = weights()[1].value;
    } else {
      if (mean_.device() != x.device()) {
        mean_ = mean_.to(x.device());
        variance_ = variance_.to(x.device());
      }
      mean = mean_;
      variance = variance_;
    }
    mean = mean.reshape({mean.numel()});
    variance = variance.reshape({variance.numel()});
  }

  void forward(LayerCall& c) override {
    Tensor mean, variance;
    statistics(c.inputs[0], mean, variance);
    ops::normalize_forward(c.inputs[0], mean, variance, c.output, axes_, o_.invert);
  }
  void backward(LayerCall& c) override {
    if (!c.dinputs[0].defined()) return;
    Tensor mean, variance;
    statistics(c.doutput, mean, variance);
    ops::normalize_backward(variance, c.doutput, c.dinputs[0], axes_, o_.invert);
  }

 private:
  NormalizationOptions o_;
  Constant mean_given_, variance_given_;
  Tensor mean_, variance_;
  std::uint32_t axes_ = 0;  // the kept axes of the input with its batch axis (bit a: axis a)
};

// A number or rectangular nested lists of numbers, flattened row-major, with the lists' shape; null: absent.
std::optional<Constant> read_values(ConfigReader& r, const char* key) {
  if (!r.has(key)) return std::nullopt;
  auto& v = r.get_raw(key);
  if (v.is_null()) return std::nullopt;
  Constant out;
  bool ok = true;
  std::function<void(const json&, std::size_t)> walk = [&](const json& j, std::size_t depth) {
    if (j.is_number()) {
      ok = ok && depth == out.shape.size();
      out.values.push_back(j.get<double>());
    } else if (j.is_array()) {
      if (depth == out.shape.size() && out.values.empty() && depth < 8)
        out.shape.push_back(std::int64_t(j.size()));
      ok = ok && depth < out.shape.size() && std::int64_t(j.size()) == out.shape[depth] && !j.empty();
      for (auto& e : j)
        if (ok) walk(e, depth + 1);
    } else {
      ok = false;
    }
  };
  walk(v, 0);
  if (!ok || out.values.empty())
    r.fail_option(
        key, "expected a number or rectangular, non-empty lists of numbers, got " + v.dump().substr(0, 200));
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
  auto mean = read_values(r, "mean");
  auto variance = read_values(r, "variance");
  if (mean.has_value() != variance.has_value())
    r.fail_option(mean ? "variance" : "mean", "give both mean and variance, or neither");
  if (mean) {
    o.mean = mean->values;
    o.variance = variance->values;
  }
  o.name = r.name();
  auto layer = std::make_shared<NormalizationLayer>(o);
  if (mean) {
    layer->mean_config = r.get_raw("mean");
    layer->variance_config = r.get_raw("variance");
    layer->set_constant_shapes(mean->shape, variance->shape);
  }
  return layer;
}

LayerRef Normalization(const NormalizationOptions& options) {
  return LayerRef(std::make_shared<NormalizationLayer>(options));
}

}  // namespace systolic::layers
