// Keras's compile settings in files: the training_config of full-model .h5 files (tf.keras) and the compile_config
// of .keras files (Keras 3), written from a compiled model and compiled back; and model_from_json_file.
#include <systolic/log.h>
#include <systolic/saving.h>
#include <systolic/schedules.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "model/saving_access.h"
#include "saving/keras_io.h"

namespace systolic {

namespace keras_io {

// ---- training config ---------------------------------------------------------------------------------------

json training_config(const Model& model) {
  auto& opt = const_cast<Model&>(model).optimizer();
  json oc = {{"name", opt.name()}, {"learning_rate", opt.learning_rate()}};
  if (opt.learning_rate_schedule())
    oc["learning_rate"] = optimizers::schedules::serialize(*opt.learning_rate_schedule());
  if (auto* a = dynamic_cast<const optimizers::Adam*>(&opt)) {
    oc["beta_1"] = a->beta_1();
    oc["beta_2"] = a->beta_2();
    oc["epsilon"] = a->epsilon();
    oc["amsgrad"] = false;
  } else if (auto* s = dynamic_cast<const optimizers::SGD*>(&opt)) {
    oc["momentum"] = s->momentum();
    oc["nesterov"] = s->nesterov();
  } else if (auto* r = dynamic_cast<const optimizers::RMSprop*>(&opt)) {
    oc["rho"] = r->rho();
    oc["momentum"] = r->momentum();
    oc["epsilon"] = r->epsilon();
    oc["centered"] = false;
  } else {
    fail("save: optimizer '{}' has no Keras config", opt.name());
  }
  auto& loss = model.loss();
  json loss_json = loss.name();
  if (loss.from_logits()) {
    std::string cls = loss.name() == "sparse_categorical_crossentropy" ? "SparseCategoricalCrossentropy"
                                                                       : "CategoricalCrossentropy";
    loss_json = {{"class_name", cls}, {"config", {{"from_logits", true}}}};
  }
  // As Keras metric objects ({"class_name": "SparseCategoricalAccuracy", "config": {"name": "accuracy"}}), the
  // class the name resolved to: tf_keras reads a bare "accuracy" as categorical accuracy (whatever the labels),
  // and Keras 3 cannot call tf_keras's MeanMetricWrapper form; both read this one right.
  json metrics = json::array();
  for (auto* m : saving_access::metrics(model))
    metrics.push_back(
        {{"class_name", m->sparse_labels() ? "SparseCategoricalAccuracy" : "CategoricalAccuracy"},
         {"config", {{"name", m->name()}, {"dtype", "float32"}}}});
  return {{"loss", loss_json},
          {"metrics", metrics},
          {"weighted_metrics", nullptr},
          {"loss_weights", nullptr},
          {"optimizer_config", {{"class_name", opt.name()}, {"config", oc}}}};
}

namespace {

std::unique_ptr<optimizers::Optimizer> optimizer_from_config(const json& oc, const std::string& source) {
  if (!oc.is_object() || !oc.contains("class_name") || !oc["class_name"].is_string())
    fail("{}: training_config: bad optimizer_config", source);
  auto cls = oc["class_name"].get<std::string>();
  if (cls.rfind("Custom>", 0) == 0) cls = cls.substr(7);  // tf.keras 2.11+ writes "Custom>Adam"
  json c = oc.value("config", json::object());
  std::set<std::string> used = {"name", "jit_compile", "is_legacy_optimizer", "ema_momentum",
                                "ema_overwrite_frequency"};
  auto num = [&](const char* key, double fallback) {
    used.insert(key);
    if (!c.contains(key)) return fallback;
    if (!c[key].is_number())
      fail("{}: optimizer {}: '{}' must be a number, got {}", source, cls, key, c[key].dump());
    return c[key].get<double>();
  };
  auto off = [&](const char* key, const json& off_value) {
    used.insert(key);
    if (c.contains(key) && !c[key].is_null() && c[key] != off_value)
      fail("{}: optimizer {}: '{}'={} is not supported", source, cls, key, c[key].dump());
  };
  for (auto* k : {"weight_decay", "clipnorm", "global_clipnorm", "clipvalue", "loss_scale_factor",
                  "gradient_accumulation_steps"})
    off(k, json(nullptr));
  off("use_ema", false);
  off("decay", 0.0);
  optimizers::Schedule schedule;
  if (c.contains("learning_rate") && c["learning_rate"].is_object()) {
    used.insert("learning_rate");
    schedule = optimizers::schedules::from_config(c["learning_rate"], source + ": optimizer " + cls);
  }
  double lr = schedule ? (*schedule)(0) : num("learning_rate", -1);
  if (lr < 0) lr = num("lr", 0.001);  // Keras 2.0 wrote "lr"
  std::unique_ptr<optimizers::Optimizer> opt;
  if (cls == "Adam") {
    off("amsgrad", false);
    opt = std::make_unique<optimizers::Adam>(lr, num("beta_1", 0.9), num("beta_2", 0.999),
                                             num("epsilon", 1e-7));
  } else if (cls == "SGD") {
    used.insert("nesterov");
    bool nesterov = c.value("nesterov", false);
    opt = std::make_unique<optimizers::SGD>(lr, num("momentum", 0.0), nesterov);
  } else if (cls == "RMSprop") {
    off("centered", false);
    opt = std::make_unique<optimizers::RMSprop>(lr, num("rho", 0.9), num("momentum", 0.0),
                                                num("epsilon", 1e-7));
  } else {
    fail("{}: optimizer '{}' is not supported (Adam, SGD, RMSprop)", source, cls);
  }
  for (auto& [k, v] : c.items())
    if (!used.count(k))
      fail("{}: optimizer {}: unsupported option '{}' (value {})", source, cls, k, v.dump());
  opt->set_learning_rate_schedule(schedule);
  return opt;
}

std::unique_ptr<losses::Loss> loss_from_config(const json& l, const std::string& source) {
  if (l.is_string()) {
    try {
      return losses::get(l.get<std::string>());
    } catch (const Error& e) {
      fail("{}: training_config: {}", source, e.what());
    }
  }
  if (l.is_object() && l.contains("class_name")) {
    auto cls = l["class_name"].get<std::string>();
    json c = l.value("config", json::object());
    bool from_logits = c.value("from_logits", false);
    for (auto& [k, v] : c.items())
      if (k != "from_logits" && k != "name" && k != "reduction" && k != "fn" && k != "ignore_class" &&
          k != "axis" && k != "label_smoothing" && k != "dtype")
        fail("{}: loss {}: unsupported option '{}'", source, cls, k);
    if (c.contains("ignore_class") && !c["ignore_class"].is_null())
      fail("{}: loss {}: ignore_class is not supported", source, cls);
    if (c.contains("label_smoothing") && c["label_smoothing"] != 0 && c["label_smoothing"] != 0.0)
      fail("{}: loss {}: label_smoothing is not supported", source, cls);
    if (c.contains("reduction") && c["reduction"] != "auto" && c["reduction"] != "sum_over_batch_size")
      fail("{}: loss {}: reduction {} is not supported", source, cls, c["reduction"].dump());
    if (cls == "SparseCategoricalCrossentropy")
      return std::make_unique<losses::SparseCategoricalCrossentropy>(
          losses::CrossentropyOptions{from_logits});
    if (cls == "CategoricalCrossentropy")
      return std::make_unique<losses::CategoricalCrossentropy>(losses::CrossentropyOptions{from_logits});
    if (cls == "MeanSquaredError") return std::make_unique<losses::MeanSquaredError>();
    fail("{}: loss class '{}' is not supported", source, cls);
  }
  fail("{}: training_config: unsupported loss {}", source, l.dump().substr(0, 200));
}

void collect_metric_names(const json& m, std::vector<std::string>& out, const std::string& source) {
  if (m.is_null()) return;
  if (m.is_string()) {
    out.push_back(m.get<std::string>());
  } else if (m.is_array()) {
    for (auto& x : m) collect_metric_names(x, out, source);
  } else if (m.is_object() && m.contains("config") && m["config"].contains("name")) {
    // tf.keras 2.11+: {"class_name": "MeanMetricWrapper", "config": {"name": ..., "fn": ...}}
    out.push_back(m["config"]["name"].get<std::string>());
  } else {
    fail("{}: training_config: unsupported metric {}", source, m.dump().substr(0, 200));
  }
}

}  // namespace

json compile_config(const Model& model) {
  json tc = training_config(model);
  json oc = tc["optimizer_config"];
  oc["module"] = "keras.optimizers";
  oc["registered_name"] = nullptr;
  oc["config"]["name"] = to_snake_case(oc["class_name"].get<std::string>());
  json loss = tc["loss"];
  if (loss.is_object()) {
    loss["module"] = "keras.losses";
    loss["registered_name"] = nullptr;
  }
  json metrics = json::array();  // the names the user gave, as Keras 3 writes them
  for (auto* m : saving_access::metrics(model)) metrics.push_back(m->name());
  return {{"optimizer", oc},
          {"loss", loss},
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
    // compiled with "adam", and loads it with RMSprop).
    json opt = cc.value("optimizer", json("rmsprop"));
    if (opt.is_string()) {  // a name, as keras.optimizers.get takes it
      static const std::map<std::string, std::string> classes = {
          {"adam", "Adam"}, {"sgd", "SGD"}, {"rmsprop", "RMSprop"}};
      auto it = classes.find(opt.get<std::string>());
      opt = {{"class_name", it == classes.end() ? opt : json(it->second)}, {"config", json::object()}};
    }
    json tc = {{"loss", cc["loss"]}, {"optimizer_config", opt}};
    for (auto* k : {"metrics", "weighted_metrics", "loss_weights"})
      if (cc.contains(k)) tc[k] = cc[k];
    compile_from_training_config(model, tc, source + ": compile_config");
  });
}

void compile_from_training_config(Model& model, const json& tc, const std::string& source) {
  json_checked(source, [&] {
    if (!tc.is_object() || !tc.contains("loss") || !tc.contains("optimizer_config"))
      fail("{}: training_config needs \"loss\" and \"optimizer_config\"", source);
    auto opt = optimizer_from_config(tc["optimizer_config"], source);
    auto loss = loss_from_config(tc["loss"], source);
    std::vector<std::string> metrics;
    if (tc.contains("metrics")) collect_metric_names(tc["metrics"], metrics, source);
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
