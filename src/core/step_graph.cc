// StepGraph where no CUDA backend is built (CPU only): nothing is captured.
#include "core/step_graph.h"

#if !SYSTOLIC_HAS_CUDA

#include <systolic/error.h>

namespace systolic {

struct StepGraph::Impl {};

StepGraph::StepGraph(Device device) : device_(device) {}
StepGraph::~StepGraph() = default;
bool StepGraph::supported() const {
  return false;
}
bool StepGraph::captured() const {
  return false;
}
bool StepGraph::capture(const std::function<void()>&, std::string& why) {
  why = "this build has no CUDA support";
  return false;
}
void StepGraph::replay() {
  fail("StepGraph::replay: nothing was captured");
}
void StepGraph::reset() {}

}  // namespace systolic

#endif
