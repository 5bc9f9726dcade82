// ActivityRegularization (Keras): the identity, with the activity regularizer L1L2(l1, l2) on its output (Keras 3
// passes it to the base Layer; the model adds the penalty, divided by the batch size, to the loss and its
// gradient to the output's gradient: a loss term, src/model/loss_terms.cc). Config: l1, l2 (no
// activity_regularizer key).
#include <systolic/layers.h>

#include "layers/config.h"

namespace systolic::layers {

namespace {
class ActivityRegularizationLayer final : public Layer {
 public:
  bool output_masked(bool input_masked) const override { return input_masked; }  // Keras passes it on
  explicit ActivityRegularizationLayer(const ActivityRegularizationOptions& o)
      : Layer("ActivityRegularization", o.name), l1_(o.l1), l2_(o.l2) {
    set_activity_regularizer(regularizers::L1L2(o.l1, o.l2));
  }

  Shape compute_output_shape(const std::vector<Shape>& in) const override { return in[0]; }

  void get_config(json& c) const override {
    Layer::get_config(c);
    c.erase("activity_regularizer");  // Keras's get_config drops it: l1 and l2 say it
    c["l1"] = l1_;
    c["l2"] = l2_;
  }

 protected:
  void forward(LayerCall& c) override { c.output = c.inputs[0].reshape(c.output.shape()); }
  void backward(LayerCall& c) override {
    if (c.dinputs[0].defined()) ops::copy(c.doutput, c.dinputs[0]);
  }

 private:
  double l1_, l2_;
};
}  // namespace

std::shared_ptr<Layer> activity_regularization_from_config(ConfigReader& r) {
  ActivityRegularizationOptions o{
      .l1 = r.get_double("l1", 0.0), .l2 = r.get_double("l2", 0.0), .name = r.name()};
  return std::make_shared<ActivityRegularizationLayer>(o);
}

LayerRef ActivityRegularization(const ActivityRegularizationOptions& options) {
  return LayerRef(std::make_shared<ActivityRegularizationLayer>(options));
}

}  // namespace systolic::layers
