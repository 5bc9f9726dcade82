// Add (Keras): the elementwise sum of two or more inputs of one shape.
#include <systolic/layers.h>

#include "layers/config.h"

namespace systolic::layers {

namespace {
class AddLayer final : public Layer {
 public:
  std::string mask_refusal() const override {
    return "Keras combines the inputs' masks, which systolic does not do yet";
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
  void forward(LayerCall& c) override { ops::add_n(c.inputs, c.output); }
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
