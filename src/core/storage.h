// Storage: one allocation on one device. Tensors hold it through a shared_ptr.
#pragma once

#include <systolic/device.h>

#include <cstddef>

namespace systolic {

class Storage {
 public:
  Storage(std::size_t bytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_;
  Device device_;
};

// Copies bytes between any two devices this build knows.
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, std::size_t bytes);

}  // namespace systolic
