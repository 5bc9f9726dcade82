// What every CUDA op needs: the device of its tensors made current, that device's stream, cuDNN and cuBLASLt
// handles bound to it, scratch memory from the caching allocator.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <systolic/tensor.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "core/cuda/check.h"
#include "core/cuda/runtime.h"
#include "ops/cuda/element.h"

namespace systolic::ops::cuda {

struct Context {
  int device = 0;
  cudaStream_t stream = nullptr;
  cudnnHandle_t cudnn = nullptr;
  cublasLtHandle_t cublaslt = nullptr;
  int* error_flags = nullptr;  // device memory: bits set by kernels that find bad data (see ErrorFlag)

  // The device's persistent scratch memory (cuDNN and cuBLASLt workspaces, transposed kernels, padded copies,
  // partial sums): at least `bytes`, 256-byte aligned. One buffer per device, grown (never shrunk) when a
  // larger size is asked for, so once a training step has run (the warm-up step), later steps allocate
  // nothing and a step captured as a CUDA graph keeps pointing at valid memory. The pointer is valid until
  // the next call: an op asks once, for the sum of its pieces (WorkspacePlan), and enqueues all its work
  // before returning. A freed buffer is safe to reuse at once because all work on the device is ordered on
  // `stream`. A device's ops are issued from one host thread at a time (one replica per device).
  void* workspace(std::size_t bytes);

 private:
  std::mutex workspace_mutex_;
  Tensor workspace_;
  std::vector<Tensor> retired_workspaces_;  // outgrown workspaces, kept for graphs that point into them
};

// Lays out the pieces of one workspace request: offsets rounded up to 256 bytes (what cuDNN, cuBLASLt and
// vectorised kernels want). Add every piece, ask Context::workspace(total()) once, then at(base, offset).
class WorkspacePlan {
 public:
  std::size_t add(std::size_t bytes) {
    std::size_t offset = total_;
    total_ += (bytes + kAlign - 1) / kAlign * kAlign;
    return offset;
  }
  std::size_t total() const { return total_; }
  static void* at(void* base, std::size_t offset) { return static_cast<char*>(base) + offset; }
  static constexpr std::size_t kAlign = 256;

 private:
  std::size_t total_ = 0;
};

// Makes t's device current and returns its context (handles created on first use).
Context& context(const Tensor& t);
Context& context(int device);

// Bits kernels set in Context::error_flags for bad data they cannot report synchronously; synchronize(device)
// raises Error naming them.
enum ErrorFlag : int { kLabelOutOfRange = 1, kIndexOutOfRange = 2 };

// The kernels' element type of a dtype (ops/cuda/element.h).
Element element_of(DType dtype);

// Scratch device memory (workspaces): a uint8 tensor from the caching allocator, freed when it goes out of
// scope.
Tensor scratch(std::size_t bytes, int device);

// The largest power of two (at most 256) that divides the address: cuBLASLt's algorithms are chosen for the
// alignment of the pointers they will see, so plans cached by shape include it in their keys.
inline std::size_t pointer_alignment(const void* p) {
  auto a = reinterpret_cast<std::uintptr_t>(p);
  std::size_t align = 1;
  while (align < 256 && (a & align) == 0) align <<= 1;
  return align;
}

}  // namespace systolic::ops::cuda

#define SYSTOLIC_CUDNN_CHECK(call)                                                                 \
  do {                                                                                             \
    cudnnStatus_t systolic_status_ = (call);                                                       \
    if (systolic_status_ != CUDNN_STATUS_SUCCESS)                                                  \
      ::systolic::cuda::fail_call("cuDNN", #call, cudnnGetErrorString(systolic_status_), __FILE__, \
                                  __LINE__);                                                       \
  } while (0)

#define SYSTOLIC_CUBLAS_CHECK(call)                                                                          \
  do {                                                                                                       \
    cublasStatus_t systolic_status_ = (call);                                                                \
    if (systolic_status_ != CUBLAS_STATUS_SUCCESS)                                                           \
      ::systolic::cuda::fail_call(                                                                           \
          "cuBLAS", #call, ::systolic::ops::cuda::cublas_status_name(systolic_status_), __FILE__, __LINE__); \
  } while (0)

namespace systolic::ops::cuda {
const char* cublas_status_name(cublasStatus_t s);
}
