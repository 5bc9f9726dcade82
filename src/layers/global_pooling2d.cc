// GlobalAveragePooling2D and GlobalMaxPooling2D (Keras, channels_last): (H, W, C) -> (C,), or (1, 1, C) with
// keepdims, a pool over the whole image (pool2d ops with the image as the window); GlobalAveragePooling1D and
// GlobalMaxPooling1D: (L, C) -> (C,), or (1, C), the same on an (N, 1, L, C) view.
#include <systolic/layers.h>

#include "layers/config.h"
#include "layers/conv_geometry.h"

namespace systolic::layers {

namespace {
class GlobalPooling2DLayer final : public Layer {
 public:
  GlobalPooling2DLayer(const char* class_name, ops::PoolKind kind, int rank, const GlobalPoolingOptions& o)
      : Layer(class_name, o.name), kind_(kind), rank_(rank), keepdims_(o.keepdims) {}
  // Keras's GlobalAveragePooling1D averages the unmasked steps alone.
  std::string mask_refusal() const override {
    return rank_ == 1 && kind_ == ops::PoolKind::average
               ? "Keras's GlobalAveragePooling1D averages the unmasked steps alone, which systolic does not "
                 "do yet"
               : "";
  }

  Shape compute_output_shape(const std::vector<Shape>& in) const override {
    if (in[0].rank() != rank_ + 1)
      fail_shape(std::string("expects input ") + (rank_ == 1 ? "(steps, channels)" : "(H, W, C)") + ", got " +
                 in[0].keras_str());
    const std::int64_t channels = in[0][rank_];
    if (!keepdims_) return {channels};
    return rank_ == 1 ? Shape{1, channels} : Shape{1, 1, channels};
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
  Tensor view(const Tensor& t) const { return rank_ == 1 ? as_2d(t) : t; }
  // saved[0]: the backend's workspace for max pooling's backward, filled by a training forward.
  void forward(LayerCall& c) override {
    const Tensor x = view(c.inputs[0]);
    Tensor y = c.output.reshape({x.dim(0), 1, 1, x.dim(3)});
    Tensor none;
    bool workspace = c.training && kind_ == ops::PoolKind::max;
    if (workspace && c.saved.empty()) c.saved = {Tensor(Shape{0}, DType::uint8, x.device())};
    ops::pool2d_forward(x, y, workspace ? c.saved[0] : none, params(x));
  }
  void backward(LayerCall& c) override {
    if (!c.dinputs[0].defined()) return;
    const Tensor x = view(c.inputs[0]);
    Shape s{x.dim(0), 1, 1, x.dim(3)};
    Tensor workspace = c.saved.empty() ? Tensor() : c.saved[0], dx = view(c.dinputs[0]);
    ops::pool2d_backward(x, c.output.reshape(s), c.doutput.reshape(s), workspace, dx, params(x));
  }

 private:
  ops::PoolKind kind_;
  int rank_;  // the spatial axes: 2 (H, W) or 1 (steps)
  bool keepdims_;
};

std::shared_ptr<Layer> global_pooling_from_config(ConfigReader& r, const char* class_name, ops::PoolKind kind,
                                                  int rank) {
  r.require_value("data_format", "channels_last");
  GlobalPoolingOptions o{.keepdims = r.get_bool("keepdims", false), .name = r.name()};
  return std::make_shared<GlobalPooling2DLayer>(class_name, kind, rank, o);
}
}  // namespace

std::shared_ptr<Layer> global_average_pooling2d_from_config(ConfigReader& r) {
  return global_pooling_from_config(r, "GlobalAveragePooling2D", ops::PoolKind::average, 2);
}
std::shared_ptr<Layer> global_max_pooling2d_from_config(ConfigReader& r) {
  return global_pooling_from_config(r, "GlobalMaxPooling2D", ops::PoolKind::max, 2);
}
std::shared_ptr<Layer> global_average_pooling1d_from_config(ConfigReader& r) {
  return global_pooling_from_config(r, "GlobalAveragePooling1D", ops::PoolKind::average, 1);
}
std::shared_ptr<Layer> global_max_pooling1d_from_config(ConfigReader& r) {
  return global_pooling_from_config(r, "GlobalMaxPooling1D", ops::PoolKind::max, 1);
}

LayerRef GlobalAveragePooling2D(const GlobalPoolingOptions& options) {
  return LayerRef(
      std::make_shared<GlobalPooling2DLayer>("GlobalAveragePooling2D", ops::PoolKind::average, 2, options));
}
LayerRef GlobalMaxPooling2D(const GlobalPoolingOptions& options) {
  return LayerRef(
      std::make_shared<GlobalPooling2DLayer>("GlobalMaxPooling2D", ops::PoolKind::max, 2, options));
}
LayerRef GlobalAveragePooling1D(const GlobalPoolingOptions& options) {
  return LayerRef(
      std::make_shared<GlobalPooling2DLayer>("GlobalAveragePooling1D", ops::PoolKind::average, 1, options));
}
LayerRef GlobalMaxPooling1D(const GlobalPoolingOptions& options) {
  return LayerRef(
      std::make_shared<GlobalPooling2DLayer>("GlobalMaxPooling1D", ops::PoolKind::max, 1, options));
}

}  // namespace systolic::layers
