#include "layers/config.h"

#include <map>

namespace systolic::layers {

namespace {
// Keras's initializer classes and the snake_case names systolic's initialize() takes.
const std::map<std::string, std::string>& initializer_classes() {
  static const std::map<std::string, std::string> m = {
      {"Zeros", "zeros"},
      {"Ones", "ones"},
      {"GlorotUniform", "glorot_uniform"},
      {"GlorotNormal", "glorot_normal"},
      {"HeUniform", "he_uniform"},
      {"HeNormal", "he_normal"},
      {"LecunUniform", "lecun_uniform"},
      {"LecunNormal", "lecun_normal"},
      {"RandomUniform", "random_uniform"},
      {"RandomNormal", "random_normal"},
  };
  return m;
}

std::string dtype_from_config(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  // Keras 3: {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"}}; tf.keras mixed
  // precision: {"class_name": "Policy", "config": {"name": "mixed_float16"}}.
  if (v.is_object() && v.contains("config") && v["config"].is_object() && v["config"].contains("name") &&
      v["config"]["name"].is_string())
    return v["config"]["name"].get<std::string>();
  return v.dump();
}
}  // namespace

ConfigReader::ConfigReader(const json& config, std::string class_name)
    : config_(config), class_name_(std::move(class_name)) {
  if (!config_.is_object()) fail("layer of class {}: its config is not a JSON object", class_name_);
  if (config_.contains("name") && config_["name"].is_string()) name_ = config_["name"].get<std::string>();
  used_.insert("name");
  // Common keys: trainable (layer_from_config applies it), dtype (the float type layers compute in).
  if (has("trainable")) {
    auto& t = at("trainable");
    if (!t.is_boolean()) fail_option("trainable", "expected true or false, got " + t.dump());
    trainable_ = t.get<bool>();
  }
  if (has("dtype") && !config_["dtype"].is_null()) {
    auto d = dtype_from_config(at("dtype"));
    // layer_from_config made the layer under the policy its config names (a mixed one included).
    if (d != dtype_name(floatx()) && d != "mixed_bfloat16")
      fail_option("dtype", "'" + d + "' is not supported (layers compute in " +
                               std::string(dtype_name(floatx())) + " or under the mixed_bfloat16 policy)");
  } else {
    used_.insert("dtype");
  }
}

bool ConfigReader::has(const std::string& key) const {
  return config_.contains(key);
}

const json& ConfigReader::at(const std::string& key) {
  used_.insert(key);
  return config_.at(key);
}

const json& ConfigReader::get_raw(const std::string& key) {
  if (!has(key)) fail_option(key, "missing");
  return at(key);
}

void ConfigReader::fail_option(const std::string& key, const std::string& why) const {
  fail("layer '{}' ({}): option '{}': {}", name_, class_name_, key, why);
}

int ConfigReader::get_int(const std::string& key, int fallback) {
  if (!has(key)) return fallback;
  auto& v = at(key);
  if (v.is_number_integer()) return v.get<int>();
  if (v.is_number_float() && v.get<double>() == static_cast<int>(v.get<double>()))
    return static_cast<int>(v.get<double>());
  fail_option(key, "expected an integer, got " + v.dump());
}

double ConfigReader::get_double(const std::string& key, double fallback) {
  if (!has(key)) return fallback;
  auto& v = at(key);
  if (!v.is_number()) fail_option(key, "expected a number, got " + v.dump());
  return v.get<double>();
}

bool ConfigReader::get_bool(const std::string& key, bool fallback) {
  if (!has(key)) return fallback;
  auto& v = at(key);
  if (!v.is_boolean()) fail_option(key, "expected true or false, got " + v.dump());
  return v.get<bool>();
}

std::string ConfigReader::get_string(const std::string& key, const std::string& fallback) {
  if (!has(key)) return fallback;
  auto& v = at(key);
  if (!v.is_string()) fail_option(key, "expected a string, got " + v.dump());
  return v.get<std::string>();
}

std::optional<Pair> ConfigReader::get_optional_pair(const std::string& key) {
  if (!has(key) || config_[key].is_null()) {
    if (has(key)) at(key);
    return std::nullopt;
  }
  auto& v = at(key);
  if (v.is_number_integer()) return Pair{v.get<int>(), v.get<int>()};
  if (v.is_array() && v.size() == 2 && v[0].is_number_integer() && v[1].is_number_integer())
    return Pair{v[0].get<int>(), v[1].get<int>()};
  fail_option(key, "expected an integer or a list of two integers, got " + v.dump());
}

Pair ConfigReader::get_pair(const std::string& key, Pair fallback) {
  auto p = get_optional_pair(key);
  return p ? *p : fallback;
}

std::optional<std::int64_t> ConfigReader::get_optional_int(const std::string& key) {
  if (!has(key) || config_[key].is_null()) {
    if (has(key)) at(key);
    return std::nullopt;
  }
  auto& v = at(key);
  if (!v.is_number_integer()) fail_option(key, "expected an integer or null, got " + v.dump());
  return v.get<std::int64_t>();
}

std::string ConfigReader::get_initializer(const std::string& key, const std::string& fallback) {
  if (!has(key)) return fallback;
  auto& v = at(key);
  if (v.is_string()) {
    auto s = v.get<std::string>();
    for (auto& [cls, snake] : initializer_classes())
      if (s == snake || s == cls) return snake;
    fail_option(key, "initializer '" + s + "' is not supported");
  }
  if (!v.is_object() || !v.contains("class_name") || !v["class_name"].is_string())
    fail_option(key, "expected an initializer, got " + v.dump());
  auto cls = v["class_name"].get<std::string>();
  if (cls == "VarianceScaling") return variance_scaling(key, v.value("config", json::object()));
  auto it = initializer_classes().find(cls);
  if (it == initializer_classes().end()) fail_option(key, "initializer class '" + cls + "' is not supported");
  // The arguments systolic's initializers use, with Keras's defaults; a different value is not supported.
  json defaults = json::object();
  if (cls == "RandomUniform") defaults = {{"minval", -0.05}, {"maxval", 0.05}};
  if (cls == "RandomNormal") defaults = {{"mean", 0.0}, {"stddev", 0.05}};
  if (v.contains("config") && v["config"].is_object()) {
    for (auto& [k, value] : v["config"].items()) {
      if (k == "seed") {
        if (!value.is_null())
          fail_option(key, "a seeded initializer (seed " + value.dump() + ") is not supported");
        continue;
      }
      if ((k == "input_axes" || k == "output_axes") && value.is_null()) continue;  // Keras 3.x: default fans
      if (!defaults.contains(k)) fail_option(key, cls + " argument '" + k + "' is not supported");
      if (!value.is_number() || value.get<double>() != defaults[k].get<double>())
        fail_option(key, cls + " with " + k + "=" + value.dump() + " is not supported (only " +
                             defaults[k].dump() + ")");
    }
  }
  return it->second;
}

// Keras 2.0-2.2 wrote glorot_uniform and friends as VarianceScaling(scale, mode, distribution).
std::string ConfigReader::variance_scaling(const std::string& key, const json& c) {
  double scale = c.value("scale", 1.0);
  std::string mode = c.value("mode", "fan_in"), dist = c.value("distribution", "truncated_normal");
  if (c.contains("seed") && !c["seed"].is_null()) fail_option(key, "a seeded initializer is not supported");
  for (auto& [k, v] : c.items())
    if (k != "scale" && k != "mode" && k != "distribution" && k != "seed" &&
        !((k == "input_axes" || k == "output_axes") && v.is_null()))
      fail_option(key, "VarianceScaling argument '" + k + "' is not supported");
  bool uniform = dist == "uniform";
  bool normal = dist == "normal" || dist == "truncated_normal";
  if (scale == 1.0 && mode == "fan_avg" && (uniform || normal))
    return uniform ? "glorot_uniform" : "glorot_normal";
  if (scale == 2.0 && mode == "fan_in" && (uniform || normal)) return uniform ? "he_uniform" : "he_normal";
  if (scale == 1.0 && mode == "fan_in" && (uniform || normal))
    return uniform ? "lecun_uniform" : "lecun_normal";
  fail_option(key, "VarianceScaling(scale=" + std::to_string(scale) + ", mode=" + mode +
                       ", distribution=" + dist + ") is not supported");
}

std::string ConfigReader::get_activation(const std::string& key, const std::string& fallback) {
  if (!has(key)) return fallback;
  auto& v = at(key);
  std::string s;
  if (v.is_string())
    s = v.get<std::string>();
  else if (v.is_null())
    s = "linear";
  else if (v.is_object() && v.contains("class_name") && v["class_name"].is_string())
    s = v["class_name"].get<std::string>();
  else
    fail_option(key, "expected an activation name, got " + v.dump());
  try {
    activation_from_name(s);
  } catch (const Error& e) {
    fail_option(key, e.what());
  }
  return s;
}

void ConfigReader::require_null(const std::string& key) {
  if (!has(key)) return;
  auto& v = at(key);
  if (!v.is_null()) fail_option(key, "not supported (only null), got " + v.dump());
}

void ConfigReader::require_value(const std::string& key, const json& value) {
  if (!has(key)) return;
  auto& v = at(key);
  if (v != value) fail_option(key, "only " + value.dump() + " is supported, got " + v.dump());
}

void ConfigReader::ignore(const std::string& key) {
  if (has(key)) at(key);
}

void ConfigReader::finish() const {
  for (auto& [k, v] : config_.items())
    if (!used_.count(k))
      fail("layer '{}' ({}): unsupported option '{}' (value {})", name_, class_name_, k, v.dump());
}

json initializer_config(const std::string& name) {
  for (auto& [cls, snake] : initializer_classes()) {
    if (snake != name) continue;
    json config = json::object();
    if (cls == "RandomUniform")
      config = {{"minval", -0.05}, {"maxval", 0.05}, {"seed", nullptr}};
    else if (cls == "RandomNormal")
      config = {{"mean", 0.0}, {"stddev", 0.05}, {"seed", nullptr}};
    else if (cls != "Zeros" && cls != "Ones")
      config = {{"seed", nullptr}};
    return {{"module", "keras.initializers"},
            {"class_name", cls},
            {"config", config},
            {"registered_name", nullptr}};
  }
  fail("initializer '{}' has no Keras class", name);
}

void write_kernel_options(json& c, const KernelOptions& o) {
  c["activation"] = o.activation;
  c["use_bias"] = o.use_bias;
  c["kernel_initializer"] = initializer_config(o.kernel_initializer);
  c["bias_initializer"] = initializer_config(o.bias_initializer);
  for (auto* k : {"kernel_regularizer", "bias_regularizer", "activity_regularizer", "kernel_constraint",
                  "bias_constraint"})
    c[k] = nullptr;
}

KernelOptions read_kernel_options(ConfigReader& r) {
  KernelOptions o{.activation = r.get_activation("activation", "linear"),
                  .use_bias = r.get_bool("use_bias", true),
                  .kernel_initializer = r.get_initializer("kernel_initializer", "glorot_uniform"),
                  .bias_initializer = r.get_initializer("bias_initializer", "zeros")};
  for (auto* k : {"kernel_regularizer", "bias_regularizer", "activity_regularizer", "kernel_constraint",
                  "bias_constraint", "lora_rank", "quantization_config"})
    r.require_null(k);
  r.ignore("lora_alpha");  // only used with lora_rank
  return o;
}

json base_config(const Layer& layer) {
  // tf.keras 2.x writes a mixed policy as {"class_name": "Policy", "config": {"name": "mixed_bfloat16"}}.
  json dtype = layer.compute_dtype() == layer.dtype()
                   ? json(std::string(dtype_name(layer.dtype())))
                   : json{{"class_name", "Policy"}, {"config", {{"name", layer.dtype_policy()}}}};
  return {{"name", layer.name()}, {"trainable", layer.trainable()}, {"dtype", dtype}};
}

}  // namespace systolic::layers

namespace systolic {
void Layer::get_config(nlohmann::ordered_json& config) const {
  config = layers::base_config(*this);
}
}  // namespace systolic

namespace systolic::layers {

namespace {
using FromConfig = std::shared_ptr<Layer> (*)(ConfigReader&);
const std::map<std::string, FromConfig>& registry() {
  static const std::map<std::string, FromConfig> m = {
      {"InputLayer", input_layer_from_config},
      {"Conv2D", conv2d_from_config},
      {"Convolution2D", conv2d_from_config},  // Keras 2.0's alias
      {"Dense", dense_from_config},
      {"BatchNormalization", batch_normalization_from_config},
      {"MaxPooling2D", max_pooling2d_from_config},
      {"MaxPool2D", max_pooling2d_from_config},
      {"AveragePooling2D", average_pooling2d_from_config},
      {"AvgPool2D", average_pooling2d_from_config},
      {"GlobalAveragePooling2D", global_average_pooling2d_from_config},
      {"GlobalAvgPool2D", global_average_pooling2d_from_config},
      {"Dropout", dropout_from_config},
      {"Flatten", flatten_from_config},
      {"Activation", activation_from_config},
      {"ReLU", relu_from_config},
      {"LeakyReLU", leaky_relu_from_config},
      {"ELU", elu_from_config},
      {"Softmax", softmax_from_config},
      {"ZeroPadding2D", zero_padding2d_from_config},
      {"Rescaling", rescaling_from_config},
      {"Add", add_from_config},
      {"Concatenate", concatenate_from_config},
  };
  return m;
}
}  // namespace

std::vector<std::string> known_layer_classes() {
  std::vector<std::string> names;
  for (auto& [k, v] : registry()) names.push_back(k);
  return names;
}

std::shared_ptr<Layer> layer_from_config(const std::string& class_name, const json& config) {
  auto it = registry().find(class_name);
  if (it == registry().end()) {
    std::string name = config.is_object() && config.contains("name") && config["name"].is_string()
                           ? config["name"].get<std::string>()
                           : "?";
    std::string known;
    for (auto& k : known_layer_classes()) known += (known.empty() ? "" : ", ") + k;
    fail("layer '{}': unknown layer class '{}' (systolic knows: {})", name, class_name, known);
  }
  ConfigReader reader(config, class_name);
  // A layer whose config names the mixed_bfloat16 policy is made under it (Keras records the policy per layer).
  bool mixed = config.is_object() && config.contains("dtype") && !config["dtype"].is_null() &&
               dtype_from_config(config["dtype"]) == "mixed_bfloat16";
  bool named = config.is_object() && config.contains("dtype") && !config["dtype"].is_null();
  mixed_precision::PolicyScope policy(mixed   ? "mixed_bfloat16"
                                      : named ? "float32"
                                              : mixed_precision::global_policy());
  auto layer = it->second(reader);
  reader.finish();
  if (!reader.trainable()) layer->set_trainable(false);
  return layer;
}

}  // namespace systolic::layers
