// fit's train function (Keras's make_train_function around train_step): one training step on a batch, and
// how steps run. A step is the plain sequence of the model's calls (forward, compute_loss, compute_metrics,
// backward, apply_gradients), after which the step counter advances, once, here.
//
// With batches built on a GPU (EpochIterator::on_device) the step is recorded once as a CUDA graph
// (StepGraph), after an eager warm-up step has made every buffer, and replayed for every later full batch
// (the last, partial batch of an epoch runs eagerly). On an XLA device the first full step is traced into one
// XLA program, compiled, and run for every full batch, the host's batches copied into the input buffers first. Recording runs nothing, and the recorded calls change
// nothing on the host: the counter advances after each replay as after an eager step, so no host state has
// to be put back. A refused recording (the step allocated device memory, a CUDA call failed) is logged once
// and the steps run eagerly; step_mode and step_mode_reason say how the last fit ran (Model::step_mode).
// What changes between steps lives on the device, where the recorded kernels read it: the step counter, and the
// learning rate, which the optimizer loads before every step (a schedule's rate, or one a callback set, reaches a
// replayed graph without recording it again).
// Under replicas a step is the ReplicaGroup's: each replica takes its shard of the host batch, the gradients
// are summed, and every replica applies them and advances its own counter.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "core/step_graph.h"
#include "model/epoch_iterator.h"

namespace systolic {

class ModelState;

class TrainFunction {
 public:
  explicit TrainFunction(ModelState& model);
  ~TrainFunction();
  TrainFunction(const TrainFunction&) = delete;
  TrainFunction& operator=(const TrainFunction&) = delete;

  // Before a fit's first step: whether its batches are built on the model's device (only those steps can be
  // replayed), whether graphs are wanted (FitOptions::step_graph), and the samples of a full batch.
  void begin_fit(bool device_batches, bool graphs, std::int64_t full_batch);
  // One step of fit. A batch built on the host is copied into the model's buffers first (under replicas,
  // split among them); an undefined one is already there.
  void operator()(const Batch& batch);
  // One eager step on the n samples in the model's buffers (train_on_batch).
  void run_eagerly(std::int64_t n);
  // One inference step on the n samples in the model's input buffers (Keras's test_step with `testing`: the
  // loss and metric sums; its predict_step without: the outputs). On an XLA device it runs as one program per
  // batch size and kind, traced and compiled at its first use; elsewhere op by op.
  void inference_step(std::int64_t n, bool testing);
  // The buffers a recorded step points at have moved (ensure_capacity grew them, to(), compile()): the next
  // replayed step is recorded again, after a warm-up step.
  void invalidate();

  // How the last fit ran its steps: "graph", "eager" (why: reason()), or "host" (the CPU, host batches).
  const std::string& step_mode() const { return mode_; }
  const std::string& step_mode_reason() const { return reason_; }
  // How many times the last fit recorded its step as a graph (1 when every replay reused one recording; 2 with
  // gradient accumulation, whose steps that only accumulate have a graph of their own).
  int recordings() const { return recordings_; }

 private:
  // forward .. apply_gradients: what a graph records.
  void step(std::int64_t n);
  void record(StepGraph& graph, std::int64_t n);
  // Which graph the coming step replays: 0 for a step that updates, 1 for one that only accumulates its gradients.
  int phase() const;

  ModelState& s_;
  std::unique_ptr<StepGraph> graphs_[2];  // by phase()
  // The inference programs, by batch size and kind (testing); one that could not be recorded stays empty.
  std::map<std::pair<std::int64_t, bool>, std::unique_ptr<StepGraph>> inference_;
  std::int64_t graph_batch_ = 0;  // the full batch the graph is for
  bool refused_ = false;          // a recording failed: eager steps until the buffers move
  int recordings_ = 0;
  int warm_[2] = {0, 0};  // eager full steps of each phase since the buffers last moved
  bool device_batches_ = false, use_graph_ = false;
  std::int64_t full_batch_ = 0;
  std::string mode_ = "host", reason_;
};

}  // namespace systolic
