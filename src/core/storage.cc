#include "core/storage.h"

#include <systolic/error.h>

#if SYSTOLIC_HAS_CUDA
#include "core/cuda/runtime.h"
#endif

#include <cstdlib>
#include <cstring>

#include "core/xla/trace.h"

namespace systolic {

namespace {
[[maybe_unused]] [[noreturn]] void no_backend(Device device) {
  fail("device {} is not available: this build of systolic has no CUDA support", device.str());
}
}  // namespace

Storage::Storage(std::size_t bytes, Device device, DType dtype) : bytes_(bytes), device_(device) {
  if (device.is_xla()) {
    auto& runtime = xla::Runtime::get(device.xla_platform());
    SYSTOLIC_CHECK(device.index() < runtime.device_count(),
                   "device {} is not available (the plugin has {} devices)", device.str(),
                   runtime.device_count());
    xla_ = std::make_shared<xla::Array>(device.xla_platform(), device.index(), dtype,
                                        static_cast<std::int64_t>(bytes / dtype_size(dtype)));
    return;
  }
  if (!device.is_cpu()) {
#if SYSTOLIC_HAS_CUDA
    data_ = cuda::allocate(bytes, device.index());  // the caching allocator: no cudaMalloc in a steady loop
    return;
#else
    no_backend(device);
#endif
  }
  // 64-byte alignment suits AVX-512 loads and oneDNN's preferred alignment.
  std::size_t rounded = (bytes + 63) / 64 * 64;
  data_ = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  if (!data_) fail("out of host memory allocating {} bytes", bytes);
}

Storage::~Storage() {
  if (device_.is_xla()) return;  // the array goes with xla_
#if SYSTOLIC_HAS_CUDA
  if (!device_.is_cpu()) {
    cuda::deallocate(data_, device_.index());
    return;
  }
#endif
  std::free(data_);
}

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, std::size_t bytes) {
#if SYSTOLIC_HAS_CUDA
  cuda::copy(dst, dst_device, src, src_device, bytes);
#else
  if (!dst_device.is_cpu()) no_backend(dst_device);
  if (!src_device.is_cpu()) no_backend(src_device);
  if (bytes) std::memmove(dst, src, bytes);
#endif
}

}  // namespace systolic
