// Tensor: a typed, shaped view of a block of device memory. Tensors are always contiguous (row-major);
// copies of a Tensor share the storage (like a shared_ptr), views share it too. clone() copies the data.
#pragma once

#include <systolic/device.h>
#include <systolic/dtype.h>
#include <systolic/error.h>
#include <systolic/shape.h>

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace systolic {

class Storage;

class Tensor {
 public:
  Tensor() = default;
  // Allocates uninitialised memory.
  Tensor(Shape shape, DType dtype = DType::float32, Device device = Device::cpu());

  static Tensor zeros(Shape shape, DType dtype = DType::float32, Device device = Device::cpu());
  static Tensor full(Shape shape, double value, DType dtype = DType::float32, Device device = Device::cpu());
  template <class T>
  static Tensor from_vector(const std::vector<T>& values, Shape shape) {
    SYSTOLIC_CHECK(static_cast<std::int64_t>(values.size()) == shape.numel(),
                   "Tensor::from_vector: {} values do not fill shape {}", values.size(), shape.str());
    Tensor t(std::move(shape), dtype_of<T>::value);
    std::copy(values.begin(), values.end(), t.data<T>());
    return t;
  }

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  Device device() const;
  std::int64_t numel() const { return shape_.numel(); }
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype_); }
  std::int64_t dim(int i) const { return shape_[i]; }
  int rank() const { return shape_.rank(); }

  void* raw_data();
  const void* raw_data() const;
  template <class T>
  T* data() {
    check_type(dtype_of<T>::value);
    return static_cast<T*>(raw_data());
  }
  template <class T>
  const T* data() const {
    check_type(dtype_of<T>::value);
    return static_cast<const T*>(raw_data());
  }

  // Views (no copy).
  Tensor reshape(Shape shape) const;
  Tensor slice(std::int64_t begin, std::int64_t end) const;     // rows [begin, end) of dimension 0
  Tensor view(std::int64_t element_offset, Shape shape) const;  // any contiguous window of the storage

  // Copies.
  Tensor clone() const;
  Tensor to(DType dtype) const;         // CPU conversion, rounding to nearest
  Tensor to(Device device) const;       // a copy on the device (a view of this when already there)
  void copy_from(const Tensor& other);  // same shape (or numel) and dtype; may cross devices
  void fill(double value);
  // CPU values as doubles (for tests, logs, small reads); copies from a device first.
  std::vector<double> to_doubles() const;
  double item() const;  // the single value of a one-element tensor

  bool shares_storage_with(const Tensor& other) const { return storage_ == other.storage_; }
  // Whether both start at the same byte of one storage (on any device; an XLA tensor has no address to compare).
  bool same_start_as(const Tensor& other) const {
    return storage_ == other.storage_ && offset_ == other.offset_;
  }

 private:
  friend struct TensorInternals;  // src/core/tensor_internals.h
  void check_type(DType t) const;
  std::shared_ptr<Storage> storage_;
  std::size_t offset_ = 0;  // bytes
  Shape shape_;
  DType dtype_ = DType::float32;
};

// The arrays of a model's inputs (or of its labels, one per output), in the model's order, as Keras's fit takes
// a list: a Tensor is the list of one, so fit(x, y) and fit({xa, xb}, {ya, yb}) both read.
class Arrays : public std::vector<Tensor> {
 public:
  using std::vector<Tensor>::vector;
  Arrays() = default;
  Arrays(const Tensor& t) : std::vector<Tensor>{t} {}
  Arrays(std::vector<Tensor> v) : std::vector<Tensor>(std::move(v)) {}
  // The samples: the first array's first dimension (0 for none).
  std::int64_t samples() const { return empty() || !front().defined() ? 0 : front().dim(0); }
  // Every array's rows [begin, end).
  Arrays slice(std::int64_t begin, std::int64_t end) const;
  // Every array on `device`.
  Arrays to(Device device) const;
};

}  // namespace systolic
