// What a Model holds: the graph in topological order, the compiled loss/optimizer/metrics, the flat weight
// buffers, and the execution buffers (sized for the largest batch seen, so a step allocates nothing).
#pragma once

#include <systolic/model.h>

#include <functional>

#include "core/step_graph.h"

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
  // The training-step counter on the model's device (float64 [1]): Adam's t and dropout's masks read it
  // there, so a step captured as a CUDA graph replays correctly. step_on_device mirrors its value on the
  // host.
  Tensor step;
  std::int64_t step_on_device = -1;
  void sync_step_counter();  // makes `step` equal the optimizer's iterations

  std::string step_mode = "host", step_mode_reason;
  // The captured training step (GPU). It holds the addresses of the buffers, so it is dropped whenever they
  // move (ensure_capacity growing, to(), compile()); graph_warm counts the eager full steps since then.
  std::shared_ptr<StepGraph> graph;
  std::int64_t graph_batch = 0;
  double graph_lr = 0;
  bool graph_refused = false;
  int graph_warm = 0;
  void drop_graph() {
    graph.reset();
    graph_warm = 0;
    graph_refused = false;
  }

  // Under a data-parallel strategy (to_accelerator with several replicas or workers): the other replicas and
  // the communicator; null for a model of one replica. Only the chief (worker 0) writes files.
  std::shared_ptr<distribute::ReplicaGroup> replicas;
  bool chief = true;
  // Set on every replica when batch norm is synchronised: sums a small host vector over every replica (layers
  // get it through LayerCall::cross_replica_sum).
  const std::function<void(std::vector<double>&)>* cross_replica_sum = nullptr;

  int replica_index = 0;  // under a strategy, across every worker (dropout masks differ per replica)

  Device device() const { return params.device(); }
  void to(Device device);

  // Builds nodes and layers from inputs/outputs and packs the weights.
  void finalize();
  void pack_weights();

  int input_node() const;
  int output_node() const;
  void check_single_io(const char* what) const;
  void ensure_capacity(std::int64_t n);
  void load_batch(const Tensor& x, const Tensor* y, const std::vector<std::int64_t>& rows);
  // A batch already built in the buffers' dtypes (BatchPipeline): copied into x_buf / y_buf.
  void set_batch(const Tensor& x, const Tensor& y);
  void forward(std::int64_t n, bool training);
  // Loss and metrics of the last forward added to totals; with backward, the gradients too, of grad_scale *
  // the summed loss (0: 1/n, the batch mean).
  void loss_and_metrics(std::int64_t n, bool backward, double grad_scale = 0);
  // A training step in two phases, so replicas can sum their gradients in between: compute_gradients sets
  // grads to the gradient of grad_scale * (sum of the losses of the n samples in the buffers);
  // apply_gradients runs the optimizer on them and advances the step counter. train_step(n) is both with
  // grad_scale 1/n.
  void compute_gradients(std::int64_t n, double grad_scale);
  void apply_gradients();
  void train_step(std::int64_t n);
  void check_xy(const Tensor& x, const Tensor* y, const char* what) const;
};

// The state behind a Model handle (for to_accelerator and the replicas).
struct ModelInternals {
  static std::shared_ptr<ModelState>& state(Model& m) { return m.state_; }
};

}  // namespace systolic
