#include "layers/config.h"

#include <map>

namespace systolic::layers {

namespace {
// Keras's initializer classes and the snake_case names systolic's Initializer takes.
const std::map<std::string, std::string>& initializer_classes() {
  static const std::map<std::string, std::string> m = {
      {"Zeros", "zeros"},
      {"Ones", "ones"},
      {"Constant", "constant"},
      {"GlorotUniform", "glorot_uniform"},
      {"GlorotNormal", "glorot_normal"},
      {"HeUniform", "he_uniform"},
      {"HeNormal", "he_normal"},
      {"LecunUniform", "lecun_uniform"},
      {"LecunNormal", "lecun_normal"},
      {"RandomUniform", "random_uniform"},
      {"RandomNormal", "random_normal"},
      {"TruncatedNormal", "truncated_normal"},
      {"VarianceScaling", "variance_scaling"},
      {"Orthogonal", "orthogonal"},
      {"Identity", "identity"},
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

const json& ConfigReader::get_serialized_layer(const std::string& key) {
  const json& v = get_raw(key);
  if (!v.is_object() || !v.contains("class_name") || !v["class_name"].is_string() || !v.contains("config"))
    fail_option(key, "expected a serialized layer {\"class_name\": ..., \"config\": ...}, got " + v.dump());
  for (auto& [k, value] : v.items())
    if (k != "class_name" && k != "config" && k != "module" && k != "registered_name" && k != "build_config")
      fail_option(key, "unexpected key '" + k + "'");
  return v;
}

void ConfigReader::fail_option(const std::string& key, const std::string& why) const {
  fail("layer '{}' ({}): option '{}': {}", name_, class_name_, key, why);
}

Padding2D ConfigReader::get_padding2d(const std::string& key, Padding2D fallback) {
  if (!has(key)) return fallback;
  auto& v = at(key);
  auto is_pair = [](const json& j) {
    return j.is_array() && j.size() == 2 && j[0].is_number_integer() && j[1].is_number_integer();
  };
  if (v.is_number_integer()) return Padding2D(v.get<int>());
  if (is_pair(v)) return Padding2D(Pair{v[0].get<int>(), v[1].get<int>()});
  if (v.is_array() && v.size() == 2 && is_pair(v[0]) && is_pair(v[1]))
    return Padding2D(Pair{v[0][0].get<int>(), v[0][1].get<int>()},
                     Pair{v[1][0].get<int>(), v[1][1].get<int>()});
  fail_option(key, "expected an int, two ints or two pairs, got " + v.dump());
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

std::optional<int> ConfigReader::get_optional_size1(const std::string& key) {
  if (!has(key) || config_[key].is_null()) {
    if (has(key)) at(key);
    return std::nullopt;
  }
  auto& v = at(key);
  if (v.is_number_integer()) return v.get<int>();
  if (v.is_array() && v.size() == 1 && v[0].is_number_integer()) return v[0].get<int>();
  fail_option(key, "expected an int or a list of one int, got " + v.dump());
}

int ConfigReader::get_size1(const std::string& key, int fallback) {
  return get_optional_size1(key).value_or(fallback);
}

Pair ConfigReader::get_pair_or_size1(const std::string& key, int fallback, bool one_d) {
  return one_d ? Pair{1, get_size1(key, fallback)} : get_pair(key, {fallback, fallback});
}

std::optional<std::vector<std::int64_t>> ConfigReader::get_optional_int_list(const std::string& key) {
  if (!has(key) || at(key).is_null()) return std::nullopt;
  const json& v = at(key);
  std::vector<std::int64_t> out;
  if (v.is_number_integer()) out.push_back(v.get<std::int64_t>());
  if (v.is_array())
    for (auto& e : v) {
      if (!e.is_number_integer()) fail_option(key, "expected an int or a list of ints, got " + v.dump());
      out.push_back(e.get<std::int64_t>());
    }
  if (out.empty()) fail_option(key, "expected an int or a list of ints, got " + v.dump());
  return out;
}

std::vector<int> read_axis(ConfigReader& r, int fallback, bool& is_list) {
  is_list = false;
  if (!r.has("axis")) return {fallback};
  is_list = r.get_raw("axis").is_array();
  auto axis = r.get_optional_int_list("axis");
  if (!axis) r.fail_option("axis", "expected an int or a list of ints, got null");
  return std::vector<int>(axis->begin(), axis->end());
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

Initializer ConfigReader::get_initializer(const std::string& key, const Initializer& fallback) {
  if (!has(key)) return fallback;
  auto& v = at(key);
  std::string cls;
  json args = json::object();
  if (v.is_string()) {
    cls = v.get<std::string>();
  } else if (v.is_object() && v.contains("class_name") && v["class_name"].is_string()) {
    cls = v["class_name"].get<std::string>();
    if (v.contains("config") && v["config"].is_object()) args = v["config"];
  } else {
    fail_option(key, "expected an initializer, got " + v.dump());
  }
  Initializer init;
  for (auto& [c, snake] : initializer_classes())
    if (cls == c || cls == snake) init.name = snake;
  if (init.name == "zeros" && cls != "Zeros" && cls != "zeros")
    fail_option(key, "initializer '" + cls + "' is not supported");
  // Every argument Keras writes for the class (Keras 3 and tf.keras), read strictly.
  auto number = [&](const std::string& k, const json& value) {
    if (!value.is_number())
      fail_option(key, cls + " argument '" + k + "' must be a number, got " + value.dump());
    return value.get<double>();
  };
  const std::string& n = init.name;
  bool random = n != "zeros" && n != "ones" && n != "constant" && n != "identity";
  bool fans =
      n.starts_with("glorot") || n.starts_with("he_") || n.starts_with("lecun") || n == "variance_scaling";
  for (auto& [k, value] : args.items()) {
    if (k == "seed" && random) {
      if (value.is_null()) continue;
      if (!value.is_number_integer())
        fail_option(key, "seed must be an integer or null, got " + value.dump());
      init.seed = value.get<std::uint64_t>();
    } else if ((k == "input_axes" || k == "output_axes") && fans && value.is_null()) {
      // Keras 3.x: the default fans
    } else if ((k == "mean" || k == "stddev") && (n == "random_normal" || n == "truncated_normal")) {
      (k == "mean" ? init.mean : init.stddev) = number(k, value);
    } else if ((k == "minval" || k == "maxval") && n == "random_uniform") {
      (k == "minval" ? init.minval : init.maxval) = number(k, value);
    } else if (k == "value" && n == "constant") {
      init.value = number(k, value);
    } else if (k == "gain" && (n == "orthogonal" || n == "identity")) {
      init.gain = number(k, value);
    } else if (n == "variance_scaling" && k == "scale") {
      init.scale = number(k, value);
    } else if (n == "variance_scaling" && (k == "mode" || k == "distribution") && value.is_string()) {
      (k == "mode" ? init.mode : init.distribution) = value.get<std::string>();
    } else {
      fail_option(key, cls + " argument '" + k + "' (value " + value.dump() + ") is not supported");
    }
  }
  if (n == "variance_scaling") {
    // Keras 2.0-2.2 wrote glorot_uniform and friends as VarianceScaling(scale, mode, distribution); "normal" then
    // meant the truncated normal.
    if (init.distribution == "normal") init.distribution = "truncated_normal";
    if (init.mode != "fan_in" && init.mode != "fan_out" && init.mode != "fan_avg")
      fail_option(key, "VarianceScaling mode '" + init.mode + "' is not supported");
    if (init.distribution != "truncated_normal" && init.distribution != "untruncated_normal" &&
        init.distribution != "uniform")
      fail_option(key, "VarianceScaling distribution '" + init.distribution + "' is not supported");
    bool uniform = init.distribution == "uniform", avg = init.mode == "fan_avg", in = init.mode == "fan_in";
    bool truncated = init.distribution == "truncated_normal";
    std::string named = init.scale == 1.0 && avg  ? (uniform     ? "glorot_uniform"
                                                     : truncated ? "glorot_normal"
                                                                 : "")
                        : init.scale == 2.0 && in ? (uniform     ? "he_uniform"
                                                     : truncated ? "he_normal"
                                                                 : "")
                        : init.scale == 1.0 && in ? (uniform     ? "lecun_uniform"
                                                     : truncated ? "lecun_normal"
                                                                 : "")
                                                  : "";
    if (!named.empty()) {
      Initializer simple = named;
      simple.seed = init.seed;
      return simple;
    }
  }
  return init;
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

json initializer_config(const Initializer& init) {
  for (auto& [cls, snake] : initializer_classes()) {
    if (snake != init.name) continue;
    json seed = init.seed ? json(*init.seed) : json(nullptr);
    json config = json::object();
    if (cls == "RandomUniform")
      config = {{"seed", seed}, {"minval", init.minval}, {"maxval", init.maxval}};
    else if (cls == "RandomNormal" || cls == "TruncatedNormal")
      config = {{"seed", seed}, {"mean", init.mean}, {"stddev", init.stddev}};
    else if (cls == "Constant")
      config = {{"value", init.value}};
    else if (cls == "Orthogonal")
      config = {{"seed", seed}, {"gain", init.gain}};
    else if (cls == "VarianceScaling")
      config = {
          {"seed", seed}, {"scale", init.scale}, {"mode", init.mode}, {"distribution", init.distribution}};
    else if (cls != "Zeros" && cls != "Ones" &&
             cls != "Identity")  // Keras 3.15 writes Identity's config as {}
      config = {{"seed", seed}};
    return {{"module", "keras.initializers"},
            {"class_name", cls},
            {"config", config},
            {"registered_name", nullptr}};
  }
  fail("initializer '{}' has no Keras class", init.name);
}

void write_kernel_options(json& c, const KernelOptions& o) {
  c["activation"] = o.activation;
  c["use_bias"] = o.use_bias;
  c["kernel_initializer"] = initializer_config(o.kernel_initializer);
  c["bias_initializer"] = initializer_config(o.bias_initializer);
  c["kernel_regularizer"] = regularizer_config(o.kernel.regularizer);
  c["bias_regularizer"] = regularizer_config(o.bias.regularizer);
  if (!c.contains("activity_regularizer")) c["activity_regularizer"] = nullptr;  // base_config wrote one set
  c["kernel_constraint"] = constraint_config(o.kernel.constraint);
  c["bias_constraint"] = constraint_config(o.bias.constraint);
}

KernelOptions read_kernel_options(ConfigReader& r) {
  KernelOptions o{.activation = r.get_activation("activation", "linear"),
                  .use_bias = r.get_bool("use_bias", true),
                  .kernel_initializer = r.get_initializer("kernel_initializer", "glorot_uniform"),
                  .bias_initializer = r.get_initializer("bias_initializer", "zeros"),
                  .kernel = r.get_weight_options("kernel"),
                  .bias = r.get_weight_options("bias")};
  for (auto* k : {"lora_rank", "quantization_config"}) r.require_null(k);
  r.ignore("lora_alpha");  // only used with lora_rank
  return o;
}

// regul: a weight's regularizer and constraint, through their registries (src/regularizers/registry.cc).
Regularizer regularizer_from_config(const json& value) {
  return regularizers::deserialize(value);
}
json regularizer_config(const Regularizer& r) {
  return regularizers::serialize(r);
}
Constraint constraint_from_config(const json& value) {
  return constraints::deserialize(value);
}
json constraint_config(const Constraint& c) {
  return constraints::serialize(c);
}

Regularizer ConfigReader::get_regularizer(const std::string& key) {
  if (!has(key)) return {};
  auto& v = at(key);
  try {
    return regularizers::deserialize(v);
  } catch (const Error& e) {
    fail_option(key, e.what());
  }
}

Constraint ConfigReader::get_constraint(const std::string& key) {
  if (!has(key)) return {};
  auto& v = at(key);
  try {
    return constraints::deserialize(v);
  } catch (const Error& e) {
    fail_option(key, e.what());
  }
}

WeightOptions ConfigReader::get_weight_options(const std::string& prefix) {
  return {.regularizer = get_regularizer(prefix + "_regularizer"),
          .constraint = get_constraint(prefix + "_constraint")};
}

void write_regularizers(json& config,
                        std::initializer_list<std::pair<const char*, const WeightOptions*>> weights) {
  for (auto& [prefix, o] : weights)
    config[std::string(prefix) + "_regularizer"] = regularizer_config(o->regularizer);
  for (auto& [prefix, o] : weights)
    config[std::string(prefix) + "_constraint"] = constraint_config(o->constraint);
}

json base_config(const Layer& layer) {
  // tf.keras 2.x writes a mixed policy as {"class_name": "Policy", "config": {"name": "mixed_bfloat16"}}.
  json dtype = layer.compute_dtype() == layer.dtype()
                   ? json(std::string(dtype_name(layer.dtype())))
                   : json{{"class_name", "Policy"}, {"config", {{"name", layer.dtype_policy()}}}};
  json config = {{"name", layer.name()}, {"trainable", layer.trainable()}, {"dtype", dtype}};
  // Keras 3's base Layer.get_config writes activity_regularizer when the layer has one.
  if (layer.activity_regularizer())
    config["activity_regularizer"] = regularizer_config(layer.activity_regularizer());
  return config;
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
      // 1-D
      {"Conv1D", conv1d_from_config},
      {"Convolution1D", conv1d_from_config},
      {"MaxPooling1D", max_pooling1d_from_config},
      {"MaxPool1D", max_pooling1d_from_config},
      {"AveragePooling1D", average_pooling1d_from_config},
      {"AvgPool1D", average_pooling1d_from_config},
      {"GlobalAveragePooling1D", global_average_pooling1d_from_config},
      {"GlobalAvgPool1D", global_average_pooling1d_from_config},
      {"GlobalMaxPooling1D", global_max_pooling1d_from_config},
      {"GlobalMaxPool1D", global_max_pooling1d_from_config},
      {"ZeroPadding1D", zero_padding1d_from_config},
      {"Cropping1D", cropping1d_from_config},
      {"UpSampling1D", upsampling1d_from_config},
      {"SpatialDropout1D", spatial_dropout1d_from_config},
      {"Embedding", embedding_from_config},
      {"Masking", masking_from_config},
      {"SimpleRNN", simple_rnn_from_config},
      {"LSTM", lstm_from_config},
      {"GRU", gru_from_config},
      {"Bidirectional", bidirectional_from_config},
      {"TimeDistributed", time_distributed_from_config},
      {"DepthwiseConv1D", depthwise_conv1d_from_config},
      {"Conv1DTranspose", conv1d_transpose_from_config},
      {"Convolution1DTranspose", conv1d_transpose_from_config},
      {"SeparableConv1D", separable_conv1d_from_config},
      {"SeparableConvolution1D", separable_conv1d_from_config},
      {"Rescaling", rescaling_from_config},
      {"Add", add_from_config},
      {"Concatenate", concatenate_from_config},
      // norm
      {"LayerNormalization", layer_normalization_from_config},
      // attention
      {"MultiHeadAttention", multi_head_attention_from_config},
      {"GroupQueryAttention", grouped_query_attention_from_config},
      {"GroupedQueryAttention", grouped_query_attention_from_config},
      {"Attention", attention_from_config},
      {"AdditiveAttention", additive_attention_from_config},
      {"EinsumDense", einsum_dense_from_config},
      {"UnitNormalization", unit_normalization_from_config},
      {"Normalization", normalization_from_config},
      {"LayerScale", layer_scale_from_config},
      {"Multiply", multiply_from_config},
      {"Subtract", subtract_from_config},
      {"Average", average_from_config},
      {"Maximum", maximum_from_config},
      {"Minimum", minimum_from_config},
      {"Reshape", reshape_from_config},
      {"Permute", permute_from_config},
      {"RepeatVector", repeat_vector_from_config},
      {"SpatialDropout2D", spatial_dropout2d_from_config},
      // regul
      {"ActivityRegularization", activity_regularization_from_config},
      // conv area
      {"DepthwiseConv2D", depthwise_conv2d_from_config},
      {"SeparableConv2D", separable_conv2d_from_config},
      {"SeparableConvolution2D", separable_conv2d_from_config},
      {"Cropping2D", cropping2d_from_config},
      {"GlobalMaxPooling2D", global_max_pooling2d_from_config},
      {"GlobalMaxPool2D", global_max_pooling2d_from_config},
      {"Conv2DTranspose", conv2d_transpose_from_config},
      {"Convolution2DTranspose", conv2d_transpose_from_config},
      {"UpSampling2D", upsampling2d_from_config},
      // augment (branch augment)
      {"GaussianNoise", gaussian_noise_from_config},
      {"GaussianDropout", gaussian_dropout_from_config},
      {"RandomFlip", random_flip_from_config},
      {"RandomTranslation", random_translation_from_config},
      {"RandomRotation", random_rotation_from_config},
      {"RandomZoom", random_zoom_from_config},
      {"RandomContrast", random_contrast_from_config},
      {"RandomCrop", random_crop_from_config},
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
  // Every Keras layer takes activity_regularizer (its base class's argument).
  Regularizer activity = reader.get_regularizer("activity_regularizer");
  auto layer = it->second(reader);
  if (activity) layer->set_activity_regularizer(activity);
  reader.finish();
  if (!reader.trainable()) layer->set_trainable(false);
  return layer;
}

}  // namespace systolic::layers
