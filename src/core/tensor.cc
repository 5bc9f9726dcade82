#include <systolic/tensor.h>

#include <algorithm>
#include <cmath>

#include "core/dtype_dispatch.h"
#include "core/storage.h"
#include "core/xla/trace.h"

namespace systolic {

namespace {
template <class T>
double to_double(T v) {
  if constexpr (std::is_same_v<T, bfloat16>)
    return static_cast<double>(static_cast<float>(v));
  else
    return static_cast<double>(v);
}
}  // namespace

Tensor::Tensor(Shape shape, DType dtype, Device device) : shape_(std::move(shape)), dtype_(dtype) {
  for (auto d : shape_.dims()) SYSTOLIC_CHECK(d >= 0, "Tensor: negative dimension in shape {}", shape_.str());
  storage_ = std::make_shared<Storage>(nbytes(), device, dtype);
}

Tensor Tensor::zeros(Shape shape, DType dtype, Device device) {
  return full(std::move(shape), 0.0, dtype, device);
}

Tensor Tensor::full(Shape shape, double value, DType dtype, Device device) {
  Tensor t(std::move(shape), dtype);
  t.fill(value);
  return t.to(device);  // filled on the host, copied once (core code does not call device kernels)
}

Device Tensor::device() const {
  return storage_ ? storage_->device() : Device::cpu();
}

void* Tensor::raw_data() {
  SYSTOLIC_CHECK(storage_, "access to the data of an undefined tensor");
  SYSTOLIC_CHECK(!storage_->xla_array(), "a tensor on {} has no address (copy it to the CPU first)",
                 device().str());
  return static_cast<char*>(storage_->data()) + offset_;
}
const void* Tensor::raw_data() const {
  SYSTOLIC_CHECK(storage_, "access to the data of an undefined tensor");
  SYSTOLIC_CHECK(!storage_->xla_array(), "a tensor on {} has no address (copy it to the CPU first)",
                 device().str());
  return static_cast<const char*>(storage_->data()) + offset_;
}

void Tensor::check_type(DType t) const {
  SYSTOLIC_CHECK(t == dtype_, "tensor of dtype {} accessed as {}", dtype_name(dtype_), dtype_name(t));
}

Tensor Tensor::reshape(Shape shape) const {
  SYSTOLIC_CHECK(shape.numel() == numel(), "cannot reshape a tensor of shape {} to {}", shape_.str(),
                 shape.str());
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::slice(std::int64_t begin, std::int64_t end) const {
  SYSTOLIC_CHECK(rank() >= 1 && 0 <= begin && begin <= end && end <= shape_[0],
                 "slice [{}, {}) out of range for shape {}", begin, end, shape_.str());
  std::int64_t row = shape_[0] ? numel() / shape_[0] : 0;
  Shape s = shape_;
  s[0] = end - begin;
  return view(begin * row, s);
}

Tensor Tensor::view(std::int64_t element_offset, Shape shape) const {
  std::size_t size = dtype_size(dtype_);
  std::size_t new_offset = offset_ + static_cast<std::size_t>(element_offset) * size;
  SYSTOLIC_CHECK(storage_ && element_offset >= 0 &&
                     new_offset + static_cast<std::size_t>(shape.numel()) * size <= storage_->bytes(),
                 "view of {} elements at offset {} exceeds the storage", shape.numel(), element_offset);
  Tensor t = *this;
  t.offset_ = new_offset;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::clone() const {
  Tensor t(shape_, dtype_, device());
  t.copy_from(*this);
  return t;
}

Tensor Tensor::to(Device device) const {
  if (device == this->device()) return *this;
  Tensor t(shape_, dtype_, device);
  t.copy_from(*this);
  return t;
}

Tensor Tensor::to(DType dtype) const {
  SYSTOLIC_CHECK(device().is_cpu(), "dtype conversion runs on the CPU; copy the tensor to the CPU first");
  if (dtype == dtype_) return clone();
  Tensor t(shape_, dtype, device());
  std::int64_t n = numel();
  visit_dtype(dtype_, [&](auto src_tag) {
    using S = typename decltype(src_tag)::type;
    const S* src = static_cast<const S*>(raw_data());
    visit_dtype(dtype, [&](auto dst_tag) {
      using D = typename decltype(dst_tag)::type;
      D* dst = static_cast<D*>(t.raw_data());
      for (std::int64_t i = 0; i < n; ++i) dst[i] = value_as<D>(to_double(src[i]));
    });
  });
  return t;
}

void Tensor::copy_from(const Tensor& other) {
  SYSTOLIC_CHECK(other.numel() == numel() && other.dtype_ == dtype_,
                 "copy_from: source {} {} does not match destination {} {}", dtype_name(other.dtype_),
                 other.shape_.str(), dtype_name(dtype_), shape_.str());
  if (device().is_xla() || other.device().is_xla()) return xla::copy(*this, other);
  copy_bytes(raw_data(), device(), other.raw_data(), other.device(), nbytes());
}

void Tensor::fill(double value) {
  SYSTOLIC_CHECK(device().is_cpu(), "Tensor::fill runs on the CPU; use ops::fill on devices");
  std::int64_t n = numel();
  visit_dtype(dtype_, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T v = value_as<T>(value);
    std::fill_n(static_cast<T*>(raw_data()), n, v);
  });
}

std::vector<double> Tensor::to_doubles() const {
  Tensor host = to(Device::cpu());
  std::vector<double> out(static_cast<std::size_t>(numel()));
  visit_dtype(dtype_, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = static_cast<const T*>(host.raw_data());
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = to_double(p[i]);
  });
  return out;
}

double Tensor::item() const {
  SYSTOLIC_CHECK(numel() == 1, "item() of a tensor with {} elements", numel());
  return to_doubles()[0];
}

Arrays Arrays::slice(std::int64_t begin, std::int64_t end) const {
  Arrays out;
  for (const Tensor& t : *this) out.push_back(t.slice(begin, end));
  return out;
}

Arrays Arrays::to(Device device) const {
  Arrays out;
  for (const Tensor& t : *this) out.push_back(t.to(device));
  return out;
}

}  // namespace systolic
