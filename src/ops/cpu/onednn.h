// float32 and bfloat16 CPU ops through oneDNN primitives (NHWC memory, OpenMP threads). Same contracts as ops.h.
// bfloat16 data reaches these functions only when runs_bf16(); parameters and their gradients (biases, batch-norm
// statistics, weight gradients) may then stay float32, as mixed precision keeps them.
#pragma once

#include <systolic/ops.h>

#include <string>

namespace systolic::ops::onednn {

void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y, const Conv2DParams& p);
void conv2d_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw, Tensor& db,
                     const Conv2DParams& p);
void pool2d_forward(const Tensor& x, Tensor& y, Tensor& workspace, const Pool2DParams& p);
void pool2d_backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& workspace, Tensor& dx,
                     const Pool2DParams& p);
void batch_norm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                  const Tensor& mean, const Tensor& var, Tensor& y, double eps);
// Whether oneDNN has JIT batch-norm kernels (forward and backward) for x's shape and dtype. For a few channels
// (the seed CNN's input has 3) it has only its generic C++ implementation, which the CPU's loops outrun.
bool has_fast_batch_norm(const Tensor& x, double eps);
void batch_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& var,
                         const Tensor& dy, Tensor& dx, Tensor& dgamma, Tensor& dbeta, double eps);
// Layer normalisation (kind layer) over rows of K contiguous values (x's trailing axes).
void layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y, Tensor& mean,
                        Tensor& rstd, std::int64_t K, double eps);
void layer_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                         const Tensor& dy, Tensor& dx, Tensor& dgamma, Tensor& dbeta, std::int64_t K);
void dense_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y);
void dense_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw, Tensor& db);
// float32 only (onednn_rnn.cc).
void rnn_sequence_forward(const RnnCellParams& p, bool reverse, const Tensor& x, const Tensor& kernel,
                          const Tensor& recurrent, const Tensor& bias, const Tensor& h0, const Tensor& c0,
                          Tensor& y, Tensor& h_last, Tensor& c_last, Tensor& workspace);
void rnn_sequence_backward(const RnnCellParams& p, bool reverse, const Tensor& x, const Tensor& kernel,
                           const Tensor& recurrent, const Tensor& bias, const Tensor& h0, const Tensor& c0,
                           const Tensor& y, const Tensor& workspace, const Tensor& dy, const Tensor& dh_last,
                           const Tensor& dc_last, Tensor& dx, Tensor& dkernel, Tensor& drecurrent,
                           Tensor& dbias, Tensor& dh0, Tensor& dc0);
// Row-major C[M, N] = alpha * op(A) op(B) + beta * C (op: transposed when ta / tb), float32, leading dimensions
// given (rows of strided views): oneDNN's sgemm, on the calling thread (attention calls it per (batch, head) from
// its own parallel loop).
void sgemm(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const float* A,
           std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc);
void activation_forward(const Activation& a, const Tensor& x, Tensor& y);
void activation_backward(const Activation& a, const Tensor& y, const Tensor& dy, Tensor& dx);

// Whether the ops here take bfloat16 data on this CPU: oneDNN has native bfloat16 kernels for it (AVX-512 BF16
// or AMX). Elsewhere the CPU backend widens bfloat16 to float32 around these ops (bf16_emulation.h).
bool runs_bf16();
// Whether the ops here take data of dtype t on this CPU.
inline bool takes(DType t) {
  return t == DType::float32 || (t == DType::bfloat16 && runs_bf16());
}

// oneDNN's version and the instruction set its kernels use here ("avx512_core", ...), for `systolic info`.
std::string version();
std::string cpu_isa();

}  // namespace systolic::ops::onednn
