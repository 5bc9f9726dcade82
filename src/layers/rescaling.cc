// Rescaling (Keras): y = x * scale + offset. scale and offset are numbers or lists (one value per channel of the
// last axis, as EfficientNet's 1/sqrt(stddev) per RGB channel): lists run as broadcasting ops against constant
// tensors (ops::broadcast_forward multiply, then add), numbers as ops::scale_shift.
#include <systolic/layers.h>

#include <algorithm>

#include "layers/config.h"

namespace systolic::layers {

namespace {
class RescalingLayer final : public Layer {
 public:
  bool output_masked(bool input_masked) const override { return input_masked; }  // Keras passes it on
  RescalingLayer(std::vector<double> scale, std::vector<double> offset, const std::string& name)
      : Layer("Rescaling", name), scale_(std::move(scale)), offset_(std::move(offset)) {
    SYSTOLIC_CHECK(!scale_.empty() && !offset_.empty(), "layer '{}': empty scale or offset", name);
  }

  Shape compute_output_shape(const std::vector<Shape>& in) const override {
    for (auto* v : {&scale_, &offset_})
      if (v->size() > 1 && (in[0].rank() < 1 || in[0][-1] != std::int64_t(v->size())))
        fail_shape(std::to_string(v->size()) + " scale or offset values do not fit input " +
                   in[0].keras_str());
    return in[0];
  }

  void get_config(json& c) const override {
    Layer::get_config(c);
    c["scale"] = is_list(scale_) ? json(scale_) : json(scale_[0]);
    c["offset"] = is_list(offset_) ? json(offset_) : json(offset_[0]);
  }

  bool scale_list = false, offset_list = false;  // the config gave lists (written back as lists)

 protected:
  bool is_list(const std::vector<double>& v) const { return &v == &scale_ ? scale_list : offset_list; }
  bool per_channel() const { return scale_list || offset_list; }
  // The constants as tensors of the data's dtype on its device (made once).
  const Tensor& constant(Tensor& t, const std::vector<double>& v, const Tensor& like) {
    if (!t.defined() || t.dtype() != like.dtype() || !(t.device() == like.device()))
      t = Tensor::from_vector<double>(v, {std::int64_t(v.size())}).to(like.dtype()).to(like.device());
    return t;
  }
  void forward(LayerCall& c) override {
    if (!per_channel()) return ops::scale_shift(c.inputs[0], c.output, scale_[0], offset_[0]);
    ops::broadcast_forward(ops::BinaryKind::multiply, c.inputs[0], constant(scale_t_, scale_, c.inputs[0]),
                           c.output);
    ops::broadcast_forward(ops::BinaryKind::add, c.output, constant(offset_t_, offset_, c.inputs[0]),
                           c.output);
  }
  void backward(LayerCall& c) override {
    if (!c.dinputs[0].defined()) return;
    if (!per_channel()) return ops::scale_shift(c.doutput, c.dinputs[0], scale_[0], 0.0);
    Tensor none;
    ops::broadcast_backward(ops::BinaryKind::multiply, c.inputs[0], constant(scale_t_, scale_, c.inputs[0]),
                            c.doutput, c.dinputs[0], none);
  }

 private:
  std::vector<double> scale_, offset_;
  Tensor scale_t_, offset_t_;
};

// A number or a list of numbers.
std::vector<double> read_numbers(ConfigReader& r, const char* key, double fallback, bool& list) {
  list = false;
  if (!r.has(key)) return {fallback};
  auto& v = r.get_raw(key);
  if (v.is_number()) return {v.get<double>()};
  if (v.is_array() && !v.empty() &&
      std::all_of(v.begin(), v.end(), [](const json& e) { return e.is_number(); })) {
    list = true;
    return v.get<std::vector<double>>();
  }
  r.fail_option(key, "expected a number or a list of numbers, got " + v.dump());
}
}  // namespace

std::shared_ptr<Layer> rescaling_from_config(ConfigReader& r) {
  if (!r.has("scale")) r.fail_option("scale", "missing");
  bool scale_list, offset_list;
  auto scale = read_numbers(r, "scale", 1.0, scale_list);
  auto offset = read_numbers(r, "offset", 0.0, offset_list);
  auto layer = std::make_shared<RescalingLayer>(scale, offset, r.name());
  layer->scale_list = scale_list;
  layer->offset_list = offset_list;
  return layer;
}

LayerRef Rescaling(double scale, const RescalingOptions& options) {
  return LayerRef(std::make_shared<RescalingLayer>(std::vector<double>{scale},
                                                   std::vector<double>{options.offset}, options.name));
}

}  // namespace systolic::layers
