// BatchNormalization (Keras, channels_last): gamma, beta (trainable), moving_mean, moving_variance. Training
// normalises with the batch mean and biased variance and updates moving = moving*momentum + batch*(1-momentum);
// inference uses the moving statistics.
//
// Synchronised across replicas (LayerCall::cross_replica_sum set, a strategy's sync_batch_norm): the statistics
// are those of the global batch. Forward sums [n, n*mean, n*(var + mean^2)] over replicas (per channel), then
// normalises with the global mean and biased variance. Backward needs the global sums of dy and dy*xhat: the local
// backward op gives dx with the local sums (b = sum dy, a = sum dy*xhat over n local samples),
//   dx_local  = gamma*inv*(dy - b/n - xhat*a/n),     inv = 1/sqrt(var + eps), xhat = (x - mean)*inv,
// and the global one is dx = gamma*inv*(dy - B/N - xhat*A/N), so dx - dx_local is per channel affine in xhat:
// gamma*inv*((b/n - B/N) + xhat*(a/n - A/N)), which the inference op computes with a substituted gamma and beta.
// The statistics travel through the host (small vectors, per layer and step).
#include <systolic/layers.h>

#include "layers/config.h"

#include <algorithm>
#include <cmath>

namespace systolic::layers {

namespace {
class BatchNormalizationLayer final : public Layer {
 public:
  explicit BatchNormalizationLayer(const BatchNormalizationOptions& o) : Layer("BatchNormalization", o.name), o_(o) {
    SYSTOLIC_CHECK(o.epsilon > 0, "layer '{}': epsilon must be positive", name());
    SYSTOLIC_CHECK(o.momentum >= 0 && o.momentum <= 1, "layer '{}': momentum must be in [0, 1]", name());
  }

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
    for (auto* k : {"beta_regularizer", "gamma_regularizer", "beta_constraint", "gamma_constraint"}) c[k] = nullptr;
  }

 protected:
  void build(const std::vector<Shape>& in) override {
    std::int64_t c = in[0][-1];
    if (o_.scale) add_weight("gamma", {c}, o_.gamma_initializer);
    if (o_.center) add_weight("beta", {c}, o_.beta_initializer);
    add_weight("moving_mean", {c}, o_.moving_mean_initializer, false);
    add_weight("moving_variance", {c}, o_.moving_variance_initializer, false);
    // Weight references move when the vector grows; index them once all exist.
    std::size_t i = 0;
    gamma_ = o_.scale ? &weights()[i++] : nullptr;
    beta_ = o_.center ? &weights()[i++] : nullptr;
    moving_mean_ = i++;
    if (!o_.scale) ones_ = Tensor::full({c}, 1.0, dtype());
    if (!o_.center) zeros_ = Tensor::zeros({c}, dtype());
  }

  const Tensor& gamma() const { return gamma_ ? gamma_->value : ones_; }
  const Tensor& beta() const { return beta_ ? beta_->value : zeros_; }

  // The constant gamma/beta of a layer without scale/center follow the model to its device (first call there).
  void place(Device d) {
    if (ones_.defined() && ones_.device() != d) ones_ = ones_.to(d);
    if (zeros_.defined() && zeros_.device() != d) zeros_ = zeros_.to(d);
  }
  void forward(LayerCall& c) override {
    place(c.inputs[0].device());
    Tensor& mm = weights()[moving_mean_].value;
    Tensor& mv = weights()[moving_mean_ + 1].value;
    if (!c.training) {
      ops::batch_norm_forward_inference(c.inputs[0], gamma(), beta(), mm, mv, c.output, o_.epsilon);
      return;
    }
    std::int64_t ch = c.inputs[0].dim(-1);
    if (c.saved.size() != 2 || c.saved[0].numel() != ch)
      c.saved = {Tensor({ch}, dtype(), c.inputs[0].device()), Tensor({ch}, dtype(), c.inputs[0].device())};
    ops::batch_norm_forward_training(c.inputs[0], gamma(), beta(), c.output, c.saved[0], c.saved[1], o_.epsilon);
    if (c.cross_replica_sum) synchronise_forward(c);
    ops::moving_average(mm, c.saved[0], o_.momentum);
    ops::moving_average(mv, c.saved[1], o_.momentum);
  }

  // Replaces the shard's statistics (saved[0], saved[1]) by the global batch's and renormalises the output.
  void synchronise_forward(LayerCall& c) {
    std::int64_t ch = c.inputs[0].dim(-1), n = c.inputs[0].numel() / ch;
    auto mean = c.saved[0].to_doubles(), var = c.saved[1].to_doubles();
    std::vector<double> v(static_cast<std::size_t>(1 + 2 * ch));
    v[0] = double(n);
    for (std::int64_t k = 0; k < ch; ++k) {
      v[1 + k] = double(n) * mean[k];
      v[1 + ch + k] = double(n) * (var[k] + mean[k] * mean[k]);
    }
    (*c.cross_replica_sum)(v);
    double total = v[0];
    for (std::int64_t k = 0; k < ch; ++k) {
      mean[k] = v[1 + k] / total;
      var[k] = std::max(0.0, v[1 + ch + k] / total - mean[k] * mean[k]);
    }
    Device d = c.inputs[0].device();
    c.saved[0].copy_from(Tensor::from_vector(mean, {ch}).to(dtype()).to(d));
    c.saved[1].copy_from(Tensor::from_vector(var, {ch}).to(dtype()).to(d));
    ops::batch_norm_forward_inference(c.inputs[0], gamma(), beta(), c.saved[0], c.saved[1], c.output, o_.epsilon);
    global_count_ = total;
  }

  void backward(LayerCall& c) override {
    SYSTOLIC_CHECK(c.saved.size() == 2, "layer '{}': backward without a training forward", name());
    place(c.inputs[0].device());
    Tensor none;
    if (c.cross_replica_sum) return synchronised_backward(c);
    ops::batch_norm_backward(c.inputs[0], gamma(), c.saved[0], c.saved[1], c.doutput, c.dinputs[0],
                             gamma_ ? gamma_->grad : none, beta_ ? beta_->grad : none, o_.epsilon);
  }

  void synchronised_backward(LayerCall& c) {
    Device d = c.inputs[0].device();
    std::int64_t ch = c.inputs[0].dim(-1), n = c.inputs[0].numel() / ch;
    // The shard's sums a = sum dy*xhat, b = sum dy (with the global statistics), and dx with them.
    Tensor a = Tensor::zeros({ch}, dtype(), d), b = Tensor::zeros({ch}, dtype(), d), dx = c.dinputs[0];
    if (!dx.defined()) dx = Tensor(c.inputs[0].shape(), dtype(), d);
    ops::batch_norm_backward(c.inputs[0], gamma(), c.saved[0], c.saved[1], c.doutput, dx, a, b, o_.epsilon);
    // dgamma, dbeta are sums over samples: the shard's part goes into the gradients, which the replicas sum.
    if (gamma_) ops::accumulate(a, gamma_->grad);
    if (beta_) ops::accumulate(b, beta_->grad);
    auto av = a.to_doubles(), bv = b.to_doubles();
    std::vector<double> v(bv);
    v.insert(v.end(), av.begin(), av.end());
    (*c.cross_replica_sum)(v);  // every replica calls it, also one whose input needs no gradient
    if (!c.dinputs[0].defined()) return;
    auto g = gamma().to_doubles(), var = c.saved[1].to_doubles();
    std::vector<double> scale(static_cast<std::size_t>(ch)), shift(static_cast<std::size_t>(ch));
    for (std::int64_t k = 0; k < ch; ++k) {
      double inv = 1.0 / std::sqrt(var[k] + o_.epsilon);
      scale[k] = g[k] * inv * (av[k] / double(n) - v[ch + k] / global_count_);
      shift[k] = g[k] * inv * (bv[k] / double(n) - v[k] / global_count_);
    }
    Tensor correction(c.inputs[0].shape(), dtype(), d);
    ops::batch_norm_forward_inference(c.inputs[0], Tensor::from_vector(scale, {ch}).to(dtype()).to(d),
                                      Tensor::from_vector(shift, {ch}).to(dtype()).to(d), c.saved[0], c.saved[1],
                                      correction, o_.epsilon);
    ops::accumulate(correction, c.dinputs[0]);
  }

 private:
  BatchNormalizationOptions o_;
  Weight* gamma_ = nullptr;
  Weight* beta_ = nullptr;
  std::size_t moving_mean_ = 0;
  Tensor ones_, zeros_;
  double global_count_ = 0;  // samples per channel in the global batch (synchronised training)
};
}  // namespace

std::shared_ptr<Layer> batch_normalization_from_config(ConfigReader& r) {
  int axis = -1;
  if (r.has("axis")) {
    // Keras 3 writes an int; tf.keras a list with one (positive) axis.
    auto& a = r.get_raw("axis");
    if (a.is_number_integer()) axis = a.get<int>();
    else if (a.is_array() && a.size() == 1 && a[0].is_number_integer()) axis = a[0].get<int>();
    else r.fail_option("axis", "only one axis is supported, got " + a.dump());
  }
  BatchNormalizationOptions o{.axis = axis,
                              .momentum = r.get_double("momentum", 0.99),
                              .epsilon = r.get_double("epsilon", 1e-3),
                              .center = r.get_bool("center", true),
                              .scale = r.get_bool("scale", true),
                              .beta_initializer = r.get_initializer("beta_initializer", "zeros"),
                              .gamma_initializer = r.get_initializer("gamma_initializer", "ones"),
                              .moving_mean_initializer = r.get_initializer("moving_mean_initializer", "zeros"),
                              .moving_variance_initializer = r.get_initializer("moving_variance_initializer", "ones"),
                              .name = r.name()};
  for (auto* k : {"beta_regularizer", "gamma_regularizer", "beta_constraint", "gamma_constraint",
                  "renorm_clipping", "virtual_batch_size", "adjustment"})
    r.require_null(k);
  r.require_value("renorm", false);
  r.require_value("synchronized", false);
  r.ignore("renorm_momentum");  // only used with renorm
  r.ignore("fused");            // an implementation choice in tf.keras, same results
  return std::make_shared<BatchNormalizationLayer>(o);
}

LayerRef BatchNormalization(const BatchNormalizationOptions& options) {
  return LayerRef(std::make_shared<BatchNormalizationLayer>(options));
}

}  // namespace systolic::layers
