// Keras's compile settings in files: the training_config of full-model .h5 files (tf.keras) and the compile_config
// of .keras files (Keras 3), written from a compiled model and compiled back; and model_from_json_file.
#include <systolic/log.h>
#include <systolic/saving.h>
#include <systolic/schedules.h>

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

json training_config(const Model& model) {
  json metrics = json::array();
  for (auto* m : saving_access::metrics(model))
    metrics.push_back(metrics::serialize(*m, keras_object::Form::h5));
  return {{"loss", losses::serialize(model.loss(), keras_object::Form::h5)},
          {"metrics", metrics},
          {"weighted_metrics", nullptr},
          {"loss_weights", nullptr},
          {"optimizer_config",
           optimizers::serialize(const_cast<Model&>(model).optimizer(), keras_object::Form::h5)}};
}

namespace {

void collect_metrics(const json& m, std::vector<metrics::MetricArg>& out) {
  if (m.is_null()) return;
  if (m.is_array()) {
    for (auto& x : m) collect_metrics(x, out);
    return;
  }
  out.push_back(metrics::from_config(m));
}

}  // namespace

json compile_config(const Model& model) {
  json metrics = json::array();
  for (auto* m : saving_access::metrics(model))
    metrics.push_back(metrics::serialize(*m, keras_object::Form::keras3));
  return {
      {"optimizer", optimizers::serialize(const_cast<Model&>(model).optimizer(), keras_object::Form::keras3)},
      {"loss", losses::serialize(model.loss(), keras_object::Form::keras3)},
      {"loss_weights", nullptr},
      {"metrics", metrics},
      {"weighted_metrics", nullptr},
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
    std::unique_ptr<losses::Loss> loss;
    std::vector<metrics::MetricArg> metrics;
    try {
      opt = optimizers::deserialize(tc["optimizer_config"]);
      loss = losses::deserialize(tc["loss"]);
      if (tc.contains("metrics")) collect_metrics(tc["metrics"], metrics);
    } catch (const Error& e) {
      fail("{}: training_config: {}", source, e.what());
    }
    if (tc.contains("weighted_metrics") && !tc["weighted_metrics"].is_null() &&
        !tc["weighted_metrics"].empty())
      fail("{}: training_config: weighted_metrics are not supported", source);
    if (tc.contains("loss_weights") && !tc["loss_weights"].is_null())
      fail("{}: training_config: loss_weights are not supported", source);
    try {
      model.compile(*opt, *loss, metrics);
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
