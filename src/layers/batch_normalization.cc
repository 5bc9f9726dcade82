// BatchNormalization (Keras, channels_last): gamma, beta (trainable), moving_mean, moving_variance. Training
// normalises with the batch mean and biased variance and updates moving = moving*momentum + batch*(1-momentum);
// inference uses the moving statistics, and so does training when the layer is frozen (Keras 3). Without scale
// (center) there is no gamma (beta): the ops take them as 1 (0). Synchronised across replicas (a strategy's
// sync_batch_norm), the batch-norm ops sum their statistics over the replicas the model hands the layer
// (LayerCall::replicas). Keras's synchronized=True is read and written back; it changes nothing on one device (as
// in Keras), and under replicas fit asks for the strategy's sync_batch_norm.
#include <systolic/layers.h>

#include <algorithm>
#include <cmath>

#include "layers/config.h"

namespace systolic::layers {

namespace {
class BatchNormalizationLayer final : public Layer {
 public:
  bool output_masked(bool input_masked) const override { return input_masked; }  // Keras passes it on
  explicit BatchNormalizationLayer(const BatchNormalizationOptions& o)
      : Layer("BatchNormalization", o.name), o_(o) {
    SYSTOLIC_CHECK(o.epsilon > 0, "layer '{}': epsilon must be positive", name());
    SYSTOLIC_CHECK(o.momentum >= 0 && o.momentum <= 1, "layer '{}': momentum must be in [0, 1]", name());
  }

  bool synchronized() const override { return o_.synchronized; }

  Shape compute_output_shape(const std::vector<Shape>& in) const override {
    if (in[0].rank() < 1) fail_shape("expects an input with a channel axis");
    if (o_.axis != -1 && o_.axis != in[0].rank())
      fail_shape("only axis=-1 (channels_last) is supported, got axis=" + std::to_string(o_.axis));
    return in[0];
  }

  void get_config(json& c) const override {
    Layer::get_config(c);
    c["axis"] = o_.axis;
    c["momentum"] = o_.momentum;
    c["epsilon"] = o_.epsilon;
    c["center"] = o_.center;
    c["scale"] = o_.scale;
    c["beta_initializer"] = initializer_config(o_.beta_initializer);
    c["gamma_initializer"] = initializer_config(o_.gamma_initializer);
    c["moving_mean_initializer"] = initializer_config(o_.moving_mean_initializer);
    c["moving_variance_initializer"] = initializer_config(o_.moving_variance_initializer);
    WeightOptions beta{o_.beta_regularizer, o_.beta_constraint},
        gamma{o_.gamma_regularizer, o_.gamma_constraint};
    write_regularizers(c, {{"beta", &beta}, {"gamma", &gamma}});
    // As tf.keras, only when set (Keras 3 writes it always; both read it).
    if (o_.synchronized) c["synchronized"] = true;
  }

 protected:
  void build(const std::vector<Shape>& in) override {
    std::int64_t c = in[0][-1];
    if (o_.scale)
      add_weight("gamma", {c}, o_.gamma_initializer, true, {o_.gamma_regularizer, o_.gamma_constraint});
    if (o_.center)
      add_weight("beta", {c}, o_.beta_initializer, true, {o_.beta_regularizer, o_.beta_constraint});
    add_weight("moving_mean", {c}, o_.moving_mean_initializer, false);
    add_weight("moving_variance", {c}, o_.moving_variance_initializer, false);
  }

  // The weights in Keras's order: gamma and beta where they exist, then the moving statistics.
  const Weight* gamma() const { return o_.scale ? &weights()[0] : nullptr; }
  const Weight* beta() const { return o_.center ? &weights()[o_.scale ? 1 : 0] : nullptr; }
  Tensor& moving(int k) { return weights()[(o_.scale ? 1 : 0) + (o_.center ? 1 : 0) + k].value; }
  static Tensor value(const Weight* w) { return w ? w->value : Tensor(); }
  static Tensor grad(const Weight* w) { return w ? w->grad : Tensor(); }

  // Batch statistics only in training and when not frozen: a frozen BatchNormalization (trainable=false) runs in
  // inference mode even in training, as in Keras 3 (`training and self.trainable`).
  bool batch_statistics(const LayerCall& c) const { return c.training && trainable(); }

  void forward(LayerCall& c) override {
    Tensor g = value(gamma()), b = value(beta());
    if (!batch_statistics(c)) {
      ops::batch_norm_forward_inference(c.inputs[0], g, b, moving(0), moving(1), c.output, o_.epsilon);
      return;
    }
    std::int64_t ch = c.inputs[0].dim(-1);
    if (c.saved.size() != 2 || c.saved[0].numel() != ch)
      c.saved = {Tensor({ch}, dtype(), c.inputs[0].device()), Tensor({ch}, dtype(), c.inputs[0].device())};
    ops::batch_norm_forward_training(c.inputs[0], g, b, c.output, c.saved[0], c.saved[1], o_.epsilon,
                                     c.training->replicas);
    ops::moving_average(moving(0), c.saved[0], o_.momentum);
    ops::moving_average(moving(1), c.saved[1], o_.momentum);
  }

  void backward(LayerCall& c) override {
    Tensor dgamma = grad(gamma()), dbeta = grad(beta());
    if (!batch_statistics(c)) {
      // Inference mode: y = gamma*(x - mean)*inv + beta with constant statistics, inv = 1/sqrt(var + eps).
      // dgamma += sum dy*xhat and dbeta += sum dy are batch_norm_backward's with the moving statistics (its dx,
      // of the batch statistics, is not this one); dx = gamma*inv*dy is the inference forward of dy with mean 0.
      if (dgamma.defined() || dbeta.defined()) {
        Tensor no_dx;
        ops::batch_norm_backward(c.inputs[0], value(gamma()), moving(0), moving(1), c.doutput, no_dx, dgamma,
                                 dbeta, o_.epsilon, nullptr);
      }
      if (c.dinputs[0].defined()) {
        std::int64_t ch = c.inputs[0].dim(-1);
        if (c.saved.size() != 1 || c.saved[0].numel() != ch)
          c.saved = {Tensor::zeros({ch}, dtype(), c.inputs[0].device())};
        ops::batch_norm_forward_inference(c.doutput, value(gamma()), Tensor(), c.saved[0], moving(1),
                                          c.dinputs[0], o_.epsilon);
      }
      return;
    }
    SYSTOLIC_CHECK(c.saved.size() == 2, "layer '{}': backward without a training forward", name());
    ops::batch_norm_backward(c.inputs[0], value(gamma()), c.saved[0], c.saved[1], c.doutput, c.dinputs[0],
                             dgamma, dbeta, o_.epsilon, c.training ? c.training->replicas : nullptr);
  }

 private:
  BatchNormalizationOptions o_;
};
}  // namespace

std::shared_ptr<Layer> batch_normalization_from_config(ConfigReader& r) {
  int axis = -1;
  if (r.has("axis")) {
    // Keras 3 writes an int; tf.keras a list with one (positive) axis.
    auto& a = r.get_raw("axis");
    if (a.is_number_integer())
      axis = a.get<int>();
    else if (a.is_array() && a.size() == 1 && a[0].is_number_integer())
      axis = a[0].get<int>();
    else
      r.fail_option("axis", "only one axis is supported, got " + a.dump());
  }
  BatchNormalizationOptions o{
      .axis = axis,
      .momentum = r.get_double("momentum", 0.99),
      .epsilon = r.get_double("epsilon", 1e-3),
      .center = r.get_bool("center", true),
      .scale = r.get_bool("scale", true),
      .beta_initializer = r.get_initializer("beta_initializer", "zeros"),
      .gamma_initializer = r.get_initializer("gamma_initializer", "ones"),
      .moving_mean_initializer = r.get_initializer("moving_mean_initializer", "zeros"),
      .moving_variance_initializer = r.get_initializer("moving_variance_initializer", "ones"),
      .beta_regularizer = r.get_regularizer("beta_regularizer"),
      .gamma_regularizer = r.get_regularizer("gamma_regularizer"),
      .beta_constraint = r.get_constraint("beta_constraint"),
      .gamma_constraint = r.get_constraint("gamma_constraint"),
      .name = r.name()};
  for (auto* k : {"renorm_clipping", "virtual_batch_size", "adjustment"}) r.require_null(k);
  r.require_value("renorm", false);
  o.synchronized = r.get_bool("synchronized", false);
  r.ignore("renorm_momentum");  // only used with renorm
  r.ignore("fused");            // an implementation choice in tf.keras, same results
  return std::make_shared<BatchNormalizationLayer>(o);
}

LayerRef BatchNormalization(const BatchNormalizationOptions& options) {
  return LayerRef(std::make_shared<BatchNormalizationLayer>(options));
}

}  // namespace systolic::layers
