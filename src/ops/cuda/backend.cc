// The CUDA backend's table, from the list (include/systolic/ops.h) and what each op's file defines.
#include "ops/cuda/cuda_backend.h"

namespace systolic::ops::cuda {

SYSTOLIC_DEFINE_BACKEND("cuda")

}  // namespace systolic::ops::cuda
