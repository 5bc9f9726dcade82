// model.summary() as tf.keras 2.x prints it: sequential-like models in 65 columns (Layer (type), Output Shape,
// Param #), other graphs in 98 with "Connected to"; fields cut at their column; totals with thousands separators.
#include <systolic/log.h>

#include <map>

#include "model/model_state.h"

namespace systolic {

namespace {
std::string with_commas(std::int64_t v) {
  std::string s = std::to_string(v), out;
  int k = 0;
  for (auto it = s.rbegin(); it != s.rend(); ++it, ++k) {
    if (k && k % 3 == 0 && *it != '-') out.insert(out.begin(), ',');
    out.insert(out.begin(), *it);
  }
  return out;
}

std::string row(const std::vector<std::string>& fields, const std::vector<int>& positions) {
  std::string line;
  for (std::size_t i = 0; i < fields.size(); ++i) {
    if (i > 0) line = line.substr(0, line.size() - 1) + " ";
    line += fields[i];
    line = line.substr(0, positions[i]);
    line += std::string(positions[i] - line.size(), ' ');
  }
  return line + "\n";
}
}  // namespace

std::string Model::summary_string() const {
  const ModelState& s = *state_;
  // tf.keras: a graph is sequential-like when every node has at most one input and feeds at most one node.
  std::map<int, int> uses;
  bool sequential_like = s.sequential;
  if (!sequential_like) {
    sequential_like = s.inputs.size() == 1 && s.outputs.size() == 1;
    for (auto& e : s.nodes) {
      if (e.inputs.size() > 1) sequential_like = false;
      for (int j : e.inputs)
        if (++uses[j] > 1) sequential_like = false;
    }
  }
  int length = sequential_like ? 65 : 98;
  std::vector<int> positions =
      sequential_like ? std::vector<int>{29, 55, 65} : std::vector<int>{32, 53, 65, 98};
  std::vector<std::string> header{"Layer (type)", "Output Shape", "Param #"};
  if (!sequential_like) header.push_back("Connected to");

  std::string out = "Model: \"" + s.name + "\"\n" + std::string(length, '_') + "\n" + row(header, positions) +
                    std::string(length, '=') + "\n";
  std::int64_t trainable = 0, total = 0;
  for (std::size_t i = 0; i < s.layers.size(); ++i) {
    const auto& layer = s.layers[i];
    // A nested model's row: the shape of its output, its call's inputs.
    auto shown = [](const Node& n) { return n.container ? n.container.get() : n.layer.get(); };
    const NodeExec* e = nullptr;
    for (auto& n : s.nodes)
      if (shown(*n.node) == layer.get() && n.node->output == 0) e = &n;
    std::string shape = e ? e->node->shape.keras_str() : "multiple";
    // A layer of several outputs (an RNN's return_state): all their shapes.
    if (e && !e->more_outputs.empty()) {
      std::vector<Shape> in;
      for (auto& t : e->node->inputs) in.push_back(t.shape());
      shape = "[" + shape;
      for (auto& more : layer->more_output_shapes(in)) shape += ", " + more.keras_str();
      shape += "]";
    }
    // A nested model of several outputs: all their shapes, as Keras lists a layer's outputs.
    if (auto* nested = as_model_layer(*layer);
        nested && !nested->calls().empty() && nested->calls().back().outputs.size() > 1) {
      shape = "[";
      for (auto& o : nested->calls().back().outputs)
        shape += (shape.size() > 1 ? ", " : "") + o.shape().keras_str();
      shape += "]";
    }
    if (layer->is_input_layer()) shape = "[" + shape + "]";
    std::vector<std::string> connections;
    if (auto* nested = as_model_layer(*layer); nested && !nested->calls().empty()) {
      for (auto& in : nested->calls().back().inputs)
        connections.push_back(shown(*in.node())->name() + "[0][0]");
    } else if (e) {
      for (int j : e->inputs) {
        const Node& in = *s.nodes[j].node;
        connections.push_back(shown(in)->name() + "[0][" + std::to_string(in.output) + "]");
      }
    }
    std::vector<std::string> fields{layer->name() + " (" + layer->class_name() + ")", shape,
                                    std::to_string(layer->count_params())};
    if (!sequential_like) fields.push_back(connections.empty() ? "" : connections[0]);
    out += row(fields, positions);
    for (std::size_t k = 1; !sequential_like && k < connections.size(); ++k)
      out += row({"", "", "", connections[k]}, positions);
    out += std::string(length, i + 1 == s.layers.size() ? '=' : '_') + "\n";
    total += layer->count_params();
    trainable += layer->count_trainable_params();
  }
  out += "Total params: " + with_commas(total) + "\n";
  out += "Trainable params: " + with_commas(trainable) + "\n";
  out += "Non-trainable params: " + with_commas(total - trainable) + "\n";
  out += std::string(length, '_') + "\n";
  return out;
}

void Model::summary() const {
  log_write(summary_string());
}

}  // namespace systolic
