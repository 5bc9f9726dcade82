// Layer configs as Keras serialises them (layer.get_config() / Layer.from_config()). Each layer file writes its
// own arguments (Layer::get_config) and reads them back (a <Class>_from_config function listed in config.cc).
//
// Reading is strict: ConfigReader marks every key it reads; an option that systolic does not implement is
// accepted only with the value that means "off" in Keras (a null regularizer, channels_last, groups 1, ...), and
// finish() rejects any key left unread. Errors name the layer, its class and the option.
#pragma once

#include <systolic/layers.h>
#include <systolic/regularizers.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>

namespace systolic::layers {

using json = nlohmann::ordered_json;

class ConfigReader {
 public:
  ConfigReader(const json& config, std::string class_name);
  const std::string& class_name() const { return class_name_; }
  const std::string& name() const { return name_; }
  bool trainable() const { return trainable_; }  // the common key "trainable" (default true)

  bool has(const std::string& key) const;
  int get_int(const std::string& key, int fallback);
  double get_double(const std::string& key, double fallback);
  bool get_bool(const std::string& key, bool fallback);
  std::string get_string(const std::string& key, const std::string& fallback);
  Pair get_pair(const std::string& key, Pair fallback);  // an int n (n, n) or a list of two
  std::optional<Pair> get_optional_pair(const std::string& key);
  std::optional<std::int64_t> get_optional_int(const std::string& key);
  // An int n ([n]) or a non-empty list of ints; absent or null: none.
  std::optional<std::vector<std::int64_t>> get_optional_int_list(const std::string& key);
  // A 1-D layer's size: an int n or a list of one ([n], as Keras writes kernel_size, strides and pool_size).
  int get_size1(const std::string& key, int fallback);
  std::optional<int> get_optional_size1(const std::string& key);  // absent or null: none
  // A 2-D layer's size (get_pair), or with one_d a 1-D layer's (get_size1) as (1, n): the 2-D classes' 1-D modes
  // (DepthwiseConv1D, SeparableConv1D, Conv1DTranspose) run along W with an H axis of size 1.
  Pair get_pair_or_size1(const std::string& key, int fallback, bool one_d);
  // An int, (rows, cols) or ((top, bottom), (left, right)), as Keras accepts for ZeroPadding2D and Cropping2D.
  Padding2D get_padding2d(const std::string& key, Padding2D fallback);
  Initializer get_initializer(const std::string& key, const Initializer& fallback);
  std::string get_activation(const std::string& key, const std::string& fallback);
  const json& get_raw(const std::string& key);  // marks it read; throws when absent
  // A wrapper's serialized layer ({"class_name", "config"}, and Keras 3's module, registered_name, build_config):
  // checked, then returned whole.
  const json& get_serialized_layer(const std::string& key);
  // regul: Keras's regularizer and constraint objects (null or absent: none), and both of one weight:
  // get_weight_options("kernel") reads kernel_regularizer and kernel_constraint.
  Regularizer get_regularizer(const std::string& key);
  Constraint get_constraint(const std::string& key);
  WeightOptions get_weight_options(const std::string& prefix);

  // Options that systolic does not implement: absent or null.
  void require_null(const std::string& key);
  // Absent, or exactly this value (e.g. data_format "channels_last", groups 1).
  void require_value(const std::string& key, const json& value);
  void ignore(const std::string& key);  // a key with no effect on the computation
  // Throws naming the first key that no getter read.
  void finish() const;

  [[noreturn]] void fail_option(const std::string& key, const std::string& why) const;

 private:
  const json& at(const std::string& key);
  const json& config_;
  std::string class_name_, name_;
  bool trainable_ = true;
  std::set<std::string> used_;
};

// The arguments Conv2D and Dense share, in Keras's key order: activation, use_bias, the initializers, the
// regularizers and the constraints.
struct KernelOptions {
  std::string activation = "linear";
  bool use_bias = true;
  Initializer kernel_initializer = "glorot_uniform";
  Initializer bias_initializer = "zeros";
  WeightOptions kernel = {}, bias = {};
};
void write_kernel_options(json& config, const KernelOptions& o);
KernelOptions read_kernel_options(ConfigReader& r);

// Keras's serialised initializer, e.g. {"module": "keras.initializers", "class_name": "GlorotUniform", ...}.
json initializer_config(const Initializer& initializer);
// The common keys every layer config starts with: name, trainable, dtype.
json base_config(const Layer& layer);

// regul: Keras's serialised regularizers and constraints ({"module": "keras.regularizers", "class_name": "L2",
// "config": {"l2": 0.01}, "registered_name": null}; tf.keras's {"class_name", "config"}; a name such as "l2"):
// read (throwing Error on what is not supported) and written as Keras 3 writes them (null for none), through their
// registries (regularizers::deserialize / serialize, src/regularizers/registry.cc).
Regularizer regularizer_from_config(const json& value);
json regularizer_config(const Regularizer& r);
Constraint constraint_from_config(const json& value);
json constraint_config(const Constraint& c);
// Writes <prefix>_regularizer for each weight, then <prefix>_constraint for each (Keras's key order):
// write_regularizers(config, {{"kernel", &kernel}, {"bias", &bias}}).
void write_regularizers(json& config,
                        std::initializer_list<std::pair<const char*, const WeightOptions*>> weights);

// Keras's "axis" of LayerNormalization, UnitNormalization and Softmax: an int or a non-empty list of ints (absent:
// fallback); is_list says which the config gave, so that it is written back so.
std::vector<int> read_axis(ConfigReader& r, int fallback, bool& is_list);

// The settings of a kernel and a bias that Keras's EinsumDense, MultiHeadAttention and GroupedQueryAttention write
// in this order: kernel_initializer, bias_initializer, the two regularizers, activity_regularizer, the two
// constraints. O: an options struct with those fields (EinsumDenseOptions, MultiHeadAttentionOptions).
template <class O>
void write_weight_settings(json& c, const O& o, const Regularizer& activity) {
  c["kernel_initializer"] = initializer_config(o.kernel_initializer);
  c["bias_initializer"] = initializer_config(o.bias_initializer);
  c["kernel_regularizer"] = regularizer_config(o.kernel_regularizer);
  c["bias_regularizer"] = regularizer_config(o.bias_regularizer);
  c["activity_regularizer"] = regularizer_config(activity);
  c["kernel_constraint"] = constraint_config(o.kernel_constraint);
  c["bias_constraint"] = constraint_config(o.bias_constraint);
}
template <class O>
void read_weight_settings(ConfigReader& r, O& o) {
  o.kernel_initializer = r.get_initializer("kernel_initializer", "glorot_uniform");
  o.bias_initializer = r.get_initializer("bias_initializer", "zeros");
  o.kernel_regularizer = r.get_regularizer("kernel_regularizer");
  o.bias_regularizer = r.get_regularizer("bias_regularizer");
  o.activity_regularizer = r.get_regularizer("activity_regularizer");
  o.kernel_constraint = r.get_constraint("kernel_constraint");
  o.bias_constraint = r.get_constraint("bias_constraint");
}

// The keyword options of a Keras 3 call of an attention layer (Layer::read_keras_call's `options`): whether it asks
// for a causal mask (use_causal_mask) and for the scores as a second output (return_attention_scores); anything
// else is refused naming `layer` (src/layers/multi_head_attention.cc).
struct AttentionCall {
  bool causal = false, scores = false;
};
AttentionCall attention_call(const Layer& layer, const json& options);
// The same keyword options as a Keras 3 call writes them (only those that are not Keras's defaults).
void write_attention_call(const AttentionCall& call, json& kwargs);

// A layer from its Keras class name and config (the "config" object of a serialised layer). Unknown classes and
// unsupported options throw, naming them.
std::shared_ptr<Layer> layer_from_config(const std::string& class_name, const json& config);
// A Keras 3 operation node of keras.src.ops.numpy (Add, Subtract, Multiply, Divide, TrueDivide) applied to one
// tensor and one number, from its class, config and the call's args ([tensor, number] or [number, tensor]): a
// layer computing x*scale + shift (src/layers/numpy_operation.cc). Other operations throw, naming them.
std::shared_ptr<Layer> numpy_operation_from_entry(const std::string& class_name, const json& config,
                                                  const json& args);
// The class names layer_from_config knows.
std::vector<std::string> known_layer_classes();

// One per layer class (defined in the layer's own file).
std::shared_ptr<Layer> input_layer_from_config(ConfigReader& r);
std::shared_ptr<Layer> conv2d_from_config(ConfigReader& r);
std::shared_ptr<Layer> conv1d_from_config(ConfigReader& r);
std::shared_ptr<Layer> max_pooling1d_from_config(ConfigReader& r);
std::shared_ptr<Layer> average_pooling1d_from_config(ConfigReader& r);
std::shared_ptr<Layer> global_average_pooling1d_from_config(ConfigReader& r);
std::shared_ptr<Layer> global_max_pooling1d_from_config(ConfigReader& r);
std::shared_ptr<Layer> zero_padding1d_from_config(ConfigReader& r);
std::shared_ptr<Layer> cropping1d_from_config(ConfigReader& r);
std::shared_ptr<Layer> upsampling1d_from_config(ConfigReader& r);
std::shared_ptr<Layer> spatial_dropout1d_from_config(ConfigReader& r);
std::shared_ptr<Layer> embedding_from_config(ConfigReader& r);
std::shared_ptr<Layer> masking_from_config(ConfigReader& r);
std::shared_ptr<Layer> simple_rnn_from_config(ConfigReader& r);
std::shared_ptr<Layer> lstm_from_config(ConfigReader& r);
std::shared_ptr<Layer> gru_from_config(ConfigReader& r);
std::shared_ptr<Layer> bidirectional_from_config(ConfigReader& r);
std::shared_ptr<Layer> time_distributed_from_config(ConfigReader& r);
std::shared_ptr<Layer> multi_head_attention_from_config(ConfigReader& r);
std::shared_ptr<Layer> grouped_query_attention_from_config(ConfigReader& r);
std::shared_ptr<Layer> attention_from_config(ConfigReader& r);
std::shared_ptr<Layer> additive_attention_from_config(ConfigReader& r);
std::shared_ptr<Layer> einsum_dense_from_config(ConfigReader& r);
std::shared_ptr<Layer> depthwise_conv1d_from_config(ConfigReader& r);
std::shared_ptr<Layer> conv1d_transpose_from_config(ConfigReader& r);
std::shared_ptr<Layer> separable_conv1d_from_config(ConfigReader& r);
std::shared_ptr<Layer> dense_from_config(ConfigReader& r);
std::shared_ptr<Layer> batch_normalization_from_config(ConfigReader& r);
std::shared_ptr<Layer> max_pooling2d_from_config(ConfigReader& r);
std::shared_ptr<Layer> average_pooling2d_from_config(ConfigReader& r);
std::shared_ptr<Layer> global_average_pooling2d_from_config(ConfigReader& r);
std::shared_ptr<Layer> dropout_from_config(ConfigReader& r);
std::shared_ptr<Layer> flatten_from_config(ConfigReader& r);
std::shared_ptr<Layer> activation_from_config(ConfigReader& r);
std::shared_ptr<Layer> relu_from_config(ConfigReader& r);
std::shared_ptr<Layer> leaky_relu_from_config(ConfigReader& r);
std::shared_ptr<Layer> elu_from_config(ConfigReader& r);
std::shared_ptr<Layer> softmax_from_config(ConfigReader& r);
std::shared_ptr<Layer> zero_padding2d_from_config(ConfigReader& r);
std::shared_ptr<Layer> rescaling_from_config(ConfigReader& r);
std::shared_ptr<Layer> add_from_config(ConfigReader& r);
std::shared_ptr<Layer> concatenate_from_config(ConfigReader& r);
// norm
std::shared_ptr<Layer> layer_normalization_from_config(ConfigReader& r);
std::shared_ptr<Layer> unit_normalization_from_config(ConfigReader& r);
std::shared_ptr<Layer> normalization_from_config(ConfigReader& r);
std::shared_ptr<Layer> layer_scale_from_config(ConfigReader& r);
std::shared_ptr<Layer> multiply_from_config(ConfigReader& r);
std::shared_ptr<Layer> subtract_from_config(ConfigReader& r);
std::shared_ptr<Layer> average_from_config(ConfigReader& r);
std::shared_ptr<Layer> maximum_from_config(ConfigReader& r);
std::shared_ptr<Layer> minimum_from_config(ConfigReader& r);
std::shared_ptr<Layer> reshape_from_config(ConfigReader& r);
std::shared_ptr<Layer> permute_from_config(ConfigReader& r);
std::shared_ptr<Layer> repeat_vector_from_config(ConfigReader& r);
std::shared_ptr<Layer> spatial_dropout2d_from_config(ConfigReader& r);
// regul
std::shared_ptr<Layer> activity_regularization_from_config(ConfigReader& r);
// conv area
std::shared_ptr<Layer> depthwise_conv2d_from_config(ConfigReader& r);
std::shared_ptr<Layer> separable_conv2d_from_config(ConfigReader& r);
std::shared_ptr<Layer> cropping2d_from_config(ConfigReader& r);
std::shared_ptr<Layer> global_max_pooling2d_from_config(ConfigReader& r);
std::shared_ptr<Layer> conv2d_transpose_from_config(ConfigReader& r);
std::shared_ptr<Layer> upsampling2d_from_config(ConfigReader& r);
// augment (branch augment)
std::shared_ptr<Layer> gaussian_noise_from_config(ConfigReader& r);
std::shared_ptr<Layer> gaussian_dropout_from_config(ConfigReader& r);
std::shared_ptr<Layer> random_flip_from_config(ConfigReader& r);
std::shared_ptr<Layer> random_translation_from_config(ConfigReader& r);
std::shared_ptr<Layer> random_rotation_from_config(ConfigReader& r);
std::shared_ptr<Layer> random_zoom_from_config(ConfigReader& r);
std::shared_ptr<Layer> random_contrast_from_config(ConfigReader& r);
std::shared_ptr<Layer> random_crop_from_config(ConfigReader& r);

}  // namespace systolic::layers
