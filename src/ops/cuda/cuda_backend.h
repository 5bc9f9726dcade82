// The CUDA backend: one backend for every GPU (each op runs on the device of its tensors, on that device's
// stream). Its ops are defined by family, each file with the dtypes its ops take; a family's file has the name of
// the CPU backend's (src/ops/cpu/<family>.cc; tests/test_source_layout.cc checks it):
//   conv.cc          convolution through cuDNN (NHWC, algorithm chosen once per shape); bias_add
//   pool.cc          pooling through cuDNN
//   dense.cc         dense layers through cuBLASLt (bias epilogue)
//   batch_norm.cu    batch normalisation (our kernels, deterministic reductions)
//   activations.cu   the activations (activation_math.h's formulas; softmax and log_softmax over rows)
//   elementwise.cu   fill, copy, cast, add_n, accumulate, scale_shift, moving_average, dropout, padding,
//                    concatenation, gathering rows
//   augment.cu       augment_images, gaussian noise, random image transforms, affine transforms, contrast
//   losses.cu        softmax cross entropy, cross entropy from probabilities, mean squared error, accuracy
//   optimizers.cu    Adam, SGD, RMSprop over the flat parameter buffer (one fused kernel each)
//   norm_merge.cu    layer normalisation, broadcasting binary ops, normalize, transpose
//   regularizers.cu  regularize, orthogonal_regularize, constrain
//   resize.cu        resize2d (UpSampling2D)
// Helpers that define no op: dnn_kernels.cu (kernels of conv, pool and dense: kernel transposes, padding, bias add
// and gradient), kernels.cuh (what every .cu shares), context.cc. backend.cc builds the table. A .cu file reads
// kernel -> launcher -> entry; its entries only unpack tensors the common entry point (src/ops/ops.cc) has checked
// and report CUDA's statuses (SYSTOLIC_CUDA_CHECK). Contracts: include/systolic/ops.h.
#pragma once

#include "ops/backend.h"

namespace systolic::ops::cuda {

SYSTOLIC_DECLARE_BACKEND_OPS()

const Backend& backend();

}  // namespace systolic::ops::cuda
