// Storage: one allocation on one device. Tensors hold it through a shared_ptr. On an XLA device the memory is an
// xla::Array (core/xla/trace.h: a PJRT buffer of the storage's dtype), which has no host address: data() is null.
#pragma once

#include <systolic/device.h>
#include <systolic/dtype.h>

#include <cstddef>
#include <memory>

namespace systolic {

namespace xla {
class Array;
}

class Storage {
 public:
  // `dtype`: what the storage holds (an XLA device's arrays are typed).
  Storage(std::size_t bytes, Device device, DType dtype = DType::uint8);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  Device device() const { return device_; }
  const std::shared_ptr<xla::Array>& xla_array() const { return xla_; }

 private:
  void* data_ = nullptr;
  std::shared_ptr<xla::Array> xla_;
  std::size_t bytes_;
  Device device_;
};

// Copies bytes between any two devices this build knows.
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, std::size_t bytes);

}  // namespace systolic
