// LayerScale (keras.applications.convnext's custom layer, registered under the class name "LayerScale"):
// y = x * gamma, gamma of shape (projection_dim,) over the last axis, initialised to init_values. Keras 3 names
// the weight "variable" (add_weight without a name); it is the only weight, so files load by position.
#include <systolic/layers.h>

#include "layers/config.h"

namespace systolic::layers {

namespace {
class LayerScaleLayer final : public Layer {
 public:
  LayerScaleLayer(double init_values, int projection_dim, const NameOptions& o)
      : Layer("LayerScale", o.name), init_values_(init_values), projection_dim_(projection_dim) {
    SYSTOLIC_CHECK(projection_dim > 0, "layer '{}': projection_dim must be positive, got {}", name(),
                   projection_dim);
  }

  Shape compute_output_shape(const std::vector<Shape>& in) const override {
    if (in[0].rank() < 1 || (in[0][-1] != projection_dim_ && in[0][-1] != 1))
      fail_shape("projection_dim " + std::to_string(projection_dim_) + " does not fit input " +
                 in[0].keras_str());
    Shape out = in[0];
    out[-1] = projection_dim_;
    return out;
  }

  void get_config(json& c) const override {
    Layer::get_config(c);
    c["init_values"] = init_values_;
    c["projection_dim"] = projection_dim_;
  }

 protected:
  void build(const std::vector<Shape>&) override {
    Weight& w = add_weight("variable", {projection_dim_}, "zeros");
    w.value.fill(init_values_);  // Keras's Constant(init_values)
  }
  void forward(LayerCall& c) override {
    ops::broadcast_forward(ops::BinaryKind::multiply, c.inputs[0], weights()[0].value, c.output);
  }
  void backward(LayerCall& c) override {
    Weight& w = weights()[0];
    if (c.saved.empty() || c.saved[0].shape() != w.value.shape() || c.saved[0].device() != w.value.device())
      c.saved = {Tensor(w.value.shape(), w.value.dtype(), w.value.device())};
    ops::broadcast_backward(ops::BinaryKind::multiply, c.inputs[0], w.value, c.doutput, c.dinputs[0],
                            c.saved[0]);
    ops::accumulate(c.saved[0], w.grad);
  }

 private:
  double init_values_;
  int projection_dim_;
};
}  // namespace

std::shared_ptr<Layer> layer_scale_from_config(ConfigReader& r) {
  if (!r.has("init_values")) r.fail_option("init_values", "missing");
  if (!r.has("projection_dim")) r.fail_option("projection_dim", "missing");
  double init = r.get_double("init_values", 0);
  int dim = r.get_int("projection_dim", 0);
  return std::make_shared<LayerScaleLayer>(init, dim, NameOptions{r.name()});
}

LayerRef LayerScale(double init_values, int projection_dim, const NameOptions& options) {
  return LayerRef(std::make_shared<LayerScaleLayer>(init_values, projection_dim, options));
}

}  // namespace systolic::layers
