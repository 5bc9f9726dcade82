#include <systolic/device.h>
#include <systolic/error.h>

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
  // This build has no CUDA backend yet; the seam is here and in ops/backend.h.
  return device.is_cpu();
}

Device default_device() { return Device::cpu(); }

}  // namespace systolic
