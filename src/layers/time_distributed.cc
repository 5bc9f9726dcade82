// TimeDistributed (Keras): the wrapped layer applied to every step of the input, (N, T, ...) -> (N, T, ...'). The
// steps are folded into the batch, (N * T, ...), a view: the wrapped layer runs once on all of them, as tf.keras
// ran it (Keras 3 calls it step by step, which is the same for a layer that treats samples apart). A layer that
// mixes samples in training (BatchNormalization's batch statistics) is refused: Keras 3 would normalise each
// step's batch alone.
//
// The weights are the wrapper's (Keras 3's weights files keep them under layers/<key>/layer/vars, tf.keras's name
// them "<wrapper>/kernel:0"); the wrapped layer is built once, its initial values copied into the wrapper's weights,
// and it reads the wrapper's tensors (values, gradients, compute copies, trainable flags) at every call.
#include <systolic/layers.h>

#include "layers/config.h"

namespace systolic::layers {

namespace {

class TimeDistributedLayer final : public Layer {
 public:
  TimeDistributedLayer(std::shared_ptr<Layer> inner, const std::string& name)
      : Layer("TimeDistributed", name.empty() ? unique_layer_name("time_distributed") : name),
        inner_(std::move(inner)) {
    SYSTOLIC_CHECK(inner_ != nullptr, "TimeDistributed: no layer to wrap");
    SYSTOLIC_CHECK(
        inner_->class_name() != "BatchNormalization",
        "layer '{}': TimeDistributed(BatchNormalization) is not supported: Keras 3 normalises each "
        "step's batch apart, which folding the steps into one batch does not reproduce",
        this->name());
    SYSTOLIC_CHECK(
        inner_->sublayers().empty(),
        "layer '{}': TimeDistributed of a model ('{}') is not supported; wrap its layers one by one",
        this->name(), inner_->name());
  }

  Shape compute_output_shape(const std::vector<Shape>& in) const override {
    if (in[0].rank() < 2)
      fail_shape(
          "TimeDistributed needs an input of at least 2 dimensions (steps, ...) without the batch, got " +
          in[0].str());
    Shape out = inner_->compute_output_shape({step_shape(in[0])});
    std::vector<std::int64_t> dims = {in[0][0]};
    for (auto d : out.dims()) dims.push_back(d);
    return Shape(dims);
  }
  std::vector<VariableGroup> keras3_variable_groups() const override {
    std::vector<VariableGroup> groups = {{"vars", 0}};
    for (auto& g : inner_->keras3_variable_groups()) groups.push_back({"layer/" + g.path, g.count});
    return groups;
  }
  // Keras's TimeDistributed supports masking: a (N, T) mask passes to the output when the wrapped layer passes
  // masks on (Dense, activations, dropouts); the wrapped layer itself does not read it.
  bool output_masked(bool input_masked) const override { return input_masked && passes_masks(); }
  std::string mask_refusal() const override {
    return passes_masks()
               ? std::string()
               : "TimeDistributed(" + inner_->class_name() +
                     ") with a masked input is not supported (the wrapped layer would read the mask)";
  }
  void get_config(json& c) const override {
    Layer::get_config(c);
    json inner;
    inner_->get_config(inner);
    c["layer"] = {{"module", inner_->keras_module()},
                  {"class_name", inner_->class_name()},
                  {"config", inner},
                  {"registered_name", nullptr}};
  }

 protected:
  void build(const std::vector<Shape>& in) override {
    // Building the wrapped layer: a call on a symbolic input of one step's shape (a node nothing uses).
    if (!inner_->built()) (*inner_)(Input(step_shape(in[0]), {.name = name() + "_step"}));
    for (const Weight& w : inner_->weights()) {
      Weight& mine = add_weight(w.name, w.value.shape(), "zeros", w.trainable_variable,
                                {.regularizer = w.regularizer, .constraint = w.constraint});
      mine.value.copy_from(w.value);
    }
  }

  // c.saved: the wrapped call's input, output, pre-activation and activation buffer, then its own saved tensors.
  void forward(LayerCall& c) override {
    LayerCall inner = wrapped_call(c);
    inner.inputs = {fold(c.inputs[0])};
    inner.output = fold(c.output);
    inner.activated = c.saved.size() > 3 ? c.saved[3] : Tensor();
    inner.saved =
        c.saved.size() > 4 ? std::vector<Tensor>(c.saved.begin() + 4, c.saved.end()) : std::vector<Tensor>{};
    inner_->call_forward(inner);
    if (!inner.output.same_start_as(fold(c.output))) c.output = unfold(inner.output, c.output.shape());
    c.saved = {inner.inputs[0], inner.output, inner.preactivation, inner.activated};
    c.saved.insert(c.saved.end(), inner.saved.begin(), inner.saved.end());
  }

  void backward(LayerCall& c) override {
    LayerCall inner = wrapped_call(c);
    inner.inputs = {c.saved[0]};
    inner.output = c.saved[1];
    inner.preactivation = c.saved[2];
    inner.activated = c.saved[3];
    inner.saved.assign(c.saved.begin() + 4, c.saved.end());
    inner.doutput = fold(c.doutput);
    inner.dinputs = {c.dinputs[0].defined() ? fold(c.dinputs[0]) : Tensor()};  // written in place
    inner_->call_backward(inner, false);
  }

 private:
  static Shape step_shape(const Shape& s) {
    std::vector<std::int64_t> dims(s.dims().begin() + 1, s.dims().end());
    return Shape(dims);
  }
  // (N, T, ...) -> (N * T, ...): a view.
  static Tensor fold(const Tensor& t) {
    std::vector<std::int64_t> dims = {t.dim(0) * t.dim(1)};
    for (int a = 2; a < t.rank(); ++a) dims.push_back(t.dim(a));
    return t.reshape(Shape(dims));
  }
  static Tensor unfold(const Tensor& t, const Shape& like) {
    std::vector<std::int64_t> dims = {like[0], like[1]};
    for (int a = 1; a < t.rank(); ++a) dims.push_back(t.dim(a));
    return t.reshape(Shape(dims));
  }
  bool passes_masks() const { return inner_->output_masked(true) && !inner_->makes_mask(); }

  // A call of the wrapped layer with the wrapper's weights and the step's training state.
  LayerCall wrapped_call(const LayerCall& c) {
    auto& mine = weights();
    auto& theirs = inner_->weights();
    SYSTOLIC_CHECK(mine.size() == theirs.size(), "layer '{}': {} weights for the wrapped layer's {}", name(),
                   mine.size(), theirs.size());
    for (std::size_t i = 0; i < mine.size(); ++i) {
      theirs[i].value = mine[i].value;
      theirs[i].grad = mine[i].grad;
      theirs[i].compute = mine[i].compute;
      theirs[i].trainable = mine[i].trainable;
    }
    LayerCall inner;
    inner.training = c.training;
    return inner;
  }

  std::shared_ptr<Layer> inner_;
};

}  // namespace

std::shared_ptr<Layer> time_distributed_from_config(ConfigReader& r) {
  const json& v = r.get_serialized_layer("layer");
  auto inner = layer_from_config(v["class_name"].get<std::string>(), v["config"]);
  return std::make_shared<TimeDistributedLayer>(std::move(inner), r.name());
}

LayerRef TimeDistributed(const LayerRef& layer, const NameOptions& options) {
  return LayerRef(std::make_shared<TimeDistributedLayer>(layer.get(), options.name));
}

}  // namespace systolic::layers
