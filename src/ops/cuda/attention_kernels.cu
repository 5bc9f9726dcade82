// The attention kernels around attention.cc's cuBLASLt products (attention_kernels.h): layout copies, the additive
// score and its gradients (one thread per value, loops over the summed axis), the masked
// softmax of score rows (one warp per row, as activations.cu's softmax), its backward, and dropout with
// ops::dropout_forward's Philox bits (core/philox.h) over the elements of probs.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "core/philox.h"
#include "ops/cuda/attention_kernels.h"
#include "ops/cuda/kernels.cuh"

namespace systolic::ops::cuda::attn {

namespace {

__device__ __forceinline__ bool nonzero(const Mask& m, std::int64_t i) {
  switch (m.element) {
    case Element::float32:
      return static_cast<const float*>(m.data)[i] != 0.0f;
    case Element::bfloat16:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(m.data)[i]) != 0.0f;
    case Element::float64:
      return static_cast<const double*>(m.data)[i] != 0.0;
    default:
      return true;
  }
}

__device__ __forceinline__ bool row_kept(const Visibility& v, std::int64_t b, std::int64_t t) {
  return !v.query.data || nonzero(v.query, b * v.T + t);
}
__device__ __forceinline__ bool kept(const Visibility& v, std::int64_t b, std::int64_t t, std::int64_t s) {
  if (v.causal && s > t) return false;
  if (v.window > 0 && (s > t ? s - t : t - s) >= v.window) return false;
  if (v.key.data && !nonzero(v.key, b * v.S + s)) return false;
  return !v.pair.data || nonzero(v.pair, (b * v.T + t) * v.S + s);
}

template <class R>
__device__ __forceinline__ R warp_max_of(R v) {
  for (int o = 16; o > 0; o >>= 1) {
    const R other = __shfl_xor_sync(0xffffffffu, v, o);
    v = other > v ? other : v;
  }
  return v;
}

template <class T>
__global__ void swap12_kernel(const T* src, T* dst, std::int64_t A, std::int64_t X, std::int64_t Y,
                              std::int64_t Z) {
  SYSTOLIC_GRID_STRIDE(i, A * X * Y * Z) {  // i indexes dst [A, Y, X, Z]
    const std::int64_t z = i % Z;
    std::int64_t r = i / Z;
    const std::int64_t x = r % X;
    r /= X;
    const std::int64_t y = r % Y, a = r / Y;
    dst[i] = src[((a * X + x) * Y + y) * Z + z];
  }
}

template <class R>
__global__ void softmax_rows_kernel(R* probs, Visibility vis, std::int64_t rows, bool uniform) {
  const int lane = threadIdx.x & 31;
  const R neg_inf = -R(INFINITY);
  SYSTOLIC_WARP_ROWS(r, rows) {
    const std::int64_t t = r % vis.T, b = r / (vis.H * vis.T), S = vis.S;
    R* row = probs + r * S;
    const bool any_row = row_kept(vis, b, t);
    R max = neg_inf;
    for (std::int64_t s = lane; s < S; s += 32) {
      if (any_row && kept(vis, b, t, s))
        max = row[s] > max ? row[s] : max;
      else
        row[s] = neg_inf;
    }
    max = warp_max_of(max);
    if (max == neg_inf) {  // nothing kept: zeros, or Keras's fused 1/S
      const R fill = uniform ? R(1) / R(S) : R(0);
      for (std::int64_t s = lane; s < S; s += 32) row[s] = fill;
      continue;
    }
    R sum = 0;
    for (std::int64_t s = lane; s < S; s += 32) {
      const R d = row[s] - max;  // -inf where masked
      const R e = d < R(-104) ? R(0) : exp(d);
      row[s] = e;
      sum += e;
    }
    const R inv = R(1) / warp_sum(sum);
    for (std::int64_t s = lane; s < S; s += 32) row[s] *= inv;
  }
}

template <class R>
__global__ void dropout_kernel(const R* p, R* out, std::int64_t n, float rate, R inv_keep, std::uint64_t seed,
                               const double* step) {
  const std::uint64_t key = philox::dropout_key(seed, step ? *step : 0.0);
  SYSTOLIC_GRID_STRIDE(e, n) {
    const philox::U32x4 w = philox::random4(key, static_cast<std::uint64_t>(e) / 4);
    out[e] = p[e] != R(0) && philox::unit_float(w.v[e % 4]) >= rate ? p[e] * inv_keep : R(0);
  }
}

template <class R>
__global__ void softmax_backward_kernel(const R* probs, const R* dropped, const R* own, R* ds, Visibility vis,
                                        std::int64_t rows, R inv_keep, R scale) {
  const int lane = threadIdx.x & 31;
  SYSTOLIC_WARP_ROWS(r, rows) {
    const std::int64_t t = r % vis.T, b = r / (vis.H * vis.T), S = vis.S;
    R* d = ds + r * S;
    const R* row = probs + r * S;
    // A row that keeps no key (its probabilities 0 or 1/S) passes no gradient to its scores.
    bool any = false;
    if (row_kept(vis, b, t))
      for (std::int64_t s = lane; s < S && !any; s += 32) any = kept(vis, b, t, s);
    if (!__any_sync(0xffffffffu, any)) {
      for (std::int64_t s = lane; s < S; s += 32) d[s] = R(0);
      continue;
    }
    R dot = 0;
    for (std::int64_t s = lane; s < S; s += 32) {
      R g = d[s];
      if (dropped) g = dropped[r * S + s] != R(0) ? g * inv_keep : R(0);
      if (own) g += own[r * S + s];
      d[s] = g;
      dot += row[s] * g;
    }
    dot = warp_sum(dot);
    for (std::int64_t s = lane; s < S; s += 32) d[s] = row[s] * (d[s] - dot) * scale;  // 0 where masked
  }
}

template <class R>
__device__ __forceinline__ R weight_at(const R* w, std::int64_t nw, std::int64_t d) {
  return w ? w[nw == 1 ? 0 : d] : R(1);
}

// The sizes of an additive score call, with the offsets of a query row (b, h, t) and a key row (b, g, s).
struct AdditiveSizes {
  std::int64_t B, H, G, T, S, D;
  __device__ std::int64_t q_row(std::int64_t b, std::int64_t h, std::int64_t t) const {
    return ((b * H + h) * T + t) * D;
  }
  __device__ std::int64_t k_row(std::int64_t b, std::int64_t g, std::int64_t s) const {
    return ((b * G + g) * S + s) * D;
  }
};

template <class R>
__global__ void additive_scores_kernel(const R* qt, const R* kt, const R* w, std::int64_t nw, R* probs,
                                       AdditiveSizes z, R scale) {
  SYSTOLIC_GRID_STRIDE(i, z.B * z.H * z.T * z.S) {  // i indexes probs [B, H, T, S]
    const std::int64_t s = i % z.S, t = (i / z.S) % z.T, h = (i / (z.S * z.T)) % z.H,
                       b = i / (z.S * z.T * z.H);
    const R* q = qt + z.q_row(b, h, t);
    const R* k = kt + z.k_row(b, h / (z.H / z.G), s);
    R sum = 0;
    for (std::int64_t d = 0; d < z.D; ++d) sum += weight_at(w, nw, d) * tanh(q[d] + k[d]);
    probs[i] = scale * sum;
  }
}

template <class R>
__global__ void additive_dq_kernel(const R* qt, const R* kt, const R* w, std::int64_t nw, const R* ds, R* dqt,
                                   AdditiveSizes z) {
  SYSTOLIC_GRID_STRIDE(i, z.B * z.H * z.T * z.D) {  // i indexes dqt [B, H, T, D]
    const std::int64_t d = i % z.D, t = (i / z.D) % z.T, h = (i / (z.D * z.T)) % z.H,
                       b = i / (z.D * z.T * z.H);
    const R q = qt[z.q_row(b, h, t) + d];
    const R* dsr = ds + ((b * z.H + h) * z.T + t) * z.S;
    const std::int64_t g = h / (z.H / z.G);
    R acc = 0;
    for (std::int64_t s = 0; s < z.S; ++s) {
      const R u = tanh(q + kt[z.k_row(b, g, s) + d]);
      acc += dsr[s] * (R(1) - u * u);
    }
    dqt[i] = weight_at(w, nw, d) * acc;
  }
}

template <class R>
__global__ void additive_dk_kernel(const R* qt, const R* kt, const R* w, std::int64_t nw, const R* ds, R* dkt,
                                   AdditiveSizes z) {
  SYSTOLIC_GRID_STRIDE(i, z.B * z.G * z.S * z.D) {  // i indexes dkt [B, G, S, D]
    const std::int64_t d = i % z.D, s = (i / z.D) % z.S, g = (i / (z.D * z.S)) % z.G,
                       b = i / (z.D * z.S * z.G);
    const R k = kt[i];
    const std::int64_t per = z.H / z.G;
    R acc = 0;
    for (std::int64_t h = g * per; h < (g + 1) * per; ++h)
      for (std::int64_t t = 0; t < z.T; ++t) {
        const R u = tanh(qt[z.q_row(b, h, t) + d] + k);
        acc += ds[((b * z.H + h) * z.T + t) * z.S + s] * (R(1) - u * u);
      }
    dkt[i] = weight_at(w, nw, d) * acc;
  }
}

// dw[d] = sum over (b, h, t, s) of ds tanh(q + k): one warp per d.
template <class R>
__global__ void additive_dw_kernel(const R* qt, const R* kt, const R* ds, R* out, AdditiveSizes z) {
  const int lane = threadIdx.x & 31;
  SYSTOLIC_WARP_ROWS(d, z.D) {
    R acc = 0;
    for (std::int64_t j = lane; j < z.B * z.H * z.T * z.S; j += 32) {
      const std::int64_t s = j % z.S, t = (j / z.S) % z.T, h = (j / (z.S * z.T)) % z.H,
                         b = j / (z.S * z.T * z.H);
      acc += ds[j] * tanh(qt[z.q_row(b, h, t) + d] + kt[z.k_row(b, h / (z.H / z.G), s) + d]);
    }
    acc = warp_sum(acc);
    if (lane == 0) out[d] = acc;
  }
}

// out[0] = the sum of parts[0..n), by one warp.
template <class R>
__global__ void sum_parts_kernel(const R* parts, R* out, std::int64_t n) {
  const int lane = threadIdx.x & 31;
  R acc = 0;
  for (std::int64_t i = lane; i < n; i += 32) acc += parts[i];
  acc = warp_sum(acc);
  if (lane == 0) out[0] = acc;
}

}  // namespace

cudaError_t launch_swap12(const void* src, void* dst, Element type, std::int64_t A, std::int64_t X,
                          std::int64_t Y, std::int64_t Z, cudaStream_t stream) {
  return visit_element<float, double>(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return launch_elementwise(swap12_kernel<T>, A * X * Y * Z, stream, static_cast<const T*>(src),
                              static_cast<T*>(dst), A, X, Y, Z);
  });
}

cudaError_t launch_softmax_rows(void* probs, Element type, const Visibility& vis, std::int64_t rows,
                                bool uniform, cudaStream_t stream) {
  if (rows <= 0 || vis.S <= 0) return cudaSuccess;
  return visit_element<float, double>(type, [&](auto tag) {
    using R = typename decltype(tag)::type;
    softmax_rows_kernel<R>
        <<<blocks_for_rows(rows), kThreads, 0, stream>>>(static_cast<R*>(probs), vis, rows, uniform);
    return cudaGetLastError();
  });
}

cudaError_t launch_dropout(const void* p, void* out, Element type, std::int64_t n, double rate,
                           std::uint64_t seed, const double* step, cudaStream_t stream) {
  return visit_element<float, double>(type, [&](auto tag) {
    using R = typename decltype(tag)::type;
    return launch_elementwise(dropout_kernel<R>, n, stream, static_cast<const R*>(p), static_cast<R*>(out), n,
                              static_cast<float>(rate), static_cast<R>(1.0 / (1.0 - rate)), seed, step);
  });
}

cudaError_t launch_softmax_backward(const void* probs, const void* dropped, const void* own, void* ds,
                                    Element type, const Visibility& vis, std::int64_t rows, double rate,
                                    double scale, cudaStream_t stream) {
  if (rows <= 0 || vis.S <= 0) return cudaSuccess;
  return visit_element<float, double>(type, [&](auto tag) {
    using R = typename decltype(tag)::type;
    softmax_backward_kernel<R><<<blocks_for_rows(rows), kThreads, 0, stream>>>(
        static_cast<const R*>(probs), static_cast<const R*>(dropped), static_cast<const R*>(own),
        static_cast<R*>(ds), vis, rows, static_cast<R>(1.0 / (1.0 - rate)), static_cast<R>(scale));
    return cudaGetLastError();
  });
}

cudaError_t launch_additive_scores(const void* qt, const void* kt, const void* w, std::int64_t nw,
                                   void* probs, Element type, std::int64_t B, std::int64_t H, std::int64_t G,
                                   std::int64_t T, std::int64_t S, std::int64_t D, double scale,
                                   cudaStream_t stream) {
  const AdditiveSizes z{B, H, G, T, S, D};
  return visit_element<float, double>(type, [&](auto tag) {
    using R = typename decltype(tag)::type;
    return launch_elementwise(additive_scores_kernel<R>, B * H * T * S, stream, static_cast<const R*>(qt),
                              static_cast<const R*>(kt), static_cast<const R*>(w), nw, static_cast<R*>(probs),
                              z, static_cast<R>(scale));
  });
}

cudaError_t launch_additive_backward(const void* qt, const void* kt, const void* w, std::int64_t nw,
                                     const void* ds, void* dqt, void* dkt, void* dw, void* parts,
                                     Element type, std::int64_t B, std::int64_t H, std::int64_t G,
                                     std::int64_t T, std::int64_t S, std::int64_t D, cudaStream_t stream) {
  const AdditiveSizes z{B, H, G, T, S, D};
  return visit_element<float, double>(type, [&](auto tag) {
    using R = typename decltype(tag)::type;
    const R* q = static_cast<const R*>(qt);
    const R* k = static_cast<const R*>(kt);
    const R* wr = static_cast<const R*>(w);
    const R* g = static_cast<const R*>(ds);
    cudaError_t e = cudaSuccess;
    if (dqt && (e = launch_elementwise(additive_dq_kernel<R>, B * H * T * D, stream, q, k, wr, nw, g,
                                       static_cast<R*>(dqt), z)) != cudaSuccess)
      return e;
    if (dkt && (e = launch_elementwise(additive_dk_kernel<R>, B * G * S * D, stream, q, k, wr, nw, g,
                                       static_cast<R*>(dkt), z)) != cudaSuccess)
      return e;
    if (!dw || D <= 0) return e;
    R* out = nw == 1 && D != 1 ? static_cast<R*>(parts) : static_cast<R*>(dw);
    additive_dw_kernel<R><<<blocks_for_rows(D), kThreads, 0, stream>>>(q, k, g, out, z);
    if ((e = cudaGetLastError()) != cudaSuccess || out == dw) return e;
    sum_parts_kernel<R><<<1, 32, 0, stream>>>(out, static_cast<R*>(dw), D);
    return cudaGetLastError();
  });
}

}  // namespace systolic::ops::cuda::attn
