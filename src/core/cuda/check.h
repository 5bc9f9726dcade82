// Status checks for CUDA, cuDNN and cuBLAS calls: a failed call raises systolic::Error naming the call, the
// status and the source line (e.g. "CUDA call cudaMalloc(&p, bytes) failed: out of memory (runtime.cc:42)").
#pragma once

#include <cuda_runtime.h>
#include <systolic/error.h>

namespace systolic::cuda {

[[noreturn]] void fail_call(const char* library, const char* call, const char* status, const char* file,
                            int line);

}  // namespace systolic::cuda

#define SYSTOLIC_CUDA_CHECK(call)                                                                           \
  do {                                                                                                      \
    cudaError_t systolic_status_ = (call);                                                                  \
    if (systolic_status_ != cudaSuccess)                                                                    \
      ::systolic::cuda::fail_call("CUDA", #call, cudaGetErrorString(systolic_status_), __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: launch errors (bad configuration) surface here; faults inside the kernel surface at
// the next synchronising call.
#define SYSTOLIC_CUDA_CHECK_LAUNCH() SYSTOLIC_CUDA_CHECK(cudaGetLastError())
