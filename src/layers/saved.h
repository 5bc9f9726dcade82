// A layer call's tensors by index in LayerCall::saved (what forward keeps for backward, and scratch): slot i of
// `count` is made on first use and made again when its shape or dtype changes (a new batch size, a policy), so a
// layer asks only for the slots its configuration uses.
#pragma once

#include <systolic/layer.h>
#include <systolic/ops.h>

#include <cstddef>

namespace systolic::layers {

inline Tensor saved_slot(LayerCall& c, std::size_t i, std::size_t count, const Shape& s, DType dtype,
                         Device device) {
  if (c.saved.size() != count) c.saved.assign(count, Tensor());
  Tensor& t = c.saved[i];
  if (!t.defined() || t.shape() != s || t.dtype() != dtype) t = Tensor(s, dtype, device);
  return t;
}

// A weight's gradient += g, g summed in the data's dtype (bfloat16 under a mixed policy): widened first into slot
// `wide` when the gradient is float32.
inline void add_weight_gradient(LayerCall& c, std::size_t wide, std::size_t count, const Tensor& g,
                                const Weight& w) {
  Tensor sum = g.reshape(w.grad.shape());
  if (sum.dtype() != w.grad.dtype()) {
    Tensor widened = saved_slot(c, wide, count, w.grad.shape(), w.grad.dtype(), w.grad.device());
    ops::cast(sum, widened);
    sum = widened;
  }
  Tensor grad = w.grad;
  ops::accumulate(sum, grad);
}

}  // namespace systolic::layers
