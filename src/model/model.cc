// Model construction (graph walk, layer order, weight packing), compile, and the calls one step is made of:
// forward through the nodes in topological order, loss, metrics, backward in reverse order (summing the
// gradients of tensors used twice), optimizer update over the flat parameter buffer.
#include <fmt/ranges.h>
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
  // The calls of several outputs: each first output's node learns where the others are.
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    NodeExec& e = nodes[i];
    if (!e.runs_layer()) continue;
    std::vector<Shape> shapes;
    for (auto& in : e.node->inputs) shapes.push_back(in.shape());
    e.more_outputs.assign(e.node->layer->more_output_shapes(shapes).size(), -1);
  }
  for (std::size_t i = 0; i < nodes.size(); ++i)
    if (const int k = nodes[i].node->output; k > 0) {
      auto& more = nodes[nodes[i].inputs.at(0)].more_outputs;
      SYSTOLIC_CHECK(k <= static_cast<int>(more.size()), "model '{}': layer '{}' has no output {}", name,
                     nodes[i].node->layer->name(), k);
      more[static_cast<std::size_t>(k - 1)] = static_cast<int>(i);
    }
  // Each layer computes in its own policy's dtype (NodeExec::dtype); the variables share one dtype. The input
  // holds the batch in the compute dtype of the first layer with weights (the first one Keras would autocast it
  // for), or in the variables' dtype when that layer does not autocast (Embedding's ids).
  dtype = floatx();
  const Layer* first = nullptr;
  for (auto* l : weight_layers()) {
    if (l->is_input_layer()) continue;
    if (!first) {
      first = l;
      dtype = l->autocast() ? l->compute_dtype() : l->dtype();
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
  // Keras's masks: which nodes' outputs carry one, and which node made it (a layer that passes its first input's on
  // shares that input's).
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    NodeExec& e = nodes[i];
    if (e.is_input) continue;
    const Layer& l = *e.node->layer;
    if (!e.runs_layer()) {  // a later output of a call: its input's mask, if the layer passes it on there
      const NodeExec& first = nodes[e.inputs[0]];
      const int mask = first.inputs.empty() ? -1 : nodes[first.inputs[0]].mask_from;
      e.mask_from = l.more_output_masked(e.node->output, mask >= 0) ? mask : -1;
      continue;
    }
    std::vector<bool> masked;
    for (int k : e.inputs) masked.push_back(nodes[k].mask_from >= 0);
    const bool any = std::find(masked.begin(), masked.end(), true) != masked.end();
    const std::string why = any ? l.mask_refusal() : "";
    SYSTOLIC_CHECK(why.empty(),
                   "model '{}': layer '{}' ({}) gets a masked input (from Embedding(mask_zero=True) or "
                   "Masking): {}",
                   name, l.name(), l.class_name(), why);
    const int first_mask = e.inputs.empty() ? -1 : nodes[e.inputs[0]].mask_from;
    e.mask_from = l.makes_mask() || l.combines_masks(masked) ? static_cast<int>(i)
                  : l.output_masked(first_mask >= 0)         ? first_mask
                                                             : -1;
  }
  capacity = 0;
  pack_weights();
}

void ModelState::pack_weights() {
  Device d = params.defined() ? params.device() : Device::cpu();
  std::int64_t total = 0;
  DType vdtype = variable_dtype();
  packed_trainable.clear();
  trainable_variables.clear();
  for (auto* l : weight_layers())
    for (auto& w : l->weights()) {
      SYSTOLIC_CHECK(w.value.dtype() == vdtype, "model '{}': layer '{}' keeps {} weights, the model {}", name,
                     l->name(), dtype_name(w.value.dtype()), dtype_name(vdtype));
      if (w.trainable) {
        total += w.value.numel();
        trainable_variables.push_back({.shape = w.value.shape(), .path = l->name() + "/" + w.name});
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
  if (optimizer) optimizer->build(params, trainable_variables);
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

namespace {

std::vector<int> nodes_of(const ModelState& s, const std::vector<SymbolicTensor>& tensors) {
  std::vector<int> out;
  for (auto& t : tensors) {
    int found = -1;
    for (std::size_t i = 0; i < s.nodes.size() && found < 0; ++i)
      if (s.nodes[i].node == t.node()) found = static_cast<int>(i);
    SYSTOLIC_CHECK(found >= 0, "model '{}': node of '{}' not found", s.name, t.node()->layer->name());
    out.push_back(found);
  }
  return out;
}

}  // namespace

std::vector<int> ModelState::input_nodes() const {
  return nodes_of(*this, inputs);
}

std::vector<int> ModelState::output_nodes() const {
  return nodes_of(*this, outputs);
}

std::vector<Tensor> ModelState::layer_buffers() const {
  std::vector<Tensor> out;
  for (const NodeExec& e : nodes)
    for (const Tensor& t : e.call.saved)
      if (t.defined()) out.push_back(t);
  return out;
}

void ModelState::ensure_capacity(std::int64_t n) {
  if (n <= capacity) return;
  train_function.invalidate();
  Device d = device();
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    NodeExec& e = nodes[i];
    e.mask_buf =
        e.mask_from == static_cast<int>(i) ? Tensor(mask_shape(e).with_batch(n), e.dtype, d) : Tensor();
    if (e.runs_layer()) e.node->layer->reserve_batch(n, d, e.dtype);
    e.out_buf = Tensor(e.node->shape.with_batch(n), e.dtype, d);
    e.grad_buf = e.needs_grad ? Tensor(e.node->shape.with_batch(n), e.dtype, d) : Tensor();
    for (auto& s : e.scratch) s = Tensor();
    for (std::size_t k = 0; k < e.inputs.size(); ++k) {
      const NodeExec& p = nodes[e.inputs[k]];
      const bool cast = p.dtype != e.dtype && is_floating(p.dtype) && e.node->layer->autocast();
      e.cast_in[k] = cast ? Tensor(p.node->shape.with_batch(n), e.dtype, d) : Tensor();
      e.cast_grad[k] = Tensor();
    }
  }
  // Activations and gradients live within a step: a recorded XLA step need not return them (the outputs' values
  // stay: predict reads them).
  const std::vector<int> outs = output_nodes();
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    NodeExec& e = nodes[i];
    if (!e.is_input && std::find(outs.begin(), outs.end(), static_cast<int>(i)) == outs.end())
      mark_step_scratch(e.out_buf);
    mark_step_scratch(e.grad_buf);
    for (auto& c : e.cast_in) mark_step_scratch(c);
    mark_step_scratch(e.mask_buf);
  }
  x_bufs.clear();
  for (int i : input_nodes()) x_bufs.push_back(nodes[i].out_buf);
  for (auto& h : heads) {
    const NodeExec& o = nodes[h.node];
    h.y_buf = h.loss && h.loss->sparse_labels() ? Tensor(mask_shape(o).with_batch(n), DType::int32, d)
                                                : Tensor(o.node->shape.with_batch(n), o.dtype, d);
    h.mask_w = h.mask_node >= 0 ? Tensor(mask_shape(o).with_batch(n), weight_dtype(), d) : Tensor();
    mark_step_scratch(h.mask_w);
  }
  w_buf = weighted ? Tensor(weight_shape.with_batch(n), weight_dtype(), d) : Tensor();
  capacity = n;
}

DType ModelState::weight_dtype() const {
  return nodes[output_nodes()[0]].dtype == DType::float64 ? DType::float64 : DType::float32;
}

void ModelState::weigh_samples(bool on, const Shape& per_sample) {
  if (on == weighted && (!on || per_sample == weight_shape)) return;
  weighted = on;
  weight_shape = on ? per_sample : Shape();
  train_function.invalidate();  // a recorded step reads w_buf, or not
  w_buf = on && capacity > 0 ? Tensor(weight_shape.with_batch(capacity), weight_dtype(), device()) : Tensor();
}

void ModelState::weigh_samples_like(const Tensor& weights) {
  weigh_samples(weights.defined(), weights.defined() ? weights.shape().without_batch() : Shape());
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

void ModelState::check_xy(const Arrays& x, const Arrays* y, const char* what) const {
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
  SYSTOLIC_CHECK(x.size() == inputs.size(), "{}: model '{}' takes {} input array{}, x has {}", what, name,
                 inputs.size(), inputs.size() == 1 ? "" : "s", x.size());
  const std::int64_t n = x.samples();
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::string which =
        x.size() == 1 ? "x" : fmt::format("x[{}] (input '{}')", i, inputs[i].node()->layer->name());
    SYSTOLIC_CHECK(x[i].defined() && x[i].rank() >= 1, "{}: {} is empty", what, which);
    SYSTOLIC_CHECK(x[i].dim(0) == n, "{}: {} has {} samples, x[0] has {}", what, which, x[i].dim(0), n);
    Shape want = inputs[i].shape();
    SYSTOLIC_CHECK(x[i].shape().without_batch() == want,
                   "{}: {} has samples of shape {}; model '{}' takes {}", what, which,
                   x[i].shape().without_batch().str(), name, want.str());
  }
  if (!y) return;
  SYSTOLIC_CHECK(y->size() == outputs.size(), "{}: model '{}' has {} output{}, y has {} label array{}", what,
                 name, outputs.size(), outputs.size() == 1 ? "" : "s", y->size(), y->size() == 1 ? "" : "s");
  for (std::size_t i = 0; i < y->size(); ++i) {
    const Tensor& yi = (*y)[i];
    const OutputHead& h = heads[i];
    const std::string which = y->size() == 1 ? "y" : fmt::format("y[{}] (output '{}')", i, h.name);
    SYSTOLIC_CHECK(yi.defined() && yi.rank() >= 1 && yi.dim(0) == n,
                   "{}: {} samples in x but {} labels in {}", what, n,
                   yi.defined() && yi.rank() ? yi.dim(0) : 0, which);
    Shape out = outputs[i].shape();
    if (h.loss && h.loss->sparse_labels()) {
      const Shape rows = mask_shape(nodes[h.node]);  // one label per row: (N,) for an output (C,)
      SYSTOLIC_CHECK(yi.numel() == yi.dim(0) * rows.numel(),
                     "{}: loss {} takes one integer label per {}, {} has shape {}", what, h.loss->name(),
                     rows.rank() == 0 ? "sample"
                                      : fmt::format("row of the output {}: shape (N, {})", out.str(),
                                                    fmt::join(rows.dims(), ", ")),
                     which, yi.shape().str());
    } else  // Keras squeezes or expands a last axis of 1 ((N,) labels for an (N, 1) output)
      SYSTOLIC_CHECK(yi.shape().without_batch() == out || (yi.numel() == yi.dim(0) * out.numel() &&
                                                           ((out.rank() >= 1 && out[out.rank() - 1] == 1) ||
                                                            (yi.rank() >= 2 && yi.dim(-1) == 1))),
                     "{}: {} has samples of shape {}; the model's output{} is {}", what, which,
                     yi.shape().without_batch().str(), y->size() == 1 ? "" : " '" + h.name + "'", out.str());
  }
}

void ModelState::load_batch(const Arrays& x, const Arrays* y, const std::vector<std::int64_t>& rows,
                            const Tensor* w) {
  auto n = static_cast<std::int64_t>(rows.size());
  ensure_capacity(n);
  for (std::size_t i = 0; i < x.size(); ++i) {
    Tensor xb = x_bufs[i].slice(0, n);
    ops::gather_rows(x[i], rows, xb);
  }
  if (y)
    for (std::size_t i = 0; i < y->size(); ++i) {
      Tensor yb = heads[i].y_buf.slice(0, n);
      ops::gather_rows((*y)[i], rows, yb);
    }
  if (weighted) {  // a batch without weights weighs each sample 1
    Tensor wb = w_buf.slice(0, n);
    w && w->defined() ? ops::gather_rows(*w, rows, wb) : ops::fill(wb, 1.0);
  }
}

void ModelState::set_batch(const Arrays& x, const Arrays& y, const Tensor& w) {
  std::int64_t n = x.samples();
  ensure_capacity(n);
  for (std::size_t i = 0; i < x.size(); ++i) {
    Tensor xb = x_bufs[i].slice(0, n);
    ops::copy(x[i], xb);
  }
  for (std::size_t i = 0; i < y.size(); ++i) {
    Tensor yb = heads[i].y_buf.slice(0, n);
    ops::copy(y[i], yb);
  }
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
    if (!e.runs_layer()) {
      c.output =
          e.out_buf.slice(0, n);  // x_bufs: the input's batch; a later output: its call's forward writes it
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
    c.more_outputs.clear();
    for (int k : e.more_outputs) c.more_outputs.push_back(k >= 0 ? nodes[k].out_buf.slice(0, n) : Tensor());
    const int mask = e.inputs.empty() ? -1 : nodes[e.inputs[0]].mask_from;
    c.mask = mask >= 0 ? nodes[mask].mask_buf.slice(0, n) : Tensor();
    c.output_mask = e.mask_buf.defined() ? e.mask_buf.slice(0, n) : Tensor();
    // Every input's mask, for a layer of several inputs of which one has a mask (a merge combines them or reads
    // the values by them).
    c.masks.clear();
    if (e.inputs.size() > 1 &&
        std::any_of(e.inputs.begin(), e.inputs.end(), [&](int k) { return nodes[k].mask_from >= 0; }))
      for (int k : e.inputs) {
        const int from = nodes[k].mask_from;
        c.masks.push_back(from >= 0 ? nodes[from].mask_buf.slice(0, n) : Tensor());
      }
    // A nested model called with training=false runs its layers in inference mode.
    c.training = training && e.node->training.value_or(true) ? &training_step : nullptr;
    e.node->layer->call_forward(c);
  }
}

void ModelState::compute_loss(std::int64_t n, double grad_scale) {
  Tensor weights = weighted ? w_buf.slice(0, n) : Tensor();
  for (auto& h : heads) {
    h.grad_is_preactivation = false;
    if (!h.loss) continue;
    NodeExec& out = nodes[h.node];
    Tensor labels = h.y_buf.slice(0, n);
    Tensor total = totals.view(h.loss_slot < 0 ? 0 : h.loss_slot, {1});
    Tensor grad = grad_scale > 0 ? out.grad_buf.slice(0, n) : Tensor();
    // From the logits where the output layer ends in softmax or sigmoid and nothing else reads its output.
    const Activation& act = out.node->layer->activation();
    Tensor logits = act == Activation::softmax && !h.feeds_layers ? out.call.preactivation : Tensor();
    Tensor sigmoid_logits = act == Activation::sigmoid && !h.feeds_layers ? out.call.preactivation : Tensor();
    const Tensor mask = h.mask_node >= 0 ? nodes[h.mask_node].mask_buf.slice(0, n) : Tensor();
    losses::LossArgs args{out.call.output,
                          logits,
                          sigmoid_logits,
                          labels,
                          weights,
                          total,
                          grad,
                          grad,
                          (grad_scale > 0 ? grad_scale : 1.0 / double(n)) * h.weight(),
                          mask};
    // true: the gradient it wrote is w.r.t. the logits, the pre-activation values
    h.grad_is_preactivation = h.loss->compute(args);
  }
  Tensor terms_total = totals.view(0, {1});
  for (auto& t : terms.loss_terms) t.add_loss(n, terms_total);
  terms.grad_scale = grad_scale > 0 ? grad_scale : 0.0;
}

void ModelState::compute_metrics(std::int64_t n) {
  const Tensor weights = w_buf.defined() ? w_buf.slice(0, n) : Tensor();
  for (auto& h : heads) {
    const NodeExec& out = nodes[h.node];
    Tensor labels = h.y_buf.slice(0, n);
    // A metric that reads the logits (a crossentropy) gets them where the output layer ends in softmax.
    const bool softmax =
        out.node->layer->activation() == Activation::softmax && out.call.preactivation.defined();
    // The metrics' weights on a masked output (Keras's apply_mask, reduction "sum"): the mask, or the mask times
    // the sample weights; their sums (in rows) are the denominators of the metrics that read the mask.
    const Tensor mask = h.mask_node >= 0 ? nodes[h.mask_node].mask_buf.slice(0, n) : Tensor();
    Tensor mask_w = mask.defined() ? h.mask_w.slice(0, n) : Tensor();
    auto weigh_mask = [&](const Tensor& w, std::int64_t slot) {
      ops::mask_weights(mask, w, /*normalize=*/false, mask_w);
      Tensor sum = totals.view(slot, {1});
      ops::add_sum(mask_w, sum);
    };
    // Each metric adds to its state, the states laid out from `at` on; with weights w, weighted. The mask's
    // weights (when computed) stand for w in the metrics that read the mask.
    auto update = [&](const std::vector<std::unique_ptr<metrics::Metric>>& ms, std::int64_t at,
                      const Tensor& given, bool masked) {
      for (auto& m : ms) {
        Tensor state = totals.view(at, {m->state_size()});
        const bool logits = softmax && m->reads_logits();
        const Tensor& x = logits ? out.call.preactivation : out.call.output;
        const Tensor& w = masked && m->weighs_by_mask() ? mask_w : given;
        if (!w.defined())
          logits ? m->update_from_logits(x, labels, state) : m->update(x, labels, state);
        else
          logits ? m->update_weighted_from_logits(x, labels, w, state)
                 : m->update_weighted(x, labels, w, state);
        at += m->state_size();
      }
    };
    if (mask.defined()) weigh_mask(Tensor(), h.mask_at);
    update(h.metrics, h.metric_at, Tensor(), mask.defined());
    if (mask.defined()) weigh_mask(weights, h.mask_at + 1);
    update(h.weighted_metrics, h.weighted_at, weights, mask.defined());
  }
  if (weight_sum_slot >= 0 && weights.defined()) {
    Tensor sum = totals.view(weight_sum_slot, {1});
    ops::add_sum(weights, sum);
  }
}

void ModelState::backward(std::int64_t n) {
  ops::fill(grads, 0.0);  // the layers accumulate their weights' gradients
  const double term_scale = terms.grad_scale;
  LayerCall no_call;
  if (term_scale > 0)
    for (auto& t : terms.loss_terms)
      if (t.node < 0) t.add_gradient(n, term_scale, no_call, false);
  // Where backward starts: the outputs whose loss wrote a gradient (pre: w.r.t. their logits).
  std::vector<char> written(nodes.size(), 0), pre(nodes.size(), 0);
  for (auto& h : heads)
    if (h.loss) {
      written[h.node] = 1;
      pre[h.node] = h.grad_is_preactivation;
    }
  for (int i = static_cast<int>(nodes.size()) - 1; i >= 0; --i) {
    NodeExec& e = nodes[i];
    if (!e.runs_layer()) continue;  // a later output's gradient is read by its call's backward
    bool more = false;
    for (int k : e.more_outputs) more = more || (k >= 0 && written[k]);
    if (!written[i] && !more) continue;
    LayerCall& c = e.call;
    c.doutput = e.grad_buf.slice(0, n);
    if (!written[i]) ops::fill(c.doutput, 0.0);  // only a later output's gradient reached the call
    c.more_doutputs.clear();
    for (int k : e.more_outputs)
      c.more_doutputs.push_back(k >= 0 && written[k] ? nodes[k].grad_buf.slice(0, n) : Tensor());
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
        if (t.node == i) t.add_gradient(n, term_scale, c, pre[i]);
    e.node->layer->call_backward(c, pre[i]);
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
  optimizer->apply_update(params, grads, trainable_variables);
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

void Model::reset_states() {
  auto reset = [](ModelState& s) {
    for (Layer* l : s.weight_layers()) l->reset_state();
  };
  if (!state_->replicas) return reset(*state_);
  for (int l = 0; l < state_->replicas->local_size(); ++l)
    reset(static_cast<ModelState&>(state_->replicas->replica(l)));
}

Tensor& Model::trainable_parameters() {
  return state_->params;
}
Tensor& Model::gradients() {
  return state_->grads;
}

namespace {

// The metrics compile makes for one output; `weighted`: its weighted_metrics, which must take sample weights.
std::vector<std::unique_ptr<metrics::Metric>> output_metrics(const std::vector<metrics::MetricArg>& args,
                                                             const losses::Loss* loss, const Shape& out,
                                                             bool weighted) {
  const bool binary = out.rank() >= 1 && out[out.rank() - 1] == 1;
  std::vector<std::unique_ptr<metrics::Metric>> made;
  for (auto& m : args) {
    made.push_back(metrics::make(m, loss && loss->sparse_labels(), binary));
    made.back()->build(out);
    SYSTOLIC_CHECK(
        !weighted || made.back()->takes_sample_weights(),
        "compile: weighted_metrics: {} ({}) takes no sample weights in systolic; give it in metrics "
        "(all but R2Score take them: the accuracies, the loss-like and confusion-count metrics, the "
        "F-scores)",
        made.back()->name(), made.back()->class_name());
  }
  return made;
}

}  // namespace

// Every compile comes here: one entry per output, in the model's order.
void Model::compile(const optimizers::Optimizer& optimizer, const std::vector<OutputCompile>& outputs) {
  ModelState& s = *state_;
  SYSTOLIC_CHECK(!s.nodes.empty(), "compile: model '{}' has no layers yet", s.name);
  SYSTOLIC_CHECK(!s.replicas,
                 "compile: model '{}' has replicas already; compile the CPU model before "
                 "to_accelerator, which copies its compile settings to every replica",
                 s.name);
  const std::vector<std::string> names = output_names();
  SYSTOLIC_CHECK(outputs.size() == names.size(), "compile: model '{}' has {} outputs ({}), compile got {}",
                 s.name, names.size(), fmt::join(names, ", "), outputs.size());
  const std::vector<int> nodes = s.output_nodes();
  std::vector<OutputHead> heads(names.size());
  std::vector<char> given(names.size(), 0);
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    const OutputCompile& c = outputs[k];
    std::size_t i = k;  // by position, or by the output's name
    if (!c.output.empty()) {
      auto it = std::find(names.begin(), names.end(), c.output);
      SYSTOLIC_CHECK(it != names.end(), "compile: model '{}' has no output '{}' (its outputs: {})", s.name,
                     c.output, fmt::join(names, ", "));
      i = static_cast<std::size_t>(it - names.begin());
    }
    SYSTOLIC_CHECK(!given[i], "compile: output '{}' of model '{}' is given twice", names[i], s.name);
    given[i] = 1;
    OutputHead& h = heads[i];
    h.node = nodes[i];
    h.name = names[i];
    h.mask_node = s.nodes[static_cast<std::size_t>(h.node)].mask_from;
    h.rows_per_sample = double(std::max<std::int64_t>(1, mask_shape(s.nodes[std::size_t(h.node)]).numel()));
    h.loss = c.loss.make();
    h.loss_weight = c.loss_weight;
    h.metrics = output_metrics(c.metrics, h.loss.get(), s.outputs[i].shape(), false);
    h.weighted_metrics = output_metrics(c.weighted_metrics, h.loss.get(), s.outputs[i].shape(), true);
  }
  int losses = 0;
  for (std::size_t i = 0; i < heads.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j)
      SYSTOLIC_CHECK(heads[i].node != heads[j].node,
                     "compile: outputs {} and {} of model '{}' are the same tensor ('{}'); give each output "
                     "once",
                     j, i, s.name, heads[i].name);
    losses += heads[i].loss != nullptr;
    for (auto& e : s.nodes)
      for (int in : e.inputs) heads[i].feeds_layers = heads[i].feeds_layers || in == heads[i].node;
  }
  SYSTOLIC_CHECK(losses > 0, "compile: model '{}' needs a loss on at least one output", s.name);
  // The sums: the loss (the loss terms' alone when the outputs' losses keep their own), each output's loss, the
  // metrics.
  bool weighted_one = false;
  for (auto& h : heads) weighted_one = weighted_one || (h.loss && h.weight() != 1.0);
  s.separate_losses = losses > 1 || weighted_one;
  std::int64_t sums = 1;
  for (auto& h : heads)
    if (h.loss && s.separate_losses) h.loss_slot = sums++;
  for (auto& h : heads) {
    h.metric_at = sums;
    for (auto& m : h.metrics) sums += m->state_size();
  }
  bool any_weighted = false;
  for (auto& h : heads) {
    h.weighted_at = sums;
    for (auto& m : h.weighted_metrics) sums += m->state_size();
    any_weighted = any_weighted || !h.weighted_metrics.empty();
  }
  s.weight_sum_slot = any_weighted ? sums++ : -1;
  for (auto& h : heads)
    if (h.mask_node >= 0) {
      h.mask_at = sums;
      sums += 2;
    }
  s.optimizer = optimizer.clone();
  s.heads = std::move(heads);
  s.totals = Tensor::zeros({sums}, DType::float64, s.device());
  // Packs the weights that are trainable now (layers frozen or unfrozen since the last compile) and builds the
  // optimizer's slots for them only; the label buffers' types follow the losses.
  s.pack_weights();
}

void Model::compile(const optimizers::Optimizer& optimizer, const losses::Loss& loss,
                    const std::vector<metrics::MetricArg>& metrics,
                    const std::vector<metrics::MetricArg>& weighted_metrics) {
  // Keras: one loss applies to every output; with several outputs a list of metrics has one per output.
  const std::size_t n = state_->outputs.size();
  for (auto [what, list] : {std::pair{"metrics", &metrics}, std::pair{"weighted_metrics", &weighted_metrics}})
    SYSTOLIC_CHECK(n == 1 || list->empty() || list->size() == n,
                   "compile: model '{}' has {} outputs; give its {} one per output (Keras takes a list of "
                   "{} entries, or a dict by output name: compile with OutputCompile entries), not {}",
                   state_->name, n, what, n, list->size());
  std::vector<OutputCompile> outputs;
  for (std::size_t i = 0; i < n; ++i) {
    OutputCompile c{.loss = loss};
    if (n == 1) {
      c.metrics = metrics;
      c.weighted_metrics = weighted_metrics;
    } else {
      if (!metrics.empty()) c.metrics = {metrics[i]};
      if (!weighted_metrics.empty()) c.weighted_metrics = {weighted_metrics[i]};
    }
    outputs.push_back(std::move(c));
  }
  compile(optimizer, outputs);
}

void Model::compile(const optimizers::Optimizer& optimizer, const std::string& loss,
                    const std::vector<metrics::MetricArg>& metrics,
                    const std::vector<metrics::MetricArg>& weighted_metrics) {
  compile(optimizer, *losses::get(loss), metrics, weighted_metrics);
}

void Model::compile(const std::string& optimizer, const std::string& loss,
                    const std::vector<metrics::MetricArg>& metrics,
                    const std::vector<metrics::MetricArg>& weighted_metrics) {
  compile(*optimizers::get(optimizer), *losses::get(loss), metrics, weighted_metrics);
}

bool Model::compiled() const {
  return state_->compiled();
}
bool Model::is_sequential() const {
  return state_->sequential;
}

optimizers::Optimizer& Model::optimizer() {
  SYSTOLIC_CHECK(state_->optimizer, "model '{}' is not compiled", state_->name);
  return *state_->optimizer;
}

const losses::Loss& Model::loss() const {
  SYSTOLIC_CHECK(state_->compiled(), "model '{}' is not compiled", state_->name);
  for (auto& h : state_->heads)
    if (h.loss) return *h.loss;
  fail("model '{}' has no loss", state_->name);
}

std::vector<std::string> Model::output_names() const {
  std::vector<std::string> names;
  for (auto& o : state_->outputs) names.push_back(o.node()->layer->name());
  return names;
}

std::vector<const metrics::Metric*> ModelState::all_metrics() const {
  std::vector<const metrics::Metric*> out;
  for (auto& h : heads)
    for (auto& m : h.metrics) out.push_back(m.get());
  for (auto& h : heads)
    for (auto& m : h.weighted_metrics) out.push_back(m.get());
  return out;
}

std::vector<std::string> ModelState::log_names() const {
  std::vector<std::string> names{"loss"};
  std::map<std::string, int> seen;           // a name's count of later copies so far
  auto add = [&](const std::string& name) {  // the name, or its next copy's "<name>_1", "<name>_2", ...
    auto [it, first] = seen.try_emplace(name, 1);
    names.push_back(first ? name : fmt::format("{}_{}", name, it->second++));
  };
  auto prefix = [&](const OutputHead& h) { return heads.size() > 1 ? h.name + "_" : std::string(); };
  for (auto& h : heads)
    for (auto& m : h.metrics) add(prefix(h) + m->name());
  // Keras's CompileMetrics.result: a weighted metric whose name is taken is "weighted_<name>" (then "_1", ...).
  for (auto& h : heads)
    for (auto& m : h.weighted_metrics) {
      const std::string name = prefix(h) + m->name();
      add(seen.count(name) ? prefix(h) + "weighted_" + m->name() : name);
    }
  int losses = 0;
  for (auto& h : heads) losses += h.loss != nullptr;
  if (losses > 1)
    for (auto& h : heads)
      if (h.loss) names.push_back(h.name + "_loss");
  return names;
}

std::vector<std::size_t> ModelState::evaluate_order() const {
  const std::vector<std::string> logs = log_names();
  // model.metrics' names: the loss tracker, each compiled metric by its own name, the outputs' loss trackers.
  std::vector<std::string> own{"loss"};
  for (auto& h : heads)
    for (auto& m : h.metrics) own.push_back(m->name());
  for (auto& h : heads)
    for (auto& m : h.weighted_metrics) own.push_back(m->name());
  for (std::size_t i = own.size(); i < logs.size(); ++i) own.push_back(logs[i]);  // "<output>_loss"
  std::vector<std::size_t> order;
  std::vector<char> taken(logs.size(), 0);
  // Keras appends logs[name] for every entry of model.metrics named so, a name given twice twice ([loss, mae,
  // mae, mae_1] for ["mae", "mae"]); each log is listed once here.
  for (auto& name : own)
    for (std::size_t i = 0; i < logs.size(); ++i)
      if (logs[i] == name && !taken[i]) {
        order.push_back(i);
        taken[i] = 1;
        break;
      }
  std::vector<std::size_t> rest;
  for (std::size_t i = 0; i < logs.size(); ++i)
    if (!taken[i]) rest.push_back(i);
  std::sort(rest.begin(), rest.end(), [&](std::size_t a, std::size_t b) { return logs[a] < logs[b]; });
  order.insert(order.end(), rest.begin(), rest.end());
  return order;
}

std::vector<double> ModelState::log_values(const double* t, double seen) const {
  double loss = t[0];
  for (auto& h : heads)
    if (h.loss_slot >= 0) loss += h.weight() * t[h.loss_slot];
  std::vector<double> v{loss / seen};
  // Each metric's value from its state, the states laid out from `at` on; over `samples`, or on a masked output
  // for a metric that reads the mask over the mask's sum at `mask_slot` (in rows; a sum of 0 has sums of 0 to
  // divide: 0, as Keras's divide_no_nan).
  auto values = [&](const OutputHead& h, const std::vector<std::unique_ptr<metrics::Metric>>& ms,
                    std::int64_t at, double samples, std::int64_t mask_slot) {
    const double unmasked = h.mask_node >= 0 && t[mask_slot] != 0 ? t[mask_slot] / h.rows_per_sample : 1.0;
    for (auto& m : ms) {
      v.push_back(m->value(t + at, h.mask_node >= 0 && m->weighs_by_mask() ? unmasked : samples));
      at += m->state_size();
    }
  };
  for (auto& h : heads) values(h, h.metrics, h.metric_at, seen, h.mask_at);
  // The weighted metrics over the sample weights' sum (in samples: a sample of temporal weights has T of them);
  // without sample weights (a sum of 0) their plain means (a sum of 0 with weights has sums of 0 to divide: 0, as
  // Keras's divide_no_nan).
  const double weights = weight_sum_slot >= 0 && t[weight_sum_slot] != 0
                             ? t[weight_sum_slot] / double(weight_shape.numel())
                             : seen;
  for (auto& h : heads) values(h, h.weighted_metrics, h.weighted_at, weights, h.mask_at + 1);
  int losses = 0;  // "<output>_loss" is logged when several outputs have a loss (log_names)
  for (auto& h : heads) losses += h.loss != nullptr;
  if (losses > 1)
    for (auto& h : heads)
      if (h.loss_slot >= 0) v.push_back(t[h.loss_slot] / seen);
  return v;
}

std::vector<std::string> Model::metrics_names() const {
  const std::vector<std::string> logs = state_->log_names();
  std::vector<std::string> names;
  for (std::size_t i : state_->evaluate_order()) names.push_back(logs[i]);
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
