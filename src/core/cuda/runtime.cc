#include "core/cuda/runtime.h"

#include <fmt/format.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>

#include "core/cuda/check.h"

namespace systolic::cuda {

void fail_call(const char* library, const char* call, const char* status, const char* file, int line) {
  fail("{} call {} failed: {} ({}:{})", library, call, status,
       std::filesystem::path(file).filename().string(), line);
}

namespace {

struct DeviceState {
  std::once_flag once;
  cudaStream_t stream = nullptr;
  int* error_flags = nullptr;
  std::unique_ptr<CachingAllocator> allocator;
};

// Never destroyed: tensors in static objects may be freed after main returns, and the driver returns the
// memory at exit anyway.
std::vector<std::unique_ptr<DeviceState>>& states() {
  static auto* s = [] {
    auto* v = new std::vector<std::unique_ptr<DeviceState>>;
    for (int i = 0; i < device_count(); ++i) v->push_back(std::make_unique<DeviceState>());
    return v;
  }();
  return *s;
}

DeviceState& state(int index) {
  auto& s = states();
  SYSTOLIC_CHECK(index >= 0 && index < static_cast<int>(s.size()),
                 "device cuda:{} is not available ({} GPU{} found)", index, s.size(),
                 s.size() == 1 ? "" : "s");
  DeviceState& d = *s[index];
  std::call_once(d.once, [&] {
    SYSTOLIC_CUDA_CHECK(cudaSetDevice(index));
    SYSTOLIC_CUDA_CHECK(cudaStreamCreateWithFlags(&d.stream, cudaStreamNonBlocking));
    SYSTOLIC_CUDA_CHECK(cudaMalloc(&d.error_flags, sizeof(int)));
    SYSTOLIC_CUDA_CHECK(cudaMemsetAsync(d.error_flags, 0, sizeof(int), d.stream));
    d.allocator = std::make_unique<CachingAllocator>(
        fmt::format("cuda:{}", index),
        [index](std::size_t bytes) -> void* {
          SYSTOLIC_CUDA_CHECK(cudaSetDevice(index));
          void* p = nullptr;
          cudaError_t e = cudaMalloc(&p, bytes);
          if (e == cudaErrorMemoryAllocation) {
            (void)cudaGetLastError();  // clear it: the allocator retries after releasing its cache
            return nullptr;
          }
          SYSTOLIC_CUDA_CHECK(e);
          return p;
        },
        [index](void* p) {
          // Frees run at exit too, when throwing is not an option: report nothing then.
          if (cudaSetDevice(index) == cudaSuccess) (void)cudaFree(p);
        });
  });
  return d;
}

}  // namespace

int device_count() {
  static int n = [] {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return count;
  }();
  return n;
}

std::vector<GpuInfo> gpus() {
  std::vector<GpuInfo> out;
  int driver = 0;
  (void)cudaDriverGetVersion(&driver);
  for (int i = 0; i < device_count(); ++i) {
    cudaDeviceProp p;
    SYSTOLIC_CUDA_CHECK(cudaGetDeviceProperties(&p, i));
    GpuInfo g;
    g.index = i;
    g.name = p.name;
    g.memory_bytes = static_cast<std::int64_t>(p.totalGlobalMem);
    g.multiprocessors = p.multiProcessorCount;
    g.compute_capability = fmt::format("{}.{}", p.major, p.minor);
    g.driver_version = fmt::format("{}.{}", driver / 1000, (driver % 1000) / 10);
    out.push_back(g);
  }
  return out;
}

std::string runtime_version() {
  int v = 0;
  (void)cudaRuntimeGetVersion(&v);
  return fmt::format("{}.{}", v / 1000, (v % 1000) / 10);
}

void set_device(int index) {
  state(index);
  SYSTOLIC_CUDA_CHECK(cudaSetDevice(index));
}

void* stream(int index) {
  return state(index).stream;
}

void synchronize(int index) {
  DeviceState& d = state(index);
  SYSTOLIC_CUDA_CHECK(cudaSetDevice(index));
  int flags = 0;
  SYSTOLIC_CUDA_CHECK(cudaMemcpyAsync(&flags, d.error_flags, sizeof(int), cudaMemcpyDeviceToHost, d.stream));
  SYSTOLIC_CUDA_CHECK(cudaStreamSynchronize(d.stream));
  if (flags == 0) return;
  SYSTOLIC_CUDA_CHECK(cudaMemsetAsync(d.error_flags, 0, sizeof(int), d.stream));
  std::string what;
  if (flags & 1) what += "a label is out of range for the model's classes; ";
  if (flags & 2) what += "a row index is out of range of the data set; ";
  what.resize(what.size() - 2);
  fail("on cuda:{}: {} (found by a GPU kernel; the data of that step are invalid)", index, what);
}

int* error_flags(int index) {
  return state(index).error_flags;
}

CachingAllocator& allocator(int index) {
  return *state(index).allocator;
}
void* allocate(std::size_t bytes, int index) {
  return state(index).allocator->allocate(bytes);
}
void deallocate(void* p, int index) {
  state(index).allocator->deallocate(p);
}

void copy(void* dst, Device dst_device, const void* src, Device src_device, std::size_t bytes) {
  if (bytes == 0) return;
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memmove(dst, src, bytes);
  } else if (src_device.is_cpu()) {  // host to device, ordered on the device's stream
    auto s = static_cast<cudaStream_t>(stream(dst_device.index()));
    SYSTOLIC_CUDA_CHECK(cudaSetDevice(dst_device.index()));
    SYSTOLIC_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s));
    // From pageable memory the call returns once the source is staged; the caller may free it at once.
  } else if (dst_device.is_cpu()) {  // device to host: the host reads the result right after
    auto s = static_cast<cudaStream_t>(stream(src_device.index()));
    SYSTOLIC_CUDA_CHECK(cudaSetDevice(src_device.index()));
    SYSTOLIC_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s));
    SYSTOLIC_CUDA_CHECK(cudaStreamSynchronize(s));
  } else if (dst_device == src_device) {
    auto s = static_cast<cudaStream_t>(stream(dst_device.index()));
    SYSTOLIC_CUDA_CHECK(cudaSetDevice(dst_device.index()));
    SYSTOLIC_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
  } else {  // between GPUs: wait for the source's pending work, then copy on the destination's stream
    synchronize(src_device.index());
    auto s = static_cast<cudaStream_t>(stream(dst_device.index()));
    SYSTOLIC_CUDA_CHECK(cudaSetDevice(dst_device.index()));
    SYSTOLIC_CUDA_CHECK(cudaMemcpyPeerAsync(dst, dst_device.index(), src, src_device.index(), bytes, s));
    synchronize(dst_device.index());
  }
}

}  // namespace systolic::cuda
