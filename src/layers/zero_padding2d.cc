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
  Padding2D p = 1;
  if (r.has("padding")) {
    // An int, (rows, cols) or ((top, bottom), (left, right)), as Keras accepts.
    auto& v = r.get_raw("padding");
    auto is_pair = [](const json& j) {
      return j.is_array() && j.size() == 2 && j[0].is_number_integer() && j[1].is_number_integer();
    };
    if (v.is_number_integer())
      p = Padding2D(v.get<int>());
    else if (is_pair(v))
      p = Padding2D(Pair{v[0].get<int>(), v[1].get<int>()});
    else if (v.is_array() && v.size() == 2 && is_pair(v[0]) && is_pair(v[1]))
      p = Padding2D(Pair{v[0][0].get<int>(), v[0][1].get<int>()},
                    Pair{v[1][0].get<int>(), v[1][1].get<int>()});
    else
      r.fail_option("padding", "expected an int, two ints or two pairs, got " + v.dump());
  }
  return std::make_shared<ZeroPadding2DLayer>(p, NameOptions{r.name()});
}

LayerRef ZeroPadding2D(Padding2D padding, const NameOptions& options) {
  return LayerRef(std::make_shared<ZeroPadding2DLayer>(padding, options));
}

}  // namespace systolic::layers
