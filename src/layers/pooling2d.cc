// MaxPooling2D and AveragePooling2D, MaxPooling1D and AveragePooling1D (Keras): pool_size (2, 2) or 2, strides
// default to the pool size, padding valid/same; max ignores padded cells, average does not count them. A 1-D pool
// runs the pool2d ops on (N, 1, L, C) views; channels_first (N, C, L) on (N, C, L, 1) views: the channels as rows
// of one channel, which a window one row high leaves apart.
#include <systolic/layers.h>

#include "layers/config.h"
#include "layers/conv_geometry.h"

namespace systolic::layers {

namespace {
class PoolingLayer final : public Layer {
 public:
  PoolingLayer(const char* class_name, ops::PoolKind kind, ConvGeometry geometry, const std::string& name,
               bool channels_first = false)
      : Layer(class_name, name),
        kind_(kind),
        geometry_(std::move(geometry)),
        channels_first_(channels_first) {
    for (int a = 0; a < geometry_.rank(); ++a)
      SYSTOLIC_CHECK(geometry_.axis(a).kernel > 0 && geometry_.axis(a).stride > 0,
                     "layer '{}': pool_size and strides must be positive", this->name());
    check_padding(geometry_.padding(), this->name());
  }

  Shape compute_output_shape(const std::vector<Shape>& in) const override {
    const bool one = geometry_.rank() == 1;
    if (in[0].rank() != geometry_.rank() + 1)
      fail_shape(std::string("expects input ") + (one ? "(steps, channels)" : "(H, W, C)") + ", got " +
                 in[0].keras_str());
    const Shape sample = channels_first_ ? Shape{in[0][1], in[0][0]} : in[0];  // (steps, channels)
    if (!geometry_.fits(sample)) fail_shape("the pool does not fit the input " + in[0].keras_str());
    auto [h, w] = geometry_.output_extents(sample);
    if (one) return channels_first_ ? Shape{in[0][0], h} : Shape{h, in[0][1]};
    return {h, w, in[0][2]};
  }

  void get_config(json& c) const override {
    Layer::get_config(c);
    json pool = json::array(), strides = json::array();
    for (int a = 0; a < geometry_.rank(); ++a) {
      pool.push_back(geometry_.axis(a).kernel);
      strides.push_back(geometry_.axis(a).stride);
    }
    c["pool_size"] = pool;
    c["padding"] = geometry_.padding();
    c["strides"] = strides;
    c["data_format"] = channels_first_ ? "channels_first" : "channels_last";
  }

 protected:
  ops::Pool2DParams params(const Shape& x) const {
    return geometry_.pool2d_params(channels_first_ ? Shape{x[0], x[2], x[1]} : x, kind_);
  }
  Tensor view(const Tensor& t) const {
    if (channels_first_) return t.reshape({t.dim(0), t.dim(1), t.dim(2), 1});
    return geometry_.rank() == 1 ? as_2d(t) : t;
  }
  // saved[0]: the backend's workspace, which a training forward fills for backward (oneDNN's argmax indices).
  void forward(LayerCall& c) override {
    Tensor none, y = view(c.output);
    if (c.training && c.saved.empty()) c.saved = {Tensor(Shape{0}, DType::uint8, c.inputs[0].device())};
    ops::pool2d_forward(view(c.inputs[0]), y, c.training ? c.saved[0] : none, params(c.inputs[0].shape()));
  }
  void backward(LayerCall& c) override {
    if (!c.dinputs[0].defined()) return;
    Tensor workspace = c.saved.empty() ? Tensor() : c.saved[0], dx = view(c.dinputs[0]);
    ops::pool2d_backward(view(c.inputs[0]), view(c.output), view(c.doutput), workspace, dx,
                         params(c.inputs[0].shape()));
  }

 private:
  ops::PoolKind kind_;
  ConvGeometry geometry_;
  bool channels_first_;  // 1-D only
};

std::shared_ptr<Layer> pooling2d_from_config(ConfigReader& r, const char* class_name, ops::PoolKind kind) {
  Pair pool = r.get_pair("pool_size", {2, 2});
  Pair strides = r.get_optional_pair("strides").value_or(pool);
  std::string padding = r.get_string("padding", "valid");
  r.require_value("data_format", "channels_last");
  return std::make_shared<PoolingLayer>(class_name, kind, ConvGeometry(pool, strides, {1, 1}, padding),
                                        r.name());
}
std::shared_ptr<Layer> pooling1d_from_config(ConfigReader& r, const char* class_name, ops::PoolKind kind) {
  int pool = r.get_size1("pool_size", 2);
  int strides = r.get_optional_size1("strides").value_or(pool);
  std::string padding = r.get_string("padding", "valid");
  const bool channels_first = read_data_format_1d(r);
  return std::make_shared<PoolingLayer>(class_name, kind, ConvGeometry(pool, strides, 1, padding), r.name(),
                                        channels_first);
}
LayerRef pooling2d(const char* class_name, ops::PoolKind kind, Pair pool, const PoolingOptions& o) {
  return LayerRef(std::make_shared<PoolingLayer>(
      class_name, kind, ConvGeometry(pool, o.strides.value_or(pool), {1, 1}, o.padding), o.name));
}
LayerRef pooling1d(const char* class_name, ops::PoolKind kind, int pool, const Pooling1DOptions& o) {
  return LayerRef(std::make_shared<PoolingLayer>(class_name, kind,
                                                 ConvGeometry(pool, o.strides.value_or(pool), 1, o.padding),
                                                 o.name, data_format_1d(o.data_format, o.name)));
}
}  // namespace

std::shared_ptr<Layer> max_pooling2d_from_config(ConfigReader& r) {
  return pooling2d_from_config(r, "MaxPooling2D", ops::PoolKind::max);
}
std::shared_ptr<Layer> average_pooling2d_from_config(ConfigReader& r) {
  return pooling2d_from_config(r, "AveragePooling2D", ops::PoolKind::average);
}
std::shared_ptr<Layer> max_pooling1d_from_config(ConfigReader& r) {
  return pooling1d_from_config(r, "MaxPooling1D", ops::PoolKind::max);
}
std::shared_ptr<Layer> average_pooling1d_from_config(ConfigReader& r) {
  return pooling1d_from_config(r, "AveragePooling1D", ops::PoolKind::average);
}

LayerRef MaxPooling2D(Pair pool_size, const PoolingOptions& options) {
  return pooling2d("MaxPooling2D", ops::PoolKind::max, pool_size, options);
}
LayerRef AveragePooling2D(Pair pool_size, const PoolingOptions& options) {
  return pooling2d("AveragePooling2D", ops::PoolKind::average, pool_size, options);
}
LayerRef MaxPooling1D(int pool_size, const Pooling1DOptions& options) {
  return pooling1d("MaxPooling1D", ops::PoolKind::max, pool_size, options);
}
LayerRef AveragePooling1D(int pool_size, const Pooling1DOptions& options) {
  return pooling1d("AveragePooling1D", ops::PoolKind::average, pool_size, options);
}

}  // namespace systolic::layers
