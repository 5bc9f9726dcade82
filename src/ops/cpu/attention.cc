// The attention family on the CPU: scaled dot-product attention of every head (MultiHeadAttention's core), loops
// for float32 and float64 (bfloat16 widened around them, as every op), OpenMP over (batch, key/value head) pairs.
// A pair's queries read only its keys and values, and its key/value gradients gather only its queries', so the
// pairs share nothing. The scores of one query row live in probs (forward writes them there, then turns them into
// probabilities in place); backward reads them and needs a row of scratch per thread. Dropout's keep bits are
// ops::dropout_forward's over probs' elements, drawn again in backward. Contracts: include/systolic/ops.h.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/philox.h"
#include "ops/cpu/cpu_backend.h"

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

// Dropout's keep bits over probs' elements: element i is kept when word i % 4 of random4(key, i / 4), as a unit
// float, is at least the rate (ops::dropout_forward's rule), and then scaled by 1/(1 - rate).
struct DropoutBits {
  bool on;
  std::uint64_t key;
  float rate;
  bool keeps(std::int64_t i) const {
    if (!on) return true;
    const philox::U32x4 w = philox::random4(key, static_cast<std::uint64_t>(i) / 4);
    return philox::unit_float(w.v[i % 4]) >= rate;
  }
};

DropoutBits dropout_bits(const AttentionParams& p, const Tensor& step) {
  const double s = step.defined() ? step.data<double>()[0] : 0.0;
  return {p.dropout > 0, philox::dropout_key(p.seed, s), static_cast<float>(p.dropout)};
}

template <class R>
R dot(const R* a, const R* b, std::int64_t n) {
  R s = 0;
  for (std::int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

template <class R>
void attention_forward_loop(const AttentionParams& p, const Tensor& q, const Tensor& k, const Tensor& v,
                            const Visibility& vis, const DropoutBits& drop, Tensor& y, Tensor& probs) {
  const std::int64_t B = q.dim(0), T = q.dim(1), H = q.dim(2), D = q.dim(3), S = k.dim(1), G = k.dim(2),
                     E = v.dim(3), per = H / G;
  const R* qp = q.data<R>();
  const R* kp = k.data<R>();
  const R* vp = v.data<R>();
  R* yp = y.data<R>();
  R* pp = probs.data<R>();
  const R scale = static_cast<R>(p.scale), inv_keep = static_cast<R>(1.0 / (1.0 - p.dropout));
  parallel_ranges(B * H, B * H * T * S * (D + E), [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {  // r = b * H + h
      const std::int64_t b = r / H, h = r % H, g = h / per;
      for (std::int64_t t = 0; t < T; ++t) {
        R* row = pp + (r * T + t) * S;
        R* yt = yp + ((b * T + t) * H + h) * E;
        std::fill_n(yt, E, R(0));
        const R* qt = qp + ((b * T + t) * H + h) * D;
        R max = -std::numeric_limits<R>::infinity();
        const bool row_kept = vis.row_kept(b, t);
        for (std::int64_t s = 0; s < S; ++s) {
          if (row_kept && vis.kept(b, t, s)) {
            row[s] = scale * dot(qt, kp + ((b * S + s) * G + g) * D, D);
            max = std::max(max, row[s]);
          } else {
            row[s] = -std::numeric_limits<R>::infinity();
          }
        }
        if (max == -std::numeric_limits<R>::infinity()) {  // nothing kept: zeros, or Keras's fused 1/S
          std::fill_n(row, S, p.empty_rows_uniform ? R(1) / R(S) : R(0));
          if (!p.empty_rows_uniform) continue;
          for (std::int64_t s = 0; s < S; ++s) {
            if (!drop.keeps((r * T + t) * S + s)) continue;
            const R w = drop.on ? row[s] * inv_keep : row[s];
            const R* vs = vp + ((b * S + s) * G + g) * E;
            for (std::int64_t e = 0; e < E; ++e) yt[e] += w * vs[e];
          }
          continue;
        }
        R sum = 0;
        for (std::int64_t s = 0; s < S; ++s) {
          row[s] = std::exp(row[s] - max);  // exp(-inf) = 0 where masked
          sum += row[s];
        }
        const R inv = R(1) / sum;
        for (std::int64_t s = 0; s < S; ++s) {
          row[s] *= inv;
          if (row[s] == R(0) || !drop.keeps((r * T + t) * S + s)) continue;
          const R w = drop.on ? row[s] * inv_keep : row[s];
          const R* vs = vp + ((b * S + s) * G + g) * E;
          for (std::int64_t e = 0; e < E; ++e) yt[e] += w * vs[e];
        }
      }
    }
  });
}

template <class R>
void attention_backward_loop(const AttentionParams& p, const Tensor& q, const Tensor& k, const Tensor& v,
                             const Visibility& vis, const DropoutBits& drop, const Tensor& probs,
                             const Tensor& dy, Tensor& dq, Tensor& dk, Tensor& dv) {
  const std::int64_t B = q.dim(0), T = q.dim(1), H = q.dim(2), D = q.dim(3), S = k.dim(1), G = k.dim(2),
                     E = v.dim(3), per = H / G;
  const R* qp = q.data<R>();
  const R* kp = k.data<R>();
  const R* vp = v.data<R>();
  const R* pp = probs.data<R>();
  const R* gp = dy.data<R>();
  R* dqp = dq.defined() ? dq.data<R>() : nullptr;
  R* dkp = dk.defined() ? dk.data<R>() : nullptr;
  R* dvp = dv.defined() ? dv.data<R>() : nullptr;
  const R scale = static_cast<R>(p.scale), inv_keep = static_cast<R>(1.0 / (1.0 - p.dropout));
  parallel_ranges(B * G, B * H * T * S * (2 * D + 2 * E), [&](std::int64_t r0, std::int64_t r1) {
    std::vector<R> ds(static_cast<std::size_t>(S)), dropped(static_cast<std::size_t>(S));
    for (std::int64_t r = r0; r < r1; ++r) {  // r = b * G + g
      const std::int64_t b = r / G, g = r % G;
      for (std::int64_t s = 0; s < S; ++s) {
        if (dkp) std::fill_n(dkp + ((b * S + s) * G + g) * D, D, R(0));
        if (dvp) std::fill_n(dvp + ((b * S + s) * G + g) * E, E, R(0));
      }
      for (std::int64_t h = g * per; h < (g + 1) * per; ++h)
        for (std::int64_t t = 0; t < T; ++t) {
          const std::int64_t row_index = ((b * H + h) * T + t) * S;
          const R* row = pp + row_index;
          const R* gt = gp + ((b * T + t) * H + h) * E;
          const R* qt = qp + ((b * T + t) * H + h) * D;
          R* dqt = dqp ? dqp + ((b * T + t) * H + h) * D : nullptr;
          if (dqt) std::fill_n(dqt, D, R(0));
          // d: the probabilities after dropout; dp: the gradient w.r.t. the probabilities before it.
          R dot_sum = 0;
          for (std::int64_t s = 0; s < S; ++s) {
            const bool keep = row[s] != R(0) && drop.keeps(row_index + s);
            const R factor = keep ? (drop.on ? inv_keep : R(1)) : R(0);
            dropped[s] = row[s] * factor;
            const R dp = keep ? factor * dot(gt, vp + ((b * S + s) * G + g) * E, E) : R(0);
            ds[s] = dp;
            dot_sum += row[s] * dp;
          }
          // A row that no mask keeps any key of (its probabilities 1/S) passes no gradient to its scores.
          const bool row_kept = vis.row_kept(b, t);
          bool any = false;
          for (std::int64_t s = 0; row_kept && !any && s < S; ++s) any = vis.kept(b, t, s);
          for (std::int64_t s = 0; any && s < S; ++s) {
            if (row[s] == R(0)) continue;  // masked (or underflowed): no gradient reaches the score
            const R d = row[s] * (ds[s] - dot_sum) * scale;
            const std::int64_t kv = (b * S + s) * G + g;
            if (dqt) {
              const R* ks = kp + kv * D;
              for (std::int64_t i = 0; i < D; ++i) dqt[i] += d * ks[i];
            }
            if (dkp) {
              R* dks = dkp + kv * D;
              for (std::int64_t i = 0; i < D; ++i) dks[i] += d * qt[i];
            }
          }
          if (dvp)
            for (std::int64_t s = 0; s < S; ++s) {
              if (dropped[s] == R(0)) continue;
              R* dvs = dvp + ((b * S + s) * G + g) * E;
              for (std::int64_t e = 0; e < E; ++e) dvs[e] += dropped[s] * gt[e];
            }
        }
    }
  });
}

}  // namespace

const DTypes attention_forward_dtypes = kFloats;
void attention_forward(const AttentionParams& p, const Tensor& q, const Tensor& k, const Tensor& v,
                       const Tensor& query_mask, const Tensor& key_mask, const Tensor& attention_mask,
                       const Tensor& step, Tensor& y, Tensor& probs) {
  const Visibility vis(p, query_mask, key_mask, attention_mask, q.dim(1), k.dim(1));
  const DropoutBits drop = dropout_bits(p, step);
  visit_dtype<float, double>(q.dtype(), [&](auto t) {
    attention_forward_loop<typename decltype(t)::type>(p, q, k, v, vis, drop, y, probs);
  });
}

const DTypes attention_backward_dtypes = kFloats;
void attention_backward(const AttentionParams& p, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& query_mask, const Tensor& key_mask, const Tensor& attention_mask,
                        const Tensor& step, const Tensor& probs, const Tensor& dy, Tensor& dq, Tensor& dk,
                        Tensor& dv) {
  // A masked position of a row that keeps some key has probability 0, and so no gradient; a row that keeps none is
  // found by the masks.
  const Visibility vis(p, query_mask, key_mask, attention_mask, q.dim(1), k.dim(1));
  const DropoutBits drop = dropout_bits(p, step);
  visit_dtype<float, double>(q.dtype(), [&](auto t) {
    attention_backward_loop<typename decltype(t)::type>(p, q, k, v, vis, drop, probs, dy, dq, dk, dv);
  });
}

}  // namespace systolic::ops::cpu
