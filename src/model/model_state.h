// What a Model holds: the graph in topological order, the compiled loss/optimizer/metrics, the flat weight
// buffers, the execution buffers (sized for the largest batch seen, so a step allocates nothing), and the
// train function that runs fit's steps. The calls a training step is made of (forward, compute_loss,
// compute_metrics, backward, apply_gradients) are separate, as in llm.c: train_function.cc and the replicas
// (distribute/replica_group.cc) call them in that order.
#pragma once

#include <systolic/model.h>

#include <functional>
#include <optional>

#include "distribute/replica.h"
#include "model/loss_terms.h"
#include "model/train_function.h"

namespace systolic {

namespace distribute {
class ReplicaGroup;
}

struct NodeExec {
  std::shared_ptr<Node> node;
  std::vector<int> inputs;  // indices of the producing nodes
  bool is_input = false;
  bool needs_grad = false;  // some trainable weight lies at or before this node
  LayerCall call;
  // The node's compute dtype (its layer's policy; an input node holds the batch in the model's dtype): its
  // buffers' dtype. Keras autocasts a layer's floating inputs to its compute dtype: an input made in another
  // dtype (a float32 layer under mixed_bfloat16, the layer after it) is cast into cast_in first, and its
  // gradient cast back.
  DType dtype = DType::float32;
  Tensor out_buf, grad_buf;     // [capacity, shape]
  std::vector<Tensor> scratch;  // per input: a second gradient into an already written buffer goes here first
  std::vector<Tensor> cast_in,
      cast_grad;  // per input whose dtype differs: the cast input; its gradient, cast
  // Keras's mask of the output: the node that made it (this one, or the one whose mask it passes on; -1: none), and
  // where a node that makes one keeps it ([capacity, its output shape without the last axis]).
  int mask_from = -1;
  Tensor mask_buf;
  // A call of several outputs (Node::output): the first's node lists the nodes of the others (-1: one the graph does
  // not use), whose buffers its forward writes and its backward reads; those nodes run nothing themselves.
  std::vector<int> more_outputs;
  bool runs_layer() const { return !is_input && node->output == 0; }
};
// The shape of a node's mask: its output's without the last axis.
inline Shape mask_shape(const NodeExec& e) {
  auto dims = e.node->shape.dims();
  if (!dims.empty()) dims.pop_back();
  return Shape(dims);
}

// One output of a compiled model (Keras's CompileLoss and CompileMetrics entries for it): its node, Keras's name
// for it (the output layer's), its loss (null: none, Keras's None) with the loss's weight in the total, its
// metrics, and the buffer its labels are loaded into.
struct OutputHead {
  int node = -1;
  std::string name;
  std::unique_ptr<losses::Loss> loss;
  std::optional<double> loss_weight;  // Keras's loss_weights entry (none: 1)
  std::vector<std::unique_ptr<metrics::Metric>> metrics;
  std::vector<std::unique_ptr<metrics::Metric>> weighted_metrics;  // Keras's weighted_metrics for it
  // Where its sums are in ModelState::totals: its own loss sum (-1: counted in totals[0], the one loss of the
  // model), its metrics' states from metric_at on, its weighted metrics' from weighted_at on.
  std::int64_t loss_slot = -1, metric_at = 0, weighted_at = 0;
  // int32 labels for a sparse loss, one per row of the output ([capacity, output shape without its last axis]),
  // else [capacity, output shape] in its dtype.
  Tensor y_buf;
  // Its output carries a Keras mask (mask_node: the node whose mask_buf holds it, or -1): its loss weighs each row
  // by it (losses::LossArgs::mask), and so do its metrics that read it (Metric::weighs_by_mask), whose values are
  // then over the unmasked rows: over the sums at mask_at (the mask's) and mask_at + 1 (the mask times the sample
  // weights, the weighted metrics'), each a count of rows that rows_per_sample turns into samples. mask_w holds
  // the metrics' weights of a batch (ops::mask_weights).
  int mask_node = -1;
  std::int64_t mask_at = -1;
  double rows_per_sample = 1;
  Tensor mask_w;
  // Its node feeds other layers: its loss is computed from the output values (the other layers' gradients are
  // w.r.t. them too), never from the output layer's logits.
  bool feeds_layers = false;
  bool grad_is_preactivation = false;  // what compute_loss wrote into the node's gradient (the logits')
  double weight() const { return loss_weight.value_or(1.0); }
};

// A model's state is also one replica of it under a strategy (distribute/replica.h: the interface the replicas
// are driven through).
class ModelState final : public distribute::Replica {
 public:
  std::string name;
  bool sequential = false;
  std::vector<SymbolicTensor> inputs, outputs;
  std::vector<NodeExec> nodes;
  std::vector<std::shared_ptr<Layer>> layers;  // model.layers order
  DType dtype = DType::float32;  // the inputs' (x_bufs'): the compute dtype of the first layer with weights
  // Whether any layer computes in `t` (bfloat16: a mixed policy somewhere in the model).
  bool computes_in(DType t) const;

  std::unique_ptr<optimizers::Optimizer> optimizer;
  // One per output, in the model's order, once compiled (empty before).
  std::vector<OutputHead> heads;
  bool compiled() const { return !heads.empty(); }
  // Whether each output with a loss keeps its own sum (Keras logs "<output>_loss" for each when several outputs
  // have a loss; a single loss with a loss weight keeps its own too); totals[0] then holds the loss terms only.
  bool separate_losses = false;
  // The names of the logs, in Keras 3's order: "loss", the compiled metrics as CompileMetrics.result() names them
  // ("<output>_<metric>" when the model has several outputs; a name already shown gets _1, _2, ...: ["mae",
  // "mae"] logs mae and mae_1, the metrics keep their names in files), then "<output>_loss" for each output's
  // loss when several outputs have one.
  std::vector<std::string> log_names() const;
  // Keras's evaluate(return_dict=False) order of those logs (Trainer._flatten_metrics_in_order): the names of
  // model.metrics that are logs ("loss", the metrics' own names, the outputs' losses), then the other logs
  // sorted; each log once (Keras lists a metric name given twice twice). As indices into log_names().
  std::vector<std::size_t> evaluate_order() const;
  // The metrics of every output, in order.
  std::vector<const metrics::Metric*> all_metrics() const;
  // The loss and metric values of the totals `t` over `seen` samples, one per log_names() entry.
  std::vector<double> log_values(const double* t, double seen) const;

  Tensor params, grads;  // every trainable weight, flat; weights are views into these
  // Mixed precision: params in the mixed layers' compute dtype (Weight::compute of those layers views it).
  Tensor params_compute;
  // Casts every weight's value into its compute copy (Weight::compute), frozen weights included; forward() does,
  // before each batch.
  void refresh_compute_weights();
  DType variable_dtype() const {
    for (auto* l : weight_layers())
      if (!l->is_input_layer()) return l->dtype();
    return dtype;
  }
  // The layers that own the weights, in Keras's weight order: model.layers with nested models opened up.
  std::vector<Layer*> weight_layers() const;
  // The model as a layer of other models (made on the first call of the model on symbolic tensors).
  std::weak_ptr<Layer> as_layer;

  std::int64_t capacity = 0;
  std::vector<Tensor> x_bufs;  // one per input: [capacity, input shape] in dtype
  // Keras's sample weights of the batch ([capacity, weight_shape], weight_dtype()) while fit or evaluate weighs its
  // samples (weigh_samples(true)); undefined otherwise, when the loss counts every sample once. weight_shape: ()
  // for one weight per sample, or the outputs' rows ((T,) for outputs (T, C): Keras's temporal sample weights).
  Tensor w_buf;
  bool weighted = false;
  Shape weight_shape;
  // Turns the sample weights on or off (invalidating a recorded step when that changes), one per sample or of the
  // per-sample shape given: fit and evaluate do, for their data. While on, a batch loaded without weights (fit's
  // validation) weighs each sample 1.
  void weigh_samples(bool on, const Shape& per_sample = Shape());
  // On, of the weights' per-sample shape, for defined weights ([N, ...]); off for undefined ones.
  void weigh_samples_like(const Tensor& weights);
  // The weights' dtype: float64 for a float64 (first) output, float32 otherwise (Keras casts them to the loss's
  // dtype).
  DType weight_dtype() const;
  // float64: the loss sum (with separate_losses: the loss terms' only, then each output's loss sum), then the
  // metrics' states (OutputHead::loss_slot, metric_at), the weighted metrics' (weighted_at), and with weighted
  // metrics the sample weights' sum, their denominator (weight_sum_slot; 0 while batches carry no weights).
  Tensor totals;
  std::int64_t weight_sum_slot = -1;
  // What compile registered besides the loss and the optimizer (loss_terms.h): the regularizers' loss terms and
  // the constraints' post-update hooks, collected by pack_weights.
  TrainingTerms terms;
  void collect_training_terms();
  // Runs fit's training steps; keeps what outlives one fit (the step recorded as a CUDA graph, how the last
  // fit's steps ran). The buffers a recorded step points at move in ensure_capacity, to() and compile(),
  // which invalidate it.
  TrainFunction train_function{*this};
  // Keras's model.stop_training / stop_evaluating / stop_predicting: a callback sets one, and fit, evaluate or
  // predict stops after the current batch.
  bool stop_training = false, stop_evaluating = false, stop_predicting = false;
  // Where the running fit is, for BackupAndRestore (backup_and_restore.cc) to save, and where it resumes.
  struct FitProgress {
    std::uint64_t seed = 0;  // the fit's: epoch e's order and augmentation come from (seed, e)
    std::int64_t samples = 0, batch_size = 0, steps = 0;
    int epoch = 0;             // the epoch running
    std::int64_t batches = 0;  // its batches done
    // The epoch's loss and metric sums so far (over every replica): what its logs are made of.
    std::function<std::vector<double>()> totals;
    // Set in on_train_begin by a callback that restored a backup (Keras's model._initial_epoch): fit starts
    // epoch `epoch` after its first `batches` batches, with `seed` and these sums, as the backed-up fit was.
    struct Resume {
      int epoch = 0;
      std::int64_t batches = 0;
      std::uint64_t seed = 0;
      std::vector<double> totals;
    };
    std::optional<Resume> resume;
  };
  FitProgress fit;

  // Under a data-parallel strategy (to_accelerator with several replicas or workers): the other replicas and
  // the communicator; null for a model of one replica. Only the chief (worker 0) writes files.
  std::shared_ptr<distribute::ReplicaGroup> replicas;
  bool chief = true;
  // What a training forward hands the layers (LayerCall::training): the step counter's device copy, and under
  // a strategy the replica's index across every worker (dropout masks differ per replica) and, when batch norm
  // is synchronised, the replicas it sums over (set by the ReplicaGroup).
  TrainingStep training_step;

  Device device() const { return params.device(); }
  void to(Device device);

  // Keras's model.trainable (set_trainable sets it on every layer too).
  bool trainable = true;
  // Each weight's `trainable` when the weights were last packed (model.layers order).
  std::vector<bool> packed_trainable;
  // The trainable weights in params, in order: their shapes and Keras paths (an optimizer's clipnorm clips each
  // one's gradient; Adafactor's slots are shaped by them).
  std::vector<optimizers::TrainableVariable> trainable_variables;

  // Builds nodes and layers from inputs/outputs and packs the weights.
  void finalize();
  // Packs the trainable weights into params/grads (frozen ones keep storage of their own), marks the nodes
  // backward visits, builds the optimizer's slots for the trainable weights and collects the loss terms and
  // post-update hooks.
  void pack_weights();
  // Throws, naming the layer, when a layer was frozen or unfrozen since the weights were packed.
  void check_trainable(const char* what) const;

  // The nodes of the model's inputs and outputs, in order.
  std::vector<int> input_nodes() const;
  std::vector<int> output_nodes() const;
  // Grows the buffers to n samples (invalidating the train function's recorded step when they move).
  void ensure_capacity(std::int64_t n);
  // Every buffer the layers keep from call to call (LayerCall::saved), made for the batch size of their last call:
  // what a recorded step must hold on to (StepGraph::keep).
  std::vector<Tensor> layer_buffers() const;
  // Rows of x (one array per input; and y, one per output, and the sample weights w: [N] in any float dtype)
  // into the buffers.
  void load_batch(const Arrays& x, const Arrays* y, const std::vector<std::int64_t>& rows,
                  const Tensor* w = nullptr);
  // A batch already built in the buffers' dtypes (BatchPipeline): copied into the input and label buffers (and
  // its sample weights, when defined, into w_buf).
  void set_batch(const Arrays& x, const Arrays& y, const Tensor& w = Tensor());

  // One training step on the n samples in the buffers is five calls (then the step counter advances, outside
  // anything recorded as a CUDA graph):
  //   forward(n, true); compute_loss(n, 1.0 / n); compute_metrics(n); backward(n); apply_gradients();
  // Under replicas each computes its shard's gradients scaled by 1 / the global batch, and the gradients are
  // summed between backward and apply_gradients.
  //
  // Runs the layers in topological order; in training mode they read the step counter's device copy.
  void forward(std::int64_t n, bool training);
  // Adds each output's summed loss of the last forward's n samples to its sum in the totals, with the loss terms
  // (n times the regularization losses: Keras 3's compute_loss adds sum(model.losses) to each batch's loss).
  // With grad_scale > 0 it also writes the gradient of grad_scale * (the outputs' losses, each times its loss
  // weight) into the output nodes' gradient buffers (backward adds the loss terms' gradients), noting for each
  // whether it is the gradient w.r.t. the output layer's pre-activation values (a crossentropy after softmax
  // is computed from the logits), which is what backward needs to know.
  void compute_loss(std::int64_t n, double grad_scale = 0);
  // Adds the metrics of the last forward's n samples to totals[1...].
  void compute_metrics(std::int64_t n);
  // Sets grads to the gradient of the loss whose output gradient compute_loss wrote: the layers in reverse
  // order, gradients of tensors used twice summed.
  void backward(std::int64_t n);
  // The optimizer's update of params from grads; it reads the step count on the device, and does not
  // advance it.
  void apply_gradients();
  // The training step count: the optimizer's (Keras's optimizer.iterations); compiled models only.
  optimizers::StepCounter& step_counter() { return optimizer->iterations_counter(); }
  // The step counter and what the update reads (Optimizer::make_device_values) on the device, made before a step is
  // recorded (a recording reads them there and must not bake their first values in).
  void make_step_scalars() {
    step_counter().on(device());
    optimizer->make_device_values(device());
  }

  // Checks x (one array per input) and y (one per output) against the model, naming what is wrong.
  void check_xy(const Arrays& x, const Arrays* y, const char* what) const;

  // ---- distribute::Replica (model.cc) ----
  Device replica_device() const override { return device(); }
  void join_strategy(int global_index, bool chief, const ops::CrossReplica* sync_batch_norm) override;
  void load_step(const Arrays& x, const Arrays& y, const Tensor& w, std::int64_t begin, std::int64_t end,
                 double learning_rate) override;
  void compute_gradients(std::int64_t rows, std::int64_t global_batch) override;
  void apply_update() override;
  void end_step() override;
  double learning_rate() const override;
  bool accumulates_next_step() const override;
  Tensor& gradient_buffer() override { return grads; }
  Tensor& trainable_buffer() override { return params; }
  Tensor& totals_buffer() override { return totals; }
  std::vector<Tensor*> non_trainable_weights() override;
  std::vector<Tensor*> optimizer_slots() override;
  std::int64_t iterations() const override;
  void set_iterations(std::int64_t iterations) override;
};

// The state behind a replica of a model's group (ReplicaGroup::replica, run): every replica of a model is a
// ModelState.
inline ModelState& state_of(distribute::Replica& replica) {
  return static_cast<ModelState&>(replica);
}

// The state behind a Model handle (for to_accelerator and the replicas).
struct ModelInternals {
  static std::shared_ptr<ModelState>& state(Model& m) { return m.state_; }
  static const std::shared_ptr<ModelState>& state(const Model& m) { return m.state_; }
  static Model handle(std::shared_ptr<ModelState> s) {
    Model m;
    m.state_ = std::move(s);
    return m;
  }
};

// A model used as a layer of another (Keras's nested model: class Functional or Sequential in the caller's
// model.layers). Calling it flattens its graph into the caller's (Node::container names it); it never runs
// itself. Its weights are its layers' (sublayers()), in Keras's order.
class ModelLayer final : public Layer {
 public:
  explicit ModelLayer(std::shared_ptr<ModelState> state);
  Model model() const { return ModelInternals::handle(state_); }
  Shape compute_output_shape(const std::vector<Shape>& input_shapes) const override;
  std::int64_t count_params() const override;
  std::int64_t count_trainable_params() const override;
  std::vector<std::shared_ptr<Layer>> sublayers() const override { return state_->layers; }
  void set_trainable(bool trainable) override;
  // The model's flag: base.set_trainable(...) on the Model handle changes it too.
  bool trainable() const override { return state_->trainable; }
  SymbolicTensor operator()(const std::vector<SymbolicTensor>& inputs) override { return call(inputs, {}); }
  // One call on symbolic inputs: the model's outputs, in its order. call() is for a model of one output.
  std::vector<SymbolicTensor> call_all(const std::vector<SymbolicTensor>& inputs,
                                       std::optional<bool> training);
  std::vector<SymbolicTensor> call_all(const std::vector<SymbolicTensor>& inputs) override {
    return call_all(inputs, std::nullopt);
  }
  SymbolicTensor call(const std::vector<SymbolicTensor>& inputs, std::optional<bool> training);
  int output_count() const { return static_cast<int>(state_->outputs.size()); }
  struct Call {
    std::vector<SymbolicTensor> inputs;
    std::vector<SymbolicTensor> outputs;  // one per output of the model
    std::optional<bool> training;
  };
  const std::vector<Call>& calls() const { return calls_; }

 protected:
  void forward(LayerCall& call) override;
  void backward(LayerCall& call) override;
  int input_count() const override { return static_cast<int>(state_->inputs.size()); }

 private:
  std::shared_ptr<ModelState> state_;
  std::vector<Call> calls_;
};

// The nested model behind a layer, or null for any other layer.
inline const ModelLayer* as_model_layer(const Layer& layer) {
  return dynamic_cast<const ModelLayer*>(&layer);
}

}  // namespace systolic
