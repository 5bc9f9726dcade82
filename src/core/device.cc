#include <systolic/device.h>
#include <systolic/error.h>
#include <systolic/system.h>
#include <systolic/xla.h>

#if SYSTOLIC_HAS_CUDA
#include "core/cuda/runtime.h"
#endif

#include <charconv>

#include "core/xla/pjrt.h"
#include "core/xla/trace.h"

namespace systolic {

namespace {

// "" -> 0, ":I" -> I; -1 for anything else.
int index_suffix(std::string_view rest) {
  if (rest.empty()) return 0;
  if (rest[0] != ':' || rest.size() < 2) return -1;
  int index = -1;
  auto digits = rest.substr(1);
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
  return ec == std::errc() && ptr == digits.data() + digits.size() && index >= 0 ? index : -1;
}

}  // namespace

Device Device::parse(std::string_view text) {
  if (text == "cpu") return cpu();
  struct Prefix {
    std::string_view text;
    Device device;
  };
  // Longest first: "xla:cuda" before "cuda".
  for (const Prefix& p :
       {Prefix{"xla:cuda", xla(XlaPlatform::cuda)}, Prefix{"xla:cpu", xla(XlaPlatform::cpu)},
        Prefix{"xla:tpu", tpu()}, Prefix{"tpu", tpu()}, Prefix{"cuda", cuda()}})
    if (text.starts_with(p.text)) {
      int index = index_suffix(text.substr(p.text.size()));
      if (index >= 0) return p.device.with_index(index);
      break;
    }
  fail(
      "unknown device '{}' (expected cpu, cuda, cuda:I, xla:cpu, xla:cuda, xla:tpu or tpu, each with an "
      "optional :I)",
      text);
}

std::string Device::str() const {
  switch (kind_) {
    case DeviceKind::cpu:
      return "cpu";
    case DeviceKind::cuda:
      return "cuda:" + std::to_string(index_);
    case DeviceKind::xla:
      return std::string("xla:") + xla::platform_name(platform_) + ":" + std::to_string(index_);
  }
  return "?";
}

bool device_available(Device device) {
  if (device.is_cpu()) return true;
  if (device.is_xla()) {
    auto p = device.xla_platform();
    return xla::Runtime::available(p) && device.index() < xla::Runtime::get(p).device_count();
  }
#if SYSTOLIC_HAS_CUDA
  return device.index() < cuda::device_count();
#else
  return false;
#endif
}

Device default_device() {
  return device_available(Device::cuda(0)) ? Device::cuda(0) : Device::cpu();
}

XlaCompileStats xla_compile_stats() {
  auto s = xla::compile_stats();
  return {.programs = s.compiles, .cache_hits = s.hits, .seconds = s.seconds};
}

XlaPluginInfo xla_plugin_info(XlaPlatform platform) {
  XlaPluginInfo out;
  if (!xla::Runtime::available(platform, &out.why)) return out;
  try {
    auto& runtime = xla::Runtime::get(platform);
    const auto& info = runtime.info();
    out.available = true;
    out.path = info.path;
    out.platform_version = info.platform_version;
    out.api_major = info.api_major;
    out.api_minor = info.api_minor;
    for (int i = 0; i < runtime.device_count(); ++i)
      out.devices.push_back(Device::xla(platform, i).str() + " (" +
                            info.device_kinds[static_cast<std::size_t>(i)] + ")");
  } catch (const std::exception& e) {
    out = {};
    out.why = e.what();
  }
  return out;
}

std::vector<GpuInfo> gpu_info() {
#if SYSTOLIC_HAS_CUDA
  return cuda::gpus();
#else
  return {};
#endif
}

void synchronize(Device device) {
  if (device.is_cpu() || device.is_xla()) return;  // an XLA program has finished when its run returns
#if SYSTOLIC_HAS_CUDA
  cuda::synchronize(device.index());
#else
  fail("device {} is not available: this build of systolic has no CUDA support", device.str());
#endif
}

}  // namespace systolic
