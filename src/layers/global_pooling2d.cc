// GlobalAveragePooling2D and GlobalMaxPooling2D (Keras, channels_last): (H, W, C) -> (C,), or (1, 1, C) with
// keepdims, a pool over the whole image (pool2d ops with the image as the window); GlobalAveragePooling1D and
// GlobalMaxPooling1D: (L, C) -> (C,), or (1, C), the same on an (N, 1, L, C) view; channels_first (C, L) -> (C,), or
// (C, 1), on an (N, C, L, 1) view with a window one row high. GlobalAveragePooling1D of a masked input averages the
// unmasked steps alone, as Keras's: sum(x * mask) / sum(mask) over the steps, as two averages divided (NaN for a
// row with no unmasked step, as in Keras).
#include <systolic/layers.h>

#include "layers/config.h"
#include "layers/conv_geometry.h"

namespace systolic::layers {

namespace {
class GlobalPooling2DLayer final : public Layer {
 public:
  GlobalPooling2DLayer(const char* class_name, ops::PoolKind kind, int rank, const GlobalPoolingOptions& o)
      : Layer(class_name, o.name),
        kind_(kind),
        rank_(rank),
        keepdims_(o.keepdims),
        channels_first_(data_format_1d(o.data_format, name())) {
    SYSTOLIC_CHECK(rank == 1 || !channels_first_,
                   "layer '{}': data_format channels_first is supported by the 1-D layers only", name());
  }

  Shape compute_output_shape(const std::vector<Shape>& in) const override {
    if (in[0].rank() != rank_ + 1)
      fail_shape(std::string("expects input ") +
                 (rank_ == 1 ? (channels_first_ ? "(channels, steps)" : "(steps, channels)") : "(H, W, C)") +
                 ", got " + in[0].keras_str());
    const std::int64_t channels = channels_first_ ? in[0][0] : in[0][rank_];
    if (!keepdims_) return {channels};
    if (rank_ == 2) return Shape{1, 1, channels};
    return channels_first_ ? Shape{channels, 1} : Shape{1, channels};
  }

  void get_config(json& c) const override {
    Layer::get_config(c);
    c["data_format"] = channels_first_ ? "channels_first" : "channels_last";
    c["keepdims"] = keepdims_;
  }

 protected:
  // The input as NHWC for the pool ops, and the window: the whole image, or the steps of each channel's row.
  Tensor view(const Tensor& t) const {
    if (channels_first_) return t.reshape({t.dim(0), t.dim(1), t.dim(2), 1});
    return rank_ == 1 ? as_2d(t) : t;
  }
  ops::Pool2DParams params(const Tensor& x) const {
    int h = channels_first_ ? 1 : static_cast<int>(x.dim(1)), w = static_cast<int>(x.dim(2));
    return {kind_, h, w, h, w, 0, 0, 0, 0};
  }
  // The pooled values [N, C] as the pool ops' output.
  Tensor pooled(const Tensor& t, std::int64_t N, std::int64_t C) const {
    return channels_first_ ? t.reshape({N, C, 1, 1}) : t.reshape({N, 1, 1, C});
  }
  // A mask [N, L] shaped to multiply the input by.
  Tensor mask_view(const Tensor& m) const {
    const std::int64_t N = m.dim(0), L = m.numel() / N;
    return channels_first_ ? m.reshape({N, 1, L}) : m.reshape({N, L, 1});
  }
  // saved[0]: the backend's workspace for max pooling's backward, filled by a training forward. With a mask: 1 the
  // input times the mask, 2 its average [N, C], 3 the mask's average [N, 1], 4 the gradient of 2.
  void forward(LayerCall& c) override {
    const Tensor x = view(c.inputs[0]);
    const std::int64_t N = x.dim(0), C = channels_first_ ? x.dim(1) : x.dim(3);
    Tensor none;
    if (c.mask.defined() && kind_ == ops::PoolKind::average) return masked_average(c, N, C);
    bool workspace = c.training && kind_ == ops::PoolKind::max;
    if (workspace && c.saved.empty()) c.saved = {Tensor(Shape{0}, DType::uint8, x.device())};
    Tensor y = pooled(c.output, N, C);
    ops::pool2d_forward(x, y, workspace ? c.saved[0] : none, params(x));
  }
  void backward(LayerCall& c) override {
    if (!c.dinputs[0].defined()) return;
    const Tensor x = view(c.inputs[0]);
    const std::int64_t N = x.dim(0), C = channels_first_ ? x.dim(1) : x.dim(3);
    Tensor dx = view(c.dinputs[0]);
    if (c.mask.defined() && kind_ == ops::PoolKind::average) {
      Tensor none, &ds = c.saved[4];
      ops::broadcast_backward(ops::BinaryKind::divide, c.saved[2], c.saved[3], c.doutput.reshape({N, C}), ds,
                              none);
      ops::pool2d_backward(view(c.saved[1]), pooled(c.saved[2], N, C), pooled(ds, N, C), none, dx, params(x));
      ops::broadcast_forward(ops::BinaryKind::multiply, c.dinputs[0], mask_view(c.mask), c.dinputs[0]);
      return;
    }
    Tensor workspace = c.saved.empty() ? Tensor() : c.saved[0];
    ops::pool2d_backward(x, pooled(c.output, N, C), pooled(c.doutput, N, C), workspace, dx, params(x));
  }

 private:
  void masked_average(LayerCall& c, std::int64_t N, std::int64_t C) {
    const Tensor& in = c.inputs[0];
    const Tensor m = mask_view(c.mask);
    const std::int64_t L = c.mask.numel() / N;
    if (c.saved.size() != 5 || c.saved[1].shape() != in.shape() || c.saved[1].dtype() != in.dtype())
      c.saved = {Tensor(), Tensor(in.shape(), in.dtype(), in.device()),
                 Tensor({N, C}, in.dtype(), in.device()), Tensor({N, 1}, in.dtype(), in.device()),
                 Tensor({N, C}, in.dtype(), in.device())};
    Tensor none, &masked = c.saved[1], &sum = c.saved[2], &count = c.saved[3];
    ops::broadcast_forward(ops::BinaryKind::multiply, in, m, masked);
    Tensor xv = view(masked), sum_view = pooled(sum, N, C), count_view = count.reshape({N, 1, 1, 1});
    ops::pool2d_forward(xv, sum_view, none, params(xv));
    const int l = static_cast<int>(L);
    ops::pool2d_forward(c.mask.reshape({N, 1, L, 1}), count_view, none,
                        {ops::PoolKind::average, 1, l, 1, l, 0, 0, 0, 0});
    Tensor y = c.output.reshape({N, C});
    ops::broadcast_forward(ops::BinaryKind::divide, sum, count, y);
  }

  ops::PoolKind kind_;
  int rank_;  // the spatial axes: 2 (H, W) or 1 (steps)
  bool keepdims_;
  bool channels_first_;  // 1-D only
};

std::shared_ptr<Layer> global_pooling_from_config(ConfigReader& r, const char* class_name, ops::PoolKind kind,
                                                  int rank) {
  GlobalPoolingOptions o{.keepdims = r.get_bool("keepdims", false), .name = r.name()};
  if (rank == 1)
    o.data_format = read_data_format_1d(r) ? "channels_first" : "channels_last";
  else
    r.require_value("data_format", "channels_last");
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
