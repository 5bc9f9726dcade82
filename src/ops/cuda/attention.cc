// Scaled dot-product attention on CUDA: not yet (no dtypes, so ops::supports says no and a model that needs it
// raises an Error naming the op and the device). The plan is cuDNN's SDPA through its graph API, which has never
// run on a GPU here; until it has, nothing claims it.
#include "ops/cuda/cuda_backend.h"

namespace systolic::ops::cuda {

const DTypes attention_forward_dtypes{};
void attention_forward(const AttentionParams&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                       const Tensor&, const Tensor&, const Tensor&, Tensor&, Tensor&) {
  throw Error("attention_forward: not on the CUDA backend");
}

const DTypes attention_backward_dtypes{};
void attention_backward(const AttentionParams&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                        const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, Tensor&,
                        Tensor&, Tensor&) {
  throw Error("attention_backward: not on the CUDA backend");
}

}  // namespace systolic::ops::cuda
