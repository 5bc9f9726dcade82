// Model construction (graph walk, layer order, weight packing), compile, and the calls one step is made of:
// forward through the nodes in topological order, loss, metrics, backward in reverse order (summing the
// gradients of tensors used twice), optimizer update over the flat parameter buffer.
#include <systolic/log.h>
#include <systolic/system.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <set>

#include "core/step_graph.h"
#include "distribute/replica_group.h"
#include "model/model_state.h"

namespace systolic {

const std::vector<double>& History::operator[](const std::string& key) const {
  auto it = history.find(key);
  SYSTOLIC_CHECK(it != history.end(), "History has no key '{}'", key);
  return it->second;
}

Model::Model() : state_(std::make_shared<ModelState>()) {}
Model::~Model() = default;

Model::Model(const SymbolicTensor& input, const SymbolicTensor& output, const std::string& name)
    : Model(std::vector<SymbolicTensor>{input}, std::vector<SymbolicTensor>{output}, name) {}

Model::Model(const std::vector<SymbolicTensor>& inputs, const std::vector<SymbolicTensor>& outputs,
             const std::string& name)
    : state_(std::make_shared<ModelState>()) {
  state_->name = name.empty() ? unique_layer_name("model") : name;
  state_->inputs = inputs;
  state_->outputs = outputs;
  state_->finalize();
}

void ModelState::finalize() {
  SYSTOLIC_CHECK(!inputs.empty() && !outputs.empty(), "model '{}' needs inputs and outputs", name);
  for (auto& in : inputs)
    SYSTOLIC_CHECK(in.defined() && in.node()->layer->is_input_layer(),
                   "model '{}': every input must come from layers::Input", name);
  // Walk back from the outputs; creation order (node id) is a topological order.
  std::map<std::int64_t, std::shared_ptr<Node>> found;
  std::vector<std::shared_ptr<Node>> stack;
  for (auto& out : outputs) {
    SYSTOLIC_CHECK(out.defined(), "model '{}': undefined output", name);
    stack.push_back(out.node());
  }
  while (!stack.empty()) {
    auto n = stack.back();
    stack.pop_back();
    if (!found.emplace(n->id, n).second) continue;
    for (auto& in : n->inputs) stack.push_back(in.node());
  }
  std::set<const Node*> declared;
  for (auto& in : inputs) declared.insert(in.node().get());
  nodes.clear();
  layers.clear();
  std::map<const Node*, int> index;
  std::set<const Layer*> seen_layers;
  for (auto& [id, n] : found) {
    NodeExec e;
    e.node = n;
    e.is_input = n->layer->is_input_layer();
    if (e.is_input)
      SYSTOLIC_CHECK(declared.count(n.get()),
                     "model '{}': graph disconnected: it needs input '{}' ({}), which is not "
                     "among the model's inputs",
                     name, n->layer->name(), n->shape.keras_str());
    for (auto& in : n->inputs) e.inputs.push_back(index.at(in.node().get()));
    e.call.dinputs.resize(e.inputs.size());
    e.scratch.resize(e.inputs.size());
    index[n.get()] = static_cast<int>(nodes.size());
    nodes.push_back(std::move(e));
    // A nested model's nodes show as the nested model (one layer of this model).
    const auto& shown = n->container ? n->container : n->layer;
    if (seen_layers.insert(shown.get()).second && !(sequential && shown->is_input_layer()))
      layers.push_back(shown);
  }
  for (auto& in : inputs)
    SYSTOLIC_CHECK(index.count(in.node().get()), "model '{}': input '{}' is not used by the outputs", name,
                   in.node()->layer->name());
  // Each layer computes in its own policy's dtype (NodeExec::dtype); the variables share one dtype. The input
  // holds the batch in the compute dtype of the first layer with weights (the first one Keras would autocast it
  // for).
  dtype = floatx();
  const Layer* first = nullptr;
  for (auto* l : weight_layers()) {
    if (l->is_input_layer()) continue;
    if (!first) {
      first = l;
      dtype = l->compute_dtype();
    }
    SYSTOLIC_CHECK(
        l->dtype() == first->dtype(),
        "model '{}': layer '{}' keeps {} variables (policy {}) but layer '{}' keeps {} (policy {}); the "
        "layers of a model share one variable dtype",
        name, l->name(), dtype_name(l->dtype()), l->dtype_policy(), first->name(), dtype_name(first->dtype()),
        first->dtype_policy());
  }
  for (auto& e : nodes) {
    e.dtype = e.is_input ? dtype : e.node->dtype;
    e.cast_in.assign(e.inputs.size(), Tensor());
    e.cast_grad.assign(e.inputs.size(), Tensor());
  }
  capacity = 0;
  pack_weights();
}

void ModelState::pack_weights() {
  Device d = params.defined() ? params.device() : Device::cpu();
  std::int64_t total = 0;
  DType vdtype = variable_dtype();
  packed_trainable.clear();
  trainable_sizes.clear();
  for (auto* l : weight_layers())
    for (auto& w : l->weights()) {
      SYSTOLIC_CHECK(w.value.dtype() == vdtype, "model '{}': layer '{}' keeps {} weights, the model {}", name,
                     l->name(), dtype_name(w.value.dtype()), dtype_name(vdtype));
      if (w.trainable) {
        total += w.value.numel();
        trainable_sizes.push_back(w.value.numel());
      }
      packed_trainable.push_back(w.trainable);
    }
  Tensor old = params;
  params = Tensor({total}, vdtype, d);
  grads = Tensor::zeros({total}, vdtype, d);
  // Mixed precision: a compute-dtype copy of every trainable weight, refreshed before each forward.
  DType mixed = vdtype;
  for (auto* l : weight_layers())
    if (!l->is_input_layer() && l->compute_dtype() != vdtype) mixed = l->compute_dtype();
  params_compute = mixed != vdtype ? Tensor({total}, mixed, d) : Tensor();
  std::int64_t at = 0;
  for (auto* l : weight_layers())
    for (auto& w : l->weights()) {
      const bool own_dtype = l->compute_dtype() == vdtype;  // a float32 layer of a mixed model: no copy
      if (!w.trainable) {
        // A frozen weight (or one a repacking leaves out) gets storage of its own, in the compute dtype too
        // when the layers compute in another one (a frozen kernel under mixed precision).
        if (old.defined() && w.trainable_variable) w.value = w.value.clone();
        w.grad = Tensor();
        w.compute = Tensor();
        if (w.trainable_variable && params_compute.defined() && !own_dtype) {
          w.compute = Tensor(w.value.shape(), mixed, d);
          ops::cast(w.value, w.compute);
        }
        continue;
      }
      Tensor v = params.view(at, w.value.shape());
      v.copy_from(w.value);
      w.value = v;
      w.grad = grads.view(at, w.value.shape());
      w.compute =
          params_compute.defined() && !own_dtype ? params_compute.view(at, w.value.shape()) : Tensor();
      at += w.value.numel();
    }
  // Which nodes backward visits: those at or after a trainable weight (gradients flow through frozen layers to
  // earlier trainable ones; a frozen base at the start of the graph is not visited at all).
  for (auto& e : nodes) {
    bool upstream = false;
    for (int j : e.inputs) upstream = upstream || nodes[j].needs_grad;
    e.needs_grad = !e.is_input && (e.node->layer->count_trainable_params() > 0 || upstream);
  }
  capacity = 0;  // the gradient buffers follow needs_grad
  train_function.invalidate();
  if (optimizer) optimizer->build(params);
  collect_training_terms();
}

void ModelState::check_trainable(const char* what) const {
  std::size_t k = 0;
  std::int64_t at = 0;
  for (auto* l : weight_layers())
    for (auto& w : l->weights()) {
      SYSTOLIC_CHECK(k < packed_trainable.size() && packed_trainable[k] == w.trainable,
                     "{}: layer '{}' of model '{}' was {} since the model was compiled; compile the model "
                     "again to apply it (as in Keras)",
                     what, l->name(), name, w.trainable ? "unfrozen" : "frozen");
      ++k;
      if (!w.trainable) continue;
      // Another model that shares the layer (a nested model frozen and unfrozen on its own) packed it since.
      SYSTOLIC_CHECK(w.value.same_start_as(params.view(at, w.value.shape())),
                     "{}: the weights of layer '{}' were repacked by another model since model '{}' was "
                     "compiled; compile the model again",
                     what, l->name(), name);
      at += w.value.numel();
    }
}

int ModelState::input_node() const {
  for (std::size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].node == inputs[0].node()) return static_cast<int>(i);
  fail("model '{}': input node not found", name);
}

int ModelState::output_node() const {
  for (std::size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].node == outputs[0].node()) return static_cast<int>(i);
  fail("model '{}': output node not found", name);
}

void ModelState::check_single_io(const char* what) const {
  SYSTOLIC_CHECK(inputs.size() == 1 && outputs.size() == 1,
                 "model '{}': {} supports models with one input and one output (this one has {} and {})",
                 name, what, inputs.size(), outputs.size());
}

void ModelState::ensure_capacity(std::int64_t n) {
  if (n <= capacity) return;
  train_function.invalidate();
  Device d = device();
  for (auto& e : nodes) {
    e.out_buf = Tensor(e.node->shape.with_batch(n), e.dtype, d);
    e.grad_buf = e.needs_grad ? Tensor(e.node->shape.with_batch(n), e.dtype, d) : Tensor();
    for (auto& s : e.scratch) s = Tensor();
    for (std::size_t k = 0; k < e.inputs.size(); ++k) {
      const NodeExec& p = nodes[e.inputs[k]];
      const bool cast = p.dtype != e.dtype && is_floating(p.dtype);
      e.cast_in[k] = cast ? Tensor(p.node->shape.with_batch(n), e.dtype, d) : Tensor();
      e.cast_grad[k] = Tensor();
    }
  }
  // Activations and gradients live within a step: a recorded XLA step need not return them (the output's values
  // stay: predict reads them).
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    NodeExec& e = nodes[i];
    if (!e.is_input && static_cast<int>(i) != output_node()) mark_step_scratch(e.out_buf);
    mark_step_scratch(e.grad_buf);
    for (auto& c : e.cast_in) mark_step_scratch(c);
  }
  x_buf = nodes[input_node()].out_buf;
  const NodeExec& o = nodes[output_node()];
  y_buf = loss && loss->sparse_labels() ? Tensor({n}, DType::int32, d)
                                        : Tensor(o.node->shape.with_batch(n), o.dtype, d);
  w_buf = weighted ? Tensor({n}, weight_dtype(), d) : Tensor();
  capacity = n;
}

DType ModelState::weight_dtype() const {
  return nodes[output_node()].dtype == DType::float64 ? DType::float64 : DType::float32;
}

void ModelState::weigh_samples(bool on) {
  if (on == weighted) return;
  weighted = on;
  train_function.invalidate();  // a recorded step reads w_buf, or not
  w_buf = on && capacity > 0 ? Tensor({capacity}, weight_dtype(), device()) : Tensor();
}

void ModelState::refresh_compute_weights() {
  // The weights the layers compute with under a mixed policy, from the float32 values, before every forward: the
  // values may have changed in any way since (an update, a load, a user's write through Model::trainable_parameters
  // or Layer::weights), and a cast costs a small part of a forward. Trainable weights in one pass over the packed
  // buffer, frozen ones each from its own storage.
  if (params_compute.defined()) ops::cast(params, params_compute);
  for (auto* l : weight_layers())
    for (auto& w : l->weights())
      if (!w.trainable && w.compute.defined()) ops::cast(w.value, w.compute);
}

bool ModelState::computes_in(DType t) const {
  for (const auto& e : nodes)
    if (e.dtype == t) return true;
  return false;
}

void ModelState::check_xy(const Tensor& x, const Tensor* y, const char* what) const {
  if (device().is_cpu() && computes_in(DType::bfloat16) && !cpu_info().native_bfloat16) {
    // Said once per process, as TensorFlow warns about bfloat16 on CPUs without its instructions.
    static std::once_flag said;
    std::call_once(said, [] {
      log_line(
          fmt::format("Note: this CPU ({}) has no bfloat16 instructions: bfloat16 (policy mixed_bfloat16) is "
                      "computed by widening to float32 and rounding each op's result to bfloat16; expect it "
                      "slower than float32 here.",
                      cpu_info().isa));
    });
  }
  SYSTOLIC_CHECK(x.defined() && x.rank() >= 1, "{}: x is empty", what);
  Shape want = inputs[0].shape();
  SYSTOLIC_CHECK(x.shape().without_batch() == want, "{}: x has samples of shape {}; model '{}' takes {}",
                 what, x.shape().without_batch().str(), name, want.str());
  if (!y) return;
  SYSTOLIC_CHECK(y->defined() && y->rank() >= 1 && y->dim(0) == x.dim(0),
                 "{}: {} samples in x but {} labels in y", what, x.dim(0),
                 y->defined() && y->rank() ? y->dim(0) : 0);
  Shape out = outputs[0].shape();
  if (loss->sparse_labels())
    SYSTOLIC_CHECK(y->numel() == y->dim(0), "{}: loss {} takes one integer label per sample, y has shape {}",
                   what, loss->name(), y->shape().str());
  else  // Keras squeezes or expands a last axis of 1 ((N,) labels for an (N, 1) output)
    SYSTOLIC_CHECK(y->shape().without_batch() == out || (y->numel() == y->dim(0) * out.numel() &&
                                                         ((out.rank() >= 1 && out[out.rank() - 1] == 1) ||
                                                          (y->rank() >= 2 && y->dim(-1) == 1))),
                   "{}: y has samples of shape {}; the model's output is {}", what,
                   y->shape().without_batch().str(), out.str());
}

void ModelState::load_batch(const Tensor& x, const Tensor* y, const std::vector<std::int64_t>& rows,
                            const Tensor* w) {
  auto n = static_cast<std::int64_t>(rows.size());
  ensure_capacity(n);
  Tensor xb = x_buf.slice(0, n);
  ops::gather_rows(x, rows, xb);
  if (y) {
    Tensor yb = y_buf.slice(0, n);
    ops::gather_rows(*y, rows, yb);
  }
  if (weighted) {  // a batch without weights weighs each sample 1
    Tensor wb = w_buf.slice(0, n);
    w && w->defined() ? ops::gather_rows(*w, rows, wb) : ops::fill(wb, 1.0);
  }
}

void ModelState::set_batch(const Tensor& x, const Tensor& y, const Tensor& w) {
  std::int64_t n = x.dim(0);
  ensure_capacity(n);
  Tensor xb = x_buf.slice(0, n), yb = y_buf.slice(0, n);
  ops::copy(x, xb);
  ops::copy(y, yb);
  if (weighted) {
    Tensor wb = w_buf.slice(0, n);
    w.defined() ? ops::copy(w, wb) : ops::fill(wb, 1.0);
  }
}

void ModelState::forward(std::int64_t n, bool training) {
  refresh_compute_weights();
  if (training)
    training_step.counter = optimizer ? step_counter().on(device()) : Tensor();  // dropout's masks
  for (auto& e : nodes) {
    LayerCall& c = e.call;
    if (e.is_input) {
      c.output = x_buf.slice(0, n);
      continue;
    }
    c.inputs.clear();
    for (std::size_t k = 0; k < e.inputs.size(); ++k) {
      const Tensor& in = nodes[e.inputs[k]].call.output;
      if (!e.cast_in[k].defined()) {
        c.inputs.push_back(in);
        continue;
      }
      Tensor cast = e.cast_in[k].slice(0, n);  // autocast to the layer's compute dtype
      ops::cast(in, cast);
      c.inputs.push_back(cast);
    }
    c.output = e.out_buf.slice(0, n);
    // A nested model called with training=false runs its layers in inference mode.
    c.training = training && e.node->training.value_or(true) ? &training_step : nullptr;
    e.node->layer->call_forward(c);
  }
}

bool ModelState::compute_loss(std::int64_t n, double grad_scale) {
  NodeExec& out = nodes[output_node()];
  Tensor labels = y_buf.slice(0, n);
  Tensor total = totals.view(0, {1});
  Tensor grad = grad_scale > 0 ? out.grad_buf.slice(0, n) : Tensor();
  const Activation& act = out.node->layer->activation();
  Tensor logits = act == Activation::softmax ? out.call.preactivation : Tensor();
  Tensor sigmoid_logits = act == Activation::sigmoid ? out.call.preactivation : Tensor();
  Tensor weights = weighted ? w_buf.slice(0, n) : Tensor();
  losses::LossArgs args{out.call.output,
                        logits,
                        sigmoid_logits,
                        labels,
                        weights,
                        total,
                        grad,
                        grad,
                        grad_scale > 0 ? grad_scale : 1.0 / double(n)};
  bool pre = loss->compute(args);  // true: the gradient it wrote is w.r.t. the logits, the pre-softmax values
  for (auto& t : terms.loss_terms) t.add_loss(n, total);
  terms.grad_scale = grad_scale > 0 ? grad_scale : 0.0;
  return pre;
}

void ModelState::compute_metrics(std::int64_t n) {
  const NodeExec& out = nodes[output_node()];
  Tensor labels = y_buf.slice(0, n);
  std::int64_t at = 1;  // after the loss's sum: each metric's state in turn
  for (auto& m : metrics) {
    Tensor state = totals.view(at, {m->state_size()});
    m->update(out.call.output, labels, state);
    at += m->state_size();
  }
}

void ModelState::backward(std::int64_t n, bool grad_is_preactivation) {
  ops::fill(grads, 0.0);  // the layers accumulate their weights' gradients
  const double term_scale = terms.grad_scale;
  LayerCall no_call;
  if (term_scale > 0)
    for (auto& t : terms.loss_terms)
      if (t.node < 0) t.add_gradient(n, term_scale, no_call, false);
  std::vector<char> written(nodes.size(), 0);
  int o = output_node();
  written[o] = 1;
  for (int i = static_cast<int>(nodes.size()) - 1; i >= 0; --i) {
    NodeExec& e = nodes[i];
    if (!written[i] || e.is_input) continue;
    LayerCall& c = e.call;
    c.doutput = e.grad_buf.slice(0, n);
    std::vector<int> pending, cast_first;  // summed into a written buffer; cast into an unwritten one
    for (std::size_t k = 0; k < e.inputs.size(); ++k) {
      NodeExec& p = nodes[e.inputs[k]];
      if (!p.needs_grad) {
        c.dinputs[k] = Tensor();
      } else if (p.dtype != e.dtype) {
        // The gradient of an autocast input: computed in this layer's dtype, cast to the input's.
        if (!e.scratch[k].defined())
          e.scratch[k] = Tensor(p.node->shape.with_batch(capacity), e.dtype, device());
        c.dinputs[k] = e.scratch[k].slice(0, n);
        (written[e.inputs[k]] ? pending : cast_first).push_back(static_cast<int>(k));
        written[e.inputs[k]] = 1;
      } else if (!written[e.inputs[k]]) {
        c.dinputs[k] = p.grad_buf.slice(0, n);
        written[e.inputs[k]] = 1;
      } else {
        if (!e.scratch[k].defined())
          e.scratch[k] = Tensor(p.node->shape.with_batch(capacity), e.dtype, device());
        c.dinputs[k] = e.scratch[k].slice(0, n);
        pending.push_back(static_cast<int>(k));
      }
    }
    // The loss terms on this node's output add their gradients to the output's.
    if (term_scale > 0)
      for (auto& t : terms.loss_terms)
        if (t.node == i) t.add_gradient(n, term_scale, c, grad_is_preactivation && i == o);
    e.node->layer->call_backward(c, grad_is_preactivation && i == o);
    for (int k : cast_first) {
      Tensor dst = nodes[e.inputs[k]].grad_buf.slice(0, n);
      ops::cast(c.dinputs[k], dst);
    }
    for (int k : pending) {
      NodeExec& p = nodes[e.inputs[k]];
      Tensor dst = p.grad_buf.slice(0, n), src = c.dinputs[k];
      if (p.dtype != e.dtype) {
        if (!e.cast_grad[k].defined())
          e.cast_grad[k] = Tensor(p.node->shape.with_batch(capacity), p.dtype, device());
        src = e.cast_grad[k].slice(0, n);
        ops::cast(c.dinputs[k], src);
      }
      ops::accumulate(src, dst);
    }
  }
}

void ModelState::apply_gradients() {
  optimizer->apply_update(params, grads, trainable_sizes);
  for (auto& hook : terms.post_update) hook();  // the constraints, after the update (Keras 3)
}

const std::string& Model::name() const {
  return state_->name;
}

std::vector<LayerRef> Model::layers() const {
  std::vector<LayerRef> out;
  for (auto& l : state_->layers) out.emplace_back(l);
  return out;
}

LayerRef Model::get_layer(const std::string& name) const {
  for (auto& l : state_->layers)
    if (l->name() == name) return LayerRef(l);
  fail("model '{}' has no layer named '{}'", state_->name, name);
}

std::vector<SymbolicTensor> Model::inputs() const {
  return state_->inputs;
}
std::vector<SymbolicTensor> Model::outputs() const {
  return state_->outputs;
}

bool Model::trainable() const {
  return state_->trainable;
}

void Model::set_trainable(bool trainable) {
  SYSTOLIC_CHECK(!state_->replicas, "set_trainable: model '{}' has replicas; change it on the CPU model",
                 state_->name);
  state_->trainable = trainable;
  for (auto& l : state_->layers) l->set_trainable(trainable);
  state_->pack_weights();
}

std::int64_t Model::count_params() const {
  std::int64_t n = 0;
  for (auto& l : state_->layers) n += l->count_params();
  return n;
}

void ModelState::to(Device d) {
  SYSTOLIC_CHECK(device_available(d), "model '{}': device {} is not available{}", name, d.str(),
                 d.is_cpu() ? "" : " (no GPU found, or this build has no CUDA support)");
  if (params.device() == d && (!totals.defined() || totals.device() == d)) return;
  params = params.to(d);
  grads = grads.to(d);
  if (params_compute.defined()) params_compute = Tensor(params_compute.shape(), params_compute.dtype(), d);
  std::int64_t at = 0;
  for (auto* l : weight_layers())
    for (auto& w : l->weights()) {
      if (!w.trainable) {
        w.value = w.value.to(d);
        if (w.compute.defined()) w.compute = w.compute.to(d);
        continue;
      }
      w.value = params.view(at, w.value.shape());
      w.grad = grads.view(at, w.value.shape());
      w.compute = w.compute.defined() && params_compute.defined() ? params_compute.view(at, w.value.shape())
                                                                  : Tensor();
      at += w.value.numel();
    }
  if (optimizer) optimizer->to(d);
  if (totals.defined()) totals = totals.to(d);
  for (auto& e : nodes) {  // buffers and what layers kept for backward are remade on the device
    e.call = LayerCall();
    e.call.dinputs.resize(e.inputs.size());
  }
  capacity = 0;
  train_function.invalidate();
}

Device Model::device() const {
  return state_->device();
}
void Model::to(Device device) {
  SYSTOLIC_CHECK(
      !state_->replicas || device == state_->device(),
      "model '{}' has replicas on its strategy's devices; it cannot move to {} (call to_accelerator on the "
      "CPU model with another strategy instead)",
      state_->name, device.str());
  state_->to(device);
}

std::vector<Tensor> Model::get_weights() const {
  std::vector<Tensor> out;
  for (auto& layer : layers())
    for (Weight* w : all_weights(*layer)) out.push_back(w->value.to(Device::cpu()).clone());
  return out;
}

void Model::set_weights(const std::vector<Tensor>& weights) {
  std::vector<Weight*> all;
  for (auto& layer : layers())
    for (Weight* w : all_weights(*layer)) all.push_back(w);
  SYSTOLIC_CHECK(weights.size() == all.size(), "set_weights: model '{}' has {} weights, {} were given",
                 state_->name, all.size(), weights.size());
  for (std::size_t i = 0; i < all.size(); ++i)
    SYSTOLIC_CHECK(weights[i].shape() == all[i]->value.shape(),
                   "set_weights: weight {} ({}) of model '{}' has shape {}, the value given has shape {}", i,
                   all[i]->name, state_->name, all[i]->value.shape().str(), weights[i].shape().str());
  for (std::size_t i = 0; i < all.size(); ++i) all[i]->value.copy_from(weights[i]);
  // Replicas: replica 0's weights go to every replica (across workers: the chief's).
  if (state_->replicas) state_->replicas->broadcast_weights();
}

Tensor& Model::trainable_parameters() {
  return state_->params;
}
Tensor& Model::gradients() {
  return state_->grads;
}

void Model::compile(const optimizers::Optimizer& optimizer, const losses::Loss& loss,
                    const std::vector<metrics::MetricArg>& metrics) {
  SYSTOLIC_CHECK(!state_->nodes.empty(), "compile: model '{}' has no layers yet", state_->name);
  SYSTOLIC_CHECK(!state_->replicas,
                 "compile: model '{}' has replicas already; compile the CPU model before "
                 "to_accelerator, which copies its compile settings to every replica",
                 state_->name);
  state_->optimizer = optimizer.clone();
  state_->loss = loss.clone();
  state_->metrics.clear();
  const Shape out = state_->outputs[0].shape();
  const bool binary = out.rank() >= 1 && out[out.rank() - 1] == 1;
  std::int64_t sums = 1;  // the loss's, then each metric's state
  for (auto& m : metrics) {
    state_->metrics.push_back(metrics::make(m, loss.sparse_labels(), binary));
    state_->metrics.back()->build(out);
    sums += state_->metrics.back()->state_size();
  }
  state_->totals = Tensor::zeros({sums}, DType::float64, state_->device());
  // Packs the weights that are trainable now (layers frozen or unfrozen since the last compile) and builds the
  // optimizer's slots for them only; the label buffer's type follows the loss.
  state_->pack_weights();
}

void Model::compile(const optimizers::Optimizer& optimizer, const std::string& loss,
                    const std::vector<metrics::MetricArg>& metrics) {
  compile(optimizer, *losses::get(loss), metrics);
}

void Model::compile(const std::string& optimizer, const std::string& loss,
                    const std::vector<metrics::MetricArg>& metrics) {
  compile(*optimizers::get(optimizer), *losses::get(loss), metrics);
}

bool Model::compiled() const {
  return state_->loss != nullptr;
}
bool Model::is_sequential() const {
  return state_->sequential;
}

optimizers::Optimizer& Model::optimizer() {
  SYSTOLIC_CHECK(state_->optimizer, "model '{}' is not compiled", state_->name);
  return *state_->optimizer;
}

const losses::Loss& Model::loss() const {
  SYSTOLIC_CHECK(state_->loss, "model '{}' is not compiled", state_->name);
  return *state_->loss;
}

std::vector<std::string> ModelState::metric_log_names() const {
  std::vector<std::string> names;
  std::map<std::string, int> seen;  // a name's count of later copies so far
  for (auto& m : metrics) {
    std::string name = m->name();
    auto [it, first] = seen.try_emplace(name, 1);
    if (!first) name += "_" + std::to_string(it->second++);
    names.push_back(name);
  }
  return names;
}

std::vector<std::string> Model::metrics_names() const {
  std::vector<std::string> names{"loss"};
  for (auto& n : state_->metric_log_names()) names.push_back(n);
  return names;
}

Sequential::Sequential(const std::vector<Item>& items, const std::string& name) {
  state_->name = name.empty() ? unique_layer_name("sequential") : name;
  state_->sequential = true;
  for (auto& item : items) add(item);
}

void Sequential::add(const Item& item) {
  if (auto* input = std::get_if<SymbolicTensor>(&item)) {
    SYSTOLIC_CHECK(state_->inputs.empty(), "Sequential '{}': an Input can only come first", state_->name);
    state_->inputs = {*input};
    state_->outputs = {*input};
    return;
  }
  const LayerRef& layer = std::get<LayerRef>(item);
  SYSTOLIC_CHECK(
      !state_->inputs.empty(),
      "Sequential '{}': start with layers::Input(shape) so the model knows its input shape before '{}'",
      state_->name, layer->name());
  state_->outputs = {layer(state_->outputs[0])};
  state_->finalize();
}

}  // namespace systolic
