// StepGraph's recorder on a GPU: a CUDA graph (stream capture of the device's stream, instantiate, launch).
#include "core/step_graph.h"

#include <fmt/format.h>

#include "core/cuda/check.h"
#include "core/cuda/runtime.h"

namespace systolic {

namespace {

class CudaGraph : public StepRecorder {
 public:
  explicit CudaGraph(Device device) : device_(device) {}
  ~CudaGraph() override { reset(); }

  bool captured() const override { return exec_ != nullptr; }

  void reset() override {
    if (exec_) {
      (void)cudaGraphExecDestroy(exec_);
      exec_ = nullptr;
    }
  }

  bool capture(const std::function<void()>& step, std::string& why) override {
    reset();
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
      cudaError_t e = cudaGraphInstantiate(&exec_, graph, 0);
      if (e != cudaSuccess) {
        error = fmt::format("cudaGraphInstantiate: {}", cudaGetErrorString(e));
        exec_ = nullptr;
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

  void replay() override {
    auto stream = static_cast<cudaStream_t>(cuda::stream(device_.index()));
    SYSTOLIC_CUDA_CHECK(cudaGraphLaunch(exec_, stream));
  }

 private:
  Device device_;
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace

std::unique_ptr<StepRecorder> cuda_step_recorder(Device device) {
  if (!device.is_cuda() || !device_available(device)) return nullptr;
  return std::make_unique<CudaGraph>(device);
}

}  // namespace systolic
