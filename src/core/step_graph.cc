// StepGraph (step_graph.h): the recorder of the device's kind.
#include "core/step_graph.h"

#include <systolic/error.h>

namespace systolic {

StepGraph::StepGraph(Device device) : device_(device) {
  if (device.is_xla())
    recorder_ = xla_step_recorder(device);
  else if (!device.is_cpu())
    recorder_ = cuda_step_recorder(device);
}

StepGraph::~StepGraph() = default;

bool StepGraph::capture(const std::function<void()>& step, std::string& why) {
  if (!recorder_) {
    why = device_.is_cpu() ? "graphs need a CUDA or an XLA device" : "this build has no CUDA support";
    return false;
  }
  return recorder_->capture(step, why);
}

bool StepGraph::capture_replicas(int replicas, const std::function<void(int)>& step, std::string& why) {
  if (!recorder_) {
    why = "one program over several devices needs XLA devices";
    return false;
  }
  return recorder_->capture_replicas(replicas, step, why);
}

void StepGraph::replay() {
  SYSTOLIC_CHECK(captured(), "StepGraph::replay: nothing was captured");
  recorder_->replay();
}

void StepGraph::reset() {
  if (recorder_) recorder_->reset();
  kept_.clear();
}

#if !SYSTOLIC_HAS_CUDA
std::unique_ptr<StepRecorder> cuda_step_recorder(Device) {
  return nullptr;
}
#endif

}  // namespace systolic
