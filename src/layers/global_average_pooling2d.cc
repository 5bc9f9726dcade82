// GlobalAveragePooling2D (Keras, channels_last): (H, W, C) -> (C,), an average pool over the whole image.
#include <systolic/layers.h>

#include "layers/config.h"

namespace systolic::layers {

namespace {
class GlobalAveragePooling2DLayer final : public Layer {
 public:
  explicit GlobalAveragePooling2DLayer(const NameOptions& o) : Layer("GlobalAveragePooling2D", o.name) {}

  Shape compute_output_shape(const std::vector<Shape>& in) const override {
    if (in[0].rank() != 3) fail_shape("expects input (H, W, C), got " + in[0].keras_str());
    return {in[0][2]};
  }

  void get_config(json& c) const override {
    Layer::get_config(c);
    c["data_format"] = "channels_last";
    c["keepdims"] = false;
  }

 protected:
  static ops::Pool2DParams params(const Tensor& x) {
    int h = static_cast<int>(x.dim(1)), w = static_cast<int>(x.dim(2));
    return {ops::PoolKind::average, h, w, h, w, 0, 0, 0, 0};
  }
  void forward(LayerCall& c) override {
    const Tensor& x = c.inputs[0];
    Tensor y = c.output.reshape({x.dim(0), 1, 1, x.dim(3)});
    Tensor none;
    ops::pool2d_forward(x, y, none, params(x));
  }
  void backward(LayerCall& c) override {
    if (!c.dinputs[0].defined()) return;
    const Tensor& x = c.inputs[0];
    Shape s{x.dim(0), 1, 1, x.dim(3)};
    ops::pool2d_backward(x, c.output.reshape(s), c.doutput.reshape(s), Tensor(), c.dinputs[0], params(x));
  }
};
}  // namespace

std::shared_ptr<Layer> global_average_pooling2d_from_config(ConfigReader& r) {
  r.require_value("data_format", "channels_last");
  r.require_value("keepdims", false);
  return std::make_shared<GlobalAveragePooling2DLayer>(NameOptions{r.name()});
}

LayerRef GlobalAveragePooling2D(const NameOptions& options) {
  return LayerRef(std::make_shared<GlobalAveragePooling2DLayer>(options));
}

}  // namespace systolic::layers
