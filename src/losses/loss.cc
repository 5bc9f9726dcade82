// What every loss shares: its buffers, and Keras's mask folded into the weights (keras/src/losses/loss.py's
// apply_mask with reduction sum_over_batch_size: each unmasked row weighs its weight times rows / unmasked rows).
#include <systolic/losses.h>
#include <systolic/ops.h>

namespace systolic::losses {

Tensor LossBuffer::rows(const Shape& shape, DType dtype, Device device) {
  if (!buffer_.defined() || buffer_.dtype() != dtype || buffer_.device() != device ||
      buffer_.shape().without_batch() != shape.without_batch() || buffer_.dim(0) < shape[0])
    buffer_ = Tensor(shape, dtype, device);
  return buffer_.slice(0, shape[0]);
}

bool Loss::compute(LossArgs& a) const {
  if (!a.mask.defined() || folds_mask()) return compute_weighted(a);
  const DType w = a.output.dtype() == DType::float64 ? DType::float64 : DType::float32;
  Tensor weights = masked_.rows(a.mask.shape(), w, a.mask.device());
  ops::mask_weights(a.mask, a.weights, /*normalize=*/true, weights);
  LossArgs b{a.output, a.logits,  a.sigmoid_logits, a.labels,    weights,
             a.total,  a.doutput, a.dlogits,        a.grad_scale};
  return compute_weighted(b);
}

}  // namespace systolic::losses
