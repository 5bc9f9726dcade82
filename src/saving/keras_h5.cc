// Keras HDF5 files: weights (legacy tf.keras layout and Keras 3's .weights.h5) and full models (legacy .h5).
// Layouts: the legacy one has root attributes layer_names, backend, keras_version and a group per layer (its
// weight_names attribute, then the datasets, names with "/" making subgroups); Keras 3's has layers/<key>/vars/<i>
// (key: the snake_case class name with a counter; an RNN's under layers/<key>/cell/vars: the layer's
// keras3_variable_groups). Every file is written to a temporary name and renamed into
// place.
#include <fmt/format.h>
#include <systolic/log.h>
#include <systolic/saving.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <map>

#include "core/text.h"
#include "distribute/replica_group.h"
#include "io/files.h"
#include "io/hdf5.h"
#include "model/saving_access.h"
#include "saving/keras_io.h"
#include "saving/keras_zip.h"

namespace systolic {

namespace {

using keras_io::json;

// A weight as the file stores it: float32 on the host.
Tensor host_float32(const Tensor& t) {
  Tensor h = t.device().is_cpu() ? t : t.to(Device::cpu());
  return h.dtype() == DType::float32 ? h : h.to(DType::float32);
}

void log_device_copy(const Model& model) {
  for (auto& l : model.layers())
    for (auto* pw : all_weights(*l))
      if (const Weight& w = *pw; !w.value.device().is_cpu()) {
        log_line(fmt::format("Copying the weights of model '{}' from {} to the host", model.name(),
                             w.value.device().str()));
        return;
      }
}

// A weight's dataset, in the dtype of Keras's variable (float32, or int64 for an int64 variable).
void write_weight(const hdf5::Group& g, const std::string& name, const Weight& w) {
  if (w.int64)
    g.write_int64(name, host_float32(w.value));
  else
    g.write_float32(name, host_float32(w.value));
}

// Copies a value read from a file into a weight, converting to the weight's dtype and device.
void assign(Weight& w, const Tensor& value) {
  Tensor v = w.value.dtype() == DType::float32 ? value : value.to(w.value.dtype());
  w.value.copy_from(v);
}

// A layer's number in errors, for every file kind: its index in model.layers (as model.summary() lists them).
std::size_t layer_number(const Model& model, const Layer* layer) {
  auto ls = model.layers();
  for (std::size_t i = 0; i < ls.size(); ++i)
    if (&*ls[i] == layer) return i;
  return ls.size();
}

std::vector<Layer*> layers_with_weights(const Model& model) {
  std::vector<Layer*> out;
  for (auto& l : model.layers())
    if (!all_weights(*l).empty()) out.push_back(&*l);
  return out;
}

// ---- legacy layout ---------------------------------------------------------------------------------------

std::string legacy_weight_name(const Layer& l, const Weight& w) {
  return l.name() + "/" + w.name + ":0";
}

// Every weight of a layer with its legacy name: a nested model's weights are named by the path of their layer
// inside it ("conv2d/kernel:0", "stem/conv2d_1/kernel:0"), as Keras writes them into the nested model's group.
std::vector<std::pair<std::string, Weight*>> legacy_weights(Layer& l, const std::string& prefix = "") {
  std::vector<std::pair<std::string, Weight*>> out;
  for (auto& w : l.weights()) out.emplace_back(prefix + legacy_weight_name(l, w), &w);
  for (auto& sub : l.sublayers()) {
    auto more =
        legacy_weights(*sub, saving_access::is_nested_model(*sub) ? prefix + sub->name() + "/" : prefix);
    out.insert(out.end(), more.begin(), more.end());
  }
  return out;
}

// Keras's legacy weight order of a layer (_legacy_weights: layer.trainable_weights + layer.non_trainable_weights),
// which both Keras 3 and tf.keras use to write and read .h5 files, as indices into the layer's weights in layer
// order (all_weights, legacy_weights). The same as layer order for a plain layer (its trainable weights come first)
// and for a frozen nested model; a trainable nested model lists every weight that is trainable now (kernels,
// gammas, ... of its unfrozen layers) first, then the others (moving statistics, frozen layers' weights).
template <typename Trainable>
std::vector<std::size_t> legacy_order(const Layer& l, std::size_t count, Trainable&& trainable) {
  std::vector<std::size_t> order(count);
  for (std::size_t i = 0; i < count; ++i) order[i] = i;
  if (!l.sublayers().empty() && l.trainable())
    std::stable_partition(order.begin(), order.end(), [&](std::size_t i) { return trainable(i); });
  return order;
}

std::vector<Weight*> legacy_ordered_weights(Layer& l) {
  auto ws = all_weights(l);
  std::vector<Weight*> out;
  for (auto i : legacy_order(l, ws.size(), [&](std::size_t k) { return ws[k]->trainable; }))
    out.push_back(ws[i]);
  return out;
}

void write_legacy_weights(const hdf5::Group& g, const Model& model) {
  std::vector<std::string> names;
  for (auto& l : model.layers()) names.push_back(l->name());
  g.set_string_list_attribute("layer_names", names);
  g.set_string_attribute("backend", "tensorflow");
  g.set_string_attribute("keras_version", keras_io::kKerasVersion);
  for (auto& l : model.layers()) {
    auto lg = g.create_group(l->name());
    std::vector<std::string> weight_names;
    auto in_layer_order = legacy_weights(*l, "");
    decltype(in_layer_order) named;
    for (auto i : legacy_order(*l, in_layer_order.size(),
                               [&](std::size_t k) { return in_layer_order[k].second->trainable; }))
      named.push_back(in_layer_order[i]);
    for (auto& [n, w] : named) weight_names.push_back(n);
    if (weight_names.empty())
      lg.set_empty_list_attribute("weight_names");
    else
      lg.set_string_list_attribute("weight_names", weight_names);
    for (auto& [n, w] : named) write_weight(lg, n, *w);
  }
}

struct FileLayer {
  std::string name;
  std::vector<std::string> weight_names;
};

std::vector<FileLayer> legacy_file_layers(const hdf5::ReadGroup& g) {
  std::vector<FileLayer> out;
  for (auto& name : g.string_list_attribute("layer_names")) {
    if (!g.has_group(name))
      fail("{}: layer_names lists '{}' but the file has no such group", g.where(), printable(name));
    auto lg = g.group(name);
    out.push_back({name, lg.string_list_attribute("weight_names")});
  }
  return out;
}

std::string shape_of(const Weight& w) {
  return w.value.shape().str();
}

void load_legacy_weights(const hdf5::ReadGroup& g, Model& model, const LoadWeightsOptions& o) {
  auto file_layers = legacy_file_layers(g);
  std::vector<const FileLayer*> file_with;
  for (auto& f : file_layers)
    if (!f.weight_names.empty()) file_with.push_back(&f);
  auto model_with = layers_with_weights(model);

  // Reads one layer's values (checking counts and shapes); nothing is assigned until all of them fit.
  auto read_layer = [&](Layer& l, std::size_t model_index, const FileLayer& f, std::size_t file_index,
                        std::vector<Tensor>& values) -> std::string {
    auto lg = g.group(f.name);
    auto wps = legacy_ordered_weights(l);
    std::vector<Weight> ws;  // shapes and names only
    for (auto* w : wps) ws.push_back(*w);
    if (ws.size() != f.weight_names.size())
      return fmt::format(
          "layer #{} '{}' ({}) of the model has {} weights, but layer #{} '{}' of the file has {}",
          model_index, l.name(), l.class_name(), ws.size(), file_index, printable(f.name),
          f.weight_names.size());
    for (std::size_t i = 0; i < ws.size(); ++i) {
      const auto& wn = f.weight_names[i];
      if (!lg.has_dataset(wn))
        fail("{}: missing dataset '{}' (listed in weight_names)", lg.where(), printable(wn));
      auto dims = lg.dataset_shape(wn);
      if (Shape(dims) != ws[i].value.shape())
        return fmt::format(
            "layer #{} '{}' ({}) of the model expects weight '{}' of shape {}, but layer #{} '{}' of the "
            "file "
            "holds '{}' of shape {}",
            model_index, l.name(), l.class_name(), ws[i].name, shape_of(ws[i]), file_index, printable(f.name),
            printable(wn), Shape(dims).str());
      values.push_back(lg.read_float32(wn));
    }
    return "";
  };

  std::vector<std::pair<Layer*, std::vector<Tensor>>> loads;
  if (o.by_name) {
    std::map<std::string, std::size_t> by;
    for (std::size_t i = 0; i < file_layers.size(); ++i) by[file_layers[i].name] = i;
    for (std::size_t m = 0; m < model_with.size(); ++m) {
      auto it = by.find(model_with[m]->name());
      if (it == by.end()) continue;  // Keras: layers absent from the file keep their weights
      std::vector<Tensor> values;
      auto err = read_layer(*model_with[m], layer_number(model, model_with[m]), file_layers[it->second],
                            it->second, values);
      if (!err.empty()) {
        if (!o.skip_mismatch) fail("{}: {}", g.file(), err);
        log_line(fmt::format("WARNING: load_weights: skipping {}", err));
        continue;
      }
      loads.emplace_back(model_with[m], std::move(values));
    }
  } else {
    if (o.skip_mismatch) fail("load_weights: skip_mismatch needs by_name=true (as in Keras)");
    if (model_with.size() != file_with.size()) {
      std::string names;
      for (auto* f : file_with) names += (names.empty() ? "" : ", ") + printable(f->name);
      fail("{}: the model has {} layers with weights, the file {} ({})", g.file(), model_with.size(),
           file_with.size(), names);
    }
    for (std::size_t i = 0; i < model_with.size(); ++i) {
      std::vector<Tensor> values;
      auto err = read_layer(*model_with[i], layer_number(model, model_with[i]), *file_with[i],
                            static_cast<std::size_t>(file_with[i] - file_layers.data()), values);
      if (!err.empty()) fail("{}: {}", g.file(), err);
      loads.emplace_back(model_with[i], std::move(values));
    }
  }
  for (auto& [l, values] : loads)
    for (std::size_t i = 0; i < values.size(); ++i) assign(*legacy_ordered_weights(*l)[i], values[i]);
}

// The model's trainable weights in the order of its flat parameter buffer (model.layers, each layer's trainable
// weights): the optimizer's variables, whose slots it lays out in that order.
struct TrainableSlice {
  const Layer* layer;
  const Weight* weight;
};

std::vector<TrainableSlice> trainable_slices(const Model& model) {
  std::vector<TrainableSlice> out;
  for (auto* l : saving_access::weight_layers(model))
    for (auto& w : l->weights())
      if (w.trainable) out.push_back({l, &w});
  return out;
}

// The model's optimizer, built for its trainable weights (the variables the model gave it, in the slices' order: its
// slots laid out variable by variable, Optimizer::slot_view).
optimizers::Optimizer& built_optimizer(Model& model, const std::vector<TrainableSlice>& slices) {
  auto& opt = model.optimizer();
  opt.build(model.trainable_parameters());
  SYSTOLIC_CHECK(opt.variables().size() == slices.size(),
                 "optimizer {}: built for {} variables, the model has {} trainable weights", opt.name(),
                 opt.variables().size(), slices.size());
  return opt;
}

// ---- Keras 3 layout ----------------------------------------------------------------------------------------

// Keras 3 keys layers by class: conv2d, conv2d_1, ... in model.layers order (not by layer name); a nested
// model (functional, sequential) holds its own layers/ keyed the same way.
std::vector<std::string> keras3_layer_keys(const std::vector<std::shared_ptr<Layer>>& layers) {
  std::map<std::string, int> seen;
  std::vector<std::string> keys;
  for (auto& l : layers) {
    auto base = l->keras3_key();
    int n = seen[base]++;
    keys.push_back(n == 0 ? base : base + "_" + std::to_string(n));
  }
  return keys;
}

std::vector<std::shared_ptr<Layer>> model_layers(const Model& model) {
  std::vector<std::shared_ptr<Layer>> out;
  for (auto& l : model.layers()) out.push_back(l.get());
  return out;
}

// The optimizer's variables as Keras 3 orders them: iteration, learning_rate, then the slots in Keras 3's order
// (Optimizer::keras3_slot_order: Adam's m and v per trainable weight), for a model whose optimizer has state.
void write_keras3_optimizer(const hdf5::Group& root, Model& model) {
  auto& opt = built_optimizer(model, trainable_slices(model));
  auto vars = root.create_group("optimizer/vars");
  vars.write_int64_scalar("0", opt.iterations());
  // A schedule is no variable: Keras 3 then writes the slots from 1.
  int index = 1;
  if (!opt.learning_rate_schedule())
    vars.write_float32_scalar(std::to_string(index++), static_cast<float>(opt.learning_rate()));
  for (auto [t, k] : opt.keras3_slot_order())
    vars.write_float32(std::to_string(index++), host_float32(opt.slot_view(k, t)));
  for (double v : opt.keras3_scalar_variables()) vars.write_float32_scalar(std::to_string(index++), float(v));
}

void write_keras3_layers(const hdf5::Group& lg, const std::vector<std::shared_ptr<Layer>>& layers) {
  auto keys = keras3_layer_keys(layers);
  for (std::size_t i = 0; i < layers.size(); ++i) {
    auto& ws = layers[i]->weights();
    std::size_t next = 0;
    for (auto& group : layers[i]->keras3_variable_groups()) {
      auto vars = lg.create_group(keys[i] + "/" + group.path);
      for (std::size_t j = 0; j < group.count; ++j) write_weight(vars, std::to_string(j), ws[next++]);
    }
    if (saving_access::is_nested_model(*layers[i]))
      write_keras3_layers(lg.create_group(keys[i] + "/layers"), layers[i]->sublayers());
  }
}

void write_keras3_weights(const hdf5::Group& root, Model& model) {
  write_keras3_layers(root.create_group("layers"), model_layers(model));
  if (model.is_sequential()) root.create_group("vars");
  if (model.compiled() && model.optimizer().iterations() > 0 && !model.optimizer().slots().empty())
    write_keras3_optimizer(root, model);
}

using Loads = std::vector<std::pair<Weight*, Tensor>>;

void read_keras3_layers(const hdf5::ReadGroup& lg, const std::vector<std::shared_ptr<Layer>>& layers,
                        const LoadWeightsOptions& o, const std::string& where, Loads& loads) {
  auto keys = keras3_layer_keys(layers);
  for (std::size_t i = 0; i < layers.size(); ++i) {
    auto& layer = *layers[i];
    if (saving_access::is_nested_model(layer)) {
      std::string sub = keys[i] + "/layers";
      if (!lg.has_group(sub)) {
        if (all_weights(layer).empty()) continue;
        fail("{}: no weights for nested model #{} '{}': the file has no group {}{}", lg.file(), i,
             layer.name(), where, sub);
      }
      read_keras3_layers(lg.group(sub), layer.sublayers(), o, where + sub + "/", loads);
      continue;
    }
    auto& ws = layer.weights();
    Loads values;
    std::size_t next = 0;
    bool skipped = false;
    for (auto& group : layer.keras3_variable_groups()) {
      std::string path = keys[i] + "/" + group.path;
      if (!lg.has_group(path)) {
        if (group.count == 0) continue;
        fail("{}: no weights for layer #{} '{}' ({}): the file has no group {}{}", lg.file(), i, layer.name(),
             layer.class_name(), where, path);
      }
      auto vars = lg.group(path);
      auto children = vars.children();
      if (children.size() != group.count)
        fail("{}: layer #{} '{}' ({}) has {} weights in {}, the file's {}{} holds {}", lg.file(), i,
             layer.name(), layer.class_name(), group.count, group.path, where, path, children.size());
      for (std::size_t j = 0; j < group.count && !skipped; ++j, ++next) {
        auto name = std::to_string(j);
        if (!vars.has_dataset(name)) fail("{}: missing dataset", vars.where(name));
        auto dims = vars.dataset_shape(name);
        if (Shape(dims) != ws[next].value.shape()) {
          auto msg =
              fmt::format("layer #{} '{}' ({}) expects weight '{}' of shape {}, the file's {} has shape {}",
                          i, layer.name(), layer.class_name(), ws[next].name, shape_of(ws[next]),
                          vars.where(name), Shape(dims).str());
          if (!o.skip_mismatch) fail("{}: {}", lg.file(), msg);
          log_line("WARNING: load_weights: skipping " + msg);
          values.clear();
          skipped = true;
        } else {
          values.emplace_back(&ws[next], vars.read_float32(name));
        }
      }
    }
    loads.insert(loads.end(), values.begin(), values.end());
  }
}

// The optimizer's variables that write_keras3_optimizer wrote (Keras 3 reads them back in load_weights, so a
// backup resumes with its optimizer): an empty string, or why they were not read.
std::string read_keras3_optimizer(const hdf5::ReadGroup& root, Model& model) {
  auto slices = trainable_slices(model);
  auto& opt = built_optimizer(model, slices);
  auto vars = root.group("optimizer/vars");
  const bool scheduled = opt.learning_rate_schedule() != nullptr;  // no learning-rate variable then
  const int head = scheduled ? 1 : 2;
  // Variables after the slots (Nadam's u_product) follow from the step count: counted, not read.
  const auto order = opt.keras3_slot_order();
  std::size_t want = std::size_t(head) + order.size() + opt.keras3_scalar_variables().size();
  if (vars.children().size() != want)
    return fmt::format("the file's optimizer has {} variables, {} with {} trainable weights has {}",
                       vars.children().size(), opt.name(), slices.size(), want);
  std::vector<std::pair<Tensor, Tensor>> values;  // (slot view, value)
  int index = head;
  for (auto [i, k] : order) {
    auto& t = slices[i];
    auto key = std::to_string(index++);
    Tensor view = opt.slot_view(k, i);
    if (!vars.has_dataset(key)) return "no dataset " + vars.where(key);
    if (Shape(vars.dataset_shape(key)) != view.shape())
      return fmt::format("{} has shape {}, the weight '{}' {}'s {} {}", vars.where(key),
                         Shape(vars.dataset_shape(key)).str(), t.weight->name, shape_of(*t.weight),
                         opt.slots()[k].first, view.shape().str());
    values.emplace_back(view, vars.read_float32(key));
  }
  if (!vars.has_dataset("0") || (!scheduled && !vars.has_dataset("1")))
    return "no iterations or learning rate";
  auto iterations = vars.read_scalar("0");
  for (auto& [view, value] : values) view.copy_from(value.to(view.dtype()));
  opt.set_iterations(static_cast<std::int64_t>(iterations));
  if (!scheduled) opt.set_learning_rate(vars.read_scalar("1"));
  return "";
}

void load_keras3_weights(const hdf5::ReadGroup& root, Model& model, const LoadWeightsOptions& o) {
  if (o.by_name)
    fail("{}: by_name applies to legacy .h5 files, not Keras 3 .weights.h5 (as in Keras)", root.file());
  Loads loads;
  read_keras3_layers(root.group("layers"), model_layers(model), o, "layers/", loads);
  for (auto& [w, value] : loads) assign(*w, value);
  if (model.compiled() && root.has_group("optimizer/vars")) {
    auto why = read_keras3_optimizer(root, model);
    if (!why.empty())
      log_line(fmt::format("WARNING: {}: the optimizer state was not restored ({})", root.file(), why));
  }
}

// Keras 3's optimizer/vars (as write_keras3_optimizer writes them): 0 the iteration count, 1 the learning rate,
// then the slots in Keras 3's order (keras3_slot_order). Returns an empty string on success, else why the state was
// not restored.
std::string load_keras3_optimizer(const hdf5::ReadGroup& root, Model& model) {
  if (!root.has_group("optimizer/vars")) return "the file has no optimizer/vars";
  auto g = root.group("optimizer/vars");
  auto trainable = trainable_slices(model);
  auto& opt = built_optimizer(model, trainable);
  std::size_t per = opt.slots().size();
  const auto order = opt.keras3_slot_order();
  auto children = g.children();
  const std::size_t head = opt.learning_rate_schedule() ? 1 : 2;  // a schedule is no variable
  if (children.size() == head && g.has_dataset("0") && g.read_scalar("0") == 0)
    return "";  // compiled, not trained
  // Variables after the slots (Nadam's u_product) follow from the step count: counted, not read.
  const std::size_t scalars = opt.keras3_scalar_variables().size();
  if (children.size() != head + order.size() + scalars)
    return fmt::format("{} variables for {} trainable weights with {} slots each{}", children.size(),
                       trainable.size(), per, scalars ? fmt::format(" and {} more", scalars) : "");
  if (!g.has_dataset("0")) return "no iteration count";
  std::vector<std::pair<Tensor, Tensor>> copies;  // destination view, value
  std::size_t index = head;
  for (auto [i, k] : order) {
    auto name = std::to_string(index++);
    Tensor view = opt.slot_view(k, i);
    if (!g.has_dataset(name)) return "no variable " + name;
    auto dims = g.dataset_shape(name);
    if (Shape(dims) != view.shape())
      return fmt::format("variable {} has shape {}, the weight {}'s {} {}", name, Shape(dims).str(),
                         trainable[i].weight->value.shape().str(), opt.slots()[k].first, view.shape().str());
    copies.emplace_back(view, g.read_float32(name));
  }
  for (auto& [dst, value] : copies)
    dst.copy_from(dst.dtype() == DType::float32 ? value : value.to(dst.dtype()));
  opt.set_iterations(static_cast<std::int64_t>(g.read_scalar("0")));
  return "";
}

// ---- optimizer state in full-model files -----------------------------------------------------------------

// tf.keras 2.x's (legacy optimizer) layout, which tf.keras builds from an optimizer_config of class "Adam":
// "<Optimizer>/iter:0", then for each slot, for each trainable weight, "<Optimizer>/<layer>/<weight>/<slot>:0".
void write_optimizer_weights(const hdf5::Group& root, Model& model) {
  auto trainable = trainable_slices(model);
  auto& opt = built_optimizer(model, trainable);
  auto g = root.create_group("optimizer_weights");
  std::vector<std::string> names = {opt.name() + "/iter:0"};
  g.write_int64_scalar(names[0], opt.iterations());
  for (std::size_t k = 0; k < opt.slots().size(); ++k)
    for (std::size_t i = 0; i < trainable.size(); ++i) {
      Tensor view = opt.slot_view(k, i);
      if (!view.defined()) continue;  // the slot has no values for this weight (as in Keras)
      auto& t = trainable[i];
      auto name =
          opt.name() + "/" + t.layer->name() + "/" + t.weight->name + "/" + opt.slots()[k].first + ":0";
      g.write_float32(name, host_float32(view));
      names.push_back(name);
    }
  g.set_string_list_attribute("weight_names", names);
}

// The slot (systolic's name) that a name Keras gives it in one of its layouts means (Slot: Adam's "m" is tf.keras's
// "m" and Keras 3's "momentum"), or "".
std::string systolic_slot_name(const optimizers::Optimizer& opt, const std::string& keras) {
  for (auto& s : opt.variable_slots())
    if (keras == s.name || keras == s.tf_keras || keras == s.keras3) return s.name;
  return "";
}

// The slot of a Keras 3 legacy-.h5 variable name, "<path>_<keras3 slot name>" ("dense_kernel_momentum"), or "".
std::string keras3_suffix_slot(const optimizers::Optimizer& opt, const std::string& name) {
  std::string best, found;
  for (auto& s : opt.variable_slots())
    if (name.size() > s.keras3.size() && name.ends_with("_" + s.keras3) && s.keras3.size() > best.size()) {
      best = s.keras3;
      found = s.name;
    }
  return found;
}

// Reads optimizer_weights written by systolic, tf.keras (2.x, both optimizer generations) or Keras 3's legacy h5
// writer. Returns an empty string on success, else why the state was not restored (the model keeps fresh state).
std::string load_optimizer_weights(const hdf5::ReadGroup& root, Model& model) {
  if (!root.has_group("optimizer_weights")) return "the file has no optimizer_weights";
  auto g = root.group("optimizer_weights");
  auto names = g.string_list_attribute("weight_names");
  auto trainable = trainable_slices(model);
  auto& opt = built_optimizer(model, trainable);
  std::map<std::string, std::vector<std::string>> per_slot;  // systolic slot -> dataset names, in order
  std::optional<double> iterations;
  for (auto& n : names) {
    auto base = n.substr(n.rfind('/') == std::string::npos ? 0 : n.rfind('/') + 1);
    if (base == "iteration:0" || base == "iter:0" || base == "iteration" || base == "iterations") {
      iterations = g.read_scalar(n);
      continue;
    }
    if (base == "learning_rate" || base == "learning_rate:0" || base == "lr:0") continue;
    std::vector<std::string> parts;
    for (std::size_t s = 0, e; s <= n.size(); s = e + 1) {
      e = n.find('/', s);
      if (e == std::string::npos) e = n.size();
      parts.push_back(n.substr(s, e - s));
    }
    std::string slot;
    if (parts.size() >= 3 && !systolic_slot_name(opt, parts[1]).empty()) {
      slot = systolic_slot_name(opt, parts[1]);  // tf.keras 2.11+: Adam/m/<var>:0
    } else if (parts.size() >= 2) {
      auto last = parts.back();  // tf.keras <= 2.10: Adam/<var>/m:0; Keras 3: adam/<var>_momentum
      if (auto colon = last.find(':'); colon != std::string::npos) last = last.substr(0, colon);
      slot = systolic_slot_name(opt, last);
      if (slot.empty()) slot = keras3_suffix_slot(opt, last);
    }
    if (slot.empty()) return "unrecognised optimizer weight '" + printable(n) + "'";
    per_slot[slot].push_back(n);
  }
  if (!iterations) return "no iteration count";
  std::vector<std::pair<Tensor, Tensor>> copies;  // destination view, value
  for (std::size_t k = 0; k < opt.slots().size(); ++k) {
    const std::string& slot_name = opt.slots()[k].first;
    auto it = per_slot.find(slot_name);
    if (it == per_slot.end()) return "no '" + slot_name + "' slot";
    std::vector<Tensor> views;  // the weights that have the slot, in order
    for (std::size_t i = 0; i < trainable.size(); ++i)
      if (Tensor view = opt.slot_view(k, i); view.defined()) views.push_back(view);
    if (it->second.size() != views.size())
      return fmt::format("{} '{}' values for {} trainable weights", it->second.size(), slot_name,
                         views.size());
    for (std::size_t i = 0; i < views.size(); ++i) {
      auto dims = g.dataset_shape(it->second[i]);
      if (Shape(dims) != views[i].shape())
        return fmt::format("'{}' has shape {}, the slot {}", printable(it->second[i]), Shape(dims).str(),
                           views[i].shape().str());
      copies.emplace_back(views[i], g.read_float32(it->second[i]));
    }
  }
  if (per_slot.size() != opt.slots().size()) return "the file's optimizer has other slots than " + opt.name();
  for (auto& [dst, value] : copies)
    dst.copy_from(dst.dtype() == DType::float32 ? value : value.to(dst.dtype()));
  opt.set_iterations(static_cast<std::int64_t>(*iterations));
  return "";
}

}  // namespace

// ---- public API ------------------------------------------------------------------------------------------------

void Model::save_weights(const std::string& path) const {
  keras_io::save_weights(*this, path, {});
}

void keras_io::save_weights(const Model& model, const std::string& path,
                            const std::vector<std::pair<std::string, std::string>>& root_attributes,
                            const std::vector<std::pair<std::string, Tensor>>& datasets) {
  if (!distribute::writes_files(saving_access::replicas(model))) return;
  bool keras3 = path.ends_with(".weights.h5");
  if (!keras3 && !path.ends_with(".h5") && !path.ends_with(".hdf5") && !path.ends_with(".keras"))
    fail("save_weights: {}: use a name ending in .h5 / .hdf5 (tf.keras layout) or .weights.h5 (Keras 3)",
         path);
  if (path.ends_with(".keras"))
    fail("save_weights: {}: a .keras file holds the whole model; use save(), or a .weights.h5 name", path);
  log_device_copy(model);
  Model self = model;
  hdf5::Lock lock;
  io::write_atomically(path, [&](const std::string& tmp) {
    auto root = hdf5::create(tmp);
    if (keras3)
      write_keras3_weights(root, self);
    else
      write_legacy_weights(root, self);
    for (auto& [name, value] : root_attributes) root.set_string_attribute(name, value);
    for (auto& [name, value] : datasets) {
      auto slash = name.rfind('/');
      SYSTOLIC_CHECK(slash != std::string::npos, "save_weights: internal: dataset '{}' has no group", name);
      root.create_group(name.substr(0, slash)).write_float32(name.substr(slash + 1), value);
    }
  });
}

void Model::load_weights(const std::string& path, const LoadWeightsOptions& options) {
  keras_io::load_weights(*this, path, options);
  distribute::share_loaded_weights(saving_access::replicas(*this));
}

void keras_io::load_weights(Model& model, const std::string& path, const LoadWeightsOptions& options) {
  load_weights(model, hdf5::read_file(path), options);
}

void keras_io::load_weights(Model& model, const hdf5::ReadGroup& root, const LoadWeightsOptions& options) {
  const std::string& path = root.file();
  if (root.has_group("model_weights"))
    load_legacy_weights(root.group("model_weights"), model, options);
  else if (root.has_attribute("layer_names") || root.has_attribute("layer_names0"))
    load_legacy_weights(root, model, options);
  else if (root.has_group("layers"))
    load_keras3_weights(root, model, options);
  else
    fail("{}: not a Keras weights file (no layer_names attribute, model_weights group or layers group)",
         path);
}

void Model::save(const std::string& path, const SaveOptions& options) const {
  if (!distribute::writes_files(saving_access::replicas(*this))) return;
  // The one place that picks the format from the name (the CLI's --save and checkpoints come here).
  bool zip = path.ends_with(".keras");
  if (options.keras == KerasTarget::tf_keras && (zip || path.ends_with(".weights.h5")))
    fail(
        "save: {}: tf.keras reads neither Keras 3's .keras nor its .weights.h5; for tf.keras save a .h5 (a "
        "full "
        "model) or call save_weights with a .h5 name",
        path);
  if (path.ends_with(".weights.h5")) return save_weights(path);  // Keras 3's weights-only layout
  if (!zip && !path.ends_with(".h5") && !path.ends_with(".hdf5"))
    fail(
        "save: {}: use a name ending in .keras (Keras 3), .h5 (legacy full model) or .weights.h5 (weights "
        "only)",
        path);
  log_device_copy(*this);
  Model self = *this;
  if (zip) return keras_io::save_keras_archive(self, path);
  auto config = keras_io::model_config(self, options.keras);
  config["keras_version"] = keras_io::kKerasVersion;
  config["backend"] = "tensorflow";
  hdf5::Lock lock;
  io::write_atomically(path, [&](const std::string& tmp) {
    auto root = hdf5::create(tmp);
    root.set_string_attribute("backend", "tensorflow");
    root.set_string_attribute("keras_version", keras_io::kKerasVersion);
    root.set_string_attribute("model_config", config.dump());
    write_legacy_weights(root.create_group("model_weights"), self);
    if (self.compiled()) {
      root.set_string_attribute("training_config", keras_io::training_config(self).dump());
      if (!self.optimizer().slots().empty() || self.optimizer().iterations() > 0)
        write_optimizer_weights(root, self);
    }
  });
}

Model load_model(const std::string& path, const LoadModelOptions& options) {
  if (keras_io::is_zip_file(path)) {
    auto bytes = io::read_file(path);
    return keras_io::load_keras_archive(bytes.data(), bytes.size(), path, options);
  }
  return keras_io::load_model_h5(hdf5::read_file(path), options);
}

Model keras_io::load_model_h5(const hdf5::ReadGroup& root, const LoadModelOptions& options) {
  const std::string& path = root.file();
  if (!root.has_attribute("model_config")) {
    if (root.has_attribute("layer_names") || root.has_group("layers"))
      fail(
          "{}: holds weights only (no model_config); build the model (e.g. from its JSON) and call "
          "load_weights",
          path);
    fail("{}: not a Keras full-model file (no model_config attribute)", path);
  }
  json config;
  try {
    config = json::parse(root.string_attribute("model_config"));
  } catch (const json::exception& e) {
    fail("{}: model_config is not valid JSON: {}", path, printable(e.what(), 400));
  }
  Model model = keras_io::model_from_config(config, path);
  if (!root.has_group("model_weights")) fail("{}: no model_weights group", path);
  load_legacy_weights(root.group("model_weights"), model, {});
  if (options.compile && root.has_attribute("training_config")) {
    json tc;
    try {
      tc = json::parse(root.string_attribute("training_config"));
    } catch (const json::exception& e) {
      fail("{}: training_config is not valid JSON: {}", path, printable(e.what(), 400));
    }
    keras_io::compile_from_training_config(model, tc, path);
    if (root.has_group("optimizer_weights")) {
      auto why = load_optimizer_weights(root, model);
      if (!why.empty())
        log_line(fmt::format(
            "WARNING: {}: the optimizer state was not restored ({}); training starts with a fresh "
            "optimizer",
            path, why));
    }
  }
  return model;
}

namespace keras_io {

void save_keras_archive(Model& model, const std::string& path) {
  json config = model_config(model);
  config["build_config"] = {{"input_shape", nullptr}};
  if (model.compiled()) config["compile_config"] = compile_config(model);
  json metadata = {{"keras_version", kKerasVersion3}, {"date_saved", ""}};
  {
    std::time_t now = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&now, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%d@%H:%M:%S", &tm);
    metadata["date_saved"] = buf;
  }
  std::vector<char> weights;
  {
    io::TempFolder tmp(std::filesystem::temp_directory_path(), "systolic-keras");
    auto h5 = (tmp.path() / "model.weights.h5").string();
    {
      hdf5::Lock lock;
      auto root = hdf5::create(h5);
      write_keras3_weights(root, model);
    }
    weights = io::read_file(h5);
  }
  write_keras_archive(path, config.dump(), metadata.dump(), weights);
}

Model load_keras_archive(const void* data, std::size_t size, const std::string& path,
                         const LoadModelOptions& options) {
  auto k = read_keras_archive(data, size, path);
  Model model = model_from_config(k.config, path + ": config.json");
  std::string where = path + ": model.weights.h5";
  auto root = hdf5::read_image(k.weights.data(), k.weights.size(), where);
  if (!root.has_group("layers")) fail("{}: no layers group (not Keras 3's layout)", where);
  load_keras3_weights(root, model, {});
  if (options.compile && k.config.contains("compile_config") && k.config["compile_config"].is_object() &&
      !k.config["compile_config"].empty()) {
    compile_from_keras3_config(model, k.config["compile_config"], path + ": config.json");
    if (root.has_group("optimizer")) {
      auto why = load_keras3_optimizer(root, model);
      if (!why.empty())
        log_line(fmt::format(
            "WARNING: {}: the optimizer state was not restored ({}); training starts with a fresh optimizer",
            where, why));
    }
  }
  return model;
}

}  // namespace keras_io

}  // namespace systolic
