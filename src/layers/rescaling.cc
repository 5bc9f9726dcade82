// Rescaling (Keras): y = x * scale + offset.
#include <systolic/layers.h>

#include "layers/config.h"

namespace systolic::layers {

namespace {
class RescalingLayer final : public Layer {
 public:
  RescalingLayer(double scale, const RescalingOptions& o)
      : Layer("Rescaling", o.name), scale_(scale), offset_(o.offset) {}

  Shape compute_output_shape(const std::vector<Shape>& in) const override { return in[0]; }

  void get_config(json& c) const override {
    Layer::get_config(c);
    c["scale"] = scale_;
    c["offset"] = offset_;
  }

 protected:
  void forward(LayerCall& c) override { ops::scale_shift(c.inputs[0], c.output, scale_, offset_); }
  void backward(LayerCall& c) override {
    if (c.dinputs[0].defined()) ops::scale_shift(c.doutput, c.dinputs[0], scale_, 0.0);
  }

 private:
  double scale_, offset_;
};
}  // namespace

std::shared_ptr<Layer> rescaling_from_config(ConfigReader& r) {
  if (!r.has("scale")) r.fail_option("scale", "missing");
  double scale = r.get_double("scale", 1.0);
  return std::make_shared<RescalingLayer>(
      scale, RescalingOptions{.offset = r.get_double("offset", 0.0), .name = r.name()});
}

LayerRef Rescaling(double scale, const RescalingOptions& options) {
  return LayerRef(std::make_shared<RescalingLayer>(scale, options));
}

}  // namespace systolic::layers
