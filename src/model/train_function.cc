// TrainFunction (train_function.h): a training step as five plain calls, and its recording (a CUDA graph, an XLA
// program).
#include "model/train_function.h"

#include <fmt/format.h>
#include <systolic/log.h>

#include "distribute/replica_group.h"
#include "model/model_state.h"

namespace systolic {

TrainFunction::TrainFunction(ModelState& model) : s_(model) {}
TrainFunction::~TrainFunction() = default;

void TrainFunction::step(std::int64_t n) {
  s_.forward(n, /*training=*/true);
  s_.compute_loss(n, s_.optimizer->scale_loss(1.0 / double(n)));
  s_.compute_metrics(n);
  s_.backward(n);
  s_.apply_gradients();
}

void TrainFunction::inference_step(std::int64_t n, bool testing) {
  auto body = [&] {
    s_.forward(n, /*training=*/false);
    if (testing) {
      s_.compute_loss(n);
      s_.compute_metrics(n);
    }
  };
  if (!s_.device().is_xla()) return body();
  auto& program = inference_[{n, testing}];
  if (!program) {
    program = std::make_unique<StepGraph>(s_.device());
    std::string why;
    if (!program->capture(body, why))
      log_line(fmt::format("systolic: {} steps of {} samples run op by op, not as one XLA program: {}",
                           testing ? "test" : "predict", n, why));
  }
  if (program->captured())
    program->replay();
  else
    body();
}

int TrainFunction::phase() const {
  return s_.accumulates_next_step() ? 1 : 0;
}

void TrainFunction::invalidate() {
  inference_.clear();
  for (auto& g : graphs_)
    if (g) g->reset();
  graph_batch_ = -1;  // begin_fit makes new graphs, for the model's device
  warm_[0] = warm_[1] = 0;
  refused_ = false;
}

void TrainFunction::begin_fit(bool device_batches, bool graphs, std::int64_t full_batch) {
  if (!graphs_[0] || graph_batch_ != full_batch) {
    invalidate();
    for (auto& g : graphs_) g = std::make_unique<StepGraph>(s_.device());
    graph_batch_ = full_batch;
  }
  device_batches_ = device_batches;
  full_batch_ = full_batch;
  recordings_ = 0;
  // A CUDA graph reads the batch where ops built it on the device; an XLA program reads the input buffers, which
  // a host batch is copied into before each step.
  const bool recordable = device_batches || s_.device().is_xla();
  use_graph_ = recordable && graphs && graphs_[0]->supported() && !refused_;
  mode_ = recordable && !s_.device().is_cpu() ? (graphs_[0]->captured() && use_graph_ ? "graph" : "eager")
                                              : "host";
  reason_ = s_.replicas                ? "replicas: batches built on the host and split"
            : !recordable              ? "batches built on the host"
            : !graphs                  ? "step graphs turned off (FitOptions::step_graph)"
            : !graphs_[0]->supported() ? "step graphs need a GPU or an XLA device"
            : refused_                 ? reason_
                                       : "";
}

void TrainFunction::record(StepGraph& graph, std::int64_t n) {
  s_.make_step_scalars();
  std::string why;
  if (graph.capture([&] { step(n); }, why)) {
    // The layers' saved buffers of this batch size: an eager step of another size makes new ones, and the graph
    // would otherwise replay into memory the allocator had handed on (a MultiHeadAttention and a
    // GroupedQueryAttention layer trained on a GPU with a smaller last batch found it: the epoch's row order was
    // overwritten).
    graph.keep(s_.layer_buffers());
    ++recordings_;
    mode_ = "graph";
    reason_.clear();
  } else {
    use_graph_ = false;
    refused_ = true;
    reason_ = why;
    log_line(std::string("systolic: training steps run without ") +
             (s_.device().is_xla() ? "a compiled XLA program: " : "a CUDA graph: ") + why);
  }
}

void TrainFunction::operator()(const Batch& batch) {
  if (s_.replicas) {
    s_.replicas->train_step(batch.x, batch.y, batch.w);
    if (s_.replicas->runs_programs()) {
      mode_ = "graph";
      reason_.clear();
    }
    return;
  }
  if (!batch.x.empty()) s_.set_batch(batch.x, batch.y, batch.w);
  std::int64_t n = batch.size;
  bool replayable = use_graph_ && n == full_batch_;
  // The rate of this step (a schedule's, or one a callback set) goes where the recorded update reads it: a
  // replayed graph runs with it, never recorded again for it.
  s_.optimizer->load_learning_rate();
  // Recording runs nothing: replayed below. A CUDA graph is recorded after a warm-up step made every buffer. A
  // step that only accumulates its gradients has a graph of its own.
  const int p = phase();
  StepGraph& graph = *graphs_[p];
  if (replayable && !graph.captured() && (warm_[p] >= 1 || !graph.needs_warm_up())) record(graph, n);
  if (replayable && graph.captured()) {
    graph.replay();
  } else {
    step(n);
    if (device_batches_ && n == full_batch_) ++warm_[p];
  }
  s_.step_counter().advance();
}

void TrainFunction::run_eagerly(std::int64_t n) {
  s_.optimizer->load_learning_rate();
  step(n);
  s_.step_counter().advance();
}

}  // namespace systolic
