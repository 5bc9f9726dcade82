// Device: where a tensor lives and where ops run. The CPU is always present; CUDA devices exist when the
// build has CUDA and a GPU is found; XLA devices (xla:cpu, xla:cuda, xla:tpu) when a PJRT plugin for the platform
// is found at run time (docs/xla.md).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace systolic {

enum class DeviceKind { cpu, cuda, xla };
// The platforms of XLA devices: which PJRT plugin runs them.
enum class XlaPlatform : std::uint8_t { cpu, cuda, tpu };

class Device {
 public:
  constexpr Device() = default;
  static constexpr Device cpu() { return Device(DeviceKind::cpu, 0); }
  static constexpr Device cuda(int index = 0) { return Device(DeviceKind::cuda, index); }
  static constexpr Device xla(XlaPlatform platform, int index = 0) {
    return Device(DeviceKind::xla, index, platform);
  }
  static constexpr Device tpu(int index = 0) { return xla(XlaPlatform::tpu, index); }
  // "cpu", "cuda", "cuda:1", "xla:cpu", "xla:cpu:3", "xla:cuda", "xla:tpu", "tpu" (short for xla:tpu), "tpu:2".
  // "auto" is resolved by default_device(). Throws Error on anything else.
  static Device parse(std::string_view text);

  DeviceKind kind() const { return kind_; }
  int index() const { return index_; }
  XlaPlatform xla_platform() const { return platform_; }
  bool is_cpu() const { return kind_ == DeviceKind::cpu; }
  bool is_cuda() const { return kind_ == DeviceKind::cuda; }
  bool is_xla() const { return kind_ == DeviceKind::xla; }
  // The same platform's device `index` (an XLA device's sibling, a GPU's).
  Device with_index(int index) const { return Device(kind_, index, platform_); }
  std::string str() const;
  bool operator==(const Device& other) const = default;

 private:
  constexpr Device(DeviceKind kind, int index, XlaPlatform platform = XlaPlatform::cpu)
      : kind_(kind), platform_(platform), index_(index) {}
  DeviceKind kind_ = DeviceKind::cpu;
  XlaPlatform platform_ = XlaPlatform::cpu;  // XLA devices only
  int index_ = 0;
};

// The best device present: a GPU when the build has CUDA and one is found, else the CPU.
Device default_device();
// Whether this build can run ops on the device (the CPU always; CUDA only in CUDA builds with a GPU; XLA devices
// when the platform's PJRT plugin loads and has that many devices).
bool device_available(Device device);

}  // namespace systolic
