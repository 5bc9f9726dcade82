// The CUDA runtime seen from the rest of systolic (compiled only in CUDA builds; this header has no CUDA
// types so core code can include it): devices, one stream per device, the caching allocator, copies. Every
// CUDA status is checked and turned into systolic::Error naming the call (core/cuda/check.h).
#pragma once

#include <systolic/device.h>
#include <systolic/system.h>

#include <cstddef>
#include <vector>

#include "core/caching_allocator.h"

namespace systolic::cuda {

// GPUs visible to this process; 0 when there is no driver or no GPU (never throws).
int device_count();
std::vector<GpuInfo> gpus();
std::string runtime_version();  // "13.0"

// Makes `index` the calling thread's current device (checked against device_count()).
void set_device(int index);
// The device's stream (created on first use, non-blocking): every op, copy and allocation on that device is
// ordered on it.
void* stream(int index);
// Waits for the device's stream, then raises Error if a kernel flagged bad data (error_flags) since the last
// check.
void synchronize(int index);
// A device int that kernels set bits in (ops/cuda/context.h's ErrorFlag) when they meet data they cannot
// report at once, such as a label out of range; synchronize() reports and clears it.
int* error_flags(int index);

CachingAllocator& allocator(int index);
void* allocate(std::size_t bytes, int index);
void deallocate(void* p, int index);

// Copies ordered on the device's stream; a copy to the host waits for it, so host code can read the result.
void copy(void* dst, Device dst_device, const void* src, Device src_device, std::size_t bytes);

}  // namespace systolic::cuda
