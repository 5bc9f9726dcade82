// Add (Keras): the elementwise sum of two or more inputs of one shape.
#include <systolic/layers.h>

#include <algorithm>

#include "layers/config.h"
#include "layers/merge_masks.h"

namespace systolic::layers {

namespace {
class AddLayer final : public Layer {
 public:
  bool combines_masks(const std::vector<bool>& masked) const override {
    return std::all_of(masked.begin(), masked.end(), [](bool m) { return m; });
  }
  explicit AddLayer(const NameOptions& o) : Layer("Add", o.name) {}

  Shape compute_output_shape(const std::vector<Shape>& in) const override {
    for (auto& s : in)
      if (s != in[0])
        fail_shape("inputs must have one shape, got " + in[0].keras_str() + " and " + s.keras_str());
    return in[0];
  }

 protected:
  int input_count() const override { return -1; }
  void forward(LayerCall& c) override {
    ops::add_n(c.inputs, c.output);
    if (c.output_mask.defined()) merge_masks_or(name(), c.masks, c.output_mask);
  }
  void backward(LayerCall& c) override {
    for (auto& dx : c.dinputs)
      if (dx.defined()) ops::copy(c.doutput, dx);
  }
};
}  // namespace

std::shared_ptr<Layer> add_from_config(ConfigReader& r) {
  return std::make_shared<AddLayer>(NameOptions{r.name()});
}

LayerRef Add(const NameOptions& options) {
  return LayerRef(std::make_shared<AddLayer>(options));
}

}  // namespace systolic::layers
