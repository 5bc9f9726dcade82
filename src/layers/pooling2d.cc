// MaxPooling2D and AveragePooling2D (Keras): pool_size (2, 2), strides default to the pool size, padding
// valid/same; max ignores padded cells, average does not count them.
#include <systolic/layers.h>

#include "layers/config.h"
#include "layers/conv_geometry.h"

namespace systolic::layers {

namespace {
class Pooling2DLayer final : public Layer {
 public:
  Pooling2DLayer(const char* class_name, ops::PoolKind kind, Pair pool, const PoolingOptions& o)
      : Layer(class_name, o.name),
        kind_(kind),
        pool_(pool),
        strides_(o.strides.value_or(pool)),
        padding_(o.padding),
        geometry_(pool_, strides_, {1, 1}, padding_) {
    SYSTOLIC_CHECK(pool[0] > 0 && pool[1] > 0 && strides_[0] > 0 && strides_[1] > 0,
                   "layer '{}': pool_size and strides must be positive", name());
    check_padding(padding_, name());
  }

  Shape compute_output_shape(const std::vector<Shape>& in) const override {
    if (in[0].rank() != 3) fail_shape("expects input (H, W, C), got " + in[0].keras_str());
    if (!geometry_.fits(in[0])) fail_shape("the pool does not fit the input " + in[0].keras_str());
    auto [h, w] = geometry_.output_extents(in[0]);
    return {h, w, in[0][2]};
  }

  void get_config(json& c) const override {
    Layer::get_config(c);
    c["pool_size"] = pool_;
    c["padding"] = padding_;
    c["strides"] = strides_;
    c["data_format"] = "channels_last";
  }

 protected:
  ops::Pool2DParams params(const Shape& x) const { return geometry_.pool2d_params(x, kind_); }
  // saved[0]: the backend's workspace, which a training forward fills for backward (oneDNN's argmax indices).
  void forward(LayerCall& c) override {
    Tensor none;
    if (c.training && c.saved.empty()) c.saved = {Tensor(Shape{0}, DType::uint8, c.inputs[0].device())};
    ops::pool2d_forward(c.inputs[0], c.output, c.training ? c.saved[0] : none, params(c.inputs[0].shape()));
  }
  void backward(LayerCall& c) override {
    if (!c.dinputs[0].defined()) return;
    Tensor workspace = c.saved.empty() ? Tensor() : c.saved[0];
    ops::pool2d_backward(c.inputs[0], c.output, c.doutput, workspace, c.dinputs[0],
                         params(c.inputs[0].shape()));
  }

 private:
  ops::PoolKind kind_;
  Pair pool_, strides_;
  std::string padding_;
  ConvGeometry geometry_;
};
std::shared_ptr<Layer> pooling_from_config(ConfigReader& r, const char* class_name, ops::PoolKind kind) {
  Pair pool = r.get_pair("pool_size", {2, 2});
  PoolingOptions o{.strides = r.get_optional_pair("strides"),
                   .padding = r.get_string("padding", "valid"),
                   .name = r.name()};
  r.require_value("data_format", "channels_last");
  return std::make_shared<Pooling2DLayer>(class_name, kind, pool, o);
}
}  // namespace

std::shared_ptr<Layer> max_pooling2d_from_config(ConfigReader& r) {
  return pooling_from_config(r, "MaxPooling2D", ops::PoolKind::max);
}
std::shared_ptr<Layer> average_pooling2d_from_config(ConfigReader& r) {
  return pooling_from_config(r, "AveragePooling2D", ops::PoolKind::average);
}

LayerRef MaxPooling2D(Pair pool_size, const PoolingOptions& options) {
  return LayerRef(std::make_shared<Pooling2DLayer>("MaxPooling2D", ops::PoolKind::max, pool_size, options));
}

LayerRef AveragePooling2D(Pair pool_size, const PoolingOptions& options) {
  return LayerRef(
      std::make_shared<Pooling2DLayer>("AveragePooling2D", ops::PoolKind::average, pool_size, options));
}

}  // namespace systolic::layers
