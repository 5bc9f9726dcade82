// Launchers of the elementwise kernels (elementwise.cu): fill, add_n, accumulate, scale_shift,
// moving_average, activations, dropout, padding, strided copies (concatenation), gathering rows, image
// augmentation. Raw device pointers, sizes in elements, the stream; each returns the launch status. The
// checking entry points are CudaBackend's methods in elementwise_ops.cc. No systolic header here: nvcc
// compiles it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "ops/cuda/element.h"

namespace systolic::ops::augment {
struct Config;  // ops/augment_math.h
}

namespace systolic::ops::cuda {

// The same values as systolic::Activation.
enum class ActivationKind : int { linear, relu, sigmoid, tanh, softmax };

// dst[i] = src[i] converted (float32, float64, bfloat16; to bfloat16 rounding to nearest even, as the CPU
// does).
cudaError_t launch_cast(const void* src, Element src_type, void* dst, Element dst_type, std::int64_t n,
                        cudaStream_t stream);

// x[0..n) = the element whose bytes are the low `element_bytes` (1, 2, 4 or 8) bytes of `bits`.
cudaError_t launch_fill(void* x, std::int64_t n, int element_bytes, std::uint64_t bits, cudaStream_t stream);

// y = sum of xs[0..count), added in order from 0 (count <= kAddNMax; y may be one of them); with accumulate,
// y = ((y + xs[0]) + xs[1]) ... (so accumulate of one tensor is dst += src).
constexpr int kAddNMax = 8;
cudaError_t launch_add_n(const void* const* xs, int count, void* y, bool accumulate, std::int64_t n,
                         Element t, cudaStream_t stream);

// y = x * scale + shift, with scale and shift in the element type (as the CPU does); y may alias x.
cudaError_t launch_scale_shift(const void* x, void* y, std::int64_t n, double scale, double shift, Element t,
                               cudaStream_t stream);

// moving = moving * momentum + value * (1 - momentum).
cudaError_t launch_moving_average(void* moving, const void* value, std::int64_t n, double momentum, Element t,
                                  cudaStream_t stream);

// Activations over rows x cols (softmax over each row of `cols`; the others elementwise). y may alias x.
cudaError_t launch_activation_forward(ActivationKind a, const void* x, void* y, std::int64_t rows,
                                      std::int64_t cols, Element t, cudaStream_t stream);
// dx from the forward output y and dy; dx may alias dy.
cudaError_t launch_activation_backward(ActivationKind a, const void* y, const void* dy, void* dx,
                                       std::int64_t rows, std::int64_t cols, Element t, cudaStream_t stream);

// Inverted dropout: out[i] = in[i] * scale where unit_float(philox(key, i / 4)[i % 4]) >= threshold, else 0,
// with key = philox::dropout_key(seed, *step) read on the device (step null: step 0). out may alias in.
cudaError_t launch_dropout(const void* in, void* out, std::int64_t n, float threshold, float scale,
                           std::uint64_t seed, const double* step, Element t, cudaStream_t stream);

// Zero padding of NHWC images: y (N, OH, OW, C) from x (N, H, W, C) placed at (top, left); backward the
// window back.
cudaError_t launch_pad2d_forward(const void* x, void* y, std::int64_t N, std::int64_t H, std::int64_t W,
                                 std::int64_t C, std::int64_t OH, std::int64_t OW, std::int64_t top,
                                 std::int64_t left, int element_bytes, cudaStream_t stream);
cudaError_t launch_pad2d_backward(const void* dy, void* dx, std::int64_t N, std::int64_t H, std::int64_t W,
                                  std::int64_t C, std::int64_t OH, std::int64_t OW, std::int64_t top,
                                  std::int64_t left, int element_bytes, cudaStream_t stream);

// rows x width elements: dst[r * dst_pitch + j] = src[r * src_pitch + j] (pitches in elements).
cudaError_t launch_copy_rows(const void* src, std::int64_t src_pitch, void* dst, std::int64_t dst_pitch,
                             std::int64_t rows, std::int64_t width, int element_bytes, cudaStream_t stream);

// dst[k, :] = convert(src[indices[k], :]) for k < count, rows of `row` elements; an index outside [0,
// src_rows) sets `flag` (context.h's kIndexOutOfRange) in *error_flags and writes zeros. indices: int32, or
// int64 when indices_64. src: uint8, int32, float32, float64; dst: float32, bfloat16, float64, int32.
cudaError_t launch_gather_rows(const void* src, Element src_type, std::int64_t src_rows, std::int64_t row,
                               const void* indices, bool indices_64, std::int64_t count, void* dst,
                               Element dst_type, int* error_flags, int flag, cudaStream_t stream);

// Augments N float images (H, W, C): sample k draws from Philox at (seed, first + k) (ops/augment_math.h).
cudaError_t launch_augment_images(const float* x, float* y, std::int64_t N, std::int64_t H, std::int64_t W,
                                  std::int64_t C, const augment::Config& config, std::uint64_t seed,
                                  std::uint64_t first, cudaStream_t stream);

}  // namespace systolic::ops::cuda
