// Dropout (Keras): inverted dropout while training (survivors scaled by 1/(1-rate)), identity at inference.
// The mask comes from Philox at (seed of this call, element index), so backward regenerates it. With a
// noise_shape (Keras: null entries take the input's dims; EfficientNet's stochastic depth drops whole samples
// with [null, 1, 1, 1]) the mask is drawn for that shape (dropout_forward over ones: 0 or 1/(1-rate)) and
// broadcast over x (broadcast_forward multiply); backward redraws it. SpatialDropout2D is Dropout with the
// noise shape (N, 1, 1, C), SpatialDropout1D with (N, 1, C).
#include <systolic/layers.h>

#include "core/philox.h"
#include "layers/config.h"

namespace systolic::layers {

namespace {
class DropoutLayer final : public Layer {
 public:
  bool output_masked(bool input_masked) const override { return input_masked; }  // Keras passes it on
  DropoutLayer(double rate, const DropoutOptions& o, std::string cls = "Dropout")
      : Layer(std::move(cls), o.name),
        rate_(rate),
        seed_(o.seed ? *o.seed : global_generator().split()),
        given_seed_(o.seed) {
    noise_shape_ = o.noise_shape;
    SYSTOLIC_CHECK(rate >= 0 && rate < 1, "layer '{}': rate must be in [0, 1), got {}", name(), rate);
  }

  Shape compute_output_shape(const std::vector<Shape>& in) const override {
    if (spatial() && in[0].rank() != spatial_rank())
      fail_shape(std::string("expects input ") + (spatial_rank() == 2 ? "(steps, channels)" : "(H, W, C)") +
                 ", got " + in[0].keras_str());
    if (noise_shape_) {
      const auto& ns = *noise_shape_;
      bool fits = int(ns.size()) == in[0].rank() + 1;
      for (std::size_t i = 1; fits && i < ns.size(); ++i)
        fits = !ns[i] || *ns[i] == 1 || *ns[i] == in[0][int(i) - 1];
      if (!fits) fail_shape("noise_shape does not fit input " + in[0].keras_str());
    }
    return in[0];
  }

  void get_config(json& c) const override {
    if (spatial()) {
      // Keras 3's SpatialDropout2D and SpatialDropout1D write their own keys only.
      c = {{"rate", rate_}, {"seed", given_seed_ ? json(*given_seed_) : json(nullptr)}, {"name", name()}};
      c["dtype"] = base_config(*this)["dtype"];
      if (spatial_rank() == 3) c["data_format"] = "channels_last";
      return;
    }
    Layer::get_config(c);
    c["rate"] = rate_;
    c["seed"] = given_seed_ ? json(*given_seed_) : json(nullptr);
    json ns = nullptr;
    if (noise_shape_) {
      ns = json::array();
      for (auto& d : *noise_shape_) ns.push_back(d ? json(*d) : json(nullptr));
    }
    c["noise_shape"] = ns;
  }

 protected:
  void forward(LayerCall& c) override {
    if (!c.training || rate_ == 0) {
      c.output = c.inputs[0];  // identity: a view, no copy
      return;
    }
    // A fresh mask per training step: the op mixes the layer's seed with the model's step counter, which it reads
    // on the device (so a captured CUDA graph draws a new mask on every replay).
    if (!noise_shape_ && !spatial()) {
      ops::dropout_forward(c.inputs[0], c.output, rate_, seed_for(c), c.training->counter);
      return;
    }
    ops::broadcast_forward(ops::BinaryKind::multiply, c.inputs[0], mask(c, c.inputs[0]), c.output);
  }
  void backward(LayerCall& c) override {
    if (!c.dinputs[0].defined()) return;
    if (!c.training || rate_ == 0)
      ops::copy(c.doutput, c.dinputs[0]);
    else if (!noise_shape_ && !spatial())
      ops::dropout_backward(c.doutput, c.dinputs[0], rate_, seed_for(c), c.training->counter);
    else
      ops::broadcast_backward(ops::BinaryKind::multiply, c.doutput, mask(c, c.doutput), c.doutput,
                              c.dinputs[0], none_);
  }

 private:
  // Replica 0 (and a model without a strategy) uses the layer's seed; replica r a seed of its own, as each replica of
  // a tf.distribute strategy draws its own random numbers.
  std::uint64_t seed_for(const LayerCall& c) const {
    return philox::replica_seed(seed_, c.training ? c.training->replica : 0);
  }
  bool spatial() const { return spatial_rank() > 0; }
  // The sample rank of a spatial dropout's input: 3 for SpatialDropout2D, 2 for SpatialDropout1D; 0 for Dropout.
  int spatial_rank() const {
    return class_name() == "SpatialDropout2D" ? 3 : class_name() == "SpatialDropout1D" ? 2 : 0;
  }
  // This step's mask of the noise shape (kept in c.saved: ones, then the mask), like x's dtype and device.
  const Tensor& mask(LayerCall& c, const Tensor& x) {
    std::vector<std::int64_t> dims;
    for (int i = 0; i < x.rank(); ++i) {
      bool keep = spatial() ? (i == 0 || i == x.rank() - 1)
                            : !(*noise_shape_)[i] || *(*noise_shape_)[i] != 1 || x.dim(i) == 1;
      dims.push_back(keep ? x.dim(i) : 1);
    }
    Shape s(dims);
    if (c.saved.size() != 2 || c.saved[0].shape() != s || c.saved[0].dtype() != x.dtype()) {
      c.saved = {Tensor(s, x.dtype(), x.device()), Tensor(s, x.dtype(), x.device())};
      ops::fill(c.saved[0], 1.0);
    }
    ops::dropout_forward(c.saved[0], c.saved[1], rate_, seed_for(c), c.training->counter);
    return c.saved[1];
  }
  std::optional<std::vector<std::optional<std::int64_t>>> noise_shape_;
  Tensor none_;
  double rate_;
  std::uint64_t seed_;
  std::optional<std::uint64_t> given_seed_;
};
}  // namespace

std::shared_ptr<Layer> dropout_from_config(ConfigReader& r) {
  if (!r.has("rate")) r.fail_option("rate", "missing");
  double rate = r.get_double("rate", 0);
  DropoutOptions o{.name = r.name()};
  if (r.has("noise_shape") && !r.get_raw("noise_shape").is_null()) {
    auto& v = r.get_raw("noise_shape");
    if (!v.is_array()) r.fail_option("noise_shape", "expected a list of ints and nulls, got " + v.dump());
    std::vector<std::optional<std::int64_t>> ns;
    for (auto& d : v) {
      if (d.is_null())
        ns.push_back(std::nullopt);
      else if (d.is_number_integer() && d.get<std::int64_t>() > 0)
        ns.push_back(d.get<std::int64_t>());
      else
        r.fail_option("noise_shape", "expected a list of positive ints and nulls, got " + v.dump());
    }
    o.noise_shape = ns;
  }
  if (auto seed = r.get_optional_int("seed")) o.seed = static_cast<std::uint64_t>(*seed);
  return std::make_shared<DropoutLayer>(rate, o);
}

namespace {
// SpatialDropout1D's and SpatialDropout2D's configs: rate and seed (and 2-D's data_format, which 1-D has not).
std::shared_ptr<Layer> spatial_dropout_from_config(ConfigReader& r, const std::string& class_name) {
  if (!r.has("rate")) r.fail_option("rate", "missing");
  double rate = r.get_double("rate", 0);
  if (class_name == "SpatialDropout2D") r.require_value("data_format", "channels_last");
  DropoutOptions o{.name = r.name()};
  if (auto seed = r.get_optional_int("seed")) o.seed = static_cast<std::uint64_t>(*seed);
  return std::make_shared<DropoutLayer>(rate, o, class_name);
}
// A spatial dropout's noise shape is its own: the options' is ignored.
LayerRef spatial_dropout(double rate, DropoutOptions o, const std::string& class_name) {
  o.noise_shape.reset();
  return LayerRef(std::make_shared<DropoutLayer>(rate, o, class_name));
}
}  // namespace

std::shared_ptr<Layer> spatial_dropout2d_from_config(ConfigReader& r) {
  return spatial_dropout_from_config(r, "SpatialDropout2D");
}
std::shared_ptr<Layer> spatial_dropout1d_from_config(ConfigReader& r) {
  return spatial_dropout_from_config(r, "SpatialDropout1D");
}

LayerRef SpatialDropout1D(double rate, const DropoutOptions& options) {
  return spatial_dropout(rate, options, "SpatialDropout1D");
}
LayerRef SpatialDropout2D(double rate, const DropoutOptions& options) {
  return spatial_dropout(rate, options, "SpatialDropout2D");
}

LayerRef Dropout(double rate, const DropoutOptions& options) {
  return LayerRef(std::make_shared<DropoutLayer>(rate, options));
}

}  // namespace systolic::layers
