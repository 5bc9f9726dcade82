// A layer call's tensors by index in LayerCall::saved (what forward keeps for backward, and scratch): slot i of
// `count` is made on first use and made again when its shape or dtype changes (a new batch size, a policy), so a
// layer asks only for the slots its configuration uses.
#pragma once

#include <systolic/layer.h>

#include <cstddef>

namespace systolic::layers {

inline Tensor saved_slot(LayerCall& c, std::size_t i, std::size_t count, const Shape& s, DType dtype,
                         Device device) {
  if (c.saved.size() != count) c.saved.assign(count, Tensor());
  Tensor& t = c.saved[i];
  if (!t.defined() || t.shape() != s || t.dtype() != dtype) t = Tensor(s, dtype, device);
  return t;
}

}  // namespace systolic::layers
