#include "ops/cuda/context.h"

#include <fmt/format.h>
#include <systolic/system.h>

#include <memory>
#include <mutex>
#include <vector>

#include "ops/cuda/cuda_backend.h"

namespace systolic::ops::cuda {

namespace {
struct Slot {
  std::once_flag once;
  Context context;
};
std::vector<std::unique_ptr<Slot>>& slots() {
  static auto* s = [] {  // never destroyed (handles may be used by static tensors' owners at exit)
    auto* v = new std::vector<std::unique_ptr<Slot>>;
    for (int i = 0; i < systolic::cuda::device_count(); ++i) v->push_back(std::make_unique<Slot>());
    return v;
  }();
  return *s;
}
}  // namespace

Context& context(int device) {
  systolic::cuda::set_device(device);  // checks the index
  Slot& slot = *slots()[device];
  std::call_once(slot.once, [&] {
    Context& c = slot.context;
    c.device = device;
    c.stream = static_cast<cudaStream_t>(systolic::cuda::stream(device));
    c.error_flags = systolic::cuda::error_flags(device);
    SYSTOLIC_CUDNN_CHECK(cudnnCreate(&c.cudnn));
    SYSTOLIC_CUDNN_CHECK(cudnnSetStream(c.cudnn, c.stream));
    SYSTOLIC_CUBLAS_CHECK(cublasLtCreate(&c.cublaslt));
  });
  return slot.context;
}

Context& context(const Tensor& t) {
  SYSTOLIC_CHECK(t.defined() && !t.device().is_cpu(), "a CUDA op was given a tensor that is not on a GPU");
  return context(t.device().index());
}

void* Context::workspace(std::size_t bytes) {
  std::lock_guard lock(workspace_mutex_);
  if (!workspace_.defined() || workspace_.nbytes() < bytes) {
    // The old block is kept, never freed: a captured step graph may still hold its address and replay into it
    // (an evaluation with a larger batch grows the workspace after training captured its step). Growing by at
    // least 1.5x bounds what is kept to about twice the largest workspace.
    if (workspace_.defined()) retired_workspaces_.push_back(workspace_);
    std::size_t grown = workspace_.defined() ? workspace_.nbytes() + workspace_.nbytes() / 2 : 0;
    workspace_ =
        Tensor({static_cast<std::int64_t>(std::max(bytes, grown))}, DType::uint8, Device::cuda(device));
  }
  return workspace_.raw_data();
}

Element element_of(DType d) {
  switch (d) {
    case DType::float32:
      return Element::float32;
    case DType::bfloat16:
      return Element::bfloat16;
    case DType::float64:
      return Element::float64;
    case DType::int32:
      return Element::int32;
    case DType::uint8:
      return Element::uint8;
  }
  fail("no CUDA element type for dtype {}", dtype_name(d));
}

Tensor scratch(std::size_t bytes, int device) {
  return Tensor({static_cast<std::int64_t>(bytes)}, DType::uint8, Device::cuda(device));
}

const char* cublas_status_name(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR:
      return "CUBLAS_STATUS_LICENSE_ERROR";
    default:
      return "unknown cuBLAS status";
  }
}

void fill_build_info(BuildInfo& b) {
  b.cuda = true;
  b.cuda_runtime = systolic::cuda::runtime_version();
  std::size_t v = cudnnGetVersion();  // 90300 for 9.3.0
  b.cudnn_version = fmt::format("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100);
  std::size_t c = cublasLtGetVersion();  // 130000 for 13.0.0
  b.cublas_version = fmt::format("{}.{}.{}", c / 10000, (c % 10000) / 100, c % 100);
}

}  // namespace systolic::ops::cuda
