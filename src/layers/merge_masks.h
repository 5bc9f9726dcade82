// Keras's masks through the merge layers (Layer::combines_masks): the output's mask from the inputs' masks, as
// Keras 3's Merge.compute_mask and Concatenate.compute_mask make it. The values themselves are merged as without
// masks (those merges do not read them), except Multiply's (merge.cc); Maximum and Minimum refuse masked inputs.
#pragma once

#include <systolic/tensor.h>

#include <string>
#include <vector>

namespace systolic::layers {

// Add, Subtract, Average, Multiply (which have a mask when every input has one): the OR of the masks, which share
// the output mask's shape (masks of other shapes are refused, naming `layer`).
void merge_masks_or(const std::string& layer, const std::vector<Tensor>& masks, Tensor& out);
// Concatenate along `axis` (of the full shape, batch included) of `inputs`: each input's mask, or ones for an
// input without one, repeated over its last axis, concatenated along `axis`, then ANY over the last axis. Along the
// last axis that is the OR of the masks (ones when an input has none); along another, the masks (or ones)
// concatenated along it.
void concatenate_masks(const std::string& layer, const std::vector<Tensor>& masks,
                       const std::vector<Tensor>& inputs, int axis, Tensor& out);

}  // namespace systolic::layers
