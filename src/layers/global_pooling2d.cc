// GlobalAveragePooling2D and GlobalMaxPooling2D (Keras, channels_last): (H, W, C) -> (C,), or (1, 1, C) with
// keepdims, a pool over the whole image (pool2d ops with the image as the window).
#include <systolic/layers.h>

#include "layers/config.h"

namespace systolic::layers {

namespace {
class GlobalPooling2DLayer final : public Layer {
 public:
  GlobalPooling2DLayer(const char* class_name, ops::PoolKind kind, const GlobalPoolingOptions& o)
      : Layer(class_name, o.name), kind_(kind), keepdims_(o.keepdims) {}

  Shape compute_output_shape(const std::vector<Shape>& in) const override {
    if (in[0].rank() != 3) fail_shape("expects input (H, W, C), got " + in[0].keras_str());
    if (keepdims_) return {1, 1, in[0][2]};
    return {in[0][2]};
  }

  void get_config(json& c) const override {
    Layer::get_config(c);
    c["data_format"] = "channels_last";
    c["keepdims"] = keepdims_;
  }

 protected:
  ops::Pool2DParams params(const Tensor& x) const {
    int h = static_cast<int>(x.dim(1)), w = static_cast<int>(x.dim(2));
    return {kind_, h, w, h, w, 0, 0, 0, 0};
  }
  // saved[0]: the backend's workspace for max pooling's backward, filled by a training forward.
  void forward(LayerCall& c) override {
    const Tensor& x = c.inputs[0];
    Tensor y = c.output.reshape({x.dim(0), 1, 1, x.dim(3)});
    Tensor none;
    bool workspace = c.training && kind_ == ops::PoolKind::max;
    if (workspace && c.saved.empty()) c.saved = {Tensor(Shape{0}, DType::uint8, x.device())};
    ops::pool2d_forward(x, y, workspace ? c.saved[0] : none, params(x));
  }
  void backward(LayerCall& c) override {
    if (!c.dinputs[0].defined()) return;
    const Tensor& x = c.inputs[0];
    Shape s{x.dim(0), 1, 1, x.dim(3)};
    Tensor workspace = c.saved.empty() ? Tensor() : c.saved[0];
    ops::pool2d_backward(x, c.output.reshape(s), c.doutput.reshape(s), workspace, c.dinputs[0], params(x));
  }

 private:
  ops::PoolKind kind_;
  bool keepdims_;
};

std::shared_ptr<Layer> global_pooling_from_config(ConfigReader& r, const char* class_name,
                                                  ops::PoolKind kind) {
  r.require_value("data_format", "channels_last");
  GlobalPoolingOptions o{.keepdims = r.get_bool("keepdims", false), .name = r.name()};
  return std::make_shared<GlobalPooling2DLayer>(class_name, kind, o);
}
}  // namespace

std::shared_ptr<Layer> global_average_pooling2d_from_config(ConfigReader& r) {
  return global_pooling_from_config(r, "GlobalAveragePooling2D", ops::PoolKind::average);
}
std::shared_ptr<Layer> global_max_pooling2d_from_config(ConfigReader& r) {
  return global_pooling_from_config(r, "GlobalMaxPooling2D", ops::PoolKind::max);
}

LayerRef GlobalAveragePooling2D(const GlobalPoolingOptions& options) {
  return LayerRef(
      std::make_shared<GlobalPooling2DLayer>("GlobalAveragePooling2D", ops::PoolKind::average, options));
}
LayerRef GlobalMaxPooling2D(const GlobalPoolingOptions& options) {
  return LayerRef(std::make_shared<GlobalPooling2DLayer>("GlobalMaxPooling2D", ops::PoolKind::max, options));
}

}  // namespace systolic::layers
