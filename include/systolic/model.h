// Model: a functional graph of layer calls (a DAG, so residual and multi-branch nets work) and Sequential.
// compile / fit / evaluate / predict / summary behave as in Keras. A Model is a handle: copies share the
// model.
#pragma once

#include <systolic/layer.h>
#include <systolic/losses.h>
#include <systolic/metrics.h>
#include <systolic/optimizers.h>
#include <systolic/pipeline.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace systolic {

namespace callbacks {
class Callback;  // callbacks.h
}

struct ValidationData {
  Arrays x, y;           // one array per input, one per output (a Tensor for a model of one)
  Tensor sample_weight;  // Keras's (x_val, y_val, val_sample_weight): the validation loss's weights, or none
};

struct FitOptions {
  std::int64_t batch_size = 32;
  int epochs = 1;
  int verbose = 1;  // 0 silent, 1 progress bar, 2 one line per epoch
  double validation_split = 0.0;
  std::optional<ValidationData> validation_data;
  // Keras's validation_freq (validate after epochs 1+k*N, 1-based: the N-th, 2N-th, ...) and
  // validation_batch_size (0: batch_size).
  int validation_freq = 1;
  std::int64_t validation_batch_size = 0;
  bool shuffle = true;
  int initial_epoch = 0;
  // ImageDataGenerator-style augmentation of the training batches (validation data is never augmented).
  Augmentation augmentation;
  // Batches are built on `workers` background threads, up to max_queue_size ahead (0 workers: on the caller).
  int workers = 1;
  int max_queue_size = 10;
  // Where training batches are built. automatic: on a GPU the data set is copied to the device once and every
  // batch is gathered, converted (uint8 -> float) and augmented there, and the step itself is replayed from a
  // captured CUDA graph; on the CPU the threaded BatchPipeline builds them. host_pipeline / on_device force
  // one way (on_device on the CPU runs the GPU path's logic with CPU ops: the two give the same weights).
  enum class Batches { automatic, host_pipeline, on_device };
  Batches batches = Batches::automatic;
  // Replay the training step from a CUDA graph where possible (GPU, on_device batches).
  bool step_graph = true;
  // Called at Keras's points of training (callbacks.h), after fit's progress bar and before its History.
  std::vector<std::shared_ptr<callbacks::Callback>> callbacks;
  // Keras's sample_weight: one number per sample of x ([N] or [N, 1]), how much its loss counts, or for outputs
  // (T, C) one per step ([N, T]: Keras's temporal sample weights, each row's loss times its weight). As in Keras 3
  // the batch's loss is sum(weight * loss) / batch size (a weight of 0 leaves the sample out of the gradient but
  // not of the count) and metrics are not weighted. validation_split splits the weights with the samples.
  Tensor sample_weight;
  // Keras's class_weight: {class: weight}; each training sample weighs its label's class's weight (the class of
  // a one-hot label is its argmax, of a single-value label its rounded value), 1 for a class not named. Not with
  // sample_weight; not applied to validation data.
  std::map<int, double> class_weight;
};

struct EvaluateOptions {
  std::int64_t batch_size = 32;
  int verbose = 1;
  Tensor sample_weight;  // Keras's: one weight per sample of x, how much its loss counts (FitOptions)
  // Called at Keras's points of evaluate (on_test_*: callbacks.h), after the progress bar.
  std::vector<std::shared_ptr<callbacks::Callback>> callbacks;
};

struct PredictOptions {
  std::int64_t batch_size = 32;
  int verbose = 0;
  // Called at Keras's points of predict (on_predict_*: callbacks.h), after the progress bar.
  std::vector<std::shared_ptr<callbacks::Callback>> callbacks;
};

// Keras's History: one value per epoch for each key (loss, metrics, val_loss, val_metrics).
struct History {
  std::vector<int> epoch;
  std::vector<std::string> keys;  // in Keras's order
  std::map<std::string, std::vector<double>> history;
  const std::vector<double>& operator[](const std::string& key) const;
};

// One output's part of compile, for a model of several outputs (Keras's loss, loss_weights and metrics given as
// lists or dicts): the output by name (Model::output_names(), its layer's name) or, left empty, by position; its
// loss (nothing: Keras's None, no loss on it); the loss's weight in the total (Keras's loss_weights; none: 1);
// and its metrics, logged as "<output>_<metric>". The total loss is the sum of each loss times its weight (and
// the regularization losses), and each output's loss is logged as "<output>_loss" when several have one.
// weighted_metrics are Keras's: metrics that fit's and evaluate's sample weights (sample_weight, class_weight) weigh,
// each sample's value counting its weight over the weights' sum (without sample weights, the plain mean); logged
// after every output's metrics, by their names or, where a metric took the name already, as "weighted_<name>". The
// per-sample means, the confusion counts (AUC, Precision, the IoUs, ...) and the F-scores take weights
// (Metric::takes_sample_weights); compile refuses the others (R2Score) there.
struct OutputCompile {
  std::string output;
  losses::LossArg loss;
  std::optional<double> loss_weight;
  std::vector<metrics::MetricArg> metrics;
  std::vector<metrics::MetricArg> weighted_metrics;
};

// model.load_weights(path, {.by_name = true, .skip_mismatch = true}), as in Keras (legacy .h5 files only).
// Which Keras reads a model config systolic writes (model.to_json(), the model_config of a full-model .h5). The
// config is the same for both but for one number: the node index of a nested model's call, which Keras 3 counts
// from 0 and tf.keras from 1 (its node 0 is the model's own). Neither reads the other's: Keras 3.15 cannot load
// tf.keras's own .h5 files of nested models (keras-team/keras#19669), tf.keras cannot load Keras 3's. A model
// without nested models gives the same config for both. A .keras file is Keras 3's alone.
enum class KerasTarget { keras3, tf_keras };
struct SaveOptions {
  KerasTarget keras = KerasTarget::keras3;
};

struct LoadWeightsOptions {
  bool by_name = false;  // match layers by name instead of by order
  bool skip_mismatch =
      false;  // skip layers whose weight count or shapes differ (by_name only), with a warning
};

class ModelState;
struct ModelInternals;

class Model {
 public:
  Model(const SymbolicTensor& input, const SymbolicTensor& output, const std::string& name = "");
  Model(const std::vector<SymbolicTensor>& inputs, const std::vector<SymbolicTensor>& outputs,
        const std::string& name = "");
  virtual ~Model();
  Model(const Model&) = default;
  Model& operator=(const Model&) = default;

  const std::string& name() const;
  // model.layers: every layer in order (a functional model includes its InputLayer; Sequential does not).
  std::vector<LayerRef> layers() const;
  LayerRef get_layer(const std::string& name) const;
  std::vector<SymbolicTensor> inputs() const;
  std::vector<SymbolicTensor> outputs() const;
  std::int64_t count_params() const;

  // Keras's model.trainable: set_trainable(false) freezes every layer (nested models too), true unfreezes them.
  // It repacks the trainable weights at once (a compiled model's optimizer state starts afresh, as after
  // compiling again). After layer->set_trainable(...) on a layer of the model, compile again, as Keras requires.
  bool trainable() const;
  void set_trainable(bool trainable);

  // Calls the model as a layer of another model, as Keras's `x = base(inputs, training=False)`: the caller lists
  // it as one layer (class Functional or Sequential) and writes it nested in configs and files; its layers run in
  // the caller's graph, sharing their weights with this model. training=false runs them in inference mode (batch
  // norm with its moving statistics, no dropout) even in fit.
  SymbolicTensor operator()(const SymbolicTensor& input, std::optional<bool> training = std::nullopt) const;
  // The same for a model of several inputs or outputs (Keras's `a, b = base([x, y])`): every output, in order.
  std::vector<SymbolicTensor> call(const std::vector<SymbolicTensor>& inputs,
                                   std::optional<bool> training = std::nullopt) const;
  // The model as a layer (for Sequential::add and the like).
  LayerRef as_layer() const;

  // metrics: names ("accuracy", "auc") or metrics made with options (metrics::AUC({.curve = "PR"})). With several
  // outputs the loss applies to each (as Keras's) and the metrics, if any, are one per output; so are the
  // weighted_metrics (Keras's: weighed by the sample weights, see OutputCompile).
  void compile(const optimizers::Optimizer& optimizer, const losses::Loss& loss,
               const std::vector<metrics::MetricArg>& metrics = {},
               const std::vector<metrics::MetricArg>& weighted_metrics = {});
  void compile(const optimizers::Optimizer& optimizer, const std::string& loss,
               const std::vector<metrics::MetricArg>& metrics = {},
               const std::vector<metrics::MetricArg>& weighted_metrics = {});
  void compile(const std::string& optimizer, const std::string& loss,
               const std::vector<metrics::MetricArg>& metrics = {},
               const std::vector<metrics::MetricArg>& weighted_metrics = {});
  // Every output's loss, weight and metrics: one entry each (model.compile(opt, {{.output = "label", .loss =
  // "sparse_categorical_crossentropy", .metrics = {"accuracy"}}, {.output = "value", .loss = "mse",
  // .loss_weight = 0.5}})).
  void compile(const optimizers::Optimizer& optimizer, const std::vector<OutputCompile>& outputs);
  bool compiled() const;
  optimizers::Optimizer& optimizer();
  // The loss (the first output's that has one).
  const losses::Loss& loss() const;
  // Keras's model.output_names: the names of the layers that make the outputs, in order.
  std::vector<std::string> output_names() const;

  // x: [N, input shape] in any dtype (uint8 images stay uint8 until a batch is built), one array per input
  // ({xa, xb} for two); y: per output, for sparse losses one label per row of the output (any integer-valued
  // dtype): [N] or [N, 1] for an output (C,), [N, T] (or [N, T, 1]) for an output (T, C); else [N, output shape].
  // An output that carries a Keras mask weighs its loss and metrics by it, as Keras does.
  History fit(const Arrays& x, const Arrays& y, const FitOptions& options = {});
  // [loss, metrics...], in Keras's order for evaluate(return_dict=False) (metrics_names()).
  std::vector<double> evaluate(const Arrays& x, const Arrays& y, const EvaluateOptions& options = {});
  // The output of a model of one output.
  Tensor predict(const Arrays& x, const PredictOptions& options = {});
  // Every output, in order (Keras's predict on a model of several outputs).
  std::vector<Tensor> predict_outputs(const Arrays& x, const PredictOptions& options = {});
  // How the last fit ran its steps on a GPU or an XLA device: "graph" (replayed from a captured CUDA graph, or run
  // as one compiled XLA program), "eager" (why: in step_mode_reason), or "host" (the CPU, or host-built batches
  // on a GPU).
  std::string step_mode() const;
  std::string step_mode_reason() const;
  // Keras's model.stop_training: a callback sets it to end fit after the current batch (fit clears it when
  // it starts). stop_evaluating and stop_predicting do the same for evaluate (fit's validation too) and
  // predict, which clear them when they start; predict then returns the rows of the batches done.
  bool stop_training() const;
  void set_stop_training(bool stop);
  bool stop_evaluating() const;
  void set_stop_evaluating(bool stop);
  bool stop_predicting() const;
  void set_stop_predicting(bool stop);
  // Names of what evaluate returns, in its order: loss, then the metrics (then each output's loss, for several).
  std::vector<std::string> metrics_names() const;

  // One training step on one batch (Keras's train_on_batch): returns evaluate's values of that batch.
  std::vector<double> train_on_batch(const Arrays& x, const Arrays& y);

  // Keras's model.summary() table.
  std::string summary_string() const;
  void summary() const;

  // Keras files (src/io). save_weights: a path ending ".weights.h5" writes Keras 3's layout, any other
  // (".h5", ".hdf5") the legacy tf.keras layout; weights on a device are copied to the host first; the file
  // is written to a temporary name and renamed, so a failure never leaves a broken file behind. load_weights
  // reads both layouts and full-model files. save picks the format from the name (the one place that does):
  // ".keras" a Keras 3 zip (config.json with compile_config, metadata.json, model.weights.h5 with the optimizer
  // state), ".h5"/".hdf5" a legacy full model (config, training config, weights and optimizer state), and
  // ".weights.h5" the weights alone (as save_weights); systolic::load_model (saving.h) and Keras's load_model
  // read the full models back.
  void save_weights(const std::string& path) const;
  void load_weights(const std::string& path, const LoadWeightsOptions& options = {});
  void save(const std::string& path, const SaveOptions& options = {}) const;
  // Keras's model.to_json():
  // {"class_name": "Functional" or "Sequential", "config": ..., "keras_version", ...}.
  std::string to_json(int indent = -1, KerasTarget keras = KerasTarget::keras3) const;
  bool is_sequential() const;

  // Where the model's weights live and its steps run. to() moves weights, optimizer state and buffers (the
  // seed's "TPU model" is made by to_accelerator in distribute.h, which copies the model first).
  Device device() const;
  void to(Device device);

  // Keras's model.get_weights() / set_weights(): every weight of every layer of model.layers, in Keras's order
  // (each layer's trainable then non-trainable weights), as host copies. set_weights checks the count and
  // shapes (Error naming the weight); under replicas it sets every replica (a collective across workers: every
  // worker calls it, and the chief's values win).
  std::vector<Tensor> get_weights() const;
  void set_weights(const std::vector<Tensor>& weights);
  // tf.keras's model.reset_states(): every stateful layer's states (Layer::reset_state) back to zeros, on every
  // replica.
  void reset_states();

  // The flat buffers that hold every trainable weight and its gradient (weights are views into them).
  Tensor& trainable_parameters();
  Tensor& gradients();

 protected:
  friend struct ModelInternals;
  Model();
  std::shared_ptr<ModelState> state_;
};

// Sequential({layers::Input({28, 28, 1}), layers::Conv2D(...), ...}) or add() one at a time.
class Sequential : public Model {
 public:
  using Item = std::variant<SymbolicTensor, LayerRef>;
  explicit Sequential(const std::vector<Item>& items = {}, const std::string& name = "");
  void add(const Item& item);
};

}  // namespace systolic
