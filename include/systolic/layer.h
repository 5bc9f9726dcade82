// Layer: shapes and parameters. A layer knows its output shape, creates its weights and calls ops; the math
// lives in ops (ops.h), devices behind the op table. The functional graph is made of Nodes, one per call of a
// layer on symbolic inputs (SymbolicTensor, Keras's KerasTensor).
#pragma once

#include <systolic/initializers.h>
#include <systolic/ops.h>
#include <systolic/random.h>
#include <systolic/regularizers.h>
#include <systolic/tensor.h>

#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

namespace systolic {

class Layer;
struct Node;

// The symbolic result of calling a layer: its shape without the batch dimension, and the node that makes it.
class SymbolicTensor {
 public:
  SymbolicTensor() = default;
  explicit SymbolicTensor(std::shared_ptr<Node> node) : node_(std::move(node)) {}
  const Shape& shape() const;
  DType dtype() const;
  const std::shared_ptr<Node>& node() const { return node_; }
  bool defined() const { return node_ != nullptr; }

 private:
  std::shared_ptr<Node> node_;
};

struct Node {
  std::shared_ptr<Layer> layer;
  std::vector<SymbolicTensor> inputs;
  Shape shape;  // output shape without the batch dimension
  DType dtype = DType::float32;
  std::int64_t id = 0;  // creation order: a valid topological order
  // A call of a nested model is flattened into the caller's graph: its layers' nodes are made again on the
  // call's inputs. Those nodes name the nested model as the caller lists it (`container`, a layer of class
  // Functional or Sequential) and the call's training argument (false: inference mode even in fit, as
  // `base(x, training=False)` in Keras).
  std::shared_ptr<Layer> container;
  std::optional<bool> training;
  // Which output of its layer's call the node is. A call of a layer with several outputs (an RNN's return_state:
  // [output, h, c]) makes one node per output: the first runs the layer; each other one (output > 0) takes that
  // first node as its one input and holds the value the first's forward writes (LayerCall::more_outputs).
  int output = 0;
};

struct Weight {
  std::string name;  // "kernel", "bias", "gamma", "moving_mean", ...
  Tensor value;
  Tensor grad;  // trainable weights only
  // Under a mixed policy: value in the layer's compute dtype (bfloat16), refreshed from `value` by the model before
  // each forward; layers pass it where an op wants the data's dtype (kernels of convolutions and dense layers).
  Tensor compute;
  const Tensor& operand() const { return compute.defined() ? compute : value; }
  // Whether the optimizer updates it now (Keras's variable.trainable): created trainable and its layer not
  // frozen. Only these weights live in a model's flat parameter buffer, have a gradient and optimizer slots.
  bool trainable = true;
  // Keras's <name>_regularizer (its penalty joins the training loss) and <name>_constraint (applied after each
  // optimizer update): none unless the layer was given them.
  Regularizer regularizer;
  Constraint constraint;
  // Created trainable (Keras's layer._trainable_variables): trainable again when its layer is unfrozen. It fixes
  // the weight's place in Keras's order, which freezing does not change.
  bool trainable_variable = true;
  // Keras's variable is an int64 (Normalization's count): files store it as int64, its value here is a float.
  bool int64 = false;
};

// What a model's training step hands every layer it calls (the same for the whole step).
struct TrainingStep {
  Tensor counter;   // the training-step counter, float64 [1] on the device (dropout's masks)
  int replica = 0;  // the replica's index under a strategy: each replica draws its own masks
  // The replicas of the step when batch norm is synchronised (the batch-norm ops sum their statistics over
  // them); null otherwise.
  const ops::CrossReplica* replicas = nullptr;
};

// One call of a layer during execution: inputs, the preallocated output, what backward needs.
struct LayerCall {
  std::vector<Tensor> inputs;
  Tensor output;  // [N, node shape]; forward writes it (or rebinds it to a view of an input)
  const TrainingStep* training = nullptr;  // set in training (dropout, batch norm); null at inference
  std::vector<Tensor> saved;               // what the layer's backward needs, kept by its forward
  // Keras's masks: 1 for a step that counts, 0 for padding; [N, the output's shape without its last axis], in the
  // data's dtype. `mask`: the first input's (undefined: none); `output_mask`: where a layer that makes one
  // (makes_mask() or combines_masks()) writes it. `masks`: every input's (undefined for an input without one), for
  // a layer of several inputs of which one at least has a mask (empty otherwise).
  Tensor mask, output_mask;
  std::vector<Tensor> masks;
  // The values before the fused activation, kept when the loss or the activation's gradient needs them (the
  // Layer base's; the output then lives in activated).
  Tensor preactivation, activated;
  Tensor doutput;               // backward input: gradient w.r.t. the output
  std::vector<Tensor> dinputs;  // backward output (=); an undefined entry needs no gradient
  // A layer of several outputs (Layer::more_output_shapes): the outputs after the first, which forward writes (an
  // undefined one is not wanted: nothing reads it), and their gradients, which backward reads (an undefined one is
  // zero: no gradient reached it).
  std::vector<Tensor> more_outputs, more_doutputs;
};

class Layer : public std::enable_shared_from_this<Layer> {
 public:
  virtual ~Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  const std::string& class_name() const { return class_name_; }
  const std::string& name() const { return name_; }
  DType dtype() const { return dtype_; }  // of the variables (weights)
  // Of the computation and the outputs: dtype() unless the layer was made under a mixed precision policy
  // (mixed_bfloat16: bfloat16). dtype_policy() is Keras's policy name ("float32", "mixed_bfloat16").
  DType compute_dtype() const { return compute_dtype_; }
  std::string dtype_policy() const;
  Activation activation() const { return activation_; }
  bool built() const { return built_; }
  // Keras's activity_regularizer (any layer): the penalty of the layer's output, divided by the batch size,
  // joins the loss (regularizers.h).
  const Regularizer& activity_regularizer() const { return activity_regularizer_; }
  void set_activity_regularizer(const Regularizer& r) { activity_regularizer_ = r; }

  // Calls the layer on symbolic inputs: checks them, builds the weights on the first call, returns the output.
  SymbolicTensor operator()(const SymbolicTensor& input);
  virtual SymbolicTensor operator()(const std::vector<SymbolicTensor>& inputs);
  // Every output of one call, in Keras's order (operator() gives the first): one for most layers; an RNN with
  // return_state gives [output, h] or, for an LSTM, [output, h, c].
  virtual std::vector<SymbolicTensor> call_all(const std::vector<SymbolicTensor>& inputs);

  // The output shape for these input shapes (no batch dimension); throws Error naming the layer if they do not fit.
  virtual Shape compute_output_shape(const std::vector<Shape>& input_shapes) const = 0;
  // The shapes of the outputs after the first (none for most layers; an RNN's states with return_state).
  virtual std::vector<Shape> more_output_shapes(const std::vector<Shape>& input_shapes) const {
    (void)input_shapes;
    return {};
  }

  std::vector<Weight>& weights() { return weights_; }  // trainable first, then non-trainable (Keras order)
  const std::vector<Weight>& weights() const { return weights_; }
  virtual std::int64_t count_params() const;
  virtual std::int64_t count_trainable_params() const;
  // A nested model's layers (model.layers); empty for other layers. Their weights are the nested model's.
  virtual std::vector<std::shared_ptr<Layer>> sublayers() const { return {}; }

  // Keras's layer.trainable. Freezing (false) makes every weight non-trainable: the optimizer neither updates
  // nor keeps slots for them and backward computes no gradient for them (gradients still flow through the
  // layer to earlier ones); a frozen BatchNormalization normalises with its moving statistics even in
  // training, as in Keras 3. A model applies the change when it is compiled again (as Keras requires).
  // (Virtual: a nested model's layer answers with its model's flag, which Model::set_trainable changes.)
  virtual bool trainable() const { return trainable_; }
  virtual void set_trainable(bool trainable);

  // Execution (the model calls these): forward, then the fused activation; backward of the activation (unless
  // the gradient given is already w.r.t. the pre-activation values, as a loss computed from logits gives),
  // then the layer's own backward.
  void call_forward(LayerCall& call);
  void call_backward(LayerCall& call, bool grad_is_preactivation);

  // Keras's get_config(): name, trainable, dtype, then the layer's own arguments under Keras's key names (what
  // model.to_json() writes for this layer). Reading them back: layers/config.h.
  virtual void get_config(nlohmann::ordered_json& config) const;

  // Keras's layer.reset_state() (reset_states()): a stateful RNN's kept states back to zeros; no effect on a layer
  // that keeps none.
  virtual void reset_state() {}
  // A layer that keeps rows from call to call (a stateful RNN's states) makes them for batches of `batch` rows here,
  // where the model sizes its buffers: before any step is recorded (a buffer made and zeroed inside a recorded
  // step would be zeroed again at every replay).
  virtual void reserve_batch(std::int64_t batch, Device device, DType dtype) {
    (void)batch;
    (void)device;
    (void)dtype;
  }

  // Keras's adapt(data) of a preprocessing layer (Normalization: the mean and variance of data over every axis
  // but the kept ones): computes the layer's state from data [N, input shape...], building the layer for that
  // input shape if it is not built yet. Other layers refuse.
  virtual void adapt(const Tensor& data);

  // Which inputs need no gradient from this layer's own backward (the model tells, e.g. for a model input).
  virtual bool is_input_layer() const { return false; }
  // Whether forward() already applied the activation (fused into its op); backward still applies its gradient.
  virtual bool fuses_activation() const { return false; }
  // Where Keras 3's object-tree weights files (.weights.h5, a .keras archive's) keep the layer's variables: groups
  // under layers/<key>/, each holding the next `count` weights as datasets 0, 1, ... in order ("vars" with all of
  // them for most layers; an RNN's cell owns them: an empty "vars", then "cell/vars").
  struct VariableGroup {
    std::string path;
    std::size_t count;
  };
  virtual std::vector<VariableGroup> keras3_variable_groups() const { return {{"vars", weights_.size()}}; }
  // The stem of that key: the snake_case name of Keras's Python class, which is the class name its configs carry
  // except where Keras exports a class under another name (GroupQueryAttention's class is GroupedQueryAttention).
  virtual std::string keras3_key() const;
  // Keras's masks (LayerCall::mask). Whether the output carries one, given whether the first input does: a layer
  // that makes one (Embedding with mask_zero, Masking) or passes its input's on (Keras's supports_masking: Dense,
  // activations, dropouts, normalisations; an RNN with return_sequences); every other layer drops it, as Keras's
  // layers that do not support masking do.
  virtual bool output_masked(bool input_masked) const {
    (void)input_masked;
    return makes_mask();
  }
  virtual bool makes_mask() const { return false; }
  // Whether the output carries a mask that the layer computes from its inputs' masks (LayerCall::masks) into
  // LayerCall::output_mask in forward, given which inputs carry one: Keras's merges' compute_mask (Add, Subtract,
  // Average: when every input does; Concatenate: when any does).
  virtual bool combines_masks(const std::vector<bool>& inputs_masked) const {
    (void)inputs_masked;
    return false;
  }
  // Whether output k > 0 of a call of several outputs carries the mask of the call's first input (Bidirectional's
  // backward sequences with merge_mode None; an RNN's states do not).
  virtual bool more_output_masked(int k, bool input_masked) const {
    (void)k;
    (void)input_masked;
    return false;
  }
  // Why a masked input is refused (empty: it is not): a layer that Keras lets read the mask, where systolic does
  // not yet (GlobalAveragePooling1D's average of the unmasked steps, the merges' combined masks).
  virtual std::string mask_refusal() const { return {}; }
  // Keras's layer.autocast: whether the model casts the layer's float inputs to its compute dtype (under mixed
  // precision). Embedding says no: its ids stay in the variables' dtype.
  virtual bool autocast() const { return true; }
  // Whether the layer asks for statistics over the global batch under replicas (Keras's
  // BatchNormalization(synchronized=True)): fit refuses a strategy that does not synchronise batch norm.
  virtual bool synchronized() const { return false; }
  // A Keras 3 operation node (keras.src.ops.numpy.Add, ...: what `x + 3.0` on a symbolic tensor makes) rather
  // than a layer: its module, and the call's arguments as Keras writes them, with null where the input tensor
  // goes (false: a layer, whose call arguments are its inputs alone).
  virtual const char* keras_module() const { return "keras.layers"; }
  virtual bool keras_call_args(nlohmann::ordered_json& args) const {
    (void)args;
    return false;
  }
  // Keras 3's call argument that takes the inputs after the first, as a list (an RNN's "initial_state"; null: they
  // are positional). tf.keras lists them with the first.
  virtual const char* keras_list_argument() const { return nullptr; }
  // Keras 3's keyword arguments of a call that name tensors (MultiHeadAttention's key and attention_mask): inputs
  // after the positional ones, in this order. Empty for most layers.
  virtual std::vector<std::string> keras_tensor_keywords() const { return {}; }
  // Whether a config of the layer can be written for Keras 3 only (tf.keras's call form cannot say its call): by
  // default when its calls name tensors by keyword.
  virtual bool keras3_only() const { return !keras_tensor_keywords().empty(); }
  // A call read from a Keras 3 config: how many tensors it passed by position, the tensor keywords it gave (in
  // keras_tensor_keywords' order) and its other keyword arguments that are not null (training and mask aside). The
  // layer takes them or throws naming what it refuses: the default refuses any keyword.
  virtual void read_keras_call(std::size_t positional, const std::vector<std::string>& tensor_keywords,
                               const nlohmann::ordered_json& options);
  // A call written for Keras 3: its positional args and keyword arguments, from its inputs as written tensors (in
  // input order). False: the default form, every input by position.
  virtual bool keras_call_form(const std::vector<nlohmann::ordered_json>& tensors,
                               nlohmann::ordered_json& args, nlohmann::ordered_json& kwargs) const {
    (void)tensors;
    (void)args;
    (void)kwargs;
    return false;
  }

 protected:
  Layer(std::string class_name, const std::string& name, Activation activation = Activation::linear);
  // Creates the weights for these input shapes (called once, before the first output shape is used).
  virtual void build(const std::vector<Shape>& input_shapes) { (void)input_shapes; }
  // Checks the input shapes and builds the layer for them on the first call (later calls must give the same
  // shapes); returns the output shape.
  Shape build_for(const std::vector<Shape>& input_shapes);
  virtual void forward(LayerCall& call) = 0;
  // Writes dinputs (=) and accumulates weight gradients (+=). call.doutput is w.r.t. the pre-activation values.
  virtual void backward(LayerCall& call) = 0;
  // Expected number of inputs (-1: two or more, as Add and Concatenate take); a layer that takes more optionally
  // (an RNN's initial state) says how many at most.
  virtual int input_count() const { return 1; }
  virtual int max_input_count() const { return input_count(); }

  Weight& add_weight(const std::string& name, Shape shape, const Initializer& initializer,
                     bool trainable = true, const WeightOptions& options = {});
  [[noreturn]] void fail_shape(const std::string& why) const;

  Activation activation_;

 private:
  std::string class_name_;
  std::string name_;
  DType dtype_;
  DType compute_dtype_;
  bool built_ = false;
  bool trainable_ = true;
  std::vector<Shape> built_shapes_;
  std::vector<Weight> weights_;
  Regularizer activity_regularizer_;
};

// A handle to a layer made by a factory in systolic::layers: call it on symbolic tensors, reach the layer with ->.
class LayerRef {
 public:
  LayerRef() = default;
  explicit LayerRef(std::shared_ptr<Layer> layer) : layer_(std::move(layer)) {}
  SymbolicTensor operator()(const SymbolicTensor& input) const { return (*layer_)(input); }
  SymbolicTensor operator()(const std::vector<SymbolicTensor>& inputs) const { return (*layer_)(inputs); }
  // Every output of the call (Layer::call_all): `auto outs = LSTM(8, {.return_state = true}).call_all({x})`.
  std::vector<SymbolicTensor> call_all(const std::vector<SymbolicTensor>& inputs) const {
    return layer_->call_all(inputs);
  }
  Layer* operator->() const { return layer_.get(); }
  Layer& operator*() const { return *layer_; }
  const std::shared_ptr<Layer>& get() const { return layer_; }

 private:
  std::shared_ptr<Layer> layer_;
};

// Keras backend state: the float type new layers compute in (keras.backend.floatx) and the per-class name
// counters (conv2d, conv2d_1, ...), which clear_session() resets.
void set_floatx(DType dtype);
DType floatx();
// zero_based: conv2d, conv2d_1, ...; otherwise input_1, input_2, ... (as tf.keras names inputs).
std::string unique_layer_name(const std::string& snake_prefix, bool zero_based = true);
std::string to_snake_case(const std::string& class_name);  // "MaxPooling2D" -> "max_pooling2d"
void clear_session();
std::int64_t next_node_id();  // ids of new graph nodes: creation order
// Every weight of a layer in Keras's order (layer.weights): its own, or a nested model's, layer after layer.
std::vector<Weight*> all_weights(Layer& layer);

// Keras's mixed precision (keras.mixed_precision.set_global_policy): layers made while the policy is
// "mixed_bfloat16" keep float32 weights and compute in bfloat16 (activations, convolutions and matrix products in
// bfloat16 with float32 accumulation; batch-norm statistics, losses and optimizer state in float32). "float32"
// (the default) restores plain float32 layers. A layer made in a PolicyScope("float32") under a mixed global policy
// computes in float32 (Keras's dtype="float32" on a layer); the model casts its inputs. Both backends run it (the
// CPU widens bfloat16 data to float32 around each op: src/ops/cpu/bf16_emulation.h).
namespace mixed_precision {
void set_global_policy(const std::string& name);  // "float32" or "mixed_bfloat16"; throws Error on others
std::string global_policy();
// Sets the policy for its lifetime (model loading uses it for layers whose config names a policy).
class PolicyScope {
 public:
  explicit PolicyScope(const std::string& name);
  ~PolicyScope();
  PolicyScope(const PolicyScope&) = delete;
  PolicyScope& operator=(const PolicyScope&) = delete;

 private:
  std::string previous_;
};
}  // namespace mixed_precision

// Fills a weight as Keras's initializers do (initializers.h); a seeded initializer draws from its own seed,
// others from `generator`. Throws on unknown names.
void initialize(Tensor& t, const Initializer& initializer, Generator& generator);

}  // namespace systolic
