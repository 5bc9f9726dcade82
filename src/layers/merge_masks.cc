#include "layers/merge_masks.h"

#include <systolic/error.h>
#include <systolic/ops.h>

namespace systolic::layers {

namespace {

// The mask in out's dtype (a mixed model's masks may come in another).
Tensor in_dtype_of(const Tensor& mask, const Tensor& out) {
  if (mask.dtype() == out.dtype()) return mask;
  Tensor t(mask.shape(), out.dtype(), out.device());
  ops::cast(mask, t);
  return t;
}

Shape without_last(const Shape& s) {
  auto dims = s.dims();
  dims.pop_back();
  return Shape(dims);
}

}  // namespace

void merge_masks_or(const std::string& layer, const std::vector<Tensor>& masks, Tensor& out) {
  for (std::size_t i = 0; i < masks.size(); ++i) {
    SYSTOLIC_CHECK(masks[i].defined() && masks[i].shape() == out.shape(),
                   "layer '{}': input {} has no mask of the output's shape {}", layer, i, out.shape().str());
    const Tensor v = in_dtype_of(masks[i], out);
    if (i == 0)
      ops::copy(v, out);
    else
      ops::broadcast_forward(ops::BinaryKind::maximum, out, v, out);  // 0/1 values: OR
  }
}

void concatenate_masks(const std::string& layer, const std::vector<Tensor>& masks,
                       const std::vector<Tensor>& inputs, int axis, Tensor& out) {
  const int rank = out.rank() + 1;  // the inputs'
  if (axis == rank - 1) {
    for (const Tensor& m : masks)
      if (!m.defined()) return ops::fill(out, 1.0);  // an input without a mask counts everywhere
    bool first = true;
    for (const Tensor& m : masks) {
      SYSTOLIC_CHECK(m.shape() == out.shape(), "layer '{}': an input's mask {} is not the output's {}", layer,
                     m.shape().str(), out.shape().str());
      const Tensor v = in_dtype_of(m, out);
      if (first)
        ops::copy(v, out);
      else
        ops::broadcast_forward(ops::BinaryKind::maximum, out, v, out);  // 0/1 values: OR
      first = false;
    }
    return;
  }
  std::vector<Tensor> parts;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Shape want = without_last(inputs[i].shape());
    if (!masks[i].defined()) {
      parts.push_back(Tensor(want, out.dtype(), out.device()));
      ops::fill(parts.back(), 1.0);
      continue;
    }
    SYSTOLIC_CHECK(masks[i].shape() == want, "layer '{}': input {}'s mask {} does not match the input {}",
                   layer, i, masks[i].shape().str(), inputs[i].shape().str());
    parts.push_back(in_dtype_of(masks[i], out));
  }
  ops::concat_forward(parts, out, axis);
}

}  // namespace systolic::layers
