// Where each part of a concatenation lies in the output, shared by the backends. Along `axis`, y is `outer`
// rows (the product of the dimensions before the axis) of `row` elements; part k fills `width[k]` elements of
// each row from `offset[k]`.
//
// In backward an undefined gradient (an input that needs none) is skipped, but its width still moves the
// parts after it; it is the row's width left over by the defined parts when it is the only undefined one.
// With several undefined parts followed by a defined one the layout cannot be known, which is an error.
#pragma once

#include <systolic/tensor.h>

#include <vector>

namespace systolic::ops {

struct ConcatLayout {
  std::int64_t outer = 1, row = 0;
  std::vector<std::int64_t> width, offset;
};

inline ConcatLayout concat_layout(const char* op, const Tensor& y, const std::vector<Tensor>& parts,
                                  int axis) {
  SYSTOLIC_CHECK(y.defined() && axis >= 0 && axis < y.rank(), "{}: axis {} is not an axis of the output {}",
                 op, axis, y.shape().str());
  ConcatLayout l;
  for (int i = 0; i < axis; ++i) l.outer *= y.dim(i);
  l.row = l.outer ? y.numel() / l.outer : 0;
  const std::int64_t inner =
      l.row && y.dim(axis) ? l.row / y.dim(axis) : 0;  // elements per step along the axis
  std::int64_t known = 0, undefined = 0;
  l.width.assign(parts.size(), 0);
  for (std::size_t k = 0; k < parts.size(); ++k) {
    const Tensor& x = parts[k];
    if (!x.defined()) {
      ++undefined;
      continue;
    }
    bool fits = x.rank() == y.rank() && x.dtype() == y.dtype();
    for (int i = 0; fits && i < y.rank(); ++i) fits = i == axis || x.dim(i) == y.dim(i);
    SYSTOLIC_CHECK(fits, "{}: part {} ({} {}) does not fit the output ({} {}) off axis {}", op, k,
                   dtype_name(x.dtype()), x.shape().str(), dtype_name(y.dtype()), y.shape().str(), axis);
    l.width[k] = x.dim(axis) * inner;
    known += l.width[k];
  }
  SYSTOLIC_CHECK(undefined > 0 ? known <= l.row : known == l.row,
                 "{}: the parts' sizes along axis {} do not add up to the output's {}", op, axis,
                 y.shape().str());
  std::int64_t at = 0;
  bool ambiguous = false;
  l.offset.assign(parts.size(), 0);
  for (std::size_t k = 0; k < parts.size(); ++k) {
    if (!parts[k].defined()) {
      if (undefined == 1)
        l.width[k] = l.row - known;
      else
        ambiguous = true;
    } else {
      SYSTOLIC_CHECK(!ambiguous,
                     "{}: part {} follows {} undefined parts, whose sizes along axis {} are unknown", op, k,
                     undefined, axis);
    }
    l.offset[k] = at;
    at += l.width[k];
  }
  return l;
}

}  // namespace systolic::ops
