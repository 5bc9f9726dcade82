// Flatten (Keras, channels_last): (H, W, C) -> (H*W*C,), flat index (h*W + w)*C + c: NHWC memory as it is.
#include <systolic/layers.h>

namespace systolic::layers {

namespace {
class FlattenLayer final : public Layer {
 public:
  explicit FlattenLayer(const NameOptions& o) : Layer("Flatten", o.name) {}

  Shape compute_output_shape(const std::vector<Shape>& in) const override { return {in[0].numel()}; }

 protected:
  void forward(LayerCall& c) override { c.output = c.inputs[0].reshape(c.output.shape()); }
  void backward(LayerCall& c) override {
    if (c.dinputs[0].defined()) ops::copy(c.doutput, c.dinputs[0]);
  }
};
}  // namespace

LayerRef Flatten(const NameOptions& options) { return LayerRef(std::make_shared<FlattenLayer>(options)); }

}  // namespace systolic::layers
