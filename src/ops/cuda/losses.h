// Launchers of the loss and metric kernels (losses.cu); the checking entry points are in losses_ops.cc. Each
// ADDS its batch sum to *total (float64, on the device) with one atomicAdd per block, and writes the gradient
// of grad_scale * that sum when the gradient pointer is not null. Predictions and dense labels are float32 or
// bfloat16 (computed in float, the per-row sums in double, as the CPU loops do); sparse labels are int32. A
// sparse label outside [0, classes) sets `flag` (context.h's kLabelOutOfRange) in *error_flags, adds nothing
// and gets a zero gradient row. No systolic header here: nvcc compiles it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "ops/cuda/elementwise.h"  // Element

namespace systolic::ops::cuda {

// Labels of a batch: sparse (int32 [rows]) when `sparse` is not null, else dense ([rows, classes] of
// dense_type).
struct Labels {
  const std::int32_t* sparse = nullptr;
  const void* dense = nullptr;
  Element dense_type = Element::float32;
};

// Cross entropy of softmax(logits) per row of `classes`.
cudaError_t launch_softmax_cross_entropy(const void* logits, Element type, const Labels& labels,
                                         std::int64_t rows, std::int64_t classes, double* total,
                                         void* dlogits, double grad_scale, int* error_flags, int flag,
                                         cudaStream_t stream);

// Cross entropy of probabilities clipped to [eps, 1 - eps]; clipped entries get no gradient.
cudaError_t launch_crossentropy_from_probabilities(const void* probs, Element type, const Labels& labels,
                                                   std::int64_t rows, std::int64_t classes, double* total,
                                                   void* dprobs, double grad_scale, double eps,
                                                   int* error_flags, int flag, cudaStream_t stream);

// Mean over the `per_row` values of each of `rows` rows of (pred - target)^2; target of target_type.
cudaError_t launch_mean_squared_error(const void* pred, Element type, const void* target, Element target_type,
                                      std::int64_t rows, std::int64_t per_row, double* total, void* dpred,
                                      double grad_scale, cudaStream_t stream);

// Rows whose argmax (first of equal maxima, as the CPU's) equals the label or the argmax of the dense label
// row.
cudaError_t launch_accuracy_count(const void* pred, Element type, const Labels& labels, std::int64_t rows,
                                  std::int64_t classes, double* total, int* error_flags, int flag,
                                  cudaStream_t stream);

}  // namespace systolic::ops::cuda
