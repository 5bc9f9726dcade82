// Optimizer updates on CUDA, each one fused elementwise kernel over the flat float32 parameter buffer (kernel ->
// launcher -> entry; the arguments were checked at ops::<name>). The formulas are the CPU loops', rounded the same
// way (rounding.cuh), so a GPU step equals the CPU's. Each reads the learning rate (and Adam the iteration count)
// on the device, so a captured CUDA graph replays with the rate and step of the moment, which the optimizer writes
// there between steps.
#include <cuda_runtime.h>

#include <cstdint>

#include "ops/cuda/context.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/kernels.cuh"
#include "ops/cuda/rounding.cuh"
#include "ops/optimizer_math.h"

namespace systolic::ops::cuda {

namespace {

__global__ void adam_kernel(float* w, const float* g, float* m, float* v, std::int64_t n, const double* lr,
                            double beta_1, double beta_2, float b1, float b2, float eps,
                            const double* iterations) {
  // The step size, once per block: two pow() per thread would cost more than the update itself.
  __shared__ float lr_shared;
  if (threadIdx.x == 0) {
    const double t = (iterations ? *iterations : 0.0) + 1.0;
    lr_shared = static_cast<float>(*lr * sqrt(1.0 - pow(beta_2, t)) / (1.0 - pow(beta_1, t)));
  }
  __syncthreads();
  const float lr_t = lr_shared;
  SYSTOLIC_GRID_STRIDE(i, n) {
    const float gi = g[i];
    const float mi = add_rn(m[i], mul_rn(sub_rn(gi, m[i]), b1));
    const float vi = add_rn(v[i], mul_rn(sub_rn(mul_rn(gi, gi), v[i]), b2));
    m[i] = mi;
    v[i] = vi;
    w[i] = sub_rn(w[i], div_rn(mul_rn(lr_t, mi), add_rn(sqrt_rn(vi), eps)));
  }
}

__global__ void sgd_kernel(float* w, const float* g, float* velocity, std::int64_t n, const double* rate,
                           float momentum, bool nesterov) {
  const float lr = static_cast<float>(*rate);
  SYSTOLIC_GRID_STRIDE(i, n) {
    const float gi = g[i];
    if (!velocity) {
      w[i] = sub_rn(w[i], mul_rn(lr, gi));
      continue;
    }
    const float vi = sub_rn(mul_rn(momentum, velocity[i]), mul_rn(lr, gi));
    velocity[i] = vi;
    w[i] = add_rn(w[i], nesterov ? sub_rn(mul_rn(momentum, vi), mul_rn(lr, gi)) : vi);
  }
}

__global__ void decay_kernel(float* w, std::int64_t n, const double* rate, float decay) {
  const float lr = static_cast<float>(*rate);
  SYSTOLIC_GRID_STRIDE(i, n) w[i] = sub_rn(w[i], mul_rn(mul_rn(w[i], decay), lr));
}

__global__ void rmsprop_kernel(float* w, const float* g, float* ms, float* mom, std::int64_t n,
                               const double* rate, float rho, float momentum, float eps) {
  const float lr = static_cast<float>(*rate);
  const float rest = sub_rn(1.0f, rho);
  SYSTOLIC_GRID_STRIDE(i, n) {
    const float gi = g[i];
    const float si = add_rn(mul_rn(rho, ms[i]), mul_rn(mul_rn(rest, gi), gi));
    ms[i] = si;
    const float step = div_rn(mul_rn(lr, gi), sqrt_rn(add_rn(si, eps)));
    if (mom) {
      const float mi = add_rn(mul_rn(momentum, mom[i]), step);
      mom[i] = mi;
      w[i] = sub_rn(w[i], mi);
    } else {
      w[i] = sub_rn(w[i], step);
    }
  }
}

cudaError_t launch_adam_update(float* w, const float* g, float* m, float* v, std::int64_t n, const double* lr,
                               double beta_1, double beta_2, double epsilon, const double* iterations,
                               cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return launch_elementwise(adam_kernel, n, stream, w, g, m, v, n, lr, beta_1, beta_2,
                            static_cast<float>(1.0 - beta_1), static_cast<float>(1.0 - beta_2),
                            static_cast<float>(epsilon), iterations);
}

cudaError_t launch_sgd_update(float* w, const float* g, float* velocity, std::int64_t n, const double* lr,
                              double momentum, bool nesterov, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return launch_elementwise(sgd_kernel, n, stream, w, g, velocity, n, lr, static_cast<float>(momentum),
                            nesterov);
}

cudaError_t launch_decay_weights(float* w, std::int64_t n, const double* lr, double decay,
                                 cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return launch_elementwise(decay_kernel, n, stream, w, n, lr, static_cast<float>(decay));
}

cudaError_t launch_rmsprop_update(float* w, const float* g, float* ms, float* mom, std::int64_t n,
                                  const double* lr, double rho, double momentum, double epsilon,
                                  cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  return launch_elementwise(rmsprop_kernel, n, stream, w, g, ms, mom, n, lr, static_cast<float>(rho),
                            static_cast<float>(momentum), static_cast<float>(epsilon));
}

// optimizer_update: optimizer_math.h's rule for each element, in double, the step values read once per thread.
__global__ void rule_kernel(float* w, const float* g, float* s0, float* s1, float* s2, std::int64_t n,
                            UpdateParams p, const double* step) {
  double c[update::kStepValues];
  for (int k = 0; k < update::kStepValues; ++k) c[k] = step[k];
  SYSTOLIC_GRID_STRIDE(i, n) {
    double wi = w[i], v0 = s0 ? s0[i] : 0.0, v1 = s1 ? s1[i] : 0.0, v2 = s2 ? s2[i] : 0.0;
    update::element<DoubleMath>(p, c, wi, double(g[i]), v0, v1, v2);
    w[i] = static_cast<float>(wi);
    if (s0) s0[i] = static_cast<float>(v0);
    if (s1) s1[i] = static_cast<float>(v1);
    if (s2) s2[i] = static_cast<float>(v2);
  }
}

// clip_gradients by norm: each block's sum of squares (in double) into partial[block], then every block of the
// scaling kernel adds the partials in the same order (no atomics: the same norm on every run) and scales.
constexpr unsigned kClipBlocks = 256;

template <class T>
__global__ void square_partials_kernel(const T* g, std::int64_t n, double* partial) {
  __shared__ double lanes[kThreads];
  double acc = 0;
  SYSTOLIC_GRID_STRIDE(i, n) acc += double(g[i]) * double(g[i]);
  lanes[threadIdx.x] = acc;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) lanes[threadIdx.x] += lanes[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = lanes[0];
}

__global__ void clip_scale_kernel(float* g, std::int64_t n, const double* partial, unsigned parts,
                                  double limit) {
  __shared__ float scale;
  if (threadIdx.x == 0) {
    double sum = 0;
    for (unsigned k = 0; k < parts; ++k) sum += partial[k];
    const double norm = sqrt(sum);
    scale = static_cast<float>(isfinite(norm) ? limit / fmax(norm, limit) : nan(""));
  }
  __syncthreads();
  SYSTOLIC_GRID_STRIDE(i, n) g[i] = mul_rn(g[i], scale);
}

__global__ void clip_value_kernel(float* g, std::int64_t n, float limit) {
  SYSTOLIC_GRID_STRIDE(i, n) g[i] = fminf(fmaxf(g[i], -limit), limit);
}

cudaError_t launch_clip_gradients(float* g, std::int64_t n, bool by_norm, double limit, double* partial,
                                  cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (!by_norm) return launch_elementwise(clip_value_kernel, n, stream, g, n, static_cast<float>(limit));
  square_partials_kernel<float><<<kClipBlocks, kThreads, 0, stream>>>(g, n, partial);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  return launch_elementwise(clip_scale_kernel, n, stream, g, n, static_cast<const double*>(partial),
                            kClipBlocks, limit);
}

// A trust-ratio rule (Lamb), after rule_kernel updated the slots: each block's sums of w^2 and of the direction's
// squares into partial[2 block], [2 block + 1]; then every block of the step kernel adds the partials in the same
// order (the same ratio on every run) and steps w.
// Two sums over a block (each thread's a and b): the block's into partial[2 blockIdx.x] and [2 blockIdx.x + 1].
__device__ void block_sums2(double a, double b, double* partial) {
  __shared__ double lanes[2][kThreads];
  lanes[0][threadIdx.x] = a;
  lanes[1][threadIdx.x] = b;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half)
      for (int k = 0; k < 2; ++k) lanes[k][threadIdx.x] += lanes[k][threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    partial[2 * blockIdx.x] = lanes[0][0];
    partial[2 * blockIdx.x + 1] = lanes[1][0];
  }
}

__global__ void trust_partials_kernel(const float* w, const float* s0, const float* s1, std::int64_t n,
                                      UpdateParams p, const double* step, double* partial) {
  double c[update::kStepValues];
  for (int k = 0; k < update::kStepValues; ++k) c[k] = step[k];
  double ws = 0, ds = 0;
  SYSTOLIC_GRID_STRIDE(i, n) {
    const double d = static_cast<float>(update::direction<DoubleMath>(p, c, double(s0[i]), double(s1[i])));
    ws += double(w[i]) * double(w[i]);
    ds += d * d;
  }
  block_sums2(ws, ds, partial);
}

__global__ void trust_step_kernel(float* w, const float* s0, const float* s1, std::int64_t n, UpdateParams p,
                                  const double* step, const double* partial, unsigned parts) {
  __shared__ double scale;
  double c[update::kStepValues];
  for (int k = 0; k < update::kStepValues; ++k) c[k] = step[k];
  if (threadIdx.x == 0) {
    double ws = 0, ds = 0;
    for (unsigned k = 0; k < parts; ++k) ws += partial[2 * k], ds += partial[2 * k + 1];
    scale = c[0] * update::ratio<DoubleMath>(ws, ds);
  }
  __syncthreads();
  SYSTOLIC_GRID_STRIDE(i, n) {
    const float d = static_cast<float>(update::direction<DoubleMath>(p, c, double(s0[i]), double(s1[i])));
    w[i] = static_cast<float>(double(w[i]) - scale * double(d));
  }
}

cudaError_t launch_optimizer_update(float* w, const float* g, float* s0, float* s1, float* s2, std::int64_t n,
                                    const UpdateParams& p, const double* step, double* partial,
                                    cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  cudaError_t e = launch_elementwise(rule_kernel, n, stream, w, g, s0, s1, s2, n, p, step);
  if (e != cudaSuccess || !update::trust_ratio(p.rule)) return e;
  trust_partials_kernel<<<kClipBlocks, kThreads, 0, stream>>>(w, s0, s1, n, p, step, partial);
  if ((e = cudaGetLastError()) != cudaSuccess) return e;
  return launch_elementwise(trust_step_kernel, n, stream, w, static_cast<const float*>(s0),
                            static_cast<const float*>(s1), n, p, step, static_cast<const double*>(partial),
                            kClipBlocks);
}

// adafactor_update (optimizer_math.h's adafactor formulas). Factored (w [B, R, C]): a thread per row of r (the
// mean of G over C), a thread per column of c (the mean over R), a thread per b for mean_R(r) (into r_mean), then v
// for each element; unfactored: v for each element. Then the sums of squares of w and u = g / sqrt(v) as the
// trust ratio's are taken (each block's into partial, added in order by every block of the step kernel).
__global__ void adafactor_rows_kernel(const float* g, float* r, std::int64_t rows, std::int64_t C,
                                      AdafactorStep s, const double* step) {
  const double beta = step[1];
  SYSTOLIC_GRID_STRIDE(i, rows) {
    double sum = 0;
    for (std::int64_t j = 0; j < C; ++j) sum += adafactor::regulated(double(g[i * C + j]), s.epsilon_1);
    r[i] = static_cast<float>(adafactor::moment(beta, double(r[i]), sum / double(C)));
  }
}

__global__ void adafactor_cols_kernel(const float* g, float* c, std::int64_t B, std::int64_t R,
                                      std::int64_t C, AdafactorStep s, const double* step) {
  const double beta = step[1];
  SYSTOLIC_GRID_STRIDE(k, B * C) {
    const std::int64_t b = k / C, j = k % C;
    double sum = 0;
    for (std::int64_t i = 0; i < R; ++i)
      sum += adafactor::regulated(double(g[(b * R + i) * C + j]), s.epsilon_1);
    c[k] = static_cast<float>(adafactor::moment(beta, double(c[k]), sum / double(R)));
  }
}

__global__ void adafactor_r_mean_kernel(const float* r, std::int64_t B, std::int64_t R, double* r_mean) {
  SYSTOLIC_GRID_STRIDE(b, B) {
    double sum = 0;
    for (std::int64_t i = 0; i < R; ++i) sum += double(r[b * R + i]);
    r_mean[b] = sum / double(R);
  }
}

__global__ void adafactor_factored_v_kernel(float* v, const float* r, const float* c, const double* r_mean,
                                            std::int64_t B, std::int64_t R, std::int64_t C) {
  SYSTOLIC_GRID_STRIDE(k, B * R * C) {
    const std::int64_t j = k % C, row = k / C, b = row / R;
    v[k] = static_cast<float>(double(r[row]) / r_mean[b] * double(c[b * C + j]));
  }
}

__global__ void adafactor_v_kernel(float* v, const float* g, std::int64_t n, AdafactorStep s,
                                   const double* step) {
  const double beta = step[1];
  SYSTOLIC_GRID_STRIDE(i, n)
  v[i] = static_cast<float>(
      adafactor::moment(beta, double(v[i]), adafactor::regulated(double(g[i]), s.epsilon_1)));
}

__global__ void adafactor_partials_kernel(const float* w, const float* g, const float* v, std::int64_t n,
                                          double* partial) {
  double ws = 0, us = 0;
  SYSTOLIC_GRID_STRIDE(i, n) {
    const double u = double(g[i]) / sqrt(double(v[i]));
    ws += double(w[i]) * double(w[i]);
    us += u * u;
  }
  block_sums2(ws, us, partial);
}

__global__ void adafactor_step_kernel(float* w, const float* g, const float* v, std::int64_t n,
                                      AdafactorStep s, const double* step, const double* partial,
                                      unsigned parts) {
  __shared__ double scale;
  if (threadIdx.x == 0) {
    double ws = 0, us = 0;
    for (unsigned k = 0; k < parts; ++k) ws += partial[2 * k], us += partial[2 * k + 1];
    scale = adafactor::scale<DoubleMath>(sqrt(ws / double(n)), sqrt(us / double(n)), step[0], s.epsilon_2,
                                         s.clip_threshold);
  }
  __syncthreads();
  SYSTOLIC_GRID_STRIDE(i, n)
  w[i] = static_cast<float>(double(w[i]) - scale * double(g[i]) / sqrt(double(v[i])));
}

// B, R, C: w's factored shape (r and c null: unfactored); workspace: B doubles, then 2 kClipBlocks.
cudaError_t launch_adafactor_update(float* w, const float* g, float* r, float* c, float* v, std::int64_t B,
                                    std::int64_t R, std::int64_t C, std::int64_t n, const AdafactorStep& s,
                                    const double* step, double* workspace, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  cudaError_t e;
  if (r) {
    double* r_mean = workspace;
    if ((e = launch_elementwise(adafactor_rows_kernel, B * R, stream, g, r, B * R, C, s, step)) !=
            cudaSuccess ||
        (e = launch_elementwise(adafactor_cols_kernel, B * C, stream, g, c, B, R, C, s, step)) !=
            cudaSuccess ||
        (e = launch_elementwise(adafactor_r_mean_kernel, B, stream, static_cast<const float*>(r), B, R,
                                r_mean)) != cudaSuccess ||
        (e = launch_elementwise(adafactor_factored_v_kernel, n, stream, v, static_cast<const float*>(r),
                                static_cast<const float*>(c), static_cast<const double*>(r_mean), B, R, C)) !=
            cudaSuccess)
      return e;
  } else if ((e = launch_elementwise(adafactor_v_kernel, n, stream, v, g, n, s, step)) != cudaSuccess) {
    return e;
  }
  double* partial = workspace + B;
  adafactor_partials_kernel<<<kClipBlocks, kThreads, 0, stream>>>(w, g, v, n, partial);
  if ((e = cudaGetLastError()) != cudaSuccess) return e;
  return launch_elementwise(adafactor_step_kernel, n, stream, w, g, static_cast<const float*>(v), n, s, step,
                            static_cast<const double*>(partial), kClipBlocks);
}

// muon_update (optimizer_math.h's muon formulas), in double: the momentum and x (into X [r, c], r <= c, transposed
// when R > C), the Frobenius norm as clip_gradients's (each block's sum of squares, added in order by every block of
// the scaling kernel), the Newton-Schulz products (a thread per element of the product), the step.
__global__ void muon_momentum_kernel(float* m, const float* g, double* x, std::int64_t R, std::int64_t C,
                                     MuonStep s) {
  const bool transposed = R > C;
  SYSTOLIC_GRID_STRIDE(k, R * C) {
    const std::int64_t i = k / C, j = k % C;
    const double gk = g[k];
    const float mk = static_cast<float>(muon::moment(s, double(m[k]), gk));
    m[k] = mk;
    const double xi = muon::direction(s, double(mk), gk);
    x[transposed ? j * R + i : k] = xi;
  }
}

__global__ void muon_normalise_kernel(double* x, std::int64_t n, const double* partial, unsigned parts) {
  __shared__ double norm;
  if (threadIdx.x == 0) {
    double sum = 0;
    for (unsigned k = 0; k < parts; ++k) sum += partial[k];
    norm = sqrt(sum) + muon::kNormEpsilon;
  }
  __syncthreads();
  SYSTOLIC_GRID_STRIDE(i, n) x[i] /= norm;
}

// out [M, N] = alpha e + beta p q', p [M, K], q' = q [K, N] or, q_transposed, q [N, K] read transposed (e null: 0).
__global__ void muon_matmul_kernel(const double* p, const double* q, bool q_transposed, const double* e,
                                   double* out, std::int64_t M, std::int64_t N, std::int64_t K, double alpha,
                                   double beta) {
  SYSTOLIC_GRID_STRIDE(k, M * N) {
    const std::int64_t i = k / N, j = k % N;
    double sum = 0;
    for (std::int64_t l = 0; l < K; ++l) sum += p[i * K + l] * (q_transposed ? q[j * K + l] : q[l * N + j]);
    out[k] = (e ? alpha * e[k] : 0.0) + beta * sum;
  }
}

__global__ void muon_step_kernel(float* w, const double* x, std::int64_t R, std::int64_t C, const double* lr,
                                 double adjust) {
  const bool transposed = R > C;
  const double scale = lr[0] * adjust;
  SYSTOLIC_GRID_STRIDE(k, R * C) {
    const std::int64_t i = k / C, j = k % C;
    w[k] = static_cast<float>(double(w[k]) - scale * x[transposed ? j * R + i : k]);
  }
}

// workspace: X and T (r c each), A and B (r r each), then kClipBlocks partials.
cudaError_t launch_muon_update(float* w, const float* g, float* m, std::int64_t R, std::int64_t C,
                               const MuonStep& s, const double* lr, double* workspace, cudaStream_t stream) {
  const std::int64_t n = R * C;
  if (n == 0) return cudaSuccess;
  const std::int64_t r = R > C ? C : R, c = R > C ? R : C;
  double *x = workspace, *t = x + n, *a = t + n, *b = a + r * r, *partial = b + r * r;
  cudaError_t e;
  if ((e = launch_elementwise(muon_momentum_kernel, n, stream, m, g, x, R, C, s)) != cudaSuccess) return e;
  square_partials_kernel<double><<<kClipBlocks, kThreads, 0, stream>>>(x, n, partial);
  if ((e = cudaGetLastError()) != cudaSuccess) return e;
  if ((e = launch_elementwise(muon_normalise_kernel, n, stream, x, n, static_cast<const double*>(partial),
                              kClipBlocks)) != cudaSuccess)
    return e;
  const double* none = nullptr;
  for (int step = 0; step < s.steps; ++step) {
    if ((e = launch_elementwise(muon_matmul_kernel, r * r, stream, static_cast<const double*>(x),
                                static_cast<const double*>(x), true, none, a, r, r, c, 0.0, 1.0)) !=
            cudaSuccess ||  // A = X X^T
        (e = launch_elementwise(muon_matmul_kernel, r * r, stream, static_cast<const double*>(a),
                                static_cast<const double*>(a), false, static_cast<const double*>(a), b, r, r,
                                r, s.b, s.c)) != cudaSuccess ||  // B = b A + c A A
        (e = launch_elementwise(muon_matmul_kernel, n, stream, static_cast<const double*>(b),
                                static_cast<const double*>(x), false, static_cast<const double*>(x), t, r, c,
                                r, s.a, 1.0)) != cudaSuccess)  // a X + B X
      return e;
    double* swap = x;
    x = t;
    t = swap;
  }
  return launch_elementwise(muon_step_kernel, n, stream, w, static_cast<const double*>(x), R, C, lr,
                            muon::adjust(s, R, C));
}

}  // namespace

const DTypes adam_update_dtypes{DType::float32};
void adam_update(Tensor& w, const Tensor& g, Tensor& m, Tensor& v, const AdamStep& s, const Tensor& lr,
                 const Tensor& iterations) {
  Context& c = context(w);
  SYSTOLIC_CUDA_CHECK(launch_adam_update(
      w.data<float>(), g.data<float>(), m.data<float>(), v.data<float>(), w.numel(), lr.data<double>(),
      s.beta_1, s.beta_2, s.epsilon, iterations.defined() ? iterations.data<double>() : nullptr, c.stream));
}

const DTypes sgd_update_dtypes{DType::float32};
void sgd_update(Tensor& w, const Tensor& g, Tensor& velocity, const Tensor& lr, double momentum,
                bool nesterov) {
  Context& c = context(w);
  SYSTOLIC_CUDA_CHECK(launch_sgd_update(w.data<float>(), g.data<float>(),
                                        momentum != 0.0 ? velocity.data<float>() : nullptr, w.numel(),
                                        lr.data<double>(), momentum, nesterov, c.stream));
}

const DTypes decay_weights_dtypes{DType::float32};
void decay_weights(Tensor& w, const Tensor& lr, double decay) {
  Context& c = context(w);
  SYSTOLIC_CUDA_CHECK(launch_decay_weights(w.data<float>(), w.numel(), lr.data<double>(), decay, c.stream));
}

const DTypes rmsprop_update_dtypes{DType::float32};
void rmsprop_update(Tensor& w, const Tensor& g, Tensor& ms, Tensor& mom, const Tensor& lr, double rho,
                    double momentum, double epsilon) {
  Context& c = context(w);
  SYSTOLIC_CUDA_CHECK(launch_rmsprop_update(w.data<float>(), g.data<float>(), ms.data<float>(),
                                            momentum > 0 ? mom.data<float>() : nullptr, w.numel(),
                                            lr.data<double>(), rho, momentum, epsilon, c.stream));
}

const DTypes clip_gradients_dtypes{DType::float32};
void clip_gradients(Tensor& g, bool by_norm, double limit) {
  Context& c = context(g);
  double* partial = by_norm ? static_cast<double*>(c.workspace(kClipBlocks * sizeof(double))) : nullptr;
  SYSTOLIC_CUDA_CHECK(launch_clip_gradients(g.data<float>(), g.numel(), by_norm, limit, partial, c.stream));
}

const DTypes optimizer_update_dtypes{DType::float32};
void optimizer_update(Tensor& w, const Tensor& g, Tensor& s0, Tensor& s1, Tensor& s2, const UpdateParams& p,
                      const Tensor& step) {
  Context& c = context(w);
  const int slots = update::slot_count(p.rule);
  double* partial = update::trust_ratio(p.rule)
                        ? static_cast<double*>(c.workspace(2 * kClipBlocks * sizeof(double)))
                        : nullptr;
  SYSTOLIC_CUDA_CHECK(
      launch_optimizer_update(w.data<float>(), g.data<float>(), slots > 0 ? s0.data<float>() : nullptr,
                              slots > 1 ? s1.data<float>() : nullptr, slots > 2 ? s2.data<float>() : nullptr,
                              w.numel(), p, step.data<double>(), partial, c.stream));
}

const DTypes adafactor_update_dtypes{DType::float32};
void adafactor_update(Tensor& w, const Tensor& g, Tensor& r, Tensor& c, Tensor& v, const AdafactorStep& s,
                      const Tensor& step) {
  Context& ctx = context(w);
  const bool factored = r.defined();
  const std::int64_t B = factored ? w.shape()[0] : 1, R = factored ? w.shape()[1] : 0,
                     C = factored ? w.shape()[2] : 0;
  auto* workspace = static_cast<double*>(ctx.workspace((B + 2 * kClipBlocks) * sizeof(double)));
  SYSTOLIC_CUDA_CHECK(launch_adafactor_update(w.data<float>(), g.data<float>(),
                                              factored ? r.data<float>() : nullptr,
                                              factored ? c.data<float>() : nullptr, v.data<float>(), B, R, C,
                                              w.numel(), s, step.data<double>(), workspace, ctx.stream));
}

const DTypes muon_update_dtypes{DType::float32};
void muon_update(Tensor& w, const Tensor& g, Tensor& m, const MuonStep& s, const Tensor& lr) {
  Context& ctx = context(w);
  const std::int64_t R = w.shape()[0], C = w.shape()[1], r = R > C ? C : R;
  auto* workspace =
      static_cast<double*>(ctx.workspace((2 * R * C + 2 * r * r + kClipBlocks) * sizeof(double)));
  SYSTOLIC_CUDA_CHECK(launch_muon_update(w.data<float>(), g.data<float>(), m.data<float>(), R, C, s,
                                         lr.data<double>(), workspace, ctx.stream));
}

}  // namespace systolic::ops::cuda
