// Nested models: a Model called on symbolic tensors inside another model (Keras's `x = base(inputs,
// training=False)`). The call flattens the nested graph into the caller's: every node of the nested model is made
// again on the call's inputs, naming the nested model (Node::container) and the call's training argument. The
// caller lists the nested model as one layer (ModelLayer, class Functional or Sequential), so model.layers,
// summary(), configs and files show the nesting as Keras does, while execution sees plain layers.
#include <map>

#include "model/model_state.h"

namespace systolic {

ModelLayer::ModelLayer(std::shared_ptr<ModelState> state)
    : Layer(state->sequential ? "Sequential" : "Functional", state->name), state_(std::move(state)) {
  if (!state_->trainable) Layer::set_trainable(false);
}

// The first output's shape (Layer's one output shape; call_all gives every output).
Shape ModelLayer::compute_output_shape(const std::vector<Shape>& in) const {
  SYSTOLIC_CHECK(in.size() == state_->inputs.size(), "model '{}' used as a layer takes {} input(s), got {}",
                 name(), state_->inputs.size(), in.size());
  for (std::size_t i = 0; i < in.size(); ++i)
    if (in[i] != state_->inputs[i].shape())
      fail_shape("it takes inputs of shape " + state_->inputs[i].shape().keras_str() + ", got " +
                 in[i].keras_str());
  return state_->outputs[0].shape();
}

std::int64_t ModelLayer::count_params() const {
  std::int64_t n = 0;
  for (auto& l : state_->layers) n += l->count_params();
  return n;
}

std::int64_t ModelLayer::count_trainable_params() const {
  std::int64_t n = 0;
  for (auto& l : state_->layers) n += l->count_trainable_params();
  return n;
}

void ModelLayer::set_trainable(bool trainable) {
  // Keras: setting a model's trainable sets every one of its layers'.
  Layer::set_trainable(trainable);
  state_->trainable = trainable;
  for (auto& l : state_->layers) l->set_trainable(trainable);
}

SymbolicTensor ModelLayer::call(const std::vector<SymbolicTensor>& inputs, std::optional<bool> training) {
  SYSTOLIC_CHECK(state_->outputs.size() == 1, "model '{}' has {} outputs: Model::call gives them all", name(),
                 state_->outputs.size());
  return call_all(inputs, training)[0];
}

std::vector<SymbolicTensor> ModelLayer::call_all(const std::vector<SymbolicTensor>& inputs,
                                                 std::optional<bool> training) {
  std::vector<Shape> shapes;
  for (auto& in : inputs) {
    SYSTOLIC_CHECK(in.defined(), "model '{}' called on an undefined tensor", name());
    shapes.push_back(in.shape());
  }
  compute_output_shape(shapes);
  auto self = shared_from_this();
  std::map<const Node*, SymbolicTensor> made;
  for (std::size_t i = 0; i < inputs.size(); ++i) made[state_->inputs[i].node().get()] = inputs[i];
  for (auto& e : state_->nodes) {
    const Node* n = e.node.get();
    if (made.count(n)) continue;
    auto node = std::make_shared<Node>();
    node->layer = n->layer;
    for (auto& in : n->inputs) node->inputs.push_back(made.at(in.node().get()));
    node->shape = n->shape;
    node->dtype = n->dtype;
    node->id = next_node_id();
    node->container = self;
    // A training argument given inside the nested model (a model nested deeper) wins over this call's.
    node->training = n->training.has_value() ? n->training : training;
    node->output = n->output;
    made[n] = SymbolicTensor(node);
  }
  std::vector<SymbolicTensor> outs;
  for (auto& o : state_->outputs) outs.push_back(made.at(o.node().get()));
  calls_.push_back({inputs, outs, training});
  return outs;
}

void ModelLayer::forward(LayerCall&) {
  fail("model '{}' used as a layer runs as its layers (its call is flattened into the caller's graph)",
       name());
}
void ModelLayer::backward(LayerCall&) {
  fail("model '{}' used as a layer runs as its layers (its call is flattened into the caller's graph)",
       name());
}

std::vector<Layer*> ModelState::weight_layers() const {
  std::vector<Layer*> out;
  std::function<void(const std::shared_ptr<Layer>&)> add = [&](const std::shared_ptr<Layer>& l) {
    auto subs = l->sublayers();
    if (subs.empty() && !as_model_layer(*l)) out.push_back(l.get());
    for (auto& s : subs) add(s);
  };
  for (auto& l : layers) add(l);
  return out;
}

LayerRef Model::as_layer() const {
  auto layer = state_->as_layer.lock();
  if (!layer) {
    layer = std::make_shared<ModelLayer>(state_);
    state_->as_layer = layer;
  }
  return LayerRef(layer);
}

SymbolicTensor Model::operator()(const SymbolicTensor& input, std::optional<bool> training) const {
  auto layer = as_layer();
  return static_cast<ModelLayer&>(*layer).call({input}, training);
}

std::vector<SymbolicTensor> Model::call(const std::vector<SymbolicTensor>& inputs,
                                        std::optional<bool> training) const {
  auto layer = as_layer();
  return static_cast<ModelLayer&>(*layer).call_all(inputs, training);
}

}  // namespace systolic
