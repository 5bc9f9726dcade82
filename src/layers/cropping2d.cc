// Cropping2D (Keras): removes (top, bottom) rows and (left, right) columns. The pad2d ops in reverse: forward is
// pad2d_backward (the window of its larger input), backward pad2d_forward (zeros where the cropped cells were).
#include <systolic/layers.h>

#include "layers/config.h"

namespace systolic::layers {

namespace {
class Cropping2DLayer final : public Layer {
 public:
  Cropping2DLayer(Padding2D p, const NameOptions& o)
      : Layer("Cropping2D", o.name), p_{p.top, p.bottom, p.left, p.right} {
    SYSTOLIC_CHECK(p.top >= 0 && p.bottom >= 0 && p.left >= 0 && p.right >= 0,
                   "layer '{}': negative cropping", name());
  }

  Shape compute_output_shape(const std::vector<Shape>& in) const override {
    if (in[0].rank() != 3) fail_shape("expects input (H, W, C), got " + in[0].keras_str());
    std::int64_t h = in[0][0] - p_.top - p_.bottom, w = in[0][1] - p_.left - p_.right;
    if (h <= 0 || w <= 0)
      fail_shape("cropping ((" + std::to_string(p_.top) + ", " + std::to_string(p_.bottom) + "), (" +
                 std::to_string(p_.left) + ", " + std::to_string(p_.right) + ")) leaves nothing of " +
                 in[0].keras_str());
    return {h, w, in[0][2]};
  }

  void get_config(json& c) const override {
    Layer::get_config(c);
    c["cropping"] = {{p_.top, p_.bottom}, {p_.left, p_.right}};
    c["data_format"] = "channels_last";
  }

 protected:
  void forward(LayerCall& c) override { ops::pad2d_backward(c.inputs[0], c.output, p_); }
  void backward(LayerCall& c) override {
    if (c.dinputs[0].defined()) ops::pad2d_forward(c.doutput, c.dinputs[0], p_);
  }

 private:
  ops::Pad2D p_;
};
}  // namespace

std::shared_ptr<Layer> cropping2d_from_config(ConfigReader& r) {
  r.require_value("data_format", "channels_last");
  Padding2D p = r.get_padding2d("cropping", 0);
  return std::make_shared<Cropping2DLayer>(p, NameOptions{r.name()});
}

LayerRef Cropping2D(Padding2D cropping, const NameOptions& options) {
  return LayerRef(std::make_shared<Cropping2DLayer>(cropping, options));
}

}  // namespace systolic::layers
