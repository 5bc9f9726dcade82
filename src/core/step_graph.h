// StepGraph: a training step recorded once and replayed. On a GPU it is a CUDA graph (one launch per step
// instead of ~100 kernel launches, and no gaps between kernels on the GPU); on an XLA device it is one XLA program
// (the step's ops traced into StableHLO, compiled once, executed per step). On the CPU, or for a device whose kind
// this build lacks, nothing is recorded and the caller runs the step.
//
// capture(step) records what `step` does on the device; nothing runs while recording, so the caller replays once
// right after. A capture is refused (returns false, and the caller runs its steps eagerly) when it cannot be
// recorded: for a CUDA graph, when the step allocated or freed device memory while recording (its addresses would
// be baked into the graph) or a CUDA call failed during recording; for XLA, when an op has no emitter or the
// program does not compile. Values that vary from step to step must therefore live in device memory (the step
// counter, the learning rate, the batch's rows), and for a CUDA graph every buffer must exist before the capture
// (a warm-up step); an XLA program reads the buffers it uses whenever they were made.
#pragma once

#include <systolic/device.h>
#include <systolic/tensor.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace systolic {

// What one kind of device records and replays (core/cuda/step_graph.cc, core/xla/step_program.cc).
class StepRecorder {
 public:
  virtual ~StepRecorder() = default;
  virtual bool captured() const = 0;
  virtual bool capture(const std::function<void()>& step, std::string& why) = 0;
  virtual void replay() = 0;
  virtual void reset() = 0;
  // One SPMD step over several devices (XLA only): see StepGraph::capture_replicas.
  virtual bool capture_replicas(int /*replicas*/, const std::function<void(int)>& /*step*/,
                                std::string& why) {
    why = "one program over several devices needs XLA devices";
    return false;
  }
  // Whether the buffers the recording reads and writes all still exist.
  virtual bool current() const { return true; }
};

class StepGraph {
 public:
  explicit StepGraph(Device device);
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  // Whether steps can be recorded for this device (a CUDA device in a CUDA build, an XLA device).
  bool supported() const { return recorder_ != nullptr; }
  // Whether a recording must follow an eager warm-up step that made every buffer (CUDA graphs).
  bool needs_warm_up() const { return !device_.is_xla(); }
  bool captured() const { return recorder_ && recorder_->captured(); }
  // Records `step`; on refusal, `why` says what went wrong (for the log) and the graph stays empty.
  bool capture(const std::function<void()>& step, std::string& why);
  void replay();  // runs (on a GPU: queues) the recorded step
  void reset();

  // Records one step of data-parallel replicas as one SPMD program (XLA devices; refused elsewhere): step(r) is
  // replica r's part (r = 0 .. replicas-1), on the buffers of its own device (xla:<platform>:r), its collectives
  // (the gradient sum, synchronised batch norm) inside it. Each replica is traced in turn; the traces must be one
  // program, compiled once for `replicas` devices; replay() runs it on all of them at once.
  bool capture_replicas(int replicas, const std::function<void(int)>& step, std::string& why);
  // Whether every buffer the recording reads and writes still exists; when not (a buffer grew or was replaced
  // since), capture again before replaying.
  bool current() const { return recorder_ && recorder_->current(); }

  // Buffers the recording points into whose owners may let them go later: a layer's saved tensors, which it makes
  // again when an eager step (the smaller last batch of an epoch, an evaluation) calls it with another batch size.
  // Held until reset, so that the allocator gives their memory to nothing else while replays still write into it.
  void keep(std::vector<Tensor> buffers) { kept_ = std::move(buffers); }

 private:
  Device device_;
  std::unique_ptr<StepRecorder> recorder_;
  std::vector<Tensor> kept_;
};

// Marks a buffer whose contents need not outlive a recorded step (a layer's activations and gradients): an XLA
// step program then does not return it. No effect on other devices.
void mark_step_scratch(const Tensor& t);

// The recorders: null where this build or this device has none.
std::unique_ptr<StepRecorder> cuda_step_recorder(Device device);
std::unique_ptr<StepRecorder> xla_step_recorder(Device device);

}  // namespace systolic
