// UpSampling2D (Keras): (H, W, C) -> (H*size_h, W*size_w, C), interpolation "nearest" (each cell repeated) or
// "bilinear" (tf.image.resize: half-pixel centres, no antialias), through the resize2d ops.
#include <systolic/layers.h>

#include "layers/config.h"

namespace systolic::layers {

namespace {
ops::Interpolation interpolation_of(const std::string& name, const std::string& layer) {
  if (name == "nearest") return ops::Interpolation::nearest;
  if (name == "bilinear") return ops::Interpolation::bilinear;
  fail("layer '{}': interpolation '{}' is not supported (only 'nearest' and 'bilinear')", layer, name);
}

class UpSampling2DLayer final : public Layer {
 public:
  UpSampling2DLayer(Pair size, const UpSampling2DOptions& o)
      : Layer("UpSampling2D", o.name),
        size_(size),
        interpolation_(o.interpolation),
        mode_(interpolation_of(o.interpolation, name())) {
    SYSTOLIC_CHECK(size[0] > 0 && size[1] > 0, "layer '{}': size must be positive", name());
  }

  Shape compute_output_shape(const std::vector<Shape>& in) const override {
    if (in[0].rank() != 3) fail_shape("expects input (H, W, C), got " + in[0].keras_str());
    return {in[0][0] * size_[0], in[0][1] * size_[1], in[0][2]};
  }

  void get_config(json& c) const override {
    Layer::get_config(c);
    c["size"] = size_;
    c["data_format"] = "channels_last";
    c["interpolation"] = interpolation_;
  }

 protected:
  void forward(LayerCall& c) override { ops::resize2d_forward(c.inputs[0], c.output, mode_); }
  void backward(LayerCall& c) override {
    if (c.dinputs[0].defined()) ops::resize2d_backward(c.doutput, c.dinputs[0], mode_);
  }

 private:
  Pair size_;
  std::string interpolation_;
  ops::Interpolation mode_;
};
}  // namespace

std::shared_ptr<Layer> upsampling2d_from_config(ConfigReader& r) {
  r.require_value("data_format", "channels_last");
  Pair size = r.get_pair("size", {2, 2});
  UpSampling2DOptions o{.interpolation = r.get_string("interpolation", "nearest"), .name = r.name()};
  if (o.interpolation != "nearest" && o.interpolation != "bilinear")
    r.fail_option("interpolation",
                  "'" + o.interpolation + "' is not supported (only 'nearest' and 'bilinear')");
  return std::make_shared<UpSampling2DLayer>(size, o);
}

LayerRef UpSampling2D(Pair size, const UpSampling2DOptions& options) {
  return LayerRef(std::make_shared<UpSampling2DLayer>(size, options));
}

}  // namespace systolic::layers
