// The attention family on the CPU: scaled dot-product attention of every head (MultiHeadAttention's core), or the
// additive score's (loops over [T, S, D] in place of the scores' product and its two gradient products), one
// algorithm for float32 and float64 (bfloat16 widened around it, as every op): per (batch, head) pair, the products
// as row-major GEMMs over the heads' strided rows (oneDNN's sgemm for float32, loops for float64, the reference),
// the softmax and dropout as loops, OpenMP over the pairs (forward: query heads; backward: key/value heads, whose
// gradients gather their query heads', so no two threads write one row). The scores live in probs (forward writes
// them there, then turns them into probabilities in place); backward needs [T, S] of scratch per thread. Dropout's
// keep bits are ops::dropout_forward's over probs' elements, drawn again in backward. Contracts:
// include/systolic/ops.h.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/philox.h"
#include "ops/attention_layout.h"
#include "ops/cpu/cpu_backend.h"
#include "ops/cpu/onednn.h"

namespace systolic::ops::cpu {

namespace {

// A mask as bytes (1: keep), from any floating dtype; empty when the mask is undefined.
std::vector<std::uint8_t> keep_bytes(const Tensor& m) {
  std::vector<std::uint8_t> keep;
  if (!m.defined()) return keep;
  keep.resize(static_cast<std::size_t>(m.numel()));
  visit_dtype<float, double, bfloat16>(m.dtype(), [&](auto t) {
    using T = typename decltype(t)::type;
    const T* p = m.data<T>();
    for (std::size_t i = 0; i < keep.size(); ++i) keep[i] = static_cast<float>(p[i]) != 0.0f;
  });
  return keep;
}

// Which keys each query sees: the masks and the causal and window rules of AttentionParams.
struct Visibility {
  std::vector<std::uint8_t> query, key, pair;  // [B, T], [B, S], [B, T, S]; empty: all kept
  std::int64_t T, S;
  bool causal;
  std::int64_t window;

  Visibility(const AttentionParams& p, const Tensor& query_mask, const Tensor& key_mask,
             const Tensor& attention_mask, std::int64_t T_, std::int64_t S_)
      : query(keep_bytes(query_mask)),
        key(keep_bytes(key_mask)),
        pair(keep_bytes(attention_mask)),
        T(T_),
        S(S_),
        causal(p.causal),
        window(p.window) {}

  bool row_kept(std::int64_t b, std::int64_t t) const { return query.empty() || query[b * T + t]; }
  bool kept(std::int64_t b, std::int64_t t, std::int64_t s) const {
    if (causal && s > t) return false;
    if (window > 0 && (s > t ? s - t : t - s) >= window) return false;
    if (!key.empty() && !key[b * S + s]) return false;
    return pair.empty() || pair[(b * T + t) * S + s];
  }
};

// Dropout's keep bits over probs' elements (drop_rows): element i is kept when word i % 4 of random4(key, i / 4),
// as a unit float, is at least the rate (ops::dropout_forward's rule), and then scaled by 1/(1 - rate).
struct DropoutBits {
  bool on;
  std::uint64_t key;
  float rate;
};

DropoutBits dropout_bits(const AttentionParams& p, const Tensor& step) {
  const double s = step.defined() ? step.data<double>()[0] : 0.0;
  return {p.dropout > 0, philox::dropout_key(p.seed, s), static_cast<float>(p.dropout)};
}

// Row-major C[M, N] = alpha op(A) op(B) + beta C over strided rows (lda, ldb, ldc): oneDNN's sgemm for float32,
// plain loops for float64 (the reference the parity harness checks the float32 path against).
void gemm(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const float* A,
          std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc) {
  onednn::sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
void gemm(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, double alpha, const double* A,
          std::int64_t lda, const double* B, std::int64_t ldb, double beta, double* C, std::int64_t ldc) {
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) {
      double sum = 0;
      for (std::int64_t l = 0; l < K; ++l)
        sum += (ta ? A[l * lda + i] : A[i * lda + l]) * (tb ? B[j * ldb + l] : B[l * ldb + j]);
      C[i * ldc + j] = alpha * sum + (beta == 0 ? 0.0 : beta * C[i * ldc + j]);
    }
}

// The additive score (AttentionScore::additive) of every query row of Q [T, D] (rows ldq apart) against every key
// row of K [S, D] (ldk apart): P[t, s] = scale * sum_d w[d] tanh(Q[t, d] + K[s, d]); w null: 1, one_w: w[0] for
// every d.
template <class R>
void additive_scores(std::int64_t T, std::int64_t S, std::int64_t D, R scale, const R* Q, std::int64_t ldq,
                     const R* K, std::int64_t ldk, const R* w, bool one_w, R* P) {
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t s = 0; s < S; ++s) {
      const R* q = Q + t * ldq;
      const R* k = K + s * ldk;
      R sum = 0;
      for (std::int64_t d = 0; d < D; ++d) sum += (w ? w[one_w ? 0 : d] : R(1)) * std::tanh(q[d] + k[d]);
      P[t * S + s] = scale * sum;
    }
}

// Back through additive_scores from dP [T, S] (the scores' gradient, scale already in it): dQ (=), dK (+=; the
// caller zeroes it first), dw (+=, w's count of values); a null pointer is skipped.
template <class R>
void additive_scores_backward(std::int64_t T, std::int64_t S, std::int64_t D, const R* Q, std::int64_t ldq,
                              const R* K, std::int64_t ldk, const R* w, bool one_w, const R* dP, R* dQ, R* dK,
                              R* dw) {
  for (std::int64_t t = 0; t < T; ++t) {
    const R* q = Q + t * ldq;
    R* dq = dQ ? dQ + t * ldq : nullptr;
    if (dq) std::fill_n(dq, D, R(0));
    for (std::int64_t s = 0; s < S; ++s) {
      const R g = dP[t * S + s];
      if (g == R(0)) continue;  // a masked or empty row's score, or no gradient
      const R* k = K + s * ldk;
      R* dk = dK ? dK + s * ldk : nullptr;
      for (std::int64_t d = 0; d < D; ++d) {
        const R u = std::tanh(q[d] + k[d]);
        const R f = g * (w ? w[one_w ? 0 : d] : R(1)) * (R(1) - u * u);
        if (dq) dq[d] += f;
        if (dk) dk[d] += f;
        if (dw) dw[one_w ? 0 : d] += g * u;
      }
    }
  }
}

// Scores of query row t (scaled) -> its probabilities, in place: the kept keys' softmax, 0 at the others; a row with
// none kept all 0, or 1/S with empty_rows_uniform. exp of a difference below -104 is 0 in float32 and float64's
// denormals are not wanted either: skipped rather than computed (libm's slow path).
template <class R>
void softmax_row(R* row, std::int64_t S, const Visibility& vis, std::int64_t b, std::int64_t t,
                 bool uniform) {
  const bool row_kept = vis.row_kept(b, t);
  R max = -std::numeric_limits<R>::infinity();
  for (std::int64_t s = 0; s < S; ++s) {
    if (row_kept && vis.kept(b, t, s))
      max = std::max(max, row[s]);
    else
      row[s] = -std::numeric_limits<R>::infinity();
  }
  if (max == -std::numeric_limits<R>::infinity()) {  // nothing kept: zeros, or Keras's fused 1/S
    std::fill_n(row, S, uniform ? R(1) / R(S) : R(0));
    return;
  }
  R sum = 0;
  for (std::int64_t s = 0; s < S; ++s) {
    const R d = row[s] - max;  // -inf where masked
    row[s] = d < R(-104) ? R(0) : std::exp(d);
    sum += row[s];
  }
  const R inv = R(1) / sum;
  for (std::int64_t s = 0; s < S; ++s) row[s] *= inv;
}

// The probabilities after dropout: out = p * keep / (1 - rate) over n values from element `first` of probs, each
// Philox draw giving four elements' bits (DropoutBits::keeps one at a time would draw each group four times).
template <class R>
void drop_rows(const R* p, R* out, std::int64_t n, std::int64_t first, const DropoutBits& drop, R inv_keep) {
  for (std::int64_t i = 0; i < n;) {
    const std::int64_t e = first + i;
    const philox::U32x4 w = philox::random4(drop.key, static_cast<std::uint64_t>(e) / 4);
    for (std::int64_t j = e % 4; j < 4 && i < n; ++j, ++i)
      out[i] = p[i] != R(0) && philox::unit_float(w.v[j]) >= drop.rate ? p[i] * inv_keep : R(0);
  }
}

template <class R>
void attention_forward_loop(const AttentionParams& p, const Tensor& q, const Tensor& k, const Tensor& v,
                            const Tensor& score_weights, const Visibility& vis, const DropoutBits& drop,
                            Tensor& y, Tensor& probs) {
  const AttentionLayout L(q, k, v);
  const bool additive = p.score == AttentionScore::additive;
  const R* wp = score_weights.defined() ? score_weights.data<R>() : nullptr;
  const bool one_w = score_weights.defined() && score_weights.numel() == 1;
  const R* qp = q.data<R>();
  const R* kp = k.data<R>();
  const R* vp = v.data<R>();
  R* yp = y.data<R>();
  R* pp = probs.data<R>();
  const R scale = static_cast<R>(p.scale), inv_keep = static_cast<R>(1.0 / (1.0 - p.dropout));
  const std::int64_t T = L.T, S = L.S;
  parallel_ranges(L.B * L.H, L.B * L.H * T * S * (L.D + L.E), [&](std::int64_t r0, std::int64_t r1) {
    std::vector<R> dropped(drop.on ? static_cast<std::size_t>(T * S) : 0);
    for (std::int64_t r = r0; r < r1; ++r) {  // r = b * H + h
      const std::int64_t b = r / L.H, h = r % L.H, g = h / L.per;
      R* P = pp + r * T * S;
      // scores [T, S] = scale * q_bh [T, D] k_bg^T; softmax over each row; y_bh [T, E] = probabilities v_bg.
      if (additive)
        additive_scores(T, S, L.D, scale, qp + L.q_at(b, h), L.H * L.D, kp + L.k_at(b, g), L.G * L.D, wp,
                        one_w, P);
      else
        gemm(false, true, T, S, L.D, scale, qp + L.q_at(b, h), L.H * L.D, kp + L.k_at(b, g), L.G * L.D, R(0),
             P, S);
      for (std::int64_t t = 0; t < T; ++t) softmax_row(P + t * S, S, vis, b, t, p.empty_rows_uniform);
      const R* used = P;
      if (drop.on) {
        drop_rows(P, dropped.data(), T * S, r * T * S, drop, inv_keep);
        used = dropped.data();
      }
      gemm(false, false, T, L.E, S, R(1), used, S, vp + L.v_at(b, g), L.G * L.E, R(0), yp + L.y_at(b, h),
           L.H * L.E);
    }
  });
}

template <class R>
void attention_backward_loop(const AttentionParams& p, const Tensor& q, const Tensor& k, const Tensor& v,
                             const Tensor& score_weights, const Visibility& vis, const DropoutBits& drop,
                             const Tensor& probs, const Tensor& dy, const Tensor& dprobs, Tensor& dq,
                             Tensor& dk, Tensor& dv, Tensor& dscore_weights) {
  const AttentionLayout L(q, k, v);
  const bool additive = p.score == AttentionScore::additive;
  const R* wp = score_weights.defined() ? score_weights.data<R>() : nullptr;
  const bool one_w = score_weights.defined() && score_weights.numel() == 1;
  const std::int64_t nw = score_weights.defined() ? score_weights.numel() : 0;
  // The additive score weights' gradient of each (b, g) pair, summed in order after the pairs (deterministic).
  std::vector<R> dw_parts(dscore_weights.defined() ? static_cast<std::size_t>(L.B * L.G * nw) : 0, R(0));
  const R* qp = q.data<R>();
  const R* kp = k.data<R>();
  const R* vp = v.data<R>();
  const R* pp = probs.data<R>();
  const R* gp = dy.data<R>();
  const R* dpp = dprobs.defined() ? dprobs.data<R>() : nullptr;
  R* dqp = dq.defined() ? dq.data<R>() : nullptr;
  R* dkp = dk.defined() ? dk.data<R>() : nullptr;
  R* dvp = dv.defined() ? dv.data<R>() : nullptr;
  const R scale = static_cast<R>(p.scale), inv_keep = static_cast<R>(1.0 / (1.0 - p.dropout));
  const std::int64_t T = L.T, S = L.S;
  // Pairs (b, g): a key/value head's gradients gather its query heads', which no other pair touches.
  parallel_ranges(L.B * L.G, L.B * L.H * T * S * (2 * L.D + 2 * L.E), [&](std::int64_t r0, std::int64_t r1) {
    std::vector<R> dropped(drop.on ? static_cast<std::size_t>(T * S) : 0),
        ds(static_cast<std::size_t>(T * S));
    for (std::int64_t r = r0; r < r1; ++r) {  // r = b * G + g
      const std::int64_t b = r / L.G, g = r % L.G;
      const R* K = kp + L.k_at(b, g);
      const R* V = vp + L.v_at(b, g);
      for (std::int64_t h = g * L.per; h < (g + 1) * L.per; ++h) {
        const R beta =
            h == g * L.per ? R(0) : R(1);  // the group's first head writes dk and dv, the others add
        const std::int64_t first = (b * L.H + h) * T * S;
        const R* P = pp + first;
        const R* dY = gp + L.y_at(b, h);
        const R* used = P;
        if (drop.on) {
          drop_rows(P, dropped.data(), T * S, first, drop, inv_keep);
          used = dropped.data();
        }
        // dv_bg [S, E] (+)= probabilities after dropout^T dy_bh.
        if (dvp)
          gemm(true, false, S, L.E, T, R(1), used, S, dY, L.H * L.E, beta, dvp + L.v_at(b, g), L.G * L.E);
        if (!dqp && !dkp && dw_parts.empty()) continue;
        // d [T, S] = dy_bh v_bg^T w.r.t. the probabilities after dropout; back through dropout and the softmax.
        gemm(false, true, T, S, L.E, R(1), dY, L.H * L.E, V, L.G * L.E, R(0), ds.data(), S);
        for (std::int64_t t = 0; t < T; ++t) {
          R* d = ds.data() + t * S;
          const R* row = P + t * S;
          // A row that keeps no key (its probabilities 1/S) passes no gradient to its scores.
          bool any = false;
          for (std::int64_t s = 0; vis.row_kept(b, t) && !any && s < S; ++s) any = vis.kept(b, t, s);
          if (!any) {
            std::fill_n(d, S, R(0));
            continue;
          }
          // Back through dropout: kept where the dropped probability is not 0 (where the probability is 0 the
          // score's gradient is 0 whatever d is); then the probabilities' own gradient joins.
          const R* kept = drop.on ? dropped.data() + t * S : nullptr;
          const R* own = dpp ? dpp + first + t * S : nullptr;
          R dot_sum = 0;
          for (std::int64_t s = 0; s < S; ++s) {
            if (kept) d[s] = kept[s] != R(0) ? d[s] * inv_keep : R(0);
            if (own) d[s] += own[s];
            dot_sum += row[s] * d[s];
          }
          for (std::int64_t s = 0; s < S; ++s) d[s] = row[s] * (d[s] - dot_sum) * scale;  // 0 where masked
        }
        if (additive) {
          R* dK = dkp ? dkp + L.k_at(b, g) : nullptr;
          if (dK && beta == R(0))
            for (std::int64_t s = 0; s < S; ++s) std::fill_n(dK + s * L.G * L.D, L.D, R(0));
          additive_scores_backward(T, S, L.D, qp + L.q_at(b, h), L.H * L.D, K, L.G * L.D, wp, one_w,
                                   ds.data(), dqp ? dqp + L.q_at(b, h) : nullptr, dK,
                                   dw_parts.empty() ? nullptr : dw_parts.data() + r * nw);
          continue;
        }
        if (dqp)
          gemm(false, false, T, L.D, S, R(1), ds.data(), S, K, L.G * L.D, R(0), dqp + L.q_at(b, h),
               L.H * L.D);
        if (dkp)
          gemm(true, false, S, L.D, T, R(1), ds.data(), S, qp + L.q_at(b, h), L.H * L.D, beta,
               dkp + L.k_at(b, g), L.G * L.D);
      }
    }
  });
  if (dw_parts.empty()) return;
  R* dw = dscore_weights.data<R>();
  std::fill_n(dw, nw, R(0));
  for (std::int64_t r = 0; r < L.B * L.G; ++r)
    for (std::int64_t i = 0; i < nw; ++i) dw[i] += dw_parts[static_cast<std::size_t>(r * nw + i)];
}

}  // namespace

const DTypes attention_forward_dtypes = kFloats;
void attention_forward(const AttentionParams& p, const Tensor& q, const Tensor& k, const Tensor& v,
                       const Tensor& score_weights, const Tensor& query_mask, const Tensor& key_mask,
                       const Tensor& attention_mask, const Tensor& step, Tensor& y, Tensor& probs) {
  const Visibility vis(p, query_mask, key_mask, attention_mask, q.dim(1), k.dim(1));
  const DropoutBits drop = dropout_bits(p, step);
  visit_dtype<float, double>(q.dtype(), [&](auto t) {
    attention_forward_loop<typename decltype(t)::type>(p, q, k, v, score_weights, vis, drop, y, probs);
  });
}

const DTypes attention_backward_dtypes = kFloats;
void attention_backward(const AttentionParams& p, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& score_weights, const Tensor& query_mask, const Tensor& key_mask,
                        const Tensor& attention_mask, const Tensor& step, const Tensor& probs,
                        const Tensor& dy, const Tensor& dprobs, Tensor& dq, Tensor& dk, Tensor& dv,
                        Tensor& dscore_weights) {
  // A masked position of a row that keeps some key has probability 0, and so no gradient; a row that keeps none is
  // found by the masks.
  const Visibility vis(p, query_mask, key_mask, attention_mask, q.dim(1), k.dim(1));
  const DropoutBits drop = dropout_bits(p, step);
  visit_dtype<float, double>(q.dtype(), [&](auto t) {
    attention_backward_loop<typename decltype(t)::type>(p, q, k, v, score_weights, vis, drop, probs, dy,
                                                        dprobs, dq, dk, dv, dscore_weights);
  });
}

}  // namespace systolic::ops::cpu
