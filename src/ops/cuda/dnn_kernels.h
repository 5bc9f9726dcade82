// Launchers of the helper kernels around cuDNN and cuBLASLt (dnn_kernels.cu), used by conv.cc, pool.cc and
// dense.cc: kernel-layout transposes, explicit NHWC padding and cropping, the average-pooling count
// correction, bias addition and bias gradients. Raw device pointers in, the launch status out; every launch
// is ordered on `stream`. This header includes nothing of systolic's (nvcc compiles the .cu, g++ the
// callers).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "ops/cuda/element.h"

namespace systolic::ops::cuda::dnn {

// The tensors these kernels read and write are float32 or bfloat16 (Element); arithmetic is float.

// out = in^T for in [rows, cols] row-major, out [cols, rows] row-major, converting between element types;
// accumulate: out += in^T. Keras kernels (KH, KW, C, F) are [KH*KW*C, F]; cuDNN's NHWC filters (F, KH, KW, C)
// are [F, KH*KW*C].
cudaError_t launch_transpose(const void* in, Element in_type, void* out, Element out_type, std::int64_t rows,
                             std::int64_t cols, bool accumulate, cudaStream_t stream);

// y[n, h, w, c] (N, PH, PW, C) = x[n, h - top, w - left, c] (N, H, W, C) inside x, else `value`.
cudaError_t launch_pad_nhwc(const void* x, void* y, Element type, std::int64_t N, std::int64_t H,
                            std::int64_t W, std::int64_t C, std::int64_t PH, std::int64_t PW,
                            std::int64_t top, std::int64_t left, float value, cudaStream_t stream);

// x[n, h, w, c] (N, H, W, C) = y[n, h + top, w + left, c] (N, PH, PW, C): the inverse of the padding above.
cudaError_t launch_crop_nhwc(const void* y, void* x, Element type, std::int64_t N, std::int64_t H,
                             std::int64_t W, std::int64_t C, std::int64_t PH, std::int64_t PW,
                             std::int64_t top, std::int64_t left, cudaStream_t stream);

// Average pooling over explicitly padded input divides by the window area; this rescales to the count of
// valid (unpadded) cells: out[n, oh, ow, c] = in[...] * (window_h * window_w) / count(oh, ow), the count
// taken in the unpadded input (H, W) with the window at (oh*stride_h - pad_top, ow*stride_w - pad_left). in
// may equal out.
cudaError_t launch_pool_count_rescale(const void* in, void* out, Element type, std::int64_t N,
                                      std::int64_t OH, std::int64_t OW, std::int64_t C, std::int64_t H,
                                      std::int64_t W, int window_h, int window_w, int stride_h, int stride_w,
                                      int pad_top, int pad_left, cudaStream_t stream);

// y[r, c] += b[c] for y [rows, cols] (b may be null: nothing added), then y = max(y, 0) with relu: the
// convolution's epilogue, one pass over y.
cudaError_t launch_add_bias(void* y, Element y_type, const void* b, Element b_type, std::int64_t rows,
                            std::int64_t cols, bool relu, cudaStream_t stream);

// db[c] += sum over r of dy[r, c] (deterministic two-stage reduction; reduce.cuh). `partial` holds
// bias_grad_partial_bytes(rows, cols) bytes of device scratch.
std::size_t bias_grad_partial_bytes(std::int64_t rows, std::int64_t cols);
cudaError_t launch_bias_grad(const void* dy, Element dy_type, void* db, Element db_type, std::int64_t rows,
                             std::int64_t cols, void* partial, cudaStream_t stream);

}  // namespace systolic::ops::cuda::dnn
