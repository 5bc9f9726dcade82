// What a Model holds: the graph in topological order, the compiled loss/optimizer/metrics, the flat weight
// buffers, the execution buffers (sized for the largest batch seen, so a step allocates nothing), and the
// train function that runs fit's steps. The calls a training step is made of (forward, compute_loss,
// compute_metrics, backward, apply_gradients) are separate, as in llm.c: train_function.cc and the replicas
// (distribute/replica_group.cc) call them in that order.
#pragma once

#include <systolic/model.h>

#include <functional>

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
  Tensor out_buf, grad_buf;     // [capacity, shape]
  std::vector<Tensor> scratch;  // per input: a second gradient into an already written buffer goes here first
};

class ModelState {
 public:
  std::string name;
  bool sequential = false;
  std::vector<SymbolicTensor> inputs, outputs;
  std::vector<NodeExec> nodes;
  std::vector<std::shared_ptr<Layer>> layers;  // model.layers order
  DType dtype = DType::float32;

  std::unique_ptr<optimizers::Optimizer> optimizer;
  std::unique_ptr<losses::Loss> loss;
  std::vector<std::unique_ptr<metrics::Metric>> metrics;

  Tensor params, grads;   // every trainable weight, flat; weights are views into these
  Tensor params_compute;  // mixed precision: params in the compute dtype (Weight::compute views it)
  DType variable_dtype() const {
    for (auto& l : layers)
      if (!l->is_input_layer()) return l->dtype();
    return dtype;
  }

  std::int64_t capacity = 0;
  Tensor x_buf, y_buf;
  Tensor totals;  // float64 [1 + metrics]: loss sum, metric counts
  // regul: the gradient scale of the last compute_loss (0: none asked), which backward gives the gradients of
  // the regularization losses (weight and activity regularizers).
  double regularization_grad_scale = 0;
  // Runs fit's training steps; keeps what outlives one fit (the step recorded as a CUDA graph, how the last
  // fit's steps ran). The buffers a recorded step points at move in ensure_capacity, to() and compile(),
  // which invalidate it.
  TrainFunction train_function{*this};
  // Keras's model.stop_training: a callback sets it, fit stops after the current batch.
  bool stop_training = false;

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

  // Builds nodes and layers from inputs/outputs and packs the weights.
  void finalize();
  void pack_weights();

  int input_node() const;
  int output_node() const;
  void check_single_io(const char* what) const;
  // Grows the buffers to n samples (invalidating the train function's recorded step when they move).
  void ensure_capacity(std::int64_t n);
  void load_batch(const Tensor& x, const Tensor* y, const std::vector<std::int64_t>& rows);
  // A batch already built in the buffers' dtypes (BatchPipeline): copied into x_buf / y_buf.
  void set_batch(const Tensor& x, const Tensor& y);

  // One training step on the n samples in the buffers is five calls (then the step counter advances, outside
  // anything recorded as a CUDA graph):
  //   forward(n, true); bool pre = compute_loss(n, 1.0 / n); compute_metrics(n); backward(n, pre);
  //   apply_gradients();
  // Under replicas each computes its shard's gradients scaled by 1 / the global batch, and the gradients are
  // summed between backward and apply_gradients.
  //
  // Runs the layers in topological order; in training mode they read the step counter's device copy.
  void forward(std::int64_t n, bool training);
  // Adds the summed loss of the last forward's n samples to totals[0], with n times the regularization losses
  // (Keras 3's compute_loss adds sum(model.losses) to each batch's loss). With grad_scale > 0 it also writes the
  // gradient of grad_scale * that sum into the output node's gradient buffer, and returns whether it is the
  // gradient w.r.t. the output layer's pre-activation values (a crossentropy after softmax is computed from
  // the logits), which is what backward needs to know.
  bool compute_loss(std::int64_t n, double grad_scale = 0);
  // Adds the metrics of the last forward's n samples to totals[1...].
  void compute_metrics(std::int64_t n);
  // Sets grads to the gradient of the loss whose output gradient compute_loss wrote: the layers in reverse
  // order, gradients of tensors used twice summed.
  void backward(std::int64_t n, bool grad_is_preactivation);
  // The optimizer's update of params from grads; it reads the step count on the device, and does not
  // advance it.
  void apply_gradients();
  // The training step count: the optimizer's (Keras's optimizer.iterations); compiled models only.
  optimizers::StepCounter& step_counter() { return optimizer->iterations_counter(); }

  void check_xy(const Tensor& x, const Tensor* y, const char* what) const;
};

// The state behind a Model handle (for to_accelerator and the replicas).
struct ModelInternals {
  static std::shared_ptr<ModelState>& state(Model& m) { return m.state_; }
};

}  // namespace systolic
