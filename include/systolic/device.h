// Device: where a tensor lives and where ops run. The CPU is always present; CUDA devices exist when the
// build has CUDA and a GPU is found.
#pragma once

#include <string>
#include <string_view>

namespace systolic {

enum class DeviceKind { cpu, cuda };

class Device {
 public:
  constexpr Device() = default;
  static constexpr Device cpu() { return Device(DeviceKind::cpu, 0); }
  static constexpr Device cuda(int index = 0) { return Device(DeviceKind::cuda, index); }
  // "cpu", "cuda", "cuda:1". "auto" is resolved by default_device(). Throws Error on anything else.
  static Device parse(std::string_view text);

  DeviceKind kind() const { return kind_; }
  int index() const { return index_; }
  bool is_cpu() const { return kind_ == DeviceKind::cpu; }
  std::string str() const;
  bool operator==(const Device& other) const = default;

 private:
  constexpr Device(DeviceKind kind, int index) : kind_(kind), index_(index) {}
  DeviceKind kind_ = DeviceKind::cpu;
  int index_ = 0;
};

// The best device present: a GPU when the build has CUDA and one is found, else the CPU.
Device default_device();
// Whether this build can run ops on the device (the CPU always; CUDA only in CUDA builds with a GPU).
bool device_available(Device device);

}  // namespace systolic
