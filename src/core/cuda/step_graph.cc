// StepGraph with CUDA graphs: stream capture of the device's stream, instantiate, launch.
#include "core/step_graph.h"

#include <fmt/format.h>

#include "core/cuda/check.h"
#include "core/cuda/runtime.h"

namespace systolic {

struct StepGraph::Impl {
  cudaGraphExec_t exec = nullptr;
};

StepGraph::StepGraph(Device device) : device_(device), impl_(std::make_unique<Impl>()) {}

StepGraph::~StepGraph() {
  reset();
}

bool StepGraph::supported() const {
  return !device_.is_cpu() && device_available(device_);
}
bool StepGraph::captured() const {
  return impl_->exec != nullptr;
}

void StepGraph::reset() {
  if (impl_->exec) {
    (void)cudaGraphExecDestroy(impl_->exec);
    impl_->exec = nullptr;
  }
}

bool StepGraph::capture(const std::function<void()>& step, std::string& why) {
  reset();
  if (!supported()) {
    why = "graphs need a CUDA device";
    return false;
  }
  int index = device_.index();
  cuda::set_device(index);
  auto stream = static_cast<cudaStream_t>(cuda::stream(index));
  auto& alloc = cuda::allocator(index);
  auto before = alloc.stats();
  SYSTOLIC_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  std::string error;
  try {
    step();
  } catch (const std::exception& e) {
    error = e.what();
  }
  cudaGraph_t graph = nullptr;
  cudaError_t end = cudaStreamEndCapture(stream, &graph);
  auto after = alloc.stats();
  if (error.empty() && end != cudaSuccess)
    error = fmt::format("cudaStreamEndCapture: {}", cudaGetErrorString(end));
  if (error.empty() &&
      (after.allocations != before.allocations || after.deallocations != before.deallocations))
    error = fmt::format("the step allocated device memory while being captured ({} allocations, {} frees)",
                        after.allocations - before.allocations, after.deallocations - before.deallocations);
  if (error.empty()) {
    cudaError_t e = cudaGraphInstantiate(&impl_->exec, graph, 0);
    if (e != cudaSuccess) {
      error = fmt::format("cudaGraphInstantiate: {}", cudaGetErrorString(e));
      impl_->exec = nullptr;
    }
  }
  if (graph) (void)cudaGraphDestroy(graph);
  if (!error.empty()) {
    (void)cudaGetLastError();  // a failed capture leaves a sticky status for the next call
    why = error;
    reset();
    return false;
  }
  return true;
}

void StepGraph::replay() {
  SYSTOLIC_CHECK(impl_->exec, "StepGraph::replay: nothing was captured");
  auto stream = static_cast<cudaStream_t>(cuda::stream(device_.index()));
  SYSTOLIC_CUDA_CHECK(cudaGraphLaunch(impl_->exec, stream));
}

}  // namespace systolic
