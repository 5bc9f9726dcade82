// The CUDA backend: one backend for every GPU (each op runs on the device of its tensors, on that device's
// stream). Its ops are defined by family, each file with the dtypes its ops take:
//   elementwise.cu  fill, copy, cast, add_n, accumulate, scale_shift, moving_average, activations, dropout,
//                   padding, concatenation, gathering rows, image augmentation
//   losses.cu       softmax cross entropy, cross entropy from probabilities, mean squared error, accuracy
//   optimizers.cu   Adam, SGD, RMSprop over the flat parameter buffer (one fused kernel each)
//   batch_norm.cu   batch normalisation (our kernels, deterministic reductions)
//   conv.cc         convolution through cuDNN (NHWC, algorithm chosen once per shape)
//   pool.cc         pooling through cuDNN
//   dense.cc        dense layers through cuBLASLt (bias epilogue)
//   dnn_kernels.cu  helper kernels of conv, pool and dense: kernel transposes, padding, bias add and gradient
// backend.cc builds the table. A .cu file reads kernel -> launcher -> entry; its entries only unpack tensors the
// common entry point (src/ops/ops.cc) has checked and report CUDA's statuses (SYSTOLIC_CUDA_CHECK). Contracts:
// include/systolic/ops.h.
#pragma once

#include "ops/backend.h"

namespace systolic::ops::cuda {

SYSTOLIC_DECLARE_BACKEND_OPS()

const Backend& backend();

}  // namespace systolic::ops::cuda
