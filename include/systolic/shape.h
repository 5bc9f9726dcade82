// Shape: the dimensions of a tensor, outermost first (NHWC for images).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace systolic {

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<std::int64_t> dims) : dims_(dims) {}
  explicit Shape(std::vector<std::int64_t> dims) : dims_(std::move(dims)) {}

  int rank() const { return static_cast<int>(dims_.size()); }
  // Negative indices count from the end, as in Python.
  std::int64_t operator[](int i) const { return dims_.at(i < 0 ? i + rank() : i); }
  std::int64_t& operator[](int i) { return dims_.at(i < 0 ? i + rank() : i); }
  std::int64_t numel() const;
  const std::vector<std::int64_t>& dims() const { return dims_; }
  bool operator==(const Shape& other) const = default;

  Shape with_batch(std::int64_t n) const;  // (n, dims...)
  Shape without_batch() const;             // drops the first dimension
  std::string str() const;                 // "(32, 32, 3)"
  std::string keras_str() const;           // "(None, 32, 32, 3)": this shape with a leading batch of None

 private:
  std::vector<std::int64_t> dims_;
};

}  // namespace systolic
