// Batch normalisation on the CPU: the batch's statistics in double (loops), normalisation by oneDNN's primitive for
// float32 and bfloat16 where it is fast (onednn_dense_norm.cc), loops otherwise and for float64, the reference every
// backend is tested against (tests/test_ops.cc). Contracts: include/systolic/ops.h.

#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/cpu/cpu_backend.h"
#include "ops/cpu/onednn.h"

namespace systolic::ops::cpu {

namespace {

// a[c] += the sum over rows [r0, r1) of f(r, c) for a compile-time number of channels: K rows at a time into K x CC
// accumulators held in registers. (The plain loop's a[c] += runs one dependent chain per channel through memory:
// with the 3 channels of an image batch-normalised on input it was latency-bound, 4 % of a seed CNN step.)
template <int CC, class F>
void row_sums_few_channels(std::int64_t r0, std::int64_t r1, double* a, F& f) {
  constexpr int K = 8;
  double acc[K][CC] = {};
  std::int64_t r = r0;
  for (; r + K <= r1; r += K)
    for (int k = 0; k < K; ++k)
      for (int c = 0; c < CC; ++c) acc[k][c] += f(r + k, c);
  for (; r < r1; ++r)
    for (int c = 0; c < CC; ++c) acc[0][c] += f(r, c);
  for (int k = 0; k < K; ++k)
    for (int c = 0; c < CC; ++c) a[c] += acc[k][c];
}

// out[c] += the sum over rows r of f(r, c), in double: blocks of kRowBlock rows spread over the OpenMP threads,
// their partial sums added in block order, so the bits are the same whatever the thread count (the float64 loops are
// the reference the other backends are tested against, and a test runs on one thread or several).
constexpr std::int64_t kRowBlock = 512;

template <class F>
void channel_sums(std::int64_t R, std::int64_t C, double* out, F&& f) {
  const std::int64_t blocks = (R + kRowBlock - 1) / kRowBlock;
  std::vector<double> part(static_cast<std::size_t>(blocks * C), 0.0);
  parallel_ranges(blocks, blocks > 1 ? R * C : 0, [&](std::int64_t b0, std::int64_t b1) {
    for (std::int64_t b = b0; b < b1; ++b) {
      const std::int64_t r0 = b * kRowBlock, r1 = std::min(R, r0 + kRowBlock);
      double* a = part.data() + b * C;
      switch (C) {
        case 1:
          row_sums_few_channels<1>(r0, r1, a, f);
          break;
        case 2:
          row_sums_few_channels<2>(r0, r1, a, f);
          break;
        case 3:
          row_sums_few_channels<3>(r0, r1, a, f);
          break;
        case 4:
          row_sums_few_channels<4>(r0, r1, a, f);
          break;
        default:
          for (std::int64_t r = r0; r < r1; ++r)
            for (std::int64_t c = 0; c < C; ++c) a[c] += f(r, c);
      }
    }
  });
  for (std::int64_t b = 0; b < blocks; ++b)
    for (std::int64_t c = 0; c < C; ++c) out[c] += part[b * C + c];
}

// The batch's statistics in double, in two passes (the sums, then the centred squares around the mean: a large
// mean over a small spread does not cancel the variance away, as oneDNN's float32 statistics did by 2e-4 of y at a
// mean of 1000), each summed over the replicas when there are several (the count travels with the sums); mean and
// var in T.
template <class T>
void moments_loop(const Tensor& x, Tensor& mean, Tensor& var, const CrossReplica* replicas) {
  using S = arithmetic_t<T>;  // the statistics' type: float32 for bfloat16 data
  const std::int64_t C = x.dim(-1), R = x.numel() / C;
  const T* xp = x.data<T>();
  Tensor sums = Tensor::zeros({C + 1}, DType::float64), squares = Tensor::zeros({C}, DType::float64);
  double* s = sums.data<double>();
  channel_sums(R, C, s, [&](std::int64_t r, std::int64_t c) { return double(widen(xp[r * C + c])); });
  s[C] = double(R);
  if (replicas) replicas->all_reduce(sums);
  const double n = s[C];
  for (std::int64_t c = 0; c < C; ++c) s[c] /= n;
  double* q = squares.data<double>();
  channel_sums(R, C, q, [&](std::int64_t r, std::int64_t c) {
    double d = double(widen(xp[r * C + c])) - s[c];
    return d * d;
  });
  if (replicas) replicas->all_reduce(squares);
  S* mp = mean.data<S>();
  S* vp = var.data<S>();
  for (std::int64_t c = 0; c < C; ++c) {
    mp[c] = S(s[c]);
    vp[c] = S(q[c] / n);
  }
}

// T: the data's storage type (float, double or bfloat16); gamma, beta and the statistics are arithmetic_t<T>
// (float32 for bfloat16 data).
template <class T>
void batch_norm_forward_inference_loop(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                       const Tensor& mean, const Tensor& var, Tensor& y, double eps) {
  using S = arithmetic_t<T>;
  std::int64_t C = x.dim(-1), R = x.numel() / C;
  const T* xp = x.data<T>();
  const S *gp = gamma.data<S>(), *bp = beta.data<S>(), *mp = mean.data<S>(), *vp = var.data<S>();
  T* yp = y.data<T>();
  std::vector<S> scale(C), shift(C);
  for (std::int64_t c = 0; c < C; ++c) {
    scale[c] = gp[c] / std::sqrt(vp[c] + S(eps));
    shift[c] = bp[c] - mp[c] * scale[c];
  }
  parallel_ranges(R, R * C, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r)
      for (std::int64_t c = 0; c < C; ++c) yp[r * C + c] = T(widen(xp[r * C + c]) * scale[c] + shift[c]);
  });
}

// Local sums of dy and dy*xhat (added to dgamma and dbeta), then summed over the replicas with the count for dx.
template <class T>
void batch_norm_backward_loop(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& var,
                              const Tensor& dy, Tensor& dx, Tensor& dgamma, Tensor& dbeta, double eps,
                              const CrossReplica* replicas) {
  using S = arithmetic_t<T>;
  std::int64_t C = x.dim(-1), R = x.numel() / C;
  const T *xp = x.data<T>(), *dyp = dy.data<T>();
  const S *gp = gamma.data<S>(), *mp = mean.data<S>(), *vp = var.data<S>();
  Tensor sums = Tensor::zeros({2 * C + 1}, DType::float64);  // sum dy, sum dy*xhat, count
  double *sum_dy = sums.data<double>(), *sum_dy_xhat = sum_dy + C;
  std::vector<double> inv_std(C);
  for (std::int64_t c = 0; c < C; ++c) inv_std[c] = 1.0 / std::sqrt(double(vp[c]) + eps);
  channel_sums(R, C, sum_dy, [&](std::int64_t r, std::int64_t c) { return double(widen(dyp[r * C + c])); });
  channel_sums(R, C, sum_dy_xhat, [&](std::int64_t r, std::int64_t c) {
    std::int64_t k = r * C + c;
    return double(widen(dyp[k])) * (double(widen(xp[k])) - double(mp[c])) * inv_std[c];
  });
  sum_dy[2 * C] = double(R);
  if (dgamma.defined())
    for (std::int64_t c = 0; c < C; ++c) dgamma.data<S>()[c] += S(sum_dy_xhat[c]);
  if (dbeta.defined())
    for (std::int64_t c = 0; c < C; ++c) dbeta.data<S>()[c] += S(sum_dy[c]);
  if (replicas) replicas->all_reduce(sums);
  const double n = sum_dy[2 * C];
  if (dx.defined()) {
    T* dxp = dx.data<T>();
    parallel_ranges(R, R * C, [&](std::int64_t r0, std::int64_t r1) {
      for (std::int64_t r = r0; r < r1; ++r)
        for (std::int64_t c = 0; c < C; ++c) {
          std::int64_t k = r * C + c;
          double xhat = (double(widen(xp[k])) - double(mp[c])) * inv_std[c];
          dxp[k] = narrow<T>(double(gp[c]) * inv_std[c] *
                             (double(widen(dyp[k])) - sum_dy[c] / n - xhat * sum_dy_xhat[c] / n));
        }
    });
  }
}

// gamma and beta, or Keras's scale=False (1) and center=False (0).
Tensor or_constant(const Tensor& t, const Tensor& x, double value) {
  DType statistics = x.dtype() == DType::float64 ? DType::float64 : DType::float32;
  return t.defined() ? t : Tensor::full({x.dim(-1)}, value, statistics);
}

}  // namespace

const DTypes batch_norm_forward_training_dtypes = kFloatsAndBf16;
void batch_norm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                                 Tensor& mean, Tensor& var, double eps, const CrossReplica* replicas) {
  visit_dtype<float, double, bfloat16>(
      x.dtype(), [&](auto t) { moments_loop<typename decltype(t)::type>(x, mean, var, replicas); });
  batch_norm_forward_inference(x, gamma, beta, mean, var, y, eps);
}

const DTypes batch_norm_forward_inference_dtypes = kFloatsAndBf16;
void batch_norm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                  const Tensor& mean, const Tensor& var, Tensor& y, double eps) {
  Tensor g = or_constant(gamma, x, 1.0), b = or_constant(beta, x, 0.0);
  if (onednn::takes(x.dtype()) && onednn::has_fast_batch_norm(x, eps))
    return onednn::batch_norm_forward_inference(x, g, b, mean, var, y, eps);
  visit_dtype<float, double, bfloat16>(x.dtype(), [&](auto t) {
    batch_norm_forward_inference_loop<typename decltype(t)::type>(x, g, b, mean, var, y, eps);
  });
}

const DTypes batch_norm_backward_dtypes = kFloatsAndBf16;
void batch_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& var,
                         const Tensor& dy, Tensor& dx, Tensor& dgamma, Tensor& dbeta, double eps,
                         const CrossReplica* replicas) {
  Tensor g = or_constant(gamma, x, 1.0);
  // Across replicas the loops sum the statistics' gradients over the replicas; oneDNN's primitive cannot.
  if (!replicas && onednn::takes(x.dtype()) && onednn::has_fast_batch_norm(x, eps))
    return onednn::batch_norm_backward(x, g, mean, var, dy, dx, dgamma, dbeta, eps);
  visit_dtype<float, double, bfloat16>(x.dtype(), [&](auto t) {
    batch_norm_backward_loop<typename decltype(t)::type>(x, g, mean, var, dy, dx, dgamma, dbeta, eps,
                                                         replicas);
  });
}

}  // namespace systolic::ops::cpu
