// Launchers of the attention kernels (attention_kernels.cu), used by attention.cc around its cuBLASLt products:
// the head-major copies of q, k, v, y and their gradients, the masked softmax of the score rows and its backward,
// and the dropout of the probabilities. Raw device pointers in, the launch status out; every launch is ordered on
// `stream`. float32 and float64 data (Element), computed in their own type. This header includes nothing of
// systolic's (nvcc compiles the .cu, g++ the caller).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "ops/cuda/element.h"

namespace systolic::ops::cuda::attn {

// A mask of any floating element type (non-zero keeps); data null: every position kept.
struct Mask {
  const void* data = nullptr;
  Element element = Element::float32;
};

// Which keys each query row sees (ops.h's attention_forward): the query mask [B, T], the key mask [B, S], the
// attention mask [B, T, S], the causal rule (s <= t) and the window rule (|t - s| < window, when window > 0).
// Score rows are (b, h, t) in [B, H, T, S] order.
struct Visibility {
  Mask query, key, pair;
  std::int64_t T = 0, S = 0, H = 0;
  bool causal = false;
  std::int64_t window = 0;
};

// dst [A, Y, X, Z] = src [A, X, Y, Z] with axes 1 and 2 swapped (the [B, T, H, D] <-> [B, H, T, D] layouts).
cudaError_t launch_swap12(const void* src, void* dst, Element type, std::int64_t A, std::int64_t X,
                          std::int64_t Y, std::int64_t Z, cudaStream_t stream);

// Each of `rows` rows of S scores (already scaled) in place -> the softmax of its kept scores, 0 at the others; a
// row with none kept all 0, or 1/S with `uniform` (ops.h's empty_rows_uniform). One warp per row.
cudaError_t launch_softmax_rows(void* probs, Element type, const Visibility& vis, std::int64_t rows,
                                bool uniform, cudaStream_t stream);

// out[e] = p[e] / (1 - rate) where element e is kept by ops::dropout_forward's rule for the key
// dropout_key(seed, *step) (step null: 0), else 0; over n elements.
cudaError_t launch_dropout(const void* p, void* out, Element type, std::int64_t n, double rate,
                           std::uint64_t seed, const double* step, cudaStream_t stream);

// The gradient of the scores from that of the probabilities after dropout, in place in `ds` (rows x S):
// d = ds (through dropout where `dropped` is not null: d / (1 - rate) where dropped is not 0, else 0), plus `own`
// (the probabilities' own gradient, rows x S) where it is not null, then ds = probs * (d - sum(probs * d)) * scale;
// a row that keeps no key gets 0.
cudaError_t launch_softmax_backward(const void* probs, const void* dropped, const void* own, void* ds,
                                    Element type, const Visibility& vis, std::int64_t rows, double rate,
                                    double scale, cudaStream_t stream);

// The additive score (ops.h's AttentionScore::additive) on the head-major copies qt [B, H, T, D] and kt [B, G, S, D]
// (query head h reads key head h / (H / G)): probs [B, H, T, S] = scale * sum_d w[d] tanh(q + k), w null: 1, nw 1:
// w[0] for every d.
cudaError_t launch_additive_scores(const void* qt, const void* kt, const void* w, std::int64_t nw,
                                   void* probs, Element type, std::int64_t B, std::int64_t H, std::int64_t G,
                                   std::int64_t T, std::int64_t S, std::int64_t D, double scale,
                                   cudaStream_t stream);

// Back through launch_additive_scores from ds [B, H, T, S] (the scores' gradient, scale in it): dqt [B, H, T, D],
// dkt [B, G, S, D] and dw [nw] (each written; null: skipped). dw needs `parts`, D values of scratch, when nw is 1.
// Every value is one thread's or one warp's sum (no atomics: deterministic).
cudaError_t launch_additive_backward(const void* qt, const void* kt, const void* w, std::int64_t nw,
                                     const void* ds, void* dqt, void* dkt, void* dw, void* parts,
                                     Element type, std::int64_t B, std::int64_t H, std::int64_t G,
                                     std::int64_t T, std::int64_t S, std::int64_t D, cudaStream_t stream);

}  // namespace systolic::ops::cuda::attn
