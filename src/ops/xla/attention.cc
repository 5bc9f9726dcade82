// Scaled dot-product attention on the XLA backend (xla_backend.h): batched dot_generals over (batch, head) (the
// additive score: tanh(q + k) over [B, H, T, S, D], weighted and summed over D), the
// masks as one predicate over the scores [B, H, T, S], the softmax over the kept keys, and dropout's keep bits
// drawn as ops::dropout_forward's over probs' elements (elementwise.cc's rule), so every backend drops the same
// probabilities. Grouped key/value heads are broadcast to the query heads, and their gradients summed back.
#include "ops/attention_layout.h"
#include "ops/xla/emit.h"
#include "ops/xla/philox.h"
#include "ops/xla/xla_backend.h"

namespace systolic::ops::xla {

namespace {

// k or v [B, S, G, n] as [B, S, H, n]: each key/value head repeated for its `per` query heads.
E to_heads(const E& x, const AttentionLayout& d) {
  if (d.per == 1) return x;
  const std::int64_t n = x.dims()[3];
  return reshape(broadcast(x, {d.B, d.S, d.G, d.per, n}, {0, 1, 2, 4}), {d.B, d.S, d.H, n});
}
// The gradient of to_heads: [B, S, H, n] summed over each group's heads into [B, S, G, n].
E from_heads(const E& x, const AttentionLayout& d) {
  if (d.per == 1) return x;
  const std::int64_t n = x.dims()[3];
  return sum(reshape(x, {d.B, d.S, d.G, d.per, n}), {3});
}

E transpose(const E& x, const std::vector<std::int64_t>& perm) {
  return E(hlo().transpose(x.v, perm));
}

// Whether an optional value (a predicate, the keep bits) was made: E() has no dimensions, and none here is a scalar.
bool defined(const E& e) {
  return !e.v.type.dims.empty();
}

// Where key s is kept for query t, over the scores [B, H, T, S]; an undefined E when every key is.
E visible(const AttentionParams& p, const Tensor& query_mask, const Tensor& key_mask,
          const Tensor& attention_mask, const AttentionLayout& d) {
  E kept;
  auto both = [&](const E& pred) { kept = defined(kept) ? (kept && pred) : pred; };
  const auto dims = d.scores();
  if (query_mask.defined()) both(!eq(broadcast(read(query_mask), dims, {0, 2}), 0.0));
  if (key_mask.defined()) both(!eq(broadcast(read(key_mask), dims, {0, 3}), 0.0));
  if (attention_mask.defined()) both(!eq(broadcast(read(attention_mask), dims, {0, 2, 3}), 0.0));
  if (p.causal || p.window > 0) {
    E t = iota(dims, 2, Elem::f32), s = iota(dims, 3, Elem::f32);
    if (p.causal) both(s <= t);
    if (p.window > 0) both(abs(t - s) < static_cast<double>(p.window));
  }
  return kept;
}

// Dropout's keep bits over probs [B, H, T, S] (element i: word i % 4 of random4(key, i / 4) >> 8 at least rate *
// 2^24, as float32); an undefined E without dropout.
E dropout_keep(const AttentionParams& p, const Tensor& step, const AttentionLayout& d) {
  if (p.dropout <= 0) return E();
  const std::int64_t n = d.B * d.H * d.T * d.S, groups = (n + 3) / 4;
  philox::Words w = philox::random4(philox::dropout_key(p.seed, step), groups);
  std::vector<Value> parts;
  for (const E& word : w) parts.push_back(reshape(word, {groups, 1}).v);
  E words = reshape(E(hlo().concatenate(parts, 1)), {4 * groups});
  words = hlo().slice(words.v, {0}, {n});
  const float threshold = static_cast<float>(p.dropout) * 16777216.0f;
  return reshape(convert(shift_right(words, 8), Elem::f32) >= static_cast<double>(threshold), d.scores());
}

// The additive score's terms over [B, H, T, S, D]: u = tanh(q + k) and its weights w broadcast to them (an
// undefined E for weights of 1).
struct Additive {
  E u, w;
};
Additive additive_terms(const E& qv, const E& kv, const Tensor& score_weights, const AttentionLayout& d) {
  const std::vector<std::int64_t> dims{d.B, d.H, d.T, d.S, d.D};
  Additive a{tanh(broadcast(qv, dims, {0, 2, 1, 4}) + broadcast(kv, dims, {0, 3, 1, 4})), E()};
  if (score_weights.defined()) {
    E w = read(score_weights);
    a.w = score_weights.numel() == 1 && d.D != 1 ? broadcast(reshape(w, {}), dims, {})
                                                 : broadcast(w, dims, {4});
  }
  return a;
}

// scores [B, H, T, S] before the scale: q against k, by p.score.
E raw_scores(const AttentionParams& p, const E& qv, const E& kv, const Tensor& score_weights,
             const AttentionLayout& d) {
  if (p.score == AttentionScore::dot)  // batch (b, h), q's t against k's s over D
    return E(hlo().dot_general(qv.v, kv.v, {0, 2}, {0, 2}, {3}, {3}, qv.elem()));
  const Additive a = additive_terms(qv, kv, score_weights, d);
  return sum(defined(a.w) ? a.w * a.u : a.u, {4});
}

}  // namespace

const DTypes attention_forward_dtypes = kFloatsAndBf16;
void attention_forward(const AttentionParams& p, const Tensor& q, const Tensor& k, const Tensor& v,
                       const Tensor& score_weights, const Tensor& query_mask, const Tensor& key_mask,
                       const Tensor& attention_mask, const Tensor& step, Tensor& y, Tensor& probs) {
  traced([&] {
    const AttentionLayout d(q, k, v);
    E qv = read(q), kv = to_heads(read(k), d), vv = to_heads(read(v), d);
    E scores = raw_scores(p, qv, kv, score_weights, d) * p.scale;  // [B, H, T, S]
    E kept = visible(p, query_mask, key_mask, attention_mask, d);
    const double lowest = -1e30;  // below any score; a row with nothing kept is zeroed below
    E masked = defined(kept) ? where(kept, scores, lowest) : scores;
    E top = broadcast(reduce_max(masked, {3}), d.scores(), {0, 1, 2});
    E e = exp(masked - top);
    if (defined(kept)) e = where(kept, e, 0.0);
    E total = broadcast(sum(e, {3}), d.scores(), {0, 1, 2});
    E pr = where(total > 0.0, e / where(total > 0.0, total, 1.0),
                 p.empty_rows_uniform ? 1.0 / static_cast<double>(d.S) : 0.0);
    write(probs, pr);
    E keep = dropout_keep(p, step, d);
    E dropped = defined(keep) ? where(keep, pr * (1.0 / (1.0 - p.dropout)), 0.0) : pr;
    // y [B, H, T, E] -> [B, T, H, E]: batch (b, h), the probabilities against v's s.
    E out = E(hlo().dot_general(dropped.v, vv.v, {0, 1}, {0, 2}, {3}, {1}, qv.elem()));
    write(y, transpose(out, {0, 2, 1, 3}));
  });
}

const DTypes attention_backward_dtypes = kFloatsAndBf16;
void attention_backward(const AttentionParams& p, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& score_weights, const Tensor& query_mask, const Tensor& key_mask,
                        const Tensor& attention_mask, const Tensor& step, const Tensor& probs,
                        const Tensor& dy, const Tensor& dprobs, Tensor& dq, Tensor& dk, Tensor& dv,
                        Tensor& dscore_weights) {
  // A masked score gets no gradient: its probability is 0 where its row keeps some key; a row that keeps none (1/S
  // with empty_rows_uniform) is found by the masks.
  traced([&] {
    const AttentionLayout d(q, k, v);
    E pr = read(probs), g = read(dy);
    E keep = dropout_keep(p, step, d);
    const double inv = 1.0 / (1.0 - p.dropout);
    if (dv.defined()) {
      E dropped = defined(keep) ? where(keep, pr * inv, 0.0) : pr;
      // [B, H, S, E]: batch (b, h), the probabilities' t against dy's t.
      E full = E(hlo().dot_general(dropped.v, g.v, {0, 1}, {0, 2}, {2}, {1}, g.elem()));
      write(dv, from_heads(transpose(full, {0, 2, 1, 3}), d));
    }
    if (!dq.defined() && !dk.defined() && !dscore_weights.defined()) return;
    E vv = to_heads(read(v), d);
    E dd = E(hlo().dot_general(g.v, vv.v, {0, 2}, {0, 2}, {3}, {3}, g.elem()));  // [B, H, T, S]
    E dp = defined(keep) ? where(keep, dd * inv, 0.0) : dd;
    if (dprobs.defined()) dp = dp + read(dprobs);
    E row = broadcast(sum(pr * dp, {3}), d.scores(), {0, 1, 2});
    E ds = pr * (dp - row) * p.scale;
    if (p.empty_rows_uniform) {
      E kept = visible(p, query_mask, key_mask, attention_mask, d);
      if (defined(kept)) ds = where(kept, ds, 0.0);
    }
    if (p.score == AttentionScore::additive) {
      // f = ds w (1 - u^2) over [B, H, T, S, D]: dq sums it over s, dk over t; dw = sum of ds u.
      const Additive a = additive_terms(read(q), to_heads(read(k), d), score_weights, d);
      const std::vector<std::int64_t> dims{d.B, d.H, d.T, d.S, d.D};
      E g = broadcast(ds, dims, {0, 1, 2, 3});
      E f = g * (1.0 - a.u * a.u);
      if (defined(a.w)) f = f * a.w;
      if (dq.defined()) write(dq, transpose(sum(f, {3}), {0, 2, 1, 3}));
      if (dk.defined()) write(dk, from_heads(transpose(sum(f, {2}), {0, 2, 1, 3}), d));
      if (dscore_weights.defined()) {
        E dw = sum(g * a.u, {0, 1, 2, 3});
        write(dscore_weights, dscore_weights.numel() == 1 && d.D != 1 ? reshape(sum_all(dw), {1}) : dw);
      }
      return;
    }
    if (dq.defined()) {
      E kv = to_heads(read(k), d);
      E full = E(hlo().dot_general(ds.v, kv.v, {0, 1}, {0, 2}, {3}, {1}, g.elem()));  // [B, H, T, D]
      write(dq, transpose(full, {0, 2, 1, 3}));
    }
    if (dk.defined()) {
      E qv = read(q);
      E full = E(hlo().dot_general(ds.v, qv.v, {0, 1}, {0, 2}, {2}, {1}, g.elem()));  // [B, H, S, D]
      write(dk, from_heads(transpose(full, {0, 2, 1, 3}), d));
    }
  });
}

}  // namespace systolic::ops::xla
