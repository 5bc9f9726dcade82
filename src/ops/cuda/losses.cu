// Losses and metrics on CUDA, each as kernel -> launcher -> entry (the arguments were checked at ops::<name>,
// src/ops/ops.cc). The formulas are the CPU loops' (src/ops/cpu/losses.cc), evaluated in the same precision:
// element values in float, exponentials, logarithms and sums in double. Each ADDS its batch sum to *total
// (float64, on the device) with one atomicAdd per block, and writes the gradient of grad_scale * that sum when
// asked. Row kernels give each row to one warp (lanes stride over the classes and combine by shuffles). A sparse
// label outside [0, classes) cannot be reported at once without a host synchronisation: it sets
// kLabelOutOfRange (context.h), which the next synchronize(device) raises as an Error; its row adds nothing and
// gets a zero gradient.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "ops/confusion_math.h"
#include "ops/cuda/context.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/kernels.cuh"
#include "ops/loss_math.h"
#include "ops/row_loss_math.h"

namespace systolic::ops::cuda {

namespace {

// Labels of a batch: sparse (int32 [rows]) when `sparse` is not null, else dense ([rows, classes] of
// dense_type).
struct Labels {
  const std::int32_t* sparse = nullptr;
  const void* dense = nullptr;
  Element dense_type = Element::float32;
};

// Adds the sum over the block of each v[k] to total[k * stride] (one atomic each per block). Every thread of the
// block must call it; a loop may call it again at once.
template <int N>
__device__ void block_add(const double (&v)[N], double* total, std::int64_t stride) {
  __shared__ double partial[N][kThreads / 32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int k = 0; k < N; ++k) {
    const double s = warp_sum(v[k]);
    if (lane == 0) partial[k][warp] = s;
  }
  __syncthreads();
  if (threadIdx.x < N) {
    double s = 0;
    for (int w = 0; w < int(blockDim.x >> 5); ++w) s += partial[threadIdx.x][w];
    atomicAdd(total + threadIdx.x * stride, s);
  }
  __syncthreads();  // partial is written again by the next call
}

__device__ void block_add(double v, double* total) {
  const double one[1] = {v};
  block_add(one, total, 0);
}

// Sparse label of row r, or -1 when it is out of [0, classes) (flagged in error_flags when `report`).
__device__ __forceinline__ std::int64_t checked_label(const std::int32_t* labels, std::int64_t r,
                                                      std::int64_t classes, int* error_flags, int flag,
                                                      bool report) {
  std::int64_t label = labels[r];
  if (label >= 0 && label < classes) return label;
  if (report) atomicOr(error_flags, flag);
  return -1;
}

// ---- softmax cross entropy: loss_r = lse - z[label] (sparse) or sum_c y_c (lse - z_c) (dense);
// gradient (softmax - onehot) or softmax * sum(y) - y, times grad_scale.

template <class T, class L>
__global__ void softmax_cross_entropy_kernel(const T* logits, const std::int32_t* sparse, const L* dense,
                                             std::int64_t rows, std::int64_t C, loss::RowWeights rw,
                                             double* total, T* dlogits, double grad_scale, int* error_flags,
                                             int flag) {
  const int lane = threadIdx.x & 31;
  double acc = 0;  // lane 0's rows
  SYSTOLIC_WARP_ROWS(r, rows) {
    const T* z = logits + r * C;
    float mx = -INFINITY;
    for (std::int64_t c = lane; c < C; c += 32) {
      float v = load(z, c);
      mx = v > mx ? v : mx;
    }
    mx = warp_max(mx);
    double se = 0;
    for (std::int64_t c = lane; c < C; c += 32) se += exp(double(load(z, c) - mx));
    se = warp_sum(se);
    const double lse = double(mx) + log(se);
    const double wr = rw(r), gs = grad_scale * wr;
    T* g = dlogits ? dlogits + r * C : nullptr;
    if (sparse) {
      const std::int64_t label = checked_label(sparse, r, C, error_flags, flag, lane == 0);
      if (lane == 0 && label >= 0) acc += wr * (lse - double(load(z, label)));
      __syncwarp();  // z[label] is read before any lane writes the gradient (which may share its memory)
      if (g)
        for (std::int64_t c = lane; c < C; c += 32)
          store_double(g, c,
                       label < 0 ? 0.0 : (exp(double(load(z, c)) - lse) - (c == label ? 1.0 : 0.0)) * gs);
    } else {
      const L* y = dense + r * C;
      double part = 0, ysum = 0;
      for (std::int64_t c = lane; c < C; c += 32) {
        double yc = double(load(y, c));
        part += yc * (lse - double(load(z, c)));
        ysum += yc;
      }
      part = warp_sum(part);
      ysum = warp_sum(ysum);
      if (lane == 0) acc += wr * part;
      if (g)
        for (std::int64_t c = lane; c < C; c += 32)
          store_double(g, c, (exp(double(load(z, c)) - lse) * ysum - double(load(y, c))) * gs);
    }
  }
  block_add(acc, total);
}

// ---- cross entropy from probabilities: loss_math.h's ce_of_probabilities, a row per warp (its statistic s, then
// the loss and, for categorical targets, G = sum g q, then the gradient).

template <class T, class L>
__global__ void crossentropy_kernel(const T* probs, const std::int32_t* sparse, const L* dense,
                                    std::int64_t rows, std::int64_t C, loss::RowWeights rw, double* total,
                                    T* dprobs, double grad_scale, double eps, int* error_flags, int flag) {
  const int lane = threadIdx.x & 31;
  const bool is_sparse = sparse != nullptr;
  double acc = 0;  // lane 0's rows
  SYSTOLIC_WARP_ROWS(r, rows) {
    const T* p = probs + r * C;
    const std::int64_t label = is_sparse ? checked_label(sparse, r, C, error_flags, flag, lane == 0) : 0;
    auto y = [&](std::int64_t c) {
      return is_sparse ? (label == c ? 1.0 : 0.0)
                       : double(load(dense + r * C, c));  // a bad label matches none
    };
    double s = 0;
    for (std::int64_t c = lane; c < C; c += 32)
      s += loss::ce_statistic_term<DoubleMath>(is_sparse, load_double(p, c), eps);
    s = warp_sum(s);
    double row = 0, G = 0;
    for (std::int64_t c = lane; c < C; c += 32) {
      const double pc = load_double(p, c);
      const loss::ValueGrad<double> t = loss::ce_of_probabilities<DoubleMath>(is_sparse, pc, y(c), s, eps);
      row += t.value;
      if (!is_sparse) G += t.grad * pc / s;
    }
    row = warp_sum(row);
    G = warp_sum(G);
    const double wr = rw(r);
    if (lane == 0 && label >= 0) acc += wr * loss::ce_row_loss<DoubleMath>(is_sparse, row, s);
    __syncwarp();  // the row is read before any lane writes the gradient (which may share its memory)
    if (dprobs)
      for (std::int64_t c = lane; c < C; c += 32) {
        const double pc = load_double(p, c);
        const double g = loss::ce_of_probabilities<DoubleMath>(is_sparse, pc, y(c), s, eps).grad;
        store_double(dprobs + r * C, c, loss::ce_gradient(is_sparse, g, G, s) * (grad_scale * wr));
      }
  }
  block_add(acc, total);
}

// ---- ignore_class and mask_weights: one block counts the values kept, then writes their weights (and the kept
// labels: each thread reads label i before it writes kept[i], which may share its memory). A mask of float32 or
// bfloat16 (M), or none.

template <class M>
__device__ __forceinline__ bool unmasked(const M* mask, std::int64_t i) {
  return !mask || float(load(mask, i)) != 0.0f;
}

template <class M>
__global__ void ignore_class_kernel(const std::int32_t* labels, std::int64_t n, std::int32_t ignore,
                                    loss::RowWeights rw, const M* mask, std::int32_t* kept,
                                    float* kept_weights) {
  __shared__ unsigned long long count;
  if (threadIdx.x == 0) count = 0;
  __syncthreads();
  unsigned long long mine = 0;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) mine += labels[i] != ignore && unmasked(mask, i);
  atomicAdd(&count, mine);
  __syncthreads();
  const double scale = count ? double(n) / double(count) : 0.0;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const std::int32_t label = labels[i];
    const bool keep = label != ignore && unmasked(mask, i);
    kept[i] = keep ? label : 0;
    kept_weights[i] = float(keep ? rw(i) * scale : 0.0);
  }
}

template <class M>
__global__ void mask_weights_kernel(const M* mask, std::int64_t n, loss::RowWeights rw, bool normalize,
                                    float* out) {
  __shared__ unsigned long long count;
  if (threadIdx.x == 0) count = 0;
  __syncthreads();
  unsigned long long mine = 0;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) mine += unmasked(mask, i);
  atomicAdd(&count, mine);
  __syncthreads();
  const double scale = !normalize ? 1.0 : count ? double(n) / double(count) : 0.0;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x)
    out[i] = float(unmasked(mask, i) ? rw(i) * scale : 0.0);
}

// ---- elementwise losses: loss_math.h's formulas, in double; each element's loss weighted by its share of its
// sample's (w). A hinge kind first learns whether every target is 0 or 1 (not_binary: set by the first kernel,
// read by the second).

template <class L>
__global__ void non_binary_targets_kernel(const L* target, std::int64_t n, int* not_binary) {
  SYSTOLIC_GRID_STRIDE(i, n) {
    if (!loss::binary_target(double(load(target, i)))) {
      atomicOr(not_binary, 1);
      return;
    }
  }
}

template <class T, class L>
__global__ void elementwise_loss_kernel(const T* pred, const L* target, std::int64_t n, loss::RowWeights rw,
                                        ElementLossParams p, double w, const int* not_binary, double* total,
                                        T* dpred, double grad_scale) {
  const bool binary = not_binary && *not_binary == 0;
  double acc = 0;
  SYSTOLIC_GRID_STRIDE(i, n) {
    const double t = double(load(target, i));
    const loss::ValueGrad<double> e =
        loss::element<loss::DoubleMath>(p, double(load(pred, i)), binary ? 2.0 * t - 1.0 : t);
    const double wi = rw(i);  // the element's sample's or row's weight
    acc += wi * e.value * w;
    if (dpred) store_double(dpred, i, e.grad * w * grad_scale * wi);
  }
  block_add(acc, total);
}

// ---- row losses: row_loss_math.h's formulas, in double; each row's statistics reduced over the warp's lanes
// (sums, or maxima), its loss added by lane 0 and its gradient written by every lane for its columns.

__device__ __forceinline__ double warp_max(double v) {
  for (int o = 16; o > 0; o >>= 1) v = fmax(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

template <class T, class L>
__global__ void row_loss_kernel(const T* pred, const L* target, std::int64_t rows, std::int64_t C,
                                double per_sample, loss::RowWeights rw, RowLossParams p, double* total,
                                T* dpred, double grad_scale) {
  namespace rl = row_loss_math;
  const int lane = threadIdx.x & 31, n = rl::stats(p);
  double acc = 0;  // lane 0's rows
  SYSTOLIC_WARP_ROWS(r, rows) {
    const T* x = pred + r * C;
    const L* t = target + r * C;
    double st[rl::kMaxStats];
    for (int i = 0; i < n; ++i) {
      const bool max = rl::is_max(p, i);
      double a = max ? -INFINITY : 0.0;
      for (std::int64_t c = lane; c < C; c += 32) {
        const double v = rl::term<DoubleMath>(p, i, load_double(x, c),
                                              rl::target<DoubleMath>(p, load_double(t, c), double(C)), st);
        a = max ? DoubleMath::max(a, v) : a + v;
      }
      st[i] = max ? warp_max(a) : warp_sum(a);
    }
    const double wr = rw(r);
    if (lane == 0) acc += wr * rl::value<DoubleMath>(p, st);
    if (dpred)
      for (std::int64_t c = lane; c < C; c += 32)
        store_double(dpred + r * C, c,
                     rl::gradient<DoubleMath>(p, load_double(x, c),
                                              rl::target<DoubleMath>(p, load_double(t, c), double(C)), st) *
                         (wr * grad_scale / per_sample));
  }
  block_add(acc / per_sample, total);
}

// ---- accuracy

// The CPU's argmax (best = 0; best = c whenever row[c] > row[best]) is the first index of the largest value
// that is not NaN, or 0 when row[0] is NaN. Each lane scans its columns in order, then the lanes combine:
// larger value, or the same value at a smaller index.
template <class T>
__device__ std::int64_t warp_argmax(const T* row, std::int64_t C, int lane) {
  float best_v = 0.0f;
  long long best_i = -1;
  for (std::int64_t c = lane; c < C; c += 32) {
    float v = load(row, c);
    if (!isnan(v) && (best_i < 0 || v > best_v)) best_v = v, best_i = c;
  }
  for (int o = 16; o > 0; o >>= 1) {
    float ov = __shfl_xor_sync(0xffffffffu, best_v, o);
    long long oi = __shfl_xor_sync(0xffffffffu, best_i, o);
    if (oi >= 0 && (best_i < 0 || ov > best_v || (ov == best_v && oi < best_i))) best_v = ov, best_i = oi;
  }
  if (best_i < 0 || isnan(load(row, 0))) return 0;
  return best_i;
}

template <class T, class L>
__global__ void accuracy_kernel(const T* pred, const std::int32_t* sparse, const L* dense, std::int64_t rows,
                                std::int64_t C, int k, loss::RowWeights rw, double* total) {
  const int lane = threadIdx.x & 31;
  double acc = 0;
  SYSTOLIC_WARP_ROWS(r, rows) {
    // A sparse label out of [0, C) is no error: its row is a miss (-1, not reported).
    const std::int64_t truth = sparse ? checked_label(sparse, r, C, nullptr, 0, /*report=*/false)
                                      : warp_argmax(dense + r * C, C, lane);
    bool hit;
    if (k == 1) {
      hit = warp_argmax(pred + r * C, C, lane) == truth;
    } else {  // in_top_k: fewer than k predictions greater than the label's
      float greater = 0;
      if (truth >= 0) {
        const double label_value = load_double(pred + r * C, truth);
        for (std::int64_t c = lane; c < C; c += 32)
          greater += load_double(pred + r * C, c) > label_value ? 1.f : 0.f;
      }
      hit = warp_sum(greater) < float(k);
    }
    if (lane == 0 && truth >= 0 && hit) acc += rw(r);
  }
  block_add(acc, total);
}

// ---- add_sum: the sum of x's values.
template <class T>
__global__ void add_sum_kernel(const T* x, std::int64_t n, double* total) {
  double acc = 0;
  SYSTOLIC_GRID_STRIDE(i, n) {
    acc += double(x[i]);
  }
  block_add(acc, total);
}

// f(Tag<T>{}, Tag<L>{}) for predictions T and dense labels L in {float, bfloat16}.
template <class F>
cudaError_t by_types(Element t, Element l, F&& f) {
  return visit_element<float, __nv_bfloat16>(t, [&](auto ttag) {
    return visit_element<float, __nv_bfloat16>(l, [&](auto ltag) { return f(ttag, ltag); });
  });
}

cudaError_t launch_softmax_cross_entropy(const void* logits, Element type, const Labels& labels,
                                         std::int64_t rows, std::int64_t classes, loss::RowWeights rw,
                                         double* total, void* dlogits, double grad_scale, int* error_flags,
                                         int flag, cudaStream_t stream) {
  if (rows == 0 || classes == 0) return cudaSuccess;
  return by_types(type, labels.dense_type, [&](auto ttag, auto ltag) {
    using T = typename decltype(ttag)::type;
    using L = typename decltype(ltag)::type;
    softmax_cross_entropy_kernel<T, L><<<reduction_blocks(rows * 32), kThreads, 0, stream>>>(
        static_cast<const T*>(logits), labels.sparse, static_cast<const L*>(labels.dense), rows, classes, rw,
        total, static_cast<T*>(dlogits), grad_scale, error_flags, flag);
    return cudaGetLastError();
  });
}

cudaError_t launch_crossentropy_from_probabilities(const void* probs, Element type, const Labels& labels,
                                                   std::int64_t rows, std::int64_t classes,
                                                   loss::RowWeights rw, double* total, void* dprobs,
                                                   double grad_scale, double eps, int* error_flags, int flag,
                                                   cudaStream_t stream) {
  if (rows == 0 || classes == 0) return cudaSuccess;
  return by_types(type, labels.dense_type, [&](auto ttag, auto ltag) {
    using T = typename decltype(ttag)::type;
    using L = typename decltype(ltag)::type;
    crossentropy_kernel<T, L><<<reduction_blocks(rows * 32), kThreads, 0, stream>>>(
        static_cast<const T*>(probs), labels.sparse, static_cast<const L*>(labels.dense), rows, classes, rw,
        total, static_cast<T*>(dprobs), grad_scale, eps, error_flags, flag);
    return cudaGetLastError();
  });
}

cudaError_t launch_elementwise_loss(const void* pred, Element type, const void* target, Element target_type,
                                    std::int64_t n, loss::RowWeights rw, const ElementLossParams& p, double w,
                                    int* not_binary, double* total, void* dpred, double grad_scale,
                                    cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return by_types(type, target_type, [&](auto ttag, auto ltag) {
    using T = typename decltype(ttag)::type;
    using L = typename decltype(ltag)::type;
    if (not_binary) {
      cudaError_t e = cudaMemsetAsync(not_binary, 0, sizeof(int), stream);
      if (e != cudaSuccess) return e;
      non_binary_targets_kernel<L>
          <<<reduction_blocks(n), kThreads, 0, stream>>>(static_cast<const L*>(target), n, not_binary);
      if ((e = cudaGetLastError()) != cudaSuccess) return e;
    }
    elementwise_loss_kernel<T, L><<<reduction_blocks(n), kThreads, 0, stream>>>(
        static_cast<const T*>(pred), static_cast<const L*>(target), n, rw, p, w, not_binary, total,
        static_cast<T*>(dpred), grad_scale);
    return cudaGetLastError();
  });
}

cudaError_t launch_row_loss(const void* pred, Element type, const void* target, Element target_type,
                            std::int64_t rows, std::int64_t classes, double per_sample, loss::RowWeights rw,
                            const RowLossParams& p, double* total, void* dpred, double grad_scale,
                            cudaStream_t stream) {
  if (rows == 0) return cudaSuccess;
  return by_types(type, target_type, [&](auto ttag, auto ltag) {
    using T = typename decltype(ttag)::type;
    using L = typename decltype(ltag)::type;
    row_loss_kernel<T, L><<<reduction_blocks(rows * 32), kThreads, 0, stream>>>(
        static_cast<const T*>(pred), static_cast<const L*>(target), rows, classes, per_sample, rw, p, total,
        static_cast<T*>(dpred), grad_scale);
    return cudaGetLastError();
  });
}

cudaError_t launch_accuracy_count(const void* pred, Element type, const Labels& labels, std::int64_t rows,
                                  std::int64_t classes, int k, loss::RowWeights rw, double* total,
                                  cudaStream_t stream) {
  if (rows == 0 || classes == 0) return cudaSuccess;
  return by_types(type, labels.dense_type, [&](auto ttag, auto ltag) {
    using T = typename decltype(ttag)::type;
    using L = typename decltype(ltag)::type;
    accuracy_kernel<T, L><<<reduction_blocks(rows * 32), kThreads, 0, stream>>>(
        static_cast<const T*>(pred), labels.sparse, static_cast<const L*>(labels.dense), rows, classes, k, rw,
        total);
    return cudaGetLastError();
  });
}

// ---- confusion counts: blockIdx.y strides over the thresholds, blockIdx.x and the threads over the elements; each
// block adds its four counts per threshold with one atomic each (whole numbers without weights: exact in any order)
// to the counts' rows of `stride` columns.
template <class T, class L>
__global__ void confusion_kernel(const T* pred, const L* labels, std::int64_t n, std::int64_t classes,
                                 ConfusionParams p, loss::RowWeights rw, double* counts,
                                 std::int64_t stride) {
  for (std::int64_t t = blockIdx.y; t < p.thresholds; t += gridDim.y) {
    const float threshold = float(confusion::threshold(p, t));
    double c[4] = {0, 0, 0, 0};  // tp, fp, tn, fn
    for (std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += std::int64_t(gridDim.x) * blockDim.x) {
      if (p.class_id >= 0 && i % classes != p.class_id) continue;
      double raw = double(load(pred, i));
      if (p.top_k > 0) {
        const T* row = pred + (i / classes) * classes;
        if (!confusion::in_top_k<float>([row](std::int64_t j) { return load(row, j); }, classes, i % classes,
                                        load(pred, i), p.top_k))
          raw = confusion::kOutsideTopK;
      }
      const float x = float(confusion::prediction(p, raw));
      const bool above = x > threshold, positive = float(load(labels, i)) != 0.f;
      c[above ? (positive ? 0 : 1) : (positive ? 3 : 2)] += rw(i);
    }
    block_add(c, counts + t, stride);
  }
}

// ---- regression sums: a block per column (blockIdx.x strides over them), its threads over the rows; one atomic per
// column and sum per launch, so the order of the additions is the block's.
template <class T, class L>
__global__ void regression_sums_kernel(const T* pred, const L* target, std::int64_t rows, std::int64_t C,
                                       loss::RowWeights rw, double* sums) {
  for (std::int64_t c = blockIdx.x; c < C; c += gridDim.x) {
    double v[4] = {0, 0, 0, 0};
    for (std::int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
      const double w = rw(r), t = double(load(target, r * C + c)), d = t - double(load(pred, r * C + c));
      v[0] += w * t;
      v[1] += w * t * t;
      v[2] += w * d * d;
      v[3] += 1;
    }
    block_add(v, sums + c, C);
  }
}

cudaError_t launch_regression_sums(const void* pred, Element type, const void* target, Element target_type,
                                   std::int64_t rows, std::int64_t C, loss::RowWeights rw, double* sums,
                                   cudaStream_t stream) {
  if (rows == 0 || C == 0) return cudaSuccess;
  return by_types(type, target_type, [&](auto ttag, auto ltag) {
    using T = typename decltype(ttag)::type;
    using L = typename decltype(ltag)::type;
    regression_sums_kernel<T, L><<<unsigned(std::min<std::int64_t>(C, 65535)), kThreads, 0, stream>>>(
        static_cast<const T*>(pred), static_cast<const L*>(target), rows, C, rw, sums);
    return cudaGetLastError();
  });
}

// ---- F-score counts: blockIdx.y and the threads stride over the classes (a thread per class of a tile of
// kThreads), blockIdx.x over the rows; with argmax the block first finds each row's maximum over all its classes.
// Each thread adds its class's four sums with one atomic each per block (whole numbers for 0/1 labels: exact in any
// order).
template <class T, class L>
__global__ void f_score_counts_kernel(const T* pred, const L* labels, std::int64_t rows, std::int64_t C,
                                      FScoreParams p, loss::RowWeights rw, double* counts) {
  __shared__ float partial[kThreads / 32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (std::int64_t c0 = std::int64_t(blockIdx.y) * blockDim.x; c0 < C;
       c0 += std::int64_t(gridDim.y) * blockDim.x) {
    const std::int64_t c = c0 + threadIdx.x;
    double v[4] = {0, 0, 0, 0};  // tp, fp, fn, support
    for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
      const T* x = pred + r * C;
      float row_max = 0.f;
      if (p.argmax) {  // every thread of the block takes part
        float m = load(x, 0);
        for (std::int64_t k = threadIdx.x; k < C; k += blockDim.x) m = fmaxf(m, load(x, k));
        m = warp_max(m);
        if (lane == 0) partial[warp] = m;
        __syncthreads();
        row_max = partial[0];
        for (int w = 1; w < int(blockDim.x >> 5); ++w) row_max = fmaxf(row_max, partial[w]);
        __syncthreads();  // partial is written again for the next row
      }
      if (c < C) {
        const double t =
            double(load(labels, r * C + c)) * rw(r);  // the row's terms times its sample's weight
        if (confusion::f_score_positive<float>(p, load(x, c), row_max)) {
          v[0] += t;
          v[1] += rw(r) - t;
        } else {
          v[2] += t;
        }
        v[3] += t;
      }
    }
    if (c < C)
      for (int k = 0; k < 4; ++k)
        if (v[k] != 0) atomicAdd(counts + k * C + c, v[k]);
  }
}

// ---- class confusion: a thread per item (its argmax over its row where asked, in float, the first maximum), one
// atomic per counted item (whole numbers without weights: exact in any order).
template <class T>
__device__ std::int64_t first_argmax(const T* row, std::int64_t k) {
  std::int64_t best = 0;
  float best_v = load(row, 0);
  for (std::int64_t j = 1; j < k; ++j) {
    const float v = load(row, j);
    if (v > best_v) best_v = v, best = j;
  }
  return best;
}

template <class T, class L>
__global__ void class_confusion_kernel(const T* pred, const std::int32_t* sparse, const L* dense,
                                       std::int64_t n, std::int64_t K, std::int64_t KL,
                                       ClassConfusionParams p, loss::RowWeights rw, double* counts) {
  SYSTOLIC_GRID_STRIDE(i, n) {
    const std::int64_t q = p.argmax_predictions ? first_argmax(pred + i * K, K)
                           : p.thresholded      ? (load(pred, i) >= float(p.threshold) ? 1 : 0)
                                                : confusion::value_class(load_double(pred, i), p.classes);
    const std::int64_t t = sparse            ? confusion::value_class(double(sparse[i]), p.classes)
                           : p.argmax_labels ? first_argmax(dense + i * KL, KL)
                                             : confusion::value_class(load_double(dense, i), p.classes);
    const std::int64_t cell = confusion::confusion_cell(p, t, q);
    if (cell >= 0) atomicAdd(counts + cell, p.integer_weights ? trunc(rw(i)) : rw(i));
  }
}

cudaError_t launch_class_confusion(const void* pred, Element type, const Labels& labels, std::int64_t n,
                                   std::int64_t K, std::int64_t KL, const ClassConfusionParams& p,
                                   loss::RowWeights rw, double* counts, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return by_types(type, labels.dense_type, [&](auto ttag, auto ltag) {
    using T = typename decltype(ttag)::type;
    using L = typename decltype(ltag)::type;
    class_confusion_kernel<T, L><<<reduction_blocks(n), kThreads, 0, stream>>>(
        static_cast<const T*>(pred), labels.sparse, static_cast<const L*>(labels.dense), n, K, KL, p, rw,
        counts);
    return cudaGetLastError();
  });
}

cudaError_t launch_f_score_counts(const void* pred, Element type, const void* labels, Element label_type,
                                  std::int64_t rows, std::int64_t C, const FScoreParams& p,
                                  loss::RowWeights rw, double* counts, cudaStream_t stream) {
  if (rows == 0 || C == 0) return cudaSuccess;
  return by_types(type, label_type, [&](auto ttag, auto ltag) {
    using T = typename decltype(ttag)::type;
    using L = typename decltype(ltag)::type;
    const std::int64_t tiles = (C + kThreads - 1) / kThreads;
    const std::int64_t row_blocks =
        std::min<std::int64_t>((rows + 7) / 8, std::max<std::int64_t>(1, kMaxReductionBlocks / tiles));
    const dim3 grid(unsigned(row_blocks), unsigned(std::min<std::int64_t>(tiles, 65535)));
    f_score_counts_kernel<T, L><<<grid, kThreads, 0, stream>>>(
        static_cast<const T*>(pred), static_cast<const L*>(labels), rows, C, p, rw, counts);
    return cudaGetLastError();
  });
}

cudaError_t launch_confusion_counts(const void* pred, Element type, const void* labels, Element label_type,
                                    std::int64_t n, std::int64_t classes, const ConfusionParams& p,
                                    loss::RowWeights rw, double* counts, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return by_types(type, label_type, [&](auto ttag, auto ltag) {
    using T = typename decltype(ttag)::type;
    using L = typename decltype(ltag)::type;
    const unsigned per_threshold =
        std::max(1u, std::min(reduction_blocks(n), unsigned(std::max<std::int64_t>(1, 4096 / p.thresholds))));
    if (p.values.empty()) {
      const dim3 grid(per_threshold, unsigned(std::min<std::int64_t>(p.thresholds, 65535)));
      confusion_kernel<T, L><<<grid, kThreads, 0, stream>>>(static_cast<const T*>(pred),
                                                            static_cast<const L*>(labels), n, classes, p, rw,
                                                            counts, p.thresholds);
      return cudaGetLastError();
    }
    // Thresholds given (host values): a launch per threshold, each a threshold of its own in its column.
    for (std::int64_t t = 0; t < p.thresholds; ++t) {
      ConfusionParams one = p;
      one.values = {};
      one.thresholds = 1;
      one.threshold = p.values[t];
      confusion_kernel<T, L>
          <<<per_threshold, kThreads, 0, stream>>>(static_cast<const T*>(pred), static_cast<const L*>(labels),
                                                   n, classes, one, rw, counts + t, p.thresholds);
      if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
    }
    return cudaSuccess;
  });
}

}  // namespace

namespace {

constexpr DTypes kFloat32Or16{DType::float32, DType::bfloat16};

// [rows, classes] predictions and their labels (int32 sparse, or dense like the predictions).
struct Batch {
  std::int64_t rows, classes;
  Labels labels;
};
Batch batch_of(const Tensor& pred, const Tensor& labels) {
  Batch b{pred.numel() / pred.dim(-1), pred.dim(-1), {}};
  if (labels.dtype() == DType::int32) {
    b.labels.sparse = labels.data<std::int32_t>();
  } else {
    b.labels.dense = labels.raw_data();
    b.labels.dense_type = element_of(labels.dtype());
  }
  return b;
}

void* gradient_of(Tensor& grad) {
  return grad.defined() ? grad.raw_data() : nullptr;
}

}  // namespace

const DTypes softmax_cross_entropy_dtypes = kFloat32Or16;
void softmax_cross_entropy(const Tensor& logits, const Tensor& labels, const Tensor& weights, Tensor& total,
                           Tensor& dlogits, double grad_scale) {
  Batch b = batch_of(logits, labels);
  Context& c = context(logits);
  SYSTOLIC_CUDA_CHECK(launch_softmax_cross_entropy(
      logits.raw_data(), element_of(logits.dtype()), b.labels, b.rows, b.classes,
      loss::row_weights(weights, b.rows, loss::per_sample_mean(logits)), total.data<double>(),
      gradient_of(dlogits), grad_scale, c.error_flags, kLabelOutOfRange, c.stream));
}

const DTypes crossentropy_from_probabilities_dtypes = kFloat32Or16;
void crossentropy_from_probabilities(const Tensor& probs, const Tensor& labels, const Tensor& weights,
                                     Tensor& total, Tensor& dprobs, double grad_scale, double eps) {
  Batch b = batch_of(probs, labels);
  Context& c = context(probs);
  SYSTOLIC_CUDA_CHECK(launch_crossentropy_from_probabilities(
      probs.raw_data(), element_of(probs.dtype()), b.labels, b.rows, b.classes,
      loss::row_weights(weights, b.rows, loss::per_sample_mean(probs)), total.data<double>(),
      gradient_of(dprobs), grad_scale, eps, c.error_flags, kLabelOutOfRange, c.stream));
}

// Sample weights are float32 on this backend (it has no float64 predictions); a mask float32 or bfloat16.
template <class F>
cudaError_t by_mask_type(const Tensor& mask, F&& f) {
  if (!mask.defined()) return f(static_cast<const float*>(nullptr));
  if (mask.dtype() == DType::bfloat16) return f(static_cast<const __nv_bfloat16*>(mask.raw_data()));
  if (mask.dtype() != DType::float32)
    throw Error(fmt::format("a mask of {} on CUDA: it takes float32 or bfloat16", dtype_name(mask.dtype())));
  return f(static_cast<const float*>(mask.raw_data()));
}

const DTypes ignore_class_dtypes = {DType::float32};
void ignore_class(const Tensor& labels, std::int32_t ignore, const Tensor& weights, const Tensor& mask,
                  Tensor& kept, Tensor& kept_weights) {
  const std::int64_t n = labels.numel();
  if (n == 0) return;
  Context& c = context(labels);
  SYSTOLIC_CUDA_CHECK(by_mask_type(mask, [&](auto* m) {
    ignore_class_kernel<<<1, kThreads, 0, c.stream>>>(labels.data<std::int32_t>(), n, ignore,
                                                      loss::row_weights(weights, n), m,
                                                      kept.data<std::int32_t>(), kept_weights.data<float>());
    return cudaGetLastError();
  }));
}

const DTypes mask_weights_dtypes = {DType::float32};
void mask_weights(const Tensor& mask, const Tensor& weights, bool normalize, Tensor& out) {
  const std::int64_t n = mask.numel();
  if (n == 0) return;
  Context& c = context(mask);
  SYSTOLIC_CUDA_CHECK(by_mask_type(mask, [&](auto* m) {
    mask_weights_kernel<<<1, kThreads, 0, c.stream>>>(m, n, loss::row_weights(weights, n), normalize,
                                                      out.data<float>());
    return cudaGetLastError();
  }));
}

const DTypes elementwise_loss_dtypes = kFloat32Or16;
void elementwise_loss(const Tensor& pred, const Tensor& target, const Tensor& weights, Tensor& total,
                      Tensor& dpred, const ElementLossParams& p, double grad_scale) {
  const std::int64_t n = pred.numel(), rows = pred.dim(0), per_row = rows ? n / rows : 0;
  const double w = loss::element_weight(p.kind, per_row, pred.rank() >= 2 ? pred.dim(-1) : 1);
  Context& c = context(pred);
  int* not_binary = loss::hinge_targets(p.kind) ? static_cast<int*>(c.workspace(sizeof(int))) : nullptr;
  SYSTOLIC_CUDA_CHECK(launch_elementwise_loss(pred.raw_data(), element_of(pred.dtype()), target.raw_data(),
                                              element_of(target.dtype()), n, loss::row_weights(weights, n), p,
                                              w, not_binary, total.data<double>(), gradient_of(dpred),
                                              grad_scale, c.stream));
}

const DTypes row_loss_dtypes = kFloat32Or16;
void row_loss(const Tensor& pred, const Tensor& target, const Tensor& weights, Tensor& total, Tensor& dpred,
              const RowLossParams& p, double grad_scale) {
  const std::int64_t C = pred.dim(-1), rows = pred.numel() / C;
  const double per_sample = rows ? double(rows / pred.dim(0)) : 1.0;
  Context& c = context(pred);
  SYSTOLIC_CUDA_CHECK(launch_row_loss(pred.raw_data(), element_of(pred.dtype()), target.raw_data(),
                                      element_of(target.dtype()), rows, C, per_sample,
                                      loss::row_weights(weights, rows), p, total.data<double>(),
                                      gradient_of(dpred), grad_scale, c.stream));
}

const DTypes accuracy_count_dtypes = kFloat32Or16;
void accuracy_count(const Tensor& pred, const Tensor& labels, const Tensor& weights, Tensor& total, int k) {
  Batch b = batch_of(pred, labels);
  Context& c = context(pred);
  SYSTOLIC_CUDA_CHECK(launch_accuracy_count(
      pred.raw_data(), element_of(pred.dtype()), b.labels, b.rows, b.classes, k,
      loss::row_weights(weights, b.rows, loss::per_sample_mean(pred)), total.data<double>(), c.stream));
}

// Sample weights are float32 on this backend (it has no float64 predictions).
const DTypes add_sum_dtypes = {DType::float32};
void add_sum(const Tensor& x, Tensor& total) {
  const std::int64_t n = x.numel();
  if (n == 0) return;
  Context& c = context(x);
  add_sum_kernel<float>
      <<<reduction_blocks(n), kThreads, 0, c.stream>>>(x.data<float>(), n, total.data<double>());
  SYSTOLIC_CUDA_CHECK(cudaGetLastError());
}

const DTypes confusion_counts_dtypes = kFloat32Or16;
void confusion_counts(const Tensor& pred, const Tensor& labels, const Tensor& weights, Tensor& counts,
                      const ConfusionParams& p) {
  Context& c = context(pred);
  SYSTOLIC_CUDA_CHECK(launch_confusion_counts(
      pred.raw_data(), element_of(pred.dtype()), labels.raw_data(), element_of(labels.dtype()), pred.numel(),
      pred.dim(-1), p, loss::row_weights(weights, pred.numel()), counts.data<double>(), c.stream));
}

const DTypes regression_sums_dtypes = kFloat32Or16;
void regression_sums(const Tensor& pred, const Tensor& target, const Tensor& weights, Tensor& sums) {
  Context& c = context(pred);
  const std::int64_t rows = pred.numel() / pred.dim(-1);
  SYSTOLIC_CUDA_CHECK(launch_regression_sums(
      pred.raw_data(), element_of(pred.dtype()), target.raw_data(), element_of(target.dtype()), rows,
      pred.dim(-1), loss::row_weights(weights, rows), sums.data<double>(), c.stream));
}

const DTypes class_confusion_dtypes = kFloat32Or16;
void class_confusion(const Tensor& pred, const Tensor& labels, const Tensor& weights, Tensor& counts,
                     const ClassConfusionParams& p) {
  Context& c = context(pred);
  const std::int64_t K = p.argmax_predictions ? pred.dim(-1) : 1, KL = p.argmax_labels ? labels.dim(-1) : 1;
  Labels l;
  if (labels.dtype() == DType::int32) {
    l.sparse = labels.data<std::int32_t>();
  } else {
    l.dense = labels.raw_data();
    l.dense_type = element_of(labels.dtype());
  }
  SYSTOLIC_CUDA_CHECK(launch_class_confusion(
      pred.raw_data(), element_of(pred.dtype()), l, K ? pred.numel() / K : 0, K, KL, p,
      loss::row_weights(weights, K ? pred.numel() / K : 0), counts.data<double>(), c.stream));
}

const DTypes f_score_counts_dtypes = kFloat32Or16;
void f_score_counts(const Tensor& pred, const Tensor& labels, const Tensor& weights, Tensor& counts,
                    const FScoreParams& p) {
  Context& c = context(pred);
  const std::int64_t C = pred.numel() ? pred.dim(-1) : 0, rows = C ? pred.numel() / C : 0;
  SYSTOLIC_CUDA_CHECK(launch_f_score_counts(
      pred.raw_data(), element_of(pred.dtype()), labels.raw_data(), element_of(labels.dtype()), rows, C, p,
      loss::row_weights(weights, rows), counts.data<double>(), c.stream));
}

}  // namespace systolic::ops::cuda
