// Dense layers as oneDNN matmul primitives, batch normalisation as oneDNN batch_normalization primitives and
// layer normalisation as layer_normalization primitives, on the caller's row-major / NHWC memory (no reorders: all
// are memory-light enough that the plain layouts are what oneDNN's kernels take natively). Dense and batch norm
// take float32 or bfloat16 data (under bfloat16 the bias, the weight gradients and the batch-norm parameters and
// statistics stay float32, as mixed precision keeps them); layer norm takes float32.
#include <algorithm>
#include <bit>
#include <cmath>
#include <unordered_map>

#include "ops/cpu/onednn.h"
#include "ops/cpu/onednn_common.h"

namespace systolic::ops::onednn {

using namespace detail;

namespace {

struct Prim {
  dnnl::primitive prim;
};

dnnl::primitive_attr accumulate_attr() {
  // dst += result: the contract accumulates parameter gradients.
  dnnl::post_ops po;
  po.append_sum(1.0f);
  dnnl::primitive_attr attr;
  attr.set_post_ops(po);
  return attr;
}

// --------------------------------------------------------------------------------------------- batch norm

struct NormShape {
  dnnl::memory::desc data, stats;
  Key key;
};
NormShape norm_shape(const Tensor& x, double eps) {
  NormShape s;
  std::int64_t C = x.dim(-1);
  // Images as NHWC (oneDNN's nspc kernels); anything else as rows of C, which has the same statistics.
  if (x.rank() == 4)
    s.data = md({x.dim(0), C, x.dim(1), x.dim(2)}, x.dtype(), tag::nhwc);
  else
    s.data = md({x.numel() / C, C}, x.dtype(), tag::nc);
  s.stats = f32_md({C}, tag::a);
  s.key = {x.rank() == 4 ? x.dim(0) : x.numel() / C,
           x.rank() == 4 ? x.dim(1) : 1,
           x.rank() == 4 ? x.dim(2) : 1,
           C,
           x.rank() == 4,
           static_cast<std::int64_t>(std::bit_cast<std::uint64_t>(eps)),
           static_cast<int>(x.dtype())};
  return s;
}

const auto kScaleShift = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;

dnnl::batch_normalization_forward::primitive_desc norm_fwd_pd(const NormShape& s, double eps, bool training) {
  auto flags = training ? kScaleShift : kScaleShift | dnnl::normalization_flags::use_global_stats;
  dnnl::batch_normalization_forward::desc d(
      training ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference, s.data,
      static_cast<float>(eps), flags);
  return {d, engine()};
}

struct NormBackward {
  dnnl::batch_normalization_backward prim;
  // The primitive always writes all three; the contract accumulates dgamma/dbeta and may skip dx.
  dnnl::memory diff_scale, diff_shift, diff_src;
  // oneDNN 2.6 checks that a use_shift backward is handed the shift (beta), although the gradients do not
  // depend on it and the contract does not pass it: it reads this zeroed stand-in.
  dnnl::memory shift;
};

}  // namespace

bool has_fast_batch_norm(const Tensor& x, double eps) {
  if (x.numel() == 0) return false;
  thread_local std::unordered_map<Key, bool, KeyHash> known;
  auto s = norm_shape(x, eps);
  auto it = known.find(s.key);
  if (it != known.end()) return it->second;
  bool fast = false;
  try {
    auto fwd = norm_fwd_pd(s, eps, /*training=*/false);
    auto hint = norm_fwd_pd(s, eps, /*training=*/true);
    dnnl::batch_normalization_backward::desc d(dnnl::prop_kind::backward, s.data, s.data,
                                               static_cast<float>(eps), kScaleShift);
    dnnl::batch_normalization_backward::primitive_desc bwd(d, engine(), hint);
    auto jit = [](const std::string& impl) { return impl.find("jit") != std::string::npos; };
    fast = jit(fwd.impl_info_str()) && jit(bwd.impl_info_str());
  } catch (const dnnl::error&) {
    fast = false;
  }
  return known.emplace(s.key, fast).first->second;
}

namespace {
// y from given statistics (oneDNN's use_global_stats): inference, and training once batch_norm.cc has the batch's
// statistics.
void batch_norm_forward(const char* op, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                        const Tensor& mean, const Tensor& var, Tensor& y, double eps) {
  if (x.numel() == 0) return;
  guarded(op, x.numel(), [&] {
    thread_local PrimitiveCache<Prim> cache;
    auto s = norm_shape(x, eps);
    auto& e =
        cache.get(s.key, [&] { return Prim{dnnl::batch_normalization_forward(norm_fwd_pd(s, eps, false))}; });
    e.prim.execute(stream(), {{DNNL_ARG_SRC, wrap(s.data, x)},
                              {DNNL_ARG_DST, wrap(s.data, y)},
                              {DNNL_ARG_SCALE, wrap(s.stats, gamma)},
                              {DNNL_ARG_SHIFT, wrap(s.stats, beta)},
                              {DNNL_ARG_MEAN, wrap(s.stats, mean)},
                              {DNNL_ARG_VARIANCE, wrap(s.stats, var)}});
  });
}
}  // namespace

void batch_norm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                  const Tensor& mean, const Tensor& var, Tensor& y, double eps) {
  batch_norm_forward("batch_norm_forward_inference", x, gamma, beta, mean, var, y, eps);
}

void batch_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& var,
                         const Tensor& dy, Tensor& dx, Tensor& dgamma, Tensor& dbeta, double eps) {
  if (!dx.defined() && !dgamma.defined() && !dbeta.defined()) return;
  if (x.numel() == 0) return;
  guarded("batch_norm_backward", x.numel(), [&] {
    thread_local PrimitiveCache<NormBackward> cache;
    auto s = norm_shape(x, eps);
    Key key = s.key;
    key.push_back(dx.defined());
    auto& e = cache.get(key, [&] {
      auto hint = norm_fwd_pd(s, eps, /*training=*/true);
      dnnl::batch_normalization_backward::desc d(dnnl::prop_kind::backward, s.data, s.data,
                                                 static_cast<float>(eps), kScaleShift);
      NormBackward b;
      b.prim = dnnl::batch_normalization_backward(
          dnnl::batch_normalization_backward::primitive_desc(d, engine(), hint));
      b.diff_scale = dnnl::memory(s.stats, engine());
      b.diff_shift = dnnl::memory(s.stats, engine());
      b.shift = dnnl::memory(s.stats, engine());
      std::fill_n(static_cast<float*>(b.shift.get_data_handle()), s.stats.get_size() / sizeof(float), 0.0f);
      if (!dx.defined()) b.diff_src = dnnl::memory(s.data, engine());
      return b;
    });
    e.prim.execute(stream(), {{DNNL_ARG_SRC, wrap(s.data, x)},
                              {DNNL_ARG_MEAN, wrap(s.stats, mean)},
                              {DNNL_ARG_VARIANCE, wrap(s.stats, var)},
                              {DNNL_ARG_DIFF_DST, wrap(s.data, dy)},
                              {DNNL_ARG_SCALE, wrap(s.stats, gamma)},
                              {DNNL_ARG_SHIFT, e.shift},
                              {DNNL_ARG_DIFF_SRC, dx.defined() ? wrap(s.data, dx) : e.diff_src},
                              {DNNL_ARG_DIFF_SCALE, e.diff_scale},
                              {DNNL_ARG_DIFF_SHIFT, e.diff_shift}});
    std::int64_t C = x.dim(-1);
    auto add = [C](const dnnl::memory& from, Tensor& to) {
      if (!to.defined()) return;
      const float* g = static_cast<const float*>(from.get_data_handle());
      float* out = to.data<float>();
      for (std::int64_t c = 0; c < C; ++c) out[c] += g[c];
    };
    add(e.diff_scale, dgamma);
    add(e.diff_shift, dbeta);
  });
}

// --------------------------------------------------------------------------------------------- layer norm

namespace {
dnnl::normalization_flags layer_norm_flags(bool scale, bool shift) {
  auto f = dnnl::normalization_flags::none;
  if (scale) f = f | dnnl::normalization_flags::use_scale;
  if (shift) f = f | dnnl::normalization_flags::use_shift;
  return f;
}

struct LayerNormShape {
  dnnl::memory::desc data, stats, params;
};
LayerNormShape layer_norm_shape(std::int64_t M, std::int64_t K) {
  return {f32_md({M, K}, tag::ab), f32_md({M}, tag::a), f32_md({K}, tag::a)};
}

dnnl::layer_normalization_forward::primitive_desc layer_norm_fwd_pd(const LayerNormShape& s, float eps,
                                                                    dnnl::normalization_flags flags) {
  dnnl::layer_normalization_forward::desc d(dnnl::prop_kind::forward_training, s.data, s.stats, eps, flags);
  return {d, engine()};
}

struct LayerNormForward {
  dnnl::layer_normalization_forward prim;
  dnnl::memory variance;  // oneDNN's statistic; the contract keeps rstd
};

struct LayerNormBackward {
  dnnl::layer_normalization_backward prim;
  dnnl::memory variance, diff_scale, diff_shift, diff_src, shift;
};
}  // namespace

// Rows of K values; oneDNN computes the statistics (forward_training: mean and variance), rstd follows from the
// variance.
void layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y, Tensor& mean,
                        Tensor& rstd, std::int64_t K, double eps) {
  const std::int64_t M = K ? x.numel() / K : 0;
  if (M == 0) return;
  guarded("layer_norm_forward", x.numel(), [&] {
    thread_local PrimitiveCache<LayerNormForward> cache;
    auto s = layer_norm_shape(M, K);
    const auto flags = layer_norm_flags(gamma.defined(), beta.defined());
    const float e = static_cast<float>(eps);
    auto& p = cache.get({M, K, gamma.defined(), beta.defined(), std::bit_cast<std::int32_t>(e)}, [&] {
      return LayerNormForward{dnnl::layer_normalization_forward(layer_norm_fwd_pd(s, e, flags)),
                              dnnl::memory(s.stats, engine())};
    });
    std::unordered_map<int, dnnl::memory> args = {{DNNL_ARG_SRC, wrap(s.data, x)},
                                                  {DNNL_ARG_DST, wrap(s.data, y)},
                                                  {DNNL_ARG_MEAN, wrap(s.stats, mean)},
                                                  {DNNL_ARG_VARIANCE, p.variance}};
    if (gamma.defined()) args[DNNL_ARG_SCALE] = wrap(s.params, gamma);
    if (beta.defined()) args[DNNL_ARG_SHIFT] = wrap(s.params, beta);
    p.prim.execute(stream(), args);
    const float* v = static_cast<const float*>(p.variance.get_data_handle());
    float* r = rstd.data<float>();
    for (std::int64_t m = 0; m < M; ++m) r[m] = static_cast<float>(1.0 / std::sqrt(double(v[m]) + eps));
  });
}

// oneDNN's backward takes the variance and epsilon; any split of 1/rstd^2 into the two gives the same gradients,
// so it gets variance = 1/rstd^2 and epsilon 0 (the backward contract has no epsilon).
void layer_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                         const Tensor& dy, Tensor& dx, Tensor& dgamma, Tensor& dbeta, std::int64_t K) {
  const std::int64_t M = K ? x.numel() / K : 0;
  if (M == 0 || (!dx.defined() && !dgamma.defined() && !dbeta.defined())) return;
  guarded("layer_norm_backward", x.numel(), [&] {
    thread_local PrimitiveCache<LayerNormBackward> cache;
    auto s = layer_norm_shape(M, K);
    const bool scale = gamma.defined(), shift = dbeta.defined();
    auto& p = cache.get({M, K, scale, shift, dx.defined()}, [&] {
      // oneDNN 2.6 runs a scaled layer norm's backward only as prop_kind::backward (parameter gradients too,
      // into scratch when the contract skips them). The shift's gradient is wanted when dbeta is; the contract
      // gives no beta, so a zeroed stand-in (the gradients do not depend on it).
      const auto flags = layer_norm_flags(scale, shift);
      auto hint = layer_norm_fwd_pd(s, 0.0f, flags);
      dnnl::layer_normalization_backward::desc d(
          scale || shift ? dnnl::prop_kind::backward : dnnl::prop_kind::backward_data, s.data, s.data,
          s.stats, 0.0f, flags);
      LayerNormBackward b;
      b.prim = dnnl::layer_normalization_backward(
          dnnl::layer_normalization_backward::primitive_desc(d, engine(), hint));
      b.variance = dnnl::memory(s.stats, engine());
      if (scale) b.diff_scale = dnnl::memory(s.params, engine());
      if (shift) {
        b.diff_shift = dnnl::memory(s.params, engine());
        b.shift = dnnl::memory(s.params, engine());
        std::fill_n(static_cast<float*>(b.shift.get_data_handle()), K, 0.0f);
      }
      if (!dx.defined()) b.diff_src = dnnl::memory(s.data, engine());
      return b;
    });
    const float* r = rstd.data<float>();
    float* v = static_cast<float*>(p.variance.get_data_handle());
    for (std::int64_t m = 0; m < M; ++m) v[m] = static_cast<float>(1.0 / (double(r[m]) * double(r[m])));
    std::unordered_map<int, dnnl::memory> args = {
        {DNNL_ARG_SRC, wrap(s.data, x)},
        {DNNL_ARG_MEAN, wrap(s.stats, mean)},
        {DNNL_ARG_VARIANCE, p.variance},
        {DNNL_ARG_DIFF_DST, wrap(s.data, dy)},
        {DNNL_ARG_DIFF_SRC, dx.defined() ? wrap(s.data, dx) : p.diff_src}};
    if (scale) {
      args[DNNL_ARG_SCALE] = wrap(s.params, gamma);
      args[DNNL_ARG_DIFF_SCALE] = p.diff_scale;
    }
    if (shift) {
      args[DNNL_ARG_SHIFT] = p.shift;
      args[DNNL_ARG_DIFF_SHIFT] = p.diff_shift;
    }
    p.prim.execute(stream(), args);
    auto add = [K](const dnnl::memory& from, Tensor& to) {
      if (!to.defined()) return;
      const float* g = static_cast<const float*>(from.get_data_handle());
      float* out = to.data<float>();
      for (std::int64_t k = 0; k < K; ++k) out[k] += g[k];
    };
    if (scale) add(p.diff_scale, dgamma);
    if (shift) add(p.diff_shift, dbeta);
  });
}

// ------------------------------------------------------------------------------------------------- dense

namespace {
// Column sums of a row-major (M, U) matrix of float32 or bfloat16 values, added to out[U] (float32): a single
// streaming pass, cheaper than any primitive's setup.
void add_column_sums(const Tensor& g, std::int64_t M, std::int64_t U, float* out) {
  if (g.dtype() == DType::bfloat16) {
    const bfloat16* p = g.data<bfloat16>();
    for (std::int64_t m = 0; m < M; ++m)
      for (std::int64_t u = 0; u < U; ++u) out[u] += static_cast<float>(p[m * U + u]);
  } else {
    const float* p = g.data<float>();
    for (std::int64_t m = 0; m < M; ++m)
      for (std::int64_t u = 0; u < U; ++u) out[u] += p[m * U + u];
  }
}
}  // namespace

void sgemm(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const float* A,
           std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc) {
  if (M == 0 || N == 0) return;
  SerialBelow serial(0);  // the caller's loop holds the threads
  const dnnl_status_t status =
      dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  if (status != dnnl_success) fail("oneDNN sgemm: status {} ({}x{}x{})", int(status), M, N, K);
}

void dense_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) {
  std::int64_t K = w.dim(0), U = w.dim(1), M = U ? y.numel() / U : 0;
  if (M == 0 || U == 0) return;
  if (K == 0) {  // an empty sum: y is the bias (oneDNN rejects zero-sized reduction dimensions)
    Tensor rows({M, U}, DType::float32, y.device());
    float* out = rows.data<float>();
    for (std::int64_t i = 0; i < M * U; ++i) out[i] = b.defined() ? b.data<float>()[i % U] : 0.0f;
    y.copy_from(rows.to(y.dtype()).reshape(y.shape()));
    return;
  }
  guarded("dense_forward", M * K * U, [&] {
    thread_local PrimitiveCache<Prim> cache;
    DType t = x.dtype();
    auto x_md = md({M, K}, t, tag::ab), w_md = md({K, U}, w.dtype(), tag::ab), b_md = f32_md({1, U}, tag::ab),
         y_md = md({M, U}, t, tag::ab);
    auto& e = cache.get({M, K, U, b.defined(), static_cast<int>(t), static_cast<int>(w.dtype())}, [&] {
      auto d =
          b.defined() ? dnnl::matmul::desc(x_md, w_md, b_md, y_md) : dnnl::matmul::desc(x_md, w_md, y_md);
      return Prim{dnnl::matmul(dnnl::matmul::primitive_desc(d, engine()))};
    });
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC, wrap(x_md, x)}, {DNNL_ARG_WEIGHTS, wrap(w_md, w)}, {DNNL_ARG_DST, wrap(y_md, y)}};
    if (b.defined()) args[DNNL_ARG_BIAS] = wrap(b_md, b);
    e.prim.execute(stream(), args);
  });
}

void dense_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw, Tensor& db) {
  std::int64_t K = w.dim(0), U = w.dim(1), M = U ? dy.numel() / U : 0;
  if (M == 0 || K == 0 || U == 0) {  // empty products: dx is zero, nothing to add to dw or db
    if (dx.defined() && dx.numel()) dx.fill(0.0);
    if (db.defined() && K == 0 && M && U) add_column_sums(dy, M, U, db.data<float>());
    return;
  }
  guarded("dense_backward", M * K * U, [&] {
    thread_local PrimitiveCache<Prim> data_cache, weights_cache;
    DType t = dy.dtype();
    if (dx.defined()) {
      // dx[M,K] = dy[M,U] @ w^T: w read transposed in place (format `ba` of the logical (U,K) matrix).
      auto dy_md = md({M, U}, t, tag::ab), wt_md = md({U, K}, w.dtype(), tag::ba),
           dx_md = md({M, K}, t, tag::ab);
      auto& e = data_cache.get({M, K, U, static_cast<int>(t), static_cast<int>(w.dtype())}, [&] {
        return Prim{
            dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(dy_md, wt_md, dx_md), engine()))};
      });
      e.prim.execute(stream(), {{DNNL_ARG_SRC, wrap(dy_md, dy)},
                                {DNNL_ARG_WEIGHTS, wrap(wt_md, w)},
                                {DNNL_ARG_DST, wrap(dx_md, dx)}});
    }
    if (dw.defined()) {
      // dw[K,U] += x^T @ dy: x read transposed in place, the sum post-op adds into dw (float32: weight gradients
      // stay float32 under mixed precision).
      auto xt_md = md({K, M}, t, tag::ba), dy_md = md({M, U}, t, tag::ab), dw_md = f32_md({K, U}, tag::ab);
      auto& e = weights_cache.get({M, K, U, static_cast<int>(t)}, [&] {
        return Prim{dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(xt_md, dy_md, dw_md),
                                                              accumulate_attr(), engine()))};
      });
      e.prim.execute(stream(), {{DNNL_ARG_SRC, wrap(xt_md, x)},
                                {DNNL_ARG_WEIGHTS, wrap(dy_md, dy)},
                                {DNNL_ARG_DST, wrap(dw_md, dw)}});
    }
    if (db.defined()) add_column_sums(dy, M, U, db.data<float>());
  });
}

}  // namespace systolic::ops::onednn
