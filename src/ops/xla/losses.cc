// Losses and accuracy on the XLA backend (xla_backend.h), as the CPU loops compute them: the loss in float64 (its
// sum is added to the float64 total), the gradient in the data's type. A sparse label out of range makes that
// row's loss NaN (an XLA program cannot raise an error; the NaN reaches the logs), where the CPU raises an Error.
#include <cmath>

#include "ops/confusion_math.h"
#include "ops/loss_math.h"
#include "ops/row_loss_math.h"
#include "ops/xla/emit.h"
#include "ops/xla/xla_backend.h"

namespace systolic::ops::xla {

namespace {

struct Labels {
  bool sparse;
  E y;         // [R, C] float64: one-hot for sparse labels
  E in_range;  // [R] predicate (sparse), else all true
};

Labels labels_of(const Tensor& labels, std::int64_t rows, std::int64_t classes) {
  Labels l;
  l.sparse = labels.dtype() == DType::int32;
  if (l.sparse) {
    E idx = reshape(read_as(labels, Elem::i32), {rows});
    E classes_iota = iota({rows, classes}, 1, Elem::i32);
    E pick = eq(classes_iota, broadcast_rows(idx, {rows, classes}));
    l.y = where(pick, constant(1.0, Type{Elem::f64, {rows, classes}}), 0.0);
    l.in_range = idx >= constant(0.0, idx.type()) && idx < constant(double(classes), idx.type());
  } else {
    l.y = reshape(read_as(labels, Elem::f64), {rows, classes});
    l.in_range = constant(1.0, Type{Elem::i1, {rows}});
  }
  return l;
}

// NaN where the row's label is out of range.
E guard(const E& per_row, const Labels& l) {
  return where(l.in_range, per_row, like(NAN, per_row));
}

void add_total(const Tensor& total, const E& value) {
  accumulate_into(total, reshape(convert(value, Elem::f64), total.shape().dims()));
}

// Keras's weights over `count` values of a loss (one per sample, or one per value) as [count] float64.
E spread(const Tensor& weights, std::int64_t count) {
  const std::int64_t N = weights.numel();
  if (N == 0) return constant(1.0, Type{Elem::f64, {count}});  // no samples: no values
  E w = reshape(read_as(weights, Elem::f64), {N});
  return reshape(broadcast(w, {N, count / N}, {0}), {count});
}

// The weights of a loss's R rows that it means over each sample (loss_math.h's row_weights with
// per_sample_mean): spread, or 1, times the sample's share of its rows.
E mean_row_weights(const Tensor& weights, const Tensor& pred, std::int64_t R) {
  const double scale = loss::per_sample_mean(pred);
  return weights.defined() ? spread(weights, R) * scale : constant(scale, Type{Elem::f64, {R}});
}

// 1 where the mask (`count` values) is not 0, else 0, as [count] float64; all 1 without one.
E unmasked(const Tensor& mask, std::int64_t count) {
  E ones = constant(1.0, Type{Elem::f64, {count}});
  if (!mask.defined()) return ones;
  return where(eq(reshape(read_as(mask, Elem::f64), {count}), 0.0), 0.0, ones);
}

// The row's argmax: the first index of the maximum.
E argmax_rows(const E& z) {
  const auto& d = z.dims();
  E mx = broadcast_rows(reduce_max(z, {1}), d);
  E idx = iota(d, 1, Elem::i32);
  return reduce_min(where(eq(z, mx), idx, constant(double(d[1]), idx.type())), {1});
}

}  // namespace

const DTypes softmax_cross_entropy_dtypes = kFloatsAndBf16;
void softmax_cross_entropy(const Tensor& logits, const Tensor& labels, const Tensor& weights, Tensor& total,
                           Tensor& dlogits, double grad_scale) {
  traced([&] {
    const std::int64_t C = logits.dim(-1), R = logits.numel() / C;
    std::vector<std::int64_t> d{R, C};
    E z = reshape(read_as(logits, Elem::f64), d);
    Labels l = labels_of(labels, R, C);
    E mx = reduce_max(z, {1});
    E lse = mx + log(sum(exp(z - broadcast_rows(mx, d)), {1}));
    E lse_b = broadcast_rows(lse, d);
    E per_row = sum(l.y * (lse_b - z), {1});
    E w = mean_row_weights(weights, logits, R);
    add_total(total, sum_all(guard(per_row * w, l)));
    if (dlogits.defined()) {
      E p = exp(z - lse_b);
      E g = l.sparse ? p - l.y : p * broadcast_rows(sum(l.y, {1}), d) - l.y;
      write(dlogits, g * broadcast_rows(w * grad_scale, d));
    }
  });
}

const DTypes crossentropy_from_probabilities_dtypes = kFloatsAndBf16;
void crossentropy_from_probabilities(const Tensor& probs, const Tensor& labels, const Tensor& weights,
                                     Tensor& total, Tensor& dprobs, double grad_scale, double eps) {
  traced([&] {
    const std::int64_t C = probs.dim(-1), R = probs.numel() / C;
    std::vector<std::int64_t> d{R, C};
    E p = reshape(read_as(probs, Elem::f64), d);
    Labels l = labels_of(labels, R, C);
    E s_row = sum(loss::ce_statistic_term<Math>(l.sparse, p, eps), {1}), s = broadcast_rows(s_row, d);
    loss::ValueGrad<E> t = loss::ce_of_probabilities<Math>(l.sparse, p, l.y, s, eps);
    E per_row = loss::ce_row_loss<Math>(l.sparse, sum(t.value, {1}), s_row);
    E w = mean_row_weights(weights, probs, R);
    add_total(total, sum_all(guard(per_row * w, l)));
    if (dprobs.defined()) {
      E scale = broadcast_rows(w * grad_scale, d);
      E G = l.sparse ? t.grad : broadcast_rows(sum(t.grad * p / s, {1}), d);  // G: categorical only
      write(dprobs, loss::ce_gradient(l.sparse, t.grad, G, s) * scale);
    }
  });
}

const DTypes ignore_class_dtypes = kFloats;
void ignore_class(const Tensor& labels, std::int32_t ignore, const Tensor& weights, const Tensor& mask,
                  Tensor& kept, Tensor& kept_weights) {
  traced([&] {
    const std::int64_t n = labels.numel();
    E l = reshape(read_as(labels, Elem::i32), {n});
    E keep = where(eq(l, double(ignore)), 0.0, unmasked(mask, n));  // 1 kept, 0 not
    E count = sum(keep, {0});
    E scale = where(count > 0.0, double(n) / count, 0.0);
    E w = weights.defined() ? spread(weights, n) : constant(1.0, Type{Elem::f64, {n}});
    write(kept, where(eq(keep, 0.0), 0.0, l));
    write(kept_weights, keep * w * broadcast(scale, {n}, {}));
  });
}

const DTypes mask_weights_dtypes = kFloats;
void mask_weights(const Tensor& mask, const Tensor& weights, bool normalize, Tensor& out) {
  traced([&] {
    const std::int64_t n = mask.numel();
    E keep = unmasked(mask, n);
    E w = weights.defined() ? spread(weights, n) : constant(1.0, Type{Elem::f64, {n}});
    if (normalize) {
      E count = sum(keep, {0});
      w = w * broadcast(where(count > 0.0, double(n) / count, 0.0), {n}, {});
    }
    write(out, keep * w);
  });
}

const DTypes elementwise_loss_dtypes = kFloatsAndBf16;
void elementwise_loss(const Tensor& pred, const Tensor& target, const Tensor& weights, Tensor& total,
                      Tensor& dpred, const ElementLossParams& p, double grad_scale) {
  traced([&] {
    const std::int64_t n = pred.numel(), R = pred.dim(0), D = R ? n / R : 0;
    const double w = loss::element_weight(p.kind, D, pred.rank() >= 2 ? pred.dim(-1) : 1);
    E x = reshape(read_as(pred, Elem::f64), {n}), t = reshape(read_as(target, Elem::f64), {n});
    if (loss::hinge_targets(p.kind) && n > 0) {
      // Every target 0 or 1: all of them taken as -1/1.
      E binary = eq(t, 0.0) || eq(t, 1.0);
      E all = reduce_min(where(binary, like(1.0, t), 0.0), {0});
      t = where(broadcast(eq(all, 1.0), {n}, {}), 2.0 * t - 1.0, t);
    }
    loss::ValueGrad<E> e = loss::element<Math>(p, x, t);
    if (weights.defined() && n > 0) {  // each element's loss and gradient times its sample's weight
      E ws = spread(weights, n);
      e = {e.value * ws, e.grad * ws};
    }
    add_total(total, sum_all(e.value) * w);
    if (dpred.defined()) write(dpred, e.grad * (w * grad_scale));
  });
}

// Each statistic a reduction over the rows of [R, C] terms, read by the later terms broadcast over the row.
const DTypes row_loss_dtypes = kFloatsAndBf16;
void row_loss(const Tensor& pred, const Tensor& target, const Tensor& weights, Tensor& total, Tensor& dpred,
              const RowLossParams& p, double grad_scale) {
  namespace rl = row_loss_math;
  traced([&] {
    const std::int64_t C = pred.dim(-1), R = pred.numel() / C;
    if (R == 0) return;
    const double per_sample = double(R / pred.dim(0));
    const std::vector<std::int64_t> d{R, C};
    E x = reshape(read_as(pred, Elem::f64), d);
    E t = rl::target<Math>(p, reshape(read_as(target, Elem::f64), d), double(C));
    std::vector<E> rows, spread_rows;  // the statistics: [R], and broadcast to [R, C]
    for (int i = 0; i < rl::stats(p); ++i) {
      E v = rl::term<Math>(p, i, x, t, spread_rows.data());
      rows.push_back(rl::is_max(p, i) ? reduce_max(v, {1}) : sum(v, {1}));
      spread_rows.push_back(broadcast_rows(rows.back(), d));
    }
    E value = rl::value<Math>(p, rows.data());
    const bool weighted = weights.defined();
    E w = weighted ? spread(weights, R) : E();
    add_total(total, sum_all(weighted ? value * w : value) / per_sample);
    if (dpred.defined()) {
      E g = rl::gradient<Math>(p, x, t, spread_rows.data()) * (grad_scale / per_sample);
      write(dpred, weighted ? g * broadcast_rows(w, d) : g);
    }
  });
}

const DTypes accuracy_count_dtypes = kFloatsAndBf16;
void accuracy_count(const Tensor& pred, const Tensor& labels, const Tensor& weights, Tensor& total, int k) {
  traced([&] {
    const std::int64_t C = pred.dim(-1), R = pred.numel() / C;
    E z = reshape(read(pred), {R, C});
    E truth = labels.dtype() == DType::int32 ? reshape(read_as(labels, Elem::i32), {R})
                                             : argmax_rows(reshape(read(labels), {R, C}));
    E ones = constant(1.0, Type{Elem::f64, {R}});
    E hit;
    if (k == 1) {  // argmax is in [0, C): a label out of range is a miss
      hit = where(eq(argmax_rows(z), truth), ones, 0.0);
    } else {  // in_top_k: fewer than k predictions greater than the label's (a label out of range: no hit)
      E pick = eq(iota({R, C}, 1, Elem::i32), broadcast_rows(truth, {R, C}));
      E label_value = sum(where(pick, z, 0.0), {1});
      E greater = sum(
          where(z > broadcast_rows(label_value, {R, C}), constant(1.0, Type{Elem::f64, {R, C}}), 0.0), {1});
      E in_range = truth >= constant(0.0, truth.type()) && truth < constant(double(C), truth.type());
      hit = where(greater < double(k) && in_range, ones, 0.0);
    }
    add_total(total, sum_all(hit * mean_row_weights(weights, pred, R)));
  });
}

const DTypes add_sum_dtypes = kFloats;
void add_sum(const Tensor& x, Tensor& total) {
  traced([&] { add_total(total, sum_all(reshape(read_as(x, Elem::f64), {x.numel()}))); });
}

// Every prediction against every threshold ([T, n] comparisons), in float64 after rounding the prediction and the
// thresholds to the predictions' compute type as the CPU does; the four rows stacked by an iota.
const DTypes confusion_counts_dtypes = kFloatsAndBf16;
void confusion_counts(const Tensor& pred, const Tensor& labels, const Tensor& weights, Tensor& counts,
                      const ConfusionParams& p) {
  traced([&] {
    const std::int64_t n = pred.numel(), C = pred.dim(-1), R = n / C, T = p.thresholds;
    const Elem compute = compute_elem(pred.dtype());
    std::vector<double> thresholds(static_cast<std::size_t>(T));
    for (std::int64_t t = 0; t < T; ++t) {
      const double v = confusion::threshold(p, t);
      thresholds[t] = compute == Elem::f64 ? v : double(float(v));
    }
    E x = reshape(read_as(pred, Elem::f64), {n});
    if (p.top_k > 0) {  // [R, C, C]: how many of the row's values come before each in tf.math.top_k's order
      E z = reshape(x, {R, C});
      const std::vector<std::int64_t> d3{R, C, C};
      E other = broadcast(z, d3, {0, 2}), self = broadcast(z, d3, {0, 1});
      E before = other > self || (eq(other, self) && iota(d3, 2, Elem::i32) < iota(d3, 1, Elem::i32));
      E count = sum(where(before, constant(1.0, Type{Elem::f64, d3}), 0.0), {2});
      x = reshape(where(count < double(p.top_k), z, confusion::kOutsideTopK), {n});
    }
    if (p.from_logits) x = sigmoid(x);
    if (p.clip) x = clip(x, 0.0, 1.0);
    x = convert(convert(x, compute), Elem::f64);
    E positive = !eq(reshape(read_as(labels, Elem::f64), {n}), 0.0);
    E counted = constant(1.0, Type{Elem::f64, {n}});
    if (p.class_id >= 0)
      counted = reshape(where(eq(iota({R, C}, 1, Elem::i32), double(p.class_id)),
                              constant(1.0, Type{Elem::f64, {R, C}}), 0.0),
                        {n});
    if (weights.defined() && n > 0) counted = counted * spread(weights, n);
    const std::vector<std::int64_t> d{T, n};
    E above = broadcast(x, d, {1}) > broadcast(constant(thresholds, Type{Elem::f64, {T}}), d, {0});
    E label = broadcast(positive, d, {1}), weight = broadcast(counted, d, {1});
    auto count = [&](const E& predicate) { return sum(where(predicate, weight, 0.0), {1}); };
    E tp = count(above && label), fp = count(above && !label), tn = count(!above && !label),
      fn = count(!above && label);
    E row = iota({4, T}, 0, Elem::i32);
    auto rows = [&](const E& v) { return broadcast(v, {4, T}, {1}); };
    E all =
        where(eq(row, 0.0), rows(tp), where(eq(row, 1.0), rows(fp), where(eq(row, 2.0), rows(tn), rows(fn))));
    accumulate_into(counts, reshape(all, counts.shape().dims()));
  });
}

const DTypes regression_sums_dtypes = kFloatsAndBf16;
void regression_sums(const Tensor& pred, const Tensor& target, const Tensor& weights, Tensor& sums) {
  traced([&] {
    const std::int64_t C = pred.dim(-1), R = pred.numel() / C;
    E p = reshape(read_as(pred, Elem::f64), {R, C}), t = reshape(read_as(target, Elem::f64), {R, C});
    E w = weights.defined() && R > 0 ? broadcast(spread(weights, R), {R, C}, {0})
                                     : constant(1.0, Type{Elem::f64, {R, C}});
    E wt = w * t;
    E s1 = sum(wt, {0}), s2 = sum(t * wt, {0}), s3 = sum(w * square(t - p), {0});
    E row = iota({4, C}, 0, Elem::i32);
    auto rows = [&](const E& v) { return broadcast(v, {4, C}, {1}); };
    E all = where(eq(row, 0.0), rows(s1),
                  where(eq(row, 1.0), rows(s2),
                        where(eq(row, 2.0), rows(s3), constant(double(R), Type{Elem::f64, {4, C}}))));
    accumulate_into(sums, reshape(all, sums.shape().dims()));
  });
}

// Each item's cell (labels by predictions, -1 for none) in float64, counted against an iota of the cells.
const DTypes class_confusion_dtypes = kFloatsAndBf16;
void class_confusion(const Tensor& pred, const Tensor& labels, const Tensor& weights, Tensor& counts,
                     const ClassConfusionParams& p) {
  traced([&] {
    const std::int64_t C = p.classes, K = p.argmax_predictions ? pred.dim(-1) : 1, n = pred.numel() / K;
    if (n == 0) return;
    auto value_class = [&](const Tensor& t) {  // trunc(v) in [0, C), else -1
      E v = reshape(read_as(t, Elem::f64), {n});
      return where(v >= 0.0 && v < double(C), convert(convert(v, Elem::i32), Elem::f64), -1.0);
    };
    auto argmax = [&](const Tensor& t) {
      return convert(argmax_rows(reshape(read(t), {n, t.dim(-1)})), Elem::f64);
    };
    E q;
    if (p.argmax_predictions) {
      q = argmax(pred);
    } else if (p.thresholded) {  // in the predictions' compute type, as the CPU compares
      const Elem compute = compute_elem(pred.dtype());
      const double threshold = compute == Elem::f64 ? p.threshold : double(float(p.threshold));
      q = where(reshape(read_as(pred, compute), {n}) >= threshold, constant(1.0, Type{Elem::f64, {n}}), 0.0);
    } else {
      q = value_class(pred);
    }
    E t = labels.dtype() != DType::int32 && p.argmax_labels ? argmax(labels) : value_class(labels);
    E valid = t >= 0.0 && t < double(C) && q >= 0.0 && q < double(C);
    if (p.has_ignore_class) valid = valid && !eq(t, double(p.ignore_class));
    E cell = where(valid, t * double(C) + q, -1.0);
    const std::vector<std::int64_t> d{n, C * C};
    E hits = eq(broadcast(cell, d, {0}), convert(iota(d, 1, Elem::i32), Elem::f64));
    E one = constant(1.0, Type{Elem::f64, d});
    if (weights.defined()) {
      E w = spread(weights, n);
      if (p.integer_weights) w = convert(convert(w, Elem::i32), Elem::f64);  // truncated toward 0
      one = broadcast(w, d, {0});
    }
    accumulate_into(counts, reshape(sum(where(hits, one, 0.0), {0}), counts.shape().dims()));
  });
}

// The predictions compared in their compute type (the threshold and 1e-9 rounded to it, as the CPU compares them),
// the four sums in float64, stacked by an iota.
const DTypes f_score_counts_dtypes = kFloatsAndBf16;
void f_score_counts(const Tensor& pred, const Tensor& labels, const Tensor& weights, Tensor& counts,
                    const FScoreParams& p) {
  traced([&] {
    if (pred.numel() == 0) return;
    const std::int64_t C = pred.dim(-1), R = pred.numel() / C;
    const Elem compute = compute_elem(pred.dtype());
    auto rounded = [&](double v) { return compute == Elem::f64 ? v : double(float(v)); };
    E x = reshape(read_as(pred, compute), {R, C});
    E positive =
        p.argmax ? x >= broadcast_rows(reduce_max(x, {1}), {R, C}) && abs(x) > rounded(confusion::kFScoreZero)
                 : x > rounded(p.threshold);
    E q = where(positive, constant(1.0, Type{Elem::f64, {R, C}}), 0.0);
    E t = reshape(read_as(labels, Elem::f64), {R, C});
    // Each row's terms times its sample's weight.
    E w = weights.defined() ? broadcast_rows(spread(weights, R), {R, C})
                            : constant(1.0, Type{Elem::f64, {R, C}});
    E tp = sum(q * t * w, {0}), fp = sum(q * (1.0 - t) * w, {0}), fn = sum((1.0 - q) * t * w, {0}),
      support = sum(t * w, {0});
    E row = iota({4, C}, 0, Elem::i32);
    auto rows = [&](const E& v) { return broadcast(v, {4, C}, {1}); };
    E all = where(eq(row, 0.0), rows(tp),
                  where(eq(row, 1.0), rows(fp), where(eq(row, 2.0), rows(fn), rows(support))));
    accumulate_into(counts, reshape(all, counts.shape().dims()));
  });
}

}  // namespace systolic::ops::xla
