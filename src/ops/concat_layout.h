// Where each part of a concatenation lies in the output, shared by the backends. Along `axis`, y is `outer`
// rows (the product of the dimensions before the axis) of `row` elements; part k fills `width[k]` elements of
// each row from `offset[k]`.
//
// In backward an undefined gradient (an input that needs none) is skipped, but its width still moves the
// parts after it; it is the row's width left over by the defined parts when it is the only undefined one
// (ops.cc checks that the layout is known: no defined part after two undefined ones, widths that add up).
// No systolic error formatting here: CUDA files include it.
#pragma once

#include <systolic/tensor.h>

#include <vector>

namespace systolic::ops {

struct ConcatLayout {
  std::int64_t outer = 1, row = 0;
  std::vector<std::int64_t> width, offset;
  std::int64_t known = 0;  // the widths of the defined parts
  int undefined = 0;       // how many parts are undefined
};

// The layout of checked arguments: axis in [0, y's rank), defined parts fit y off the axis.
inline ConcatLayout concat_layout(const Tensor& y, const std::vector<Tensor>& parts, int axis) {
  ConcatLayout l;
  for (int i = 0; i < axis; ++i) l.outer *= y.dim(i);
  l.row = l.outer ? y.numel() / l.outer : 0;
  const std::int64_t inner =
      l.row && y.dim(axis) ? l.row / y.dim(axis) : 0;  // elements per step along the axis
  l.width.assign(parts.size(), 0);
  for (std::size_t k = 0; k < parts.size(); ++k) {
    if (!parts[k].defined()) {
      ++l.undefined;
      continue;
    }
    l.width[k] = parts[k].dim(axis) * inner;
    l.known += l.width[k];
  }
  std::int64_t at = 0;
  l.offset.assign(parts.size(), 0);
  for (std::size_t k = 0; k < parts.size(); ++k) {
    if (!parts[k].defined() && l.undefined == 1) l.width[k] = l.row - l.known;
    l.offset[k] = at;
    at += l.width[k];
  }
  return l;
}

}  // namespace systolic::ops
