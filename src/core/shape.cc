#include <systolic/error.h>
#include <systolic/shape.h>

namespace systolic {

std::int64_t Shape::numel() const {
  std::int64_t n = 1;
  for (auto d : dims_) n *= d;
  return n;
}

Shape Shape::with_batch(std::int64_t n) const {
  std::vector<std::int64_t> d;
  d.reserve(dims_.size() + 1);
  d.push_back(n);
  d.insert(d.end(), dims_.begin(), dims_.end());
  return Shape(std::move(d));
}

Shape Shape::without_batch() const {
  SYSTOLIC_CHECK(!dims_.empty(), "Shape::without_batch on a scalar shape");
  return Shape(std::vector<std::int64_t>(dims_.begin() + 1, dims_.end()));
}

std::string Shape::str() const {
  std::string s = "(";
  for (std::size_t i = 0; i < dims_.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(dims_[i]);
  }
  if (dims_.size() == 1) s += ",";
  return s + ")";
}

std::string Shape::keras_str() const {
  std::string s = "(None";
  for (auto d : dims_) s += ", " + std::to_string(d);
  return s + ")";
}

}  // namespace systolic
