// Flatten (Keras, channels_last): (H, W, C) -> (H*W*C,), flat index (h*W + w)*C + c: NHWC memory as it is.
#include <systolic/layers.h>

#include "layers/config.h"

namespace systolic::layers {

namespace {
class FlattenLayer final : public Layer {
 public:
  explicit FlattenLayer(const NameOptions& o) : Layer("Flatten", o.name) {}

  Shape compute_output_shape(const std::vector<Shape>& in) const override { return {in[0].numel()}; }

  void get_config(json& c) const override {
    Layer::get_config(c);
    c["data_format"] = "channels_last";
  }

 protected:
  void forward(LayerCall& c) override { c.output = c.inputs[0].reshape(c.output.shape()); }
  void backward(LayerCall& c) override {
    if (c.dinputs[0].defined()) ops::copy(c.doutput, c.dinputs[0]);
  }
};
}  // namespace

std::shared_ptr<Layer> flatten_from_config(ConfigReader& r) {
  r.require_value("data_format", "channels_last");
  return std::make_shared<FlattenLayer>(NameOptions{r.name()});
}

LayerRef Flatten(const NameOptions& options) {
  return LayerRef(std::make_shared<FlattenLayer>(options));
}

}  // namespace systolic::layers
