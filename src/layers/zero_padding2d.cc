// ZeroPadding2D (Keras): pads H by (top, bottom) and W by (left, right) with zeros.
#include <systolic/layers.h>

#include "layers/config.h"

namespace systolic::layers {

namespace {
class ZeroPadding2DLayer final : public Layer {
 public:
  ZeroPadding2DLayer(Padding2D p, const NameOptions& o)
      : Layer("ZeroPadding2D", o.name), p_{p.top, p.bottom, p.left, p.right} {
    SYSTOLIC_CHECK(p.top >= 0 && p.bottom >= 0 && p.left >= 0 && p.right >= 0, "layer '{}': negative padding",
                   name());
  }

  Shape compute_output_shape(const std::vector<Shape>& in) const override {
    if (in[0].rank() != 3) fail_shape("expects input (H, W, C), got " + in[0].keras_str());
    return {in[0][0] + p_.top + p_.bottom, in[0][1] + p_.left + p_.right, in[0][2]};
  }

  void get_config(json& c) const override {
    Layer::get_config(c);
    c["padding"] = {{p_.top, p_.bottom}, {p_.left, p_.right}};
    c["data_format"] = "channels_last";
  }

 protected:
  void forward(LayerCall& c) override { ops::pad2d_forward(c.inputs[0], c.output, p_); }
  void backward(LayerCall& c) override {
    if (c.dinputs[0].defined()) ops::pad2d_backward(c.doutput, c.dinputs[0], p_);
  }

 private:
  ops::Pad2D p_;
};
}  // namespace

std::shared_ptr<Layer> zero_padding2d_from_config(ConfigReader& r) {
  r.require_value("data_format", "channels_last");
  Padding2D p = r.get_padding2d("padding", 1);
  return std::make_shared<ZeroPadding2DLayer>(p, NameOptions{r.name()});
}

LayerRef ZeroPadding2D(Padding2D padding, const NameOptions& options) {
  return LayerRef(std::make_shared<ZeroPadding2DLayer>(padding, options));
}

}  // namespace systolic::layers
