// Concatenate (Keras): joins inputs along `axis` (of the full shape, batch included; -1 = channels).
#include <systolic/layers.h>

#include <algorithm>

#include "layers/config.h"
#include "layers/merge_masks.h"

namespace systolic::layers {

namespace {
class ConcatenateLayer final : public Layer {
 public:
  bool combines_masks(const std::vector<bool>& masked) const override {
    return std::any_of(masked.begin(), masked.end(), [](bool m) { return m; });
  }
  ConcatenateLayer(const ConcatenateOptions& o) : Layer("Concatenate", o.name), axis_(o.axis) {}

  Shape compute_output_shape(const std::vector<Shape>& in) const override {
    int rank = in[0].rank() + 1;  // with the batch axis
    int axis = axis_ < 0 ? axis_ + rank : axis_;
    if (axis < 1 || axis >= rank)
      fail_shape("axis " + std::to_string(axis_) + " is not a non-batch axis of inputs " + in[0].keras_str());
    Shape out = in[0];
    out[axis - 1] = 0;
    for (auto& s : in) {
      bool fits = s.rank() == in[0].rank();
      for (int i = 0; fits && i < s.rank(); ++i) fits = i == axis - 1 || s[i] == in[0][i];
      if (!fits)
        fail_shape("inputs " + in[0].keras_str() + " and " + s.keras_str() +
                   " differ off the concatenation axis");
      out[axis - 1] += s[axis - 1];
    }
    return out;
  }

  void get_config(json& c) const override {
    Layer::get_config(c);
    c["axis"] = axis_;
  }

 protected:
  int input_count() const override { return -1; }
  int full_axis(const Tensor& y) const { return axis_ < 0 ? axis_ + y.rank() : axis_; }
  void forward(LayerCall& c) override {
    ops::concat_forward(c.inputs, c.output, full_axis(c.output));
    if (c.output_mask.defined())
      concatenate_masks(name(), c.masks, c.inputs, full_axis(c.output), c.output_mask);
  }
  void backward(LayerCall& c) override { ops::concat_backward(c.doutput, c.dinputs, full_axis(c.doutput)); }

 private:
  int axis_;
};
}  // namespace

std::shared_ptr<Layer> concatenate_from_config(ConfigReader& r) {
  return std::make_shared<ConcatenateLayer>(
      ConcatenateOptions{.axis = r.get_int("axis", -1), .name = r.name()});
}

LayerRef Concatenate(const ConcatenateOptions& options) {
  return LayerRef(std::make_shared<ConcatenateLayer>(options));
}

}  // namespace systolic::layers
