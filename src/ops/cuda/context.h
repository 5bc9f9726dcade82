// What every CUDA op needs: the device of its tensors made current, that device's stream, cuDNN and cuBLASLt
// handles bound to it, scratch memory from the caching allocator, and checks of dtype, shape and device.
#pragma once

#include "core/cuda/check.h"
#include "core/cuda/runtime.h"

#include <systolic/tensor.h>

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>

namespace systolic::ops::cuda {

struct Context {
  int device = 0;
  cudaStream_t stream = nullptr;
  cudnnHandle_t cudnn = nullptr;
  cublasLtHandle_t cublaslt = nullptr;
  int* error_flags = nullptr;  // device memory: bits set by kernels that find bad data (see ErrorFlag)
};

// Makes t's device current and returns its context (handles created on first use).
Context& context(const Tensor& t);
Context& context(int device);

// Bits kernels set in Context::error_flags for bad data they cannot report synchronously; synchronize(device)
// raises Error naming them.
enum ErrorFlag : int { kLabelOutOfRange = 1, kIndexOutOfRange = 2 };

// Scratch device memory (workspaces): a uint8 tensor from the caching allocator, freed when it goes out of scope.
Tensor scratch(std::size_t bytes, int device);

// Checks, raising Error naming the op: the dtype is one of those given; the tensor is defined.
void check_dtype(const char* op, const Tensor& t, std::initializer_list<DType> allowed);

}  // namespace systolic::ops::cuda

#define SYSTOLIC_CUDNN_CHECK(call)                                                                        \
  do {                                                                                                    \
    cudnnStatus_t systolic_status_ = (call);                                                              \
    if (systolic_status_ != CUDNN_STATUS_SUCCESS)                                                         \
      ::systolic::cuda::fail_call("cuDNN", #call, cudnnGetErrorString(systolic_status_), __FILE__, __LINE__); \
  } while (0)

#define SYSTOLIC_CUBLAS_CHECK(call)                                                                       \
  do {                                                                                                    \
    cublasStatus_t systolic_status_ = (call);                                                             \
    if (systolic_status_ != CUBLAS_STATUS_SUCCESS)                                                        \
      ::systolic::cuda::fail_call("cuBLAS", #call, ::systolic::ops::cuda::cublas_status_name(systolic_status_), \
                                  __FILE__, __LINE__);                                                    \
  } while (0)

namespace systolic::ops::cuda {
const char* cublas_status_name(cublasStatus_t s);
}
