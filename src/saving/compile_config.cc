// Keras's compile settings in files: the training_config of full-model .h5 files (tf.keras) and the compile_config
// of .keras files (Keras 3), written from a compiled model and compiled back; and model_from_json_file.
#include <fmt/ranges.h>
#include <systolic/log.h>
#include <systolic/saving.h>
#include <systolic/schedules.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "losses/registry.h"
#include "metrics/registry.h"
#include "model/saving_access.h"
#include "optimizers/registry.h"
#include "saving/keras_io.h"

namespace systolic {

namespace keras_io {

// ---- training config ---------------------------------------------------------------------------------------
// The optimizer, loss and metrics are read and written by their registries (src/optimizers/registry.cc,
// src/losses/registry.cc, src/metrics/registry.cc), in the form each file holds.

namespace {

// compile's loss, loss_weights and metrics as Keras's compile_config / training_config hold them: for one output
// the loss, the weight (null when none was given) and the list of metrics; for several, dicts by output name (as
// compile took them): every output's loss (null: none), every output's weight when any was given, and the
// metrics of the outputs that have some.
struct CompileJson {
  json loss, loss_weights, metrics, weighted_metrics;
};

CompileJson compile_json(const Model& model, keras_object::Form form) {
  const std::vector<OutputCompile> outputs = saving_access::compile_settings(model);
  auto metrics_of = [&](const std::vector<metrics::MetricArg>& metrics) {
    json list = json::array();
    for (auto& m : metrics) list.push_back(metrics::serialize(*m.metric(), form));
    return list;
  };
  if (outputs.size() == 1) {
    const OutputCompile& c = outputs[0];
    // Keras writes None for weighted_metrics it was not given.
    return {losses::serialize(*c.loss.make(), form), c.loss_weight ? json(*c.loss_weight) : json(nullptr),
            metrics_of(c.metrics),
            c.weighted_metrics.empty() ? json(nullptr) : metrics_of(c.weighted_metrics)};
  }
  CompileJson out{json::object(), nullptr, json::object(), json::object()};
  bool weights = false;
  for (auto& c : outputs) {
    out.loss[c.output] = c.loss.empty() ? json(nullptr) : losses::serialize(*c.loss.make(), form);
    weights = weights || c.loss_weight.has_value();
    if (!c.metrics.empty()) out.metrics[c.output] = metrics_of(c.metrics);
    if (!c.weighted_metrics.empty()) out.weighted_metrics[c.output] = metrics_of(c.weighted_metrics);
  }
  if (weights) {
    out.loss_weights = json::object();
    for (auto& c : outputs) out.loss_weights[c.output] = c.loss_weight.value_or(1.0);
  }
  if (out.metrics.empty()) out.metrics = json::array();
  if (out.weighted_metrics.empty()) out.weighted_metrics = nullptr;
  return out;
}

// Every metric in m: one, a list, or nested lists and dicts of them (Keras flattens what it is given for a model of
// one output).
void collect_metrics(const json& m, std::vector<metrics::MetricArg>& out) {
  if (m.is_null()) return;
  if (m.is_array() || (m.is_object() && !m.contains("class_name"))) {
    for (auto& x : m) collect_metrics(x, out);
    return;
  }
  out.push_back(metrics::from_config(m));
}

// A serialized loss, metric or weight, or Keras's structures of them by output: a list (one entry per output)
// or a dict by output name (a serialized object is a dict too, with "class_name").
bool by_output(const json& v) {
  return v.is_array() || (v.is_object() && !v.contains("class_name"));
}

// The entry of `v` (a list or dict by output) for output i named `name`; null when a dict lacks it.
json entry(const json& v, std::size_t i, const std::string& name, const char* what, std::size_t outputs) {
  if (v.is_array()) {
    if (v.size() != outputs) fail("{} has {} entries for {} outputs", what, v.size(), outputs);
    return v[i];
  }
  return v.contains(name) ? v[name] : json(nullptr);
}

// compile's per-output settings from a training_config's loss, loss_weights and metrics (Keras's
// CompileLoss/CompileMetrics rules: one loss for every output, or a list or dict by output name; metrics for one
// output as a list, for several a list of one entry per output or a dict).
std::vector<OutputCompile> outputs_from(const Model& model, const json& tc) {
  const std::vector<std::string> names = model.output_names();
  const std::size_t n = names.size();
  const json& loss = tc["loss"];
  const json weights = tc.value("loss_weights", json(nullptr));
  const json metrics = tc.value("metrics", json(nullptr));
  const json weighted = tc.value("weighted_metrics", json(nullptr));
  if (loss.is_object() && by_output(loss))
    for (auto& [k, v] : loss.items())
      if (std::find(names.begin(), names.end(), k) == names.end())
        fail("loss names output '{}', which the model does not have (its outputs: {})", k,
             fmt::join(names, ", "));
  if (!weights.is_null() && !weights.is_number() && !by_output(weights))
    fail("loss_weights must be a number, a list or a dict by output name");
  std::vector<OutputCompile> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    OutputCompile& c = out[i];
    c.output = names[i];
    const json l = by_output(loss) ? entry(loss, i, names[i], "loss", n) : loss;
    if (!l.is_null()) c.loss = *losses::deserialize(l);
    if (weights.is_number()) {
      if (n != 1) fail("loss_weights is one number for a model of {} outputs", n);
      c.loss_weight = weights.get<double>();
    } else if (!weights.is_null()) {
      const json w = entry(weights, i, names[i], "loss_weights", n);
      if (!w.is_null() && !w.is_number()) fail("loss_weights['{}'] is not a number", names[i]);
      if (w.is_number()) c.loss_weight = w.get<double>();
    }
    if (n == 1) {
      collect_metrics(metrics, c.metrics);
      collect_metrics(weighted, c.weighted_metrics);
    } else {
      if (metrics.is_object() || (metrics.is_array() && !metrics.empty()))
        collect_metrics(entry(metrics, i, names[i], "metrics", n), c.metrics);
      if (weighted.is_object() || (weighted.is_array() && !weighted.empty()))
        collect_metrics(entry(weighted, i, names[i], "weighted_metrics", n), c.weighted_metrics);
    }
  }
  return out;
}

}  // namespace

json training_config(const Model& model) {
  CompileJson c = compile_json(model, keras_object::Form::h5);
  return {{"loss", c.loss},
          {"metrics", c.metrics},
          {"weighted_metrics", c.weighted_metrics},
          {"loss_weights", c.loss_weights},
          {"optimizer_config",
           optimizers::serialize(const_cast<Model&>(model).optimizer(), keras_object::Form::h5)}};
}

json compile_config(const Model& model) {
  CompileJson c = compile_json(model, keras_object::Form::keras3);
  return {
      {"optimizer", optimizers::serialize(const_cast<Model&>(model).optimizer(), keras_object::Form::keras3)},
      {"loss", c.loss},
      {"loss_weights", c.loss_weights},
      {"metrics", c.metrics},
      {"weighted_metrics", c.weighted_metrics},
      {"run_eagerly", false},
      {"steps_per_execution", 1},
      {"jit_compile", false}};
}

void compile_from_keras3_config(Model& model, const json& cc, const std::string& source) {
  json_checked(source, [&] {
    if (!cc.is_object() || !cc.contains("loss")) fail("{}: compile_config needs \"loss\"", source);
    // Keras 3 compiles with the config's entries (Trainer.compile_from_config: compile(**config)), so without an
    // "optimizer" it takes compile's default, "rmsprop" (Keras 3.15 wrote such a file for an applications model
    // compiled with "adam", and loads it with RMSprop). A name is read as keras.optimizers.get reads it.
    json tc = {{"loss", cc["loss"]}, {"optimizer_config", cc.value("optimizer", json("rmsprop"))}};
    for (auto* k : {"metrics", "weighted_metrics", "loss_weights"})
      if (cc.contains(k)) tc[k] = cc[k];
    compile_from_training_config(model, tc, source + ": compile_config");
  });
}

void compile_from_training_config(Model& model, const json& tc, const std::string& source) {
  json_checked(source, [&] {
    if (!tc.is_object() || !tc.contains("loss") || !tc.contains("optimizer_config"))
      fail("{}: training_config needs \"loss\" and \"optimizer_config\"", source);
    std::unique_ptr<optimizers::Optimizer> opt;
    std::vector<OutputCompile> outputs;
    try {
      opt = optimizers::deserialize(tc["optimizer_config"]);
      outputs = outputs_from(model, tc);
    } catch (const Error& e) {
      fail("{}: training_config: {}", source, e.what());
    }
    try {
      model.compile(*opt, outputs);
    } catch (const Error& e) {
      fail("{}: {}", source, e.what());
    }
  });
}

}  // namespace keras_io

Model model_from_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot open the file", path);
  std::stringstream ss;
  ss << in.rdbuf();
  keras_io::json j;
  try {
    j = keras_io::json::parse(ss.str());
  } catch (const keras_io::json::exception& e) {
    fail("{}: not valid JSON: {}", path, e.what());
  }
  return keras_io::model_from_config(j, path);
}

}  // namespace systolic
