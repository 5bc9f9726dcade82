// The XLA backend: one backend for every XLA device (xla:cpu, xla:cuda, xla:tpu: PJRT plugins, core/xla). Its ops
// emit StableHLO into the current trace (emit.h, core/xla/trace.h): a recorded training step is one program, and
// an op called outside a recording is traced alone and run at once. Its ops are defined by family, each file with
// the dtypes its ops take, under the names of the CPU backend's (src/ops/cpu/<family>.cc):
//   conv.cc          convolution (stablehlo.convolution: NHWC x HWIO, grouped), bias_add
//   pool.cc          max and average pooling (reduce_window; select_and_scatter for max's gradient)
//   dense.cc         dense layers (dot_general)
//   batch_norm.cc    batch normalisation (reductions; an all_reduce of the sums across replicas)
//   activations.cc   the activations (activation_math.h's formulas, as StableHLO)
//   elementwise.cc   fill, copy, cast, add_n, accumulate, scale_shift, moving_average, dropout (Philox in integer
//                    ops, bit for bit the CPU's masks), padding, concatenation, gathering rows
//   augment.cc       augment_images, gaussian noise, random image transforms, affine transforms, contrast
//   losses.cc        softmax cross entropy, cross entropy from probabilities, mean squared error, accuracy
//   optimizers.cc    Adam, SGD, RMSprop over the flat parameter buffer
//   norm_merge.cc    layer normalisation, broadcasting binary ops, normalize, transpose
//   regularizers.cc  regularize, orthogonal_regularize, constrain
//   resize.cc        resize2d
// Helpers that define no op: emit.h/.cc (reads, writes, expressions), philox.h (the counter-based streams).
// Contracts: include/systolic/ops.h.
#pragma once

#include "ops/backend.h"

namespace systolic::ops::xla {

SYSTOLIC_DECLARE_BACKEND_OPS()

const Backend& backend();

}  // namespace systolic::ops::xla
