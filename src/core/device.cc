#include <systolic/device.h>
#include <systolic/error.h>
#include <systolic/system.h>

#if SYSTOLIC_HAS_CUDA
#include "core/cuda/runtime.h"
#endif

#include <charconv>

namespace systolic {

Device Device::parse(std::string_view text) {
  if (text == "cpu") return cpu();
  if (text == "cuda") return cuda(0);
  if (text.starts_with("cuda:")) {
    int index = -1;
    auto digits = text.substr(5);
    auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (ec == std::errc() && ptr == digits.data() + digits.size() && index >= 0) return cuda(index);
  }
  fail("unknown device '{}' (expected cpu, cuda or cuda:I)", text);
}

std::string Device::str() const {
  return kind_ == DeviceKind::cpu ? "cpu" : "cuda:" + std::to_string(index_);
}

bool device_available(Device device) {
  if (device.is_cpu()) return true;
#if SYSTOLIC_HAS_CUDA
  return device.index() < cuda::device_count();
#else
  return false;
#endif
}

Device default_device() {
  return device_available(Device::cuda(0)) ? Device::cuda(0) : Device::cpu();
}

std::vector<GpuInfo> gpu_info() {
#if SYSTOLIC_HAS_CUDA
  return cuda::gpus();
#else
  return {};
#endif
}

void synchronize(Device device) {
  if (device.is_cpu()) return;
#if SYSTOLIC_HAS_CUDA
  cuda::synchronize(device.index());
#else
  fail("device {} is not available: this build of systolic has no CUDA support", device.str());
#endif
}

}  // namespace systolic
