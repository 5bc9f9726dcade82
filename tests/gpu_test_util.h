// Helpers of the GPU tests (test_cuda_*.cc, CTest label gpu): they skip visibly, naming why, where no GPU can
// be used; copies between the CPU and the GPU; device tensors poisoned (NaN) before an op writes them.
#pragma once

#include <systolic/device.h>
#include <systolic/system.h>

#include "test_util.h"

namespace systolic::testing {

inline Device gpu() {
  return Device::cuda(0);
}

// Skips the test (GoogleTest's SKIPPED, which CTest reports as "Not Run (Skipped)") without a usable GPU.
#define SYSTOLIC_REQUIRE_GPU()                                                                            \
  do {                                                                                                    \
    if (!::systolic::build_info().cuda)                                                                   \
      GTEST_SKIP() << "GPU test not run: this build of systolic has no CUDA backend (SYSTOLIC_CUDA off)"; \
    if (!::systolic::device_available(::systolic::Device::cuda(0)))                                       \
      GTEST_SKIP() << "GPU test not run: no GPU found on this machine";                                   \
  } while (0)

// A copy of a host tensor on the GPU.
inline Tensor on_gpu(const Tensor& t) {
  return t.defined() ? t.to(gpu()) : Tensor();
}

// An uninitialised-looking GPU tensor: filled with NaN, so outputs an op forgets to write show up.
inline Tensor poisoned_gpu(Shape shape, DType dtype = DType::float32) {
  Tensor h(std::move(shape), dtype);
  if (is_floating(dtype))
    h.fill(std::nan(""));
  else
    h.fill(0x5A);
  return h.to(gpu());
}

}  // namespace systolic::testing
