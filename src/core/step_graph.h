// StepGraph: a training step recorded once as a CUDA graph and replayed (one launch per step instead of ~100
// kernel launches, and no gaps between kernels on the GPU). On the CPU, or in a build without CUDA, it just
// runs the step.
//
// capture(step) records everything `step` queues on the device's stream; nothing runs while recording, so the
// caller replays once right after. A capture is refused (returns false, and the caller runs its steps
// eagerly) when the step allocated or freed device memory while recording (its addresses would be baked into
// the graph) or a CUDA call failed during recording. Values that vary from step to step must therefore live
// in device memory (the step counter, the batch's row indices), and every buffer must exist before the
// capture (a warm-up step).
#pragma once

#include <systolic/device.h>

#include <functional>
#include <memory>
#include <string>

namespace systolic {

class StepGraph {
 public:
  explicit StepGraph(Device device);
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  // Whether graphs are available for this device (a CUDA device in a CUDA build).
  bool supported() const;
  bool captured() const;
  // Records `step`; on refusal, `why` says what went wrong (for the log) and the graph stays empty.
  bool capture(const std::function<void()>& step, std::string& why);
  void replay();  // queues the recorded step on the device's stream
  void reset();

 private:
  Device device_;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace systolic
