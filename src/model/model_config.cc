// Keras model JSON: model_config / model_from_config (model/model_config.h), model.to_json(), model_from_json().
//
// Written in tf.keras 2.x's form (Keras 3 reads it): layers with "inbound_nodes" as [[[layer, node, tensor, {}]]].
// Read: that form, Keras 3's ({"args": [{"class_name": "__keras_tensor__", "config": {"keras_history": ...}}]}),
// Sequential with or without an InputLayer, and Keras 2.0's Sequential whose config is the list of layers.
#include "model/model_config.h"

#include <systolic/log.h>
#include <systolic/saving.h>
#include <systolic/schedules.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "layers/config.h"
#include "model/model_state.h"

namespace systolic {

namespace keras_config {

namespace {

// The layer a node shows as: a nested model's nodes show as the nested model.
const Layer* shown(const Node* n) {
  return n->container ? n->container.get() : n->layer.get();
}

// Every node of the model's graph, in creation order, and each layer's calls in that order (Keras's node_index):
// a plain layer's call is its node; a nested model's is one of its calls (ModelLayer::Call), whose outputs are
// nodes of the graph.
struct Graph {
  std::vector<std::shared_ptr<Node>> nodes;
  std::map<const Layer*, std::vector<const void*>> layer_calls;
  KerasTarget target = KerasTarget::keras3;

  // The call a node stands for, and which of its outputs the node is; null for a node inside a nested call.
  static const void* call_of(const Node* n, int* tensor = nullptr) {
    if (tensor) *tensor = 0;
    if (!n->container) {
      if (n->output == 0) return n;
      // A later output of a plain layer's call: the call is its first output's node.
      if (tensor) *tensor = n->output;
      return n->inputs.at(0).node().get();
    }
    for (auto& call : as_model_layer(*n->container)->calls())
      for (std::size_t i = 0; i < call.outputs.size(); ++i)
        if (call.outputs[i].node().get() == n) {
          if (tensor) *tensor = static_cast<int>(i);
          return &call;
        }
    return nullptr;
  }
  int node_index(const Node* n) const {
    auto& v = layer_calls.at(shown(n));
    const int i = static_cast<int>(std::find(v.begin(), v.end(), call_of(n)) - v.begin());
    // Keras 3 counts a nested model's calls from 0; tf.keras from 1 (its node 0 is the model's own).
    return n->container && target == KerasTarget::tf_keras ? i + 1 : i;
  }
};

Graph walk(const Model& model, KerasTarget target) {
  std::map<std::int64_t, std::shared_ptr<Node>> found;
  std::vector<std::shared_ptr<Node>> stack;
  for (auto& o : model.outputs()) stack.push_back(o.node());
  while (!stack.empty()) {
    auto n = stack.back();
    stack.pop_back();
    if (!found.emplace(n->id, n).second) continue;
    for (auto& in : n->inputs) stack.push_back(in.node());
  }
  Graph g;
  g.target = target;
  for (auto& [id, n] : found) {
    g.nodes.push_back(n);
    const void* call = Graph::call_of(n.get());
    if (!call) continue;
    auto& calls = g.layer_calls[shown(n.get())];
    if (std::find(calls.begin(), calls.end(), call) == calls.end()) calls.push_back(call);
  }
  return g;
}

// Whether a tensor carries Keras's mask: the rule the model runs by (ModelState::finalize), along first inputs.
bool carries_mask(const SymbolicTensor& t) {
  const Node& n = *t.node();
  if (n.layer->is_input_layer()) return false;
  if (n.output > 0) {  // a later output of a call
    const Node& first = *n.inputs[0].node();
    return n.layer->more_output_masked(n.output, !first.inputs.empty() && carries_mask(first.inputs[0]));
  }
  std::vector<bool> masked;
  for (const SymbolicTensor& i : n.inputs) masked.push_back(carries_mask(i));
  if (n.layer->combines_masks(masked)) return true;
  return n.layer->output_masked(!masked.empty() && masked[0]);
}

// tf.keras runs an RNN given initial states by its input's mask; Keras 3 passes it no mask then (layers/recurrent.h:
// steps_mask), which systolic follows. A call in tf.keras's form that would differ is refused, read or written.
void check_tf_keras_states(const Layer& layer, const std::vector<SymbolicTensor>& inputs,
                           const std::string& where) {
  if (layer.keras_list_argument() && inputs.size() > 1 && carries_mask(inputs[0]))
    fail(
        "{}: layer '{}' ({}) is given initial states and a masked input: tf.keras skips the masked steps "
        "there, "
        "Keras 3 (and systolic) run them all; save the model for Keras 3 (.keras) instead",
        where, layer.name(), layer.class_name());
}

json layer_entry(const Layer& layer, KerasTarget target) {
  if (auto* nested = as_model_layer(layer)) {
    json entry = model_config(nested->model(), target);
    entry["name"] = layer.name();
    return entry;
  }
  json config;
  layer.get_config(config);
  const std::string module = layer.keras_module();
  const bool operation = module != "keras.layers";  // a Keras 3 operation node registers its class name
  return {{"module", module},
          {"class_name", layer.class_name()},
          {"config", config},
          {"registered_name", operation ? json(layer.class_name()) : json(nullptr)},
          {"name", layer.name()}};
}

json tensor_ref(const Graph& g, const SymbolicTensor& t) {
  int tensor = 0;
  Graph::call_of(t.node().get(), &tensor);
  return json::array({shown(t.node().get())->name(), g.node_index(t.node().get()), tensor});
}

// Keras 3's form of a call's tensor argument.
json keras_tensor(const Graph& g, const SymbolicTensor& t) {
  json shape = json::array({nullptr});
  for (int d = 0; d < t.shape().rank(); ++d) shape.push_back(t.shape()[d]);
  return {
      {"class_name", "__keras_tensor__"},
      {"config", {{"shape", shape}, {"dtype", dtype_name(t.dtype())}, {"keras_history", tensor_ref(g, t)}}}};
}

}  // namespace

json model_config(const Model& model, KerasTarget target) {
  json layers = json::array();
  if (model.is_sequential()) {
    layers.push_back(layer_entry(*model.inputs()[0].node()->layer, target));
    for (auto& l : model.layers()) layers.push_back(layer_entry(*l, target));
    return {{"module", "keras"},
            {"class_name", "Sequential"},
            {"config", {{"name", model.name()}, {"trainable", model.trainable()}, {"layers", layers}}},
            {"registered_name", nullptr}};
  }
  Graph g = walk(model, target);
  for (auto& l : model.layers()) {
    json entry = layer_entry(*l, target);
    json inbound = json::array();
    for (const void* key : g.layer_calls.at(&*l)) {
      std::vector<SymbolicTensor> inputs;
      json kwargs = json::object();
      if (as_model_layer(*l)) {
        auto* c = static_cast<const ModelLayer::Call*>(key);
        inputs = c->inputs;
        if (c->training.has_value()) kwargs["training"] = *c->training;
      } else {
        auto* n = static_cast<const Node*>(key);
        if (n->inputs.empty()) continue;  // an InputLayer's own node has no inbound tensors
        inputs = n->inputs;
      }
      json args;
      if (l->keras_call_args(args)) {
        // An operation node: Keras 3's form, its constants among the args (null marks the input tensor).
        std::size_t k = 0;
        for (auto& a : args)
          if (a.is_null() && k < inputs.size()) a = keras_tensor(g, inputs[k++]);
        inbound.push_back({{"args", args}, {"kwargs", json::object()}});
        continue;
      }
      if (target == KerasTarget::keras3) {
        std::vector<json> tensors;
        for (auto& in : inputs) tensors.push_back(keras_tensor(g, in));
        json form_args = json::array(), form_kwargs = kwargs;
        if (l->keras_call_form(tensors, form_args, form_kwargs)) {
          inbound.push_back({{"args", form_args}, {"kwargs", form_kwargs}});
          continue;
        }
      } else if (l->keras3_only()) {
        fail("a tf.keras config: layer '{}' ({}) is written for Keras 3 only; save the model as .keras",
             l->name(), l->class_name());
      }
      if (const char* list = l->keras_list_argument();
          list && inputs.size() > 1 && target == KerasTarget::keras3) {
        // Keras 3 reads the first input as the call's argument and the others as a list argument (an RNN's
        // initial_state); tf.keras lists them all, as below.
        json more = json::array();
        for (std::size_t k = 1; k < inputs.size(); ++k) more.push_back(keras_tensor(g, inputs[k]));
        kwargs[list] = more;
        inbound.push_back({{"args", json::array({keras_tensor(g, inputs[0])})}, {"kwargs", kwargs}});
        continue;
      }
      check_tf_keras_states(*l, inputs, "a tf.keras config");
      json call = json::array();
      for (auto& in : inputs) {
        json ref = tensor_ref(g, in);
        ref.push_back(kwargs);
        call.push_back(ref);
      }
      inbound.push_back(call);
    }
    entry["inbound_nodes"] = inbound;
    layers.push_back(entry);
  }
  json inputs = json::array(), outputs = json::array();
  for (auto& t : model.inputs()) inputs.push_back(tensor_ref(g, t));
  for (auto& t : model.outputs()) outputs.push_back(tensor_ref(g, t));
  // "module" lets Keras 3 find the class (it cannot from "Functional" alone); tf.keras ignores it.
  return {{"module", "keras.src.models.functional"},
          {"class_name", "Functional"},
          {"config",
           {{"name", model.name()},
            {"trainable", model.trainable()},
            {"layers", layers},
            {"input_layers", inputs},
            {"output_layers", outputs}}},
          {"registered_name", "Functional"}};
}

Model model_from_config(const json& serialized, const std::string& source);

namespace {

// The name in a layer entry's config, for messages ("?" when the config or its name is not what Keras writes).
std::string entry_name(const json& entry) {
  const json& c = entry["config"];
  return c.is_object() && c.contains("name") && c["name"].is_string() ? c["name"].get<std::string>() : "?";
}

// A Keras 3 operation node (keras.src.ops.numpy: `x + 3.0`). Keras's legacy .h5 writer drops the module; such an
// entry is still one when its one call mixes a tensor with a number, which no merge layer takes (Keras 3.15
// itself cannot load that file back).
bool is_operation_entry(const json& entry) {
  if (!entry.is_object()) return false;
  if (entry.value("module", "") == "keras.src.ops.numpy") return true;
  if (entry.contains("module")) return false;
  static const std::set<std::string> arithmetic = {"Add", "Subtract", "Multiply", "Divide", "TrueDivide"};
  if (!arithmetic.count(entry.value("class_name", "")) || !entry.contains("inbound_nodes")) return false;
  const json& nodes = entry["inbound_nodes"];
  if (!nodes.is_array() || nodes.size() != 1 || !nodes[0].is_object() || !nodes[0].contains("args") ||
      !nodes[0]["args"].is_array())
    return false;
  for (auto& a : nodes[0]["args"])
    if (a.is_number()) return true;
  return false;
}

// The operation nodes Keras 3 writes for the masks it derived: NotEqual(x, value) and Any(..., axis=-1) for
// Embedding and Masking; LogicalOr, ExpandDims, ZerosLike, OnesLike, Concatenate and Any for the merges'
// (Merge.compute_mask, Concatenate.compute_mask); ConvertToTensor for Attention's (its query's mask).
bool is_mask_operation(const json& entry) {
  if (!entry.is_object()) return false;
  const std::string module = entry.value("module", ""), cls = entry.value("class_name", "");
  if (module == "keras.src.ops.core") return cls == "ConvertToTensor";
  if (module != "keras.src.ops.numpy") return false;
  static const std::set<std::string> mask_ops = {"NotEqual",  "Any",      "LogicalOr",  "ExpandDims",
                                                 "ZerosLike", "OnesLike", "Concatenate"};
  return mask_ops.count(cls) > 0;
}

bool is_model_class(const json& entry) {
  auto cls = entry.value("class_name", "");
  return cls == "Functional" || cls == "Sequential" || cls == "Model";
}

// A layer entry of a model config: {"class_name", "config", ...}. Keys next to "config" that carry no
// semantics here (module, registered_name, build_config, name) are accepted; anything else is refused.
std::shared_ptr<Layer> layer_from_entry(const json& entry, const std::string& source,
                                        json* strip_input_shape) {
  if (!entry.is_object() || !entry.contains("class_name") || !entry["class_name"].is_string() ||
      !entry.contains("config"))
    fail("{}: a layer entry needs \"class_name\" and \"config\", got {}", source,
         entry.dump().substr(0, 200));
  for (auto& [k, v] : entry.items())
    if (k != "class_name" && k != "config" && k != "module" && k != "registered_name" &&
        k != "build_config" && k != "name" && k != "inbound_nodes" && k != "shared_object_id" &&
        !(k == "compile_config" && is_model_class(entry) && (v.is_null() || v.empty())))
      fail("{}: layer entry for '{}': unsupported key '{}'", source, entry_name(entry), k);
  if (is_operation_entry(entry)) {
    // A Keras 3 operation node (x + 3.0): its constant is in its one call's args.
    const json& nodes = entry.contains("inbound_nodes") ? entry["inbound_nodes"] : json();
    if (!nodes.is_array() || nodes.size() != 1 || !nodes[0].is_object() || !nodes[0].contains("args"))
      fail("{}: operation '{}' needs one inbound node in Keras 3's form", source, entry_name(entry));
    try {
      return layers::numpy_operation_from_entry(entry["class_name"].get<std::string>(), entry["config"],
                                                nodes[0]["args"]);
    } catch (const Error& e) {
      fail("{}: {}", source, e.what());
    }
  }
  if (is_model_class(entry)) {
    // A nested model: its config is a model config of its own.
    auto model = model_from_config(entry, source);
    return model.as_layer().get();
  }
  json config = entry["config"];
  if (strip_input_shape && config.is_object()) {
    // Sequential without an InputLayer: the first layer carries the input shape (Keras 2.x).
    for (auto* key : {"batch_input_shape", "batch_shape"})
      if (config.contains(key)) {
        *strip_input_shape = config[key];
        config.erase(key);
      }
  }
  try {
    return layers::layer_from_config(entry["class_name"].get<std::string>(), config);
  } catch (const Error& e) {
    fail("{}: {}", source, e.what());
  }
}

Shape input_shape_from(const json& batch_shape, const std::string& source) {
  if (!batch_shape.is_array() || batch_shape.size() < 2)
    fail("{}: bad input shape {}", source, batch_shape.dump());
  std::vector<std::int64_t> dims;
  for (std::size_t i = 1; i < batch_shape.size(); ++i) {
    if (!batch_shape[i].is_number_integer() || batch_shape[i].get<std::int64_t>() <= 0)
      fail("{}: input shape {} needs positive dimensions after the batch", source, batch_shape.dump());
    dims.push_back(batch_shape[i].get<std::int64_t>());
  }
  return Shape(dims);
}

Model sequential_from_config(const json& config, const std::string& source) {
  const json* layers = nullptr;
  std::string name;
  json build_shape;
  if (config.is_array()) {
    layers = &config;  // Keras 2.0: the config is the list of layers
  } else {
    if (!config.is_object() || !config.contains("layers") || !config["layers"].is_array())
      fail("{}: a Sequential config needs a \"layers\" list", source);
    for (auto& [k, v] : config.items())
      if (k != "name" && k != "layers" && k != "trainable" && k != "dtype" && k != "build_input_shape")
        fail("{}: Sequential config: unsupported key '{}'", source, k);
    layers = &config["layers"];
    name = config.value("name", "");
    if (config.contains("build_input_shape")) build_shape = config["build_input_shape"];
  }
  if (layers->empty()) fail("{}: the Sequential model has no layers", source);
  Sequential model({}, name);
  std::size_t first = 0;
  if ((*layers)[0].value("class_name", "") == "InputLayer") {
    auto input = layer_from_entry((*layers)[0], source, nullptr);
    model.add((*input)(std::vector<SymbolicTensor>{}));
    first = 1;
  }
  for (std::size_t i = first; i < layers->size(); ++i) {
    json shape;
    auto layer = layer_from_entry((*layers)[i], source, i == first && first == 0 ? &shape : nullptr);
    if (i == first && first == 0) {
      if (shape.is_null()) shape = build_shape;
      if (shape.is_null())
        fail("{}: the Sequential model has no InputLayer and its first layer no batch_input_shape", source);
      model.add(layers::Input(input_shape_from(shape, source)));
    }
    model.add(LayerRef(layer));
  }
  if (config.is_object() && config.contains("trainable") && config["trainable"] == false)
    model.set_trainable(false);
  return model;
}

// One inbound tensor reference: [layer, node, tensor(, kwargs)] (tf.keras) or a __keras_tensor__ (Keras 3).
struct Ref {
  std::string layer;
  int node = 0, tensor = 0;
  bool legacy = false;           // tf.keras's list form (a nested model's node indices count from 1 there)
  std::optional<bool> training;  // the call's training argument
};

Ref parse_ref(const json& r, const std::string& where) {
  const json* h = &r;
  if (r.is_object()) {
    if (r.value("class_name", "") != "__keras_tensor__" || !r.contains("config") ||
        !r["config"].contains("keras_history"))
      fail("{}: unsupported inbound argument {}", where, r.dump().substr(0, 200));
    h = &r["config"]["keras_history"];
  }
  if (!h->is_array() || h->size() < 3 || !(*h)[0].is_string() || !(*h)[1].is_number_integer() ||
      !(*h)[2].is_number_integer())
    fail("{}: bad tensor reference {}", where, h->dump().substr(0, 200));
  Ref ref{(*h)[0].get<std::string>(), (*h)[1].get<int>(), (*h)[2].get<int>(), !r.is_object(), {}};
  if (h->size() == 4 && !(*h)[3].empty()) {
    const json& kw = (*h)[3];
    for (auto& [k, v] : kw.items()) {
      if (k == "training" && v.is_boolean())
        ref.training = v.get<bool>();
      else if (!v.is_null())
        fail("{}: call arguments {} are not supported", where, kw.dump());
    }
  }
  return ref;
}

// The inbound tensors of one call of a layer.
// An operation node's numbers (constants: the layer holds them) are skipped; anywhere else a number is an error.
// A Keras 3 call's `mask` argument (the mask Keras derived and wrote down) goes to *mask.
// `list`: the layer's call argument that takes its inputs after the first (Layer::keras_list_argument; null: none).
std::vector<Ref> parse_call(const json& call, const std::string& where, bool operation, Layer& layer,
                            std::optional<Ref>* mask = nullptr) {
  std::vector<Ref> refs;
  const char* list = layer.keras_list_argument();
  if (call.is_object()) {  // Keras 3: {"args": [...], "kwargs": {...}}
    json kwargs = call.contains("kwargs") ? call["kwargs"] : json::object();
    std::optional<bool> training;
    std::vector<Ref> more;
    // The layer's tensor keywords (Layer::keras_tensor_keywords) given, in its order, and its other keywords.
    const std::vector<std::string> keywords = layer.keras_tensor_keywords();
    std::vector<std::optional<Ref>> by_keyword(keywords.size());
    json options = json::object();
    for (auto& [k, v] : kwargs.items()) {
      if (k == "mask" && mask && v.is_object()) {
        *mask = parse_ref(v, where);
        continue;
      }
      if (list && k == list && v.is_array()) {
        for (auto& t : v) more.push_back(parse_ref(t, where));
        continue;
      }
      if (auto it = std::find(keywords.begin(), keywords.end(), k); it != keywords.end() && v.is_object()) {
        by_keyword[static_cast<std::size_t>(it - keywords.begin())] = parse_ref(v, where);
        continue;
      }
      if (k == "training" && v.is_boolean()) {
        training = v.get<bool>();
        continue;
      }
      if (!v.is_null()) options[k] = v;
    }
    json args = call.contains("args") ? call["args"] : json::array();
    for (auto& a : args) {
      if (operation && (a.is_number() || (a.is_object() && a.value("class_name", "") == "__tensor__")))
        continue;  // an operation's constant: the layer holds it
      if (a.is_array())
        for (auto& t : a) refs.push_back(parse_ref(t, where));
      else
        refs.push_back(parse_ref(a, where));
    }
    std::vector<std::string> given;
    for (std::size_t i = 0; i < keywords.size(); ++i)
      if (by_keyword[i]) given.push_back(keywords[i]);
    if (!given.empty() || !options.empty()) {
      try {
        layer.read_keras_call(refs.size(), given, options);
      } catch (const Error& e) {
        fail("{}: {}", where, e.what());
      }
    }
    if (!refs.empty()) refs[0].training = training;
    refs.insert(refs.end(), more.begin(), more.end());
    for (auto& r : by_keyword)
      if (r) refs.push_back(*r);
  } else if (call.is_array()) {
    for (auto& r : call) refs.push_back(parse_ref(r, where));
  } else {
    fail("{}: bad inbound node {}", where, call.dump().substr(0, 200));
  }
  return refs;
}

std::vector<Ref> parse_io(const json& v, const std::string& where) {
  std::vector<Ref> refs;
  if (!v.is_array() || v.empty()) fail("{}: expected a list of tensor references", where);
  if (v[0].is_string())
    refs.push_back(parse_ref(v, where));  // Keras 3 writes one reference unnested
  else
    for (auto& r : v) refs.push_back(parse_ref(r, where));
  return refs;
}

Model functional_from_config(const json& config, const std::string& source) {
  if (!config.is_object() || !config.contains("layers") || !config["layers"].is_array())
    fail("{}: a Functional config needs a \"layers\" list", source);
  for (auto& [k, v] : config.items())
    if (k != "name" && k != "layers" && k != "input_layers" && k != "output_layers" && k != "trainable")
      fail("{}: Functional config: unsupported key '{}'", source, k);
  struct Pending {
    std::shared_ptr<Layer> layer;
    std::vector<std::vector<Ref>> calls;
    std::vector<std::optional<Ref>> masks;  // per call: the mask Keras passed it
    std::size_t done = 0;
  };
  // Keras 3 writes the masks it derived as operation nodes (NotEqual, Any) passed to the layers that read them; the
  // model derives the same masks itself (Layer::output_masked), so these nodes are checked, not built.
  std::set<std::string> mask_nodes;
  std::vector<Pending> pending;
  // layer name -> per node (call), its outputs (several for a nested model of several outputs)
  std::map<std::string, std::vector<std::vector<SymbolicTensor>>> outputs;
  std::map<std::string, const Layer*> by_name;
  // Nested models whose calls the list form counts from 0 (systolic's files for Keras 3) rather than from 1
  // (tf.keras's, whose node 0 is the model's own and never referenced): those referenced as node 0 anywhere.
  std::set<std::string> zero_based;
  // Keras's node index of a layer's call. Keras 3's form counts a nested model's calls from 0.
  auto node_of = [&](const Ref& r) {
    auto it = by_name.find(r.layer);
    if (r.legacy && it != by_name.end() && as_model_layer(*it->second) && !zero_based.count(r.layer))
      return r.node - 1;
    return r.node;
  };
  for (auto& entry : config["layers"]) {
    if (is_mask_operation(entry)) {
      mask_nodes.insert(entry_name(entry));
      continue;
    }
    auto layer = layer_from_entry(entry, source, nullptr);
    if (outputs.count(layer->name())) fail("{}: two layers named '{}'", source, layer->name());
    outputs[layer->name()];
    by_name[layer->name()] = layer.get();
    Pending p{layer, {}, {}, 0};
    std::string where = source + ": layer '" + layer->name() + "'";
    if (layer->is_input_layer()) {
      outputs[layer->name()].push_back({(*layer)(std::vector<SymbolicTensor>{})});
    } else {
      if (!entry.contains("inbound_nodes") || !entry["inbound_nodes"].is_array())
        fail("{}: missing \"inbound_nodes\"", where);
      for (auto& call : entry["inbound_nodes"]) {
        std::optional<Ref> mask;
        p.calls.push_back(parse_call(call, where, is_operation_entry(entry), *layer, &mask));
        p.masks.push_back(mask);
      }
    }
    pending.push_back(std::move(p));
  }
  auto note_zero_based = [&](const Ref& r) {
    if (r.legacy && r.node == 0 && by_name.count(r.layer) && as_model_layer(*by_name.at(r.layer)))
      zero_based.insert(r.layer);
  };
  for (auto& p : pending)
    for (auto& call : p.calls)
      for (auto& r : call) note_zero_based(r);
  for (const char* key : {"input_layers", "output_layers"})
    if (config.contains(key))
      for (auto& r : parse_io(config[key], source + ": " + key)) note_zero_based(r);
  // The tensor a reference names among its call's outputs.
  auto pick = [&](const std::vector<SymbolicTensor>& outs, const Ref& r, const std::string& who) {
    if (r.tensor < 0 || r.tensor >= static_cast<int>(outs.size()))
      fail("{}: {} takes output {} of '{}' node {}, which has {} output(s)", source, who, r.tensor, r.layer,
           r.node, outs.size());
    return outs[static_cast<std::size_t>(r.tensor)];
  };
  // Call the layers once their inputs exist (a config may list a layer before one it consumes).
  for (bool progress = true; progress;) {
    progress = false;
    for (auto& p : pending) {
      while (p.done < p.calls.size()) {
        std::vector<SymbolicTensor> ins;
        for (auto& r : p.calls[p.done]) {
          if (mask_nodes.count(r.layer))
            fail(
                "{}: layer '{}' takes the mask operation '{}' as an input; systolic reads such nodes only as "
                "the "
                "masks Keras passes to layers",
                source, p.layer->name(), r.layer);
          auto it = outputs.find(r.layer);
          if (it == outputs.end())
            fail("{}: layer '{}' takes its input from '{}', which is not in the model", source,
                 p.layer->name(), r.layer);
          int node = node_of(r);
          if (node < 0)
            fail("{}: layer '{}' takes node {} of '{}', which does not exist", source, p.layer->name(),
                 r.node, r.layer);
          if (node >= static_cast<int>(it->second.size())) break;
          ins.push_back(
              pick(it->second[static_cast<std::size_t>(node)], r, "layer '" + p.layer->name() + "'"));
        }
        if (ins.size() != p.calls[p.done].size()) break;
        if (const auto& m = p.masks[p.done]) {
          if (!mask_nodes.count(m->layer))
            fail(
                "{}: layer '{}' is passed the output of '{}' as its mask; systolic derives masks from "
                "Embedding(mask_zero=True) and Masking only",
                source, p.layer->name(), m->layer);
          if (ins.empty() || !carries_mask(ins[0]))
            fail("{}: layer '{}' is passed a mask ('{}') that systolic does not derive for its input", source,
                 p.layer->name(), m->layer);
        }
        if (!p.calls[p.done].empty() && p.calls[p.done][0].legacy)
          check_tf_keras_states(*p.layer, ins, source);
        std::vector<SymbolicTensor> outs;
        if (auto* nested = dynamic_cast<ModelLayer*>(p.layer.get()))
          outs = nested->call_all(ins, p.calls[p.done].empty() ? std::nullopt : p.calls[p.done][0].training);
        else
          outs = p.layer->call_all(ins);
        outputs[p.layer->name()].push_back(outs);
        ++p.done;
        progress = true;
      }
    }
  }
  for (auto& p : pending)
    if (p.done < p.calls.size())
      fail("{}: layer '{}': its inputs are never computed (a cycle?)", source, p.layer->name());
  auto resolve = [&](const char* key) {
    if (!config.contains(key)) fail("{}: Functional config: missing \"{}\"", source, key);
    std::vector<SymbolicTensor> ts;
    for (auto& r : parse_io(config[key], source + ": " + key)) {
      auto it = outputs.find(r.layer);
      int node = node_of(r);
      if (it == outputs.end() || node < 0 || node >= static_cast<int>(it->second.size()))
        fail("{}: {} names '{}' node {}, which does not exist", source, key, r.layer, r.node);
      ts.push_back(pick(it->second[static_cast<std::size_t>(node)], r, key));
    }
    return ts;
  };
  Model model(resolve("input_layers"), resolve("output_layers"), config.value("name", ""));
  if (config.contains("trainable") && config["trainable"] == false) model.set_trainable(false);
  return model;
}

}  // namespace

Model model_from_config(const json& serialized, const std::string& source) {
  return json_checked(source, [&] {
    if (!serialized.is_object() || !serialized.contains("class_name") ||
        !serialized["class_name"].is_string() || !serialized.contains("config"))
      fail("{}: not a Keras model config (expected {{\"class_name\": ..., \"config\": ...}})", source);
    auto cls = serialized["class_name"].get<std::string>();
    if (cls == "Sequential") return sequential_from_config(serialized["config"], source);
    if (cls == "Functional" || cls == "Model") return functional_from_config(serialized["config"], source);
    fail("{}: model class '{}' is not supported (Sequential, Functional)", source, cls);
  });
}

}  // namespace keras_config

// ---- public API ------------------------------------------------------------------------------------------------

std::string Model::to_json(int indent, KerasTarget keras) const {
  auto j = keras_config::model_config(*this, keras);
  j["keras_version"] = keras_config::kKerasVersion;
  j["backend"] = "tensorflow";
  return j.dump(indent);
}

Model model_from_json(const std::string& text) {
  keras_config::json j;
  try {
    j = keras_config::json::parse(text);
  } catch (const keras_config::json::exception& e) {
    fail("model JSON: not valid JSON: {}", e.what());
  }
  return keras_config::model_from_config(j, "model JSON");
}

}  // namespace systolic
