// Masking (Keras): a step whose features all equal mask_value is padding; the output is the input times the mask
// (the padding zeroed) and carries the mask ([N, steps], 1 for a step that counts), which the recurrent layers read.
#include <systolic/layers.h>

#include <cmath>

#include "layers/config.h"

namespace systolic::layers {

namespace {
class MaskingLayer final : public Layer {
 public:
  explicit MaskingLayer(const MaskingOptions& o) : Layer("Masking", o.name), value_(o.mask_value) {
    SYSTOLIC_CHECK(std::isfinite(value_), "layer '{}': mask_value must be finite, got {}", name(), value_);
  }
  Shape compute_output_shape(const std::vector<Shape>& in) const override {
    if (in[0].rank() < 1) fail_shape("expects an input with a features axis");
    return in[0];
  }
  bool makes_mask() const override { return true; }
  void get_config(json& c) const override {
    Layer::get_config(c);
    c["mask_value"] = value_;
  }

 protected:
  // The mask as [N, steps..., 1]: what multiplies the input.
  static Tensor column(const Tensor& mask) { return mask.view(0, with_one(mask.shape())); }
  static Shape with_one(const Shape& s) {
    auto d = s.dims();
    d.push_back(1);
    return Shape(d);
  }
  // The mask goes to c.output_mask (the model's), or to saved[0] when the layer is called alone.
  static Tensor mask_of(LayerCall& c) { return c.output_mask.defined() ? c.output_mask : c.saved[0]; }
  void forward(LayerCall& c) override {
    const Tensor& x = c.inputs[0];
    auto dims = x.shape().dims();
    const std::int64_t features = dims.back();
    dims.pop_back();
    if (!c.output_mask.defined() && (c.saved.empty() || c.saved[0].shape() != Shape(dims)))
      c.saved = {Tensor(Shape(dims), x.dtype(), x.device())};
    Tensor mask = mask_of(c);
    ops::compute_mask(x.view(0, {x.numel() / features, features}), value_, mask);
    ops::broadcast_forward(ops::BinaryKind::multiply, x, column(mask), c.output);
  }
  void backward(LayerCall& c) override {
    if (c.dinputs[0].defined())
      ops::broadcast_forward(ops::BinaryKind::multiply, c.doutput, column(mask_of(c)), c.dinputs[0]);
  }

 private:
  double value_;
};
}  // namespace

std::shared_ptr<Layer> masking_from_config(ConfigReader& r) {
  return std::make_shared<MaskingLayer>(
      MaskingOptions{.mask_value = r.get_double("mask_value", 0.0), .name = r.name()});
}

LayerRef Masking(const MaskingOptions& options) {
  return LayerRef(std::make_shared<MaskingLayer>(options));
}

}  // namespace systolic::layers
