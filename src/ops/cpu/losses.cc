// Losses and metrics on the CPU, as OpenMP loops that sum in double: softmax cross entropy, cross entropy from
// probabilities, the elementwise losses (loss_math.h's formulas), accuracy, confusion counts, regression sums, the
// F-score counts. Sparse labels are checked against the class count here (the values are the backend's to see).
// Contracts: include/systolic/ops.h.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "ops/confusion_math.h"
#include "ops/cpu/cpu_backend.h"
#include "ops/loss_math.h"
#include "ops/row_loss_math.h"

namespace systolic::ops::cpu {

namespace {

// Sparse labels: int32 with one label per row. Checked before any parallel loop (errors cannot leave OpenMP).
// Whether the labels are int32 class ids (else dense [rows, classes]); with check_range, each in [0, classes).
bool sparse_labels(const Tensor& labels, std::int64_t rows, std::int64_t classes, bool check_range = true) {
  if (labels.dtype() != DType::int32) {
    SYSTOLIC_CHECK(labels.numel() == rows * classes,
                   "labels of shape {} do not match predictions with {} rows of {}", labels.shape().str(),
                   rows, classes);
    return false;
  }
  SYSTOLIC_CHECK(labels.numel() == rows, "{} integer labels for {} predictions", labels.numel(), rows);
  if (!check_range) return true;
  const std::int32_t* lp = labels.data<std::int32_t>();
  for (std::int64_t r = 0; r < rows; ++r)
    SYSTOLIC_CHECK(lp[r] >= 0 && lp[r] < classes,
                   "label {} (sample {} of the batch) is out of range for {} classes", lp[r], r, classes);
  return true;
}

void add_to_total(Tensor& total, double value) {
  total.data<double>()[0] += value;
}

template <class T>
void softmax_cross_entropy_loop(const Tensor& logits, const Tensor& labels, const Tensor& weights,
                                Tensor& total, Tensor& dlogits, double grad_scale) {
  std::int64_t C = logits.dim(-1), R = logits.numel() / C;
  bool sparse = sparse_labels(labels, R, C);
  const loss::RowWeights rw = loss::row_weights(weights, R, loss::per_sample_mean(logits));
  const T* zp = logits.data<T>();
  T* gp = dlogits.defined() ? dlogits.data<T>() : nullptr;
  const double sum_total = parallel_sum(R, R * C, [&](std::int64_t r0, std::int64_t r1) {
    double sum = 0;
    for (std::int64_t r = r0; r < r1; ++r) {
      const T* z = zp + r * C;
      T mx = z[0];
      for (std::int64_t c = 1; c < C; ++c) mx = z[c] > mx ? z[c] : mx;
      double se = 0;
      for (std::int64_t c = 0; c < C; ++c) se += std::exp(double(z[c] - mx));
      double lse = double(mx) + std::log(se);
      const double wr = rw(r), gs = grad_scale * wr;
      if (sparse) {
        std::int32_t label = labels.data<std::int32_t>()[r];
        sum += wr * (lse - double(z[label]));
        if (gp)
          for (std::int64_t c = 0; c < C; ++c)
            gp[r * C + c] = T((std::exp(double(z[c]) - lse) - (c == label ? 1.0 : 0.0)) * gs);
      } else {
        const T* y = labels.data<T>() + r * C;
        double ysum = 0, row = 0;
        for (std::int64_t c = 0; c < C; ++c) {
          row += double(y[c]) * (lse - double(z[c]));
          ysum += double(y[c]);
        }
        sum += wr * row;
        // d/dz of -sum_c y_c log softmax_c = softmax * sum(y) - y
        if (gp)
          for (std::int64_t c = 0; c < C; ++c)
            gp[r * C + c] = T((std::exp(double(z[c]) - lse) * ysum - double(y[c])) * gs);
      }
    }
    return sum;
  });
  add_to_total(total, sum_total);
}

template <class T>
void crossentropy_from_probabilities_loop(const Tensor& probs, const Tensor& labels, const Tensor& weights,
                                          Tensor& total, Tensor& dprobs, double grad_scale, double eps) {
  std::int64_t C = probs.dim(-1), R = probs.numel() / C;
  bool sparse = sparse_labels(labels, R, C);
  const loss::RowWeights rw = loss::row_weights(weights, R, loss::per_sample_mean(probs));
  const T* pp = probs.data<T>();
  T* gp = dprobs.defined() ? dprobs.data<T>() : nullptr;
  const double sum_total = parallel_sum(R, R * C, [&](std::int64_t r0, std::int64_t r1) {
    double sum = 0;
    for (std::int64_t r = r0; r < r1; ++r) {
      const T* p = pp + r * C;
      auto y = [&](std::int64_t c) {
        return sparse ? (labels.data<std::int32_t>()[r] == c ? 1.0 : 0.0)
                      : double(labels.data<T>()[r * C + c]);
      };
      auto term = [&](std::int64_t c, double s) {
        return loss::ce_of_probabilities<DoubleMath>(sparse, double(p[c]), y(c), s, eps);
      };
      double s = 0;
      for (std::int64_t c = 0; c < C; ++c)
        s += loss::ce_statistic_term<DoubleMath>(sparse, double(p[c]), eps);
      double values = 0, G = 0;  // G = sum grad q (categorical)
      for (std::int64_t c = 0; c < C; ++c) {
        const loss::ValueGrad<double> t = term(c, s);
        values += t.value;
        if (!sparse) G += t.grad * double(p[c]) / s;
      }
      const double wr = rw(r);
      sum += wr * loss::ce_row_loss<DoubleMath>(sparse, values, s);
      if (gp)
        for (std::int64_t c = 0; c < C; ++c)
          gp[r * C + c] = T(loss::ce_gradient(sparse, term(c, s).grad, G, s) * grad_scale * wr);
    }
    return sum;
  });
  add_to_total(total, sum_total);
}

template <class T>
void elementwise_loss_loop(const Tensor& pred, const Tensor& target, const Tensor& weights, Tensor& total,
                           Tensor& dpred, ElementLossParams p, double grad_scale) {
  const std::int64_t n = pred.numel(), R = pred.dim(0), D = R ? n / R : 0;
  const loss::RowWeights rw = loss::row_weights(weights, n);  // each element's sample's or row's weight
  const double w = loss::element_weight(p.kind, D, pred.rank() >= 2 ? pred.dim(-1) : 1);
  const T* pp = pred.data<T>();
  const T* tp = target.data<T>();
  T* gp = dpred.defined() ? dpred.data<T>() : nullptr;
  bool binary = loss::hinge_targets(p.kind);
  for (std::int64_t i = 0; i < n && binary; ++i) binary = loss::binary_target(double(tp[i]));
  const double sum_total = parallel_sum(n, n, [&](std::int64_t i0, std::int64_t i1) {
    double sum = 0;
    for (std::int64_t i = i0; i < i1; ++i) {
      const double t = binary ? 2.0 * double(tp[i]) - 1.0 : double(tp[i]);
      loss::ValueGrad<double> e = loss::element<loss::DoubleMath>(p, double(pp[i]), t);
      const double wi = rw(i);
      sum += wi * e.value;
      if (gp) gp[i] = T(e.grad * w * grad_scale * wi);
    }
    return sum;
  });
  add_to_total(total, sum_total * w);
}

// Each row's statistics by loops over the row, in double; its loss and gradient from them.
template <class T>
void row_loss_loop(const Tensor& pred, const Tensor& target, const Tensor& weights, Tensor& total,
                   Tensor& dpred, const RowLossParams& p, double grad_scale) {
  namespace rl = row_loss_math;
  const std::int64_t C = pred.dim(-1), R = pred.numel() / C;
  if (R == 0) return;
  const double per_sample = double(R / pred.dim(0));  // rows
  const loss::RowWeights rw = loss::row_weights(weights, R);
  const T *pp = pred.data<T>(), *tp = target.data<T>();
  T* gp = dpred.defined() ? dpred.data<T>() : nullptr;
  const int n = rl::stats(p);
  const double sum_total = parallel_sum(R, R * C, [&](std::int64_t r0, std::int64_t r1) {
    double sum = 0;
    for (std::int64_t r = r0; r < r1; ++r) {
      const T *x = pp + r * C, *t = tp + r * C;
      double st[rl::kMaxStats];
      for (int i = 0; i < n; ++i) {
        const bool max = rl::is_max(p, i);
        double a = max ? -INFINITY : 0.0;
        for (std::int64_t c = 0; c < C; ++c) {
          const double v = rl::term<DoubleMath>(p, i, double(x[c]),
                                                rl::target<DoubleMath>(p, double(t[c]), double(C)), st);
          a = max ? DoubleMath::max(a, v) : a + v;
        }
        st[i] = a;
      }
      const double wr = rw(r);
      sum += wr * rl::value<DoubleMath>(p, st);
      if (gp)
        for (std::int64_t c = 0; c < C; ++c)
          gp[r * C + c] = T(rl::gradient<DoubleMath>(p, double(x[c]),
                                                     rl::target<DoubleMath>(p, double(t[c]), double(C)), st) *
                            (wr * grad_scale / per_sample));
    }
    return sum;
  });
  add_to_total(total, sum_total / per_sample);
}

template <class T>
void accuracy_count_loop(const Tensor& pred, const Tensor& labels, const Tensor& weights, Tensor& total,
                         int k) {
  std::int64_t C = pred.dim(-1), R = pred.numel() / C;
  bool sparse = sparse_labels(labels, R, C, /*check_range=*/false);  // a label out of range is a miss
  const loss::RowWeights rw = loss::row_weights(weights, R, loss::per_sample_mean(pred));
  const T* pp = pred.data<T>();
  auto argmax = [C](const auto* row) {
    std::int64_t best = 0;
    for (std::int64_t c = 1; c < C; ++c)
      if (row[c] > row[best]) best = c;
    return best;
  };
  const double correct_total = parallel_sum(R, R * C, [&](std::int64_t r0, std::int64_t r1) {
    double correct = 0;
    for (std::int64_t r = r0; r < r1; ++r) {
      std::int64_t truth = sparse ? labels.data<std::int32_t>()[r] : argmax(labels.data<T>() + r * C);
      if (truth < 0 || truth >= C) continue;
      const T* row = pp + r * C;
      if (k == 1) {
        correct += argmax(row) == truth ? rw(r) : 0.0;
      } else {  // in_top_k: fewer than k predictions greater than the label's
        std::int64_t greater = 0;
        for (std::int64_t c = 0; c < C; ++c) greater += row[c] > row[truth] ? 1 : 0;
        correct += greater < k ? rw(r) : 0.0;
      }
    }
    return correct;
  });
  add_to_total(total, correct_total);
}

// Thresholds ascend, so a prediction is positive at thresholds [0, k), k the count of thresholds below it (0 for
// NaN): the counts per k of positive and negative labels, then tp[t] = the positives with k > t, and so on.
template <class T>
void confusion_counts_loop(const Tensor& pred, const Tensor& labels, const Tensor& weights, Tensor& counts,
                           const ConfusionParams& p) {
  const std::int64_t nt = p.thresholds, C = pred.dim(-1);
  const loss::RowWeights rw = loss::row_weights(weights, pred.numel());  // each prediction's sample's weight
  // The thresholds in ascending order (values given may come in any), order[k] the index of the k-th.
  std::vector<std::int64_t> order(static_cast<std::size_t>(nt));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  auto at = [&](std::int64_t t) { return T(confusion::threshold(p, t)); };
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) { return at(a) < at(b); });
  std::vector<T> thresholds(static_cast<std::size_t>(nt));
  for (std::int64_t k = 0; k < nt; ++k) thresholds[k] = at(order[k]);
  const T *pp = pred.data<T>(), *lp = labels.data<T>();
  std::vector<double> positives(nt + 1, 0.0), negatives(nt + 1, 0.0);
  for (std::int64_t i = 0; i < pred.numel(); ++i) {
    if (p.class_id >= 0 && i % C != p.class_id) continue;
    double raw = double(pp[i]);
    if (p.top_k > 0) {
      const T* row = pp + (i / C) * C;
      if (!confusion::in_top_k<T>([row](std::int64_t j) { return row[j]; }, C, i % C, pp[i], p.top_k))
        raw = confusion::kOutsideTopK;
    }
    const T x = T(confusion::prediction(p, raw));
    const auto k = std::lower_bound(thresholds.begin(), thresholds.end(), x,
                                    [](T threshold, T value) { return threshold < value; }) -
                   thresholds.begin();
    (lp[i] != T(0) ? positives : negatives)[k] += rw(i);
  }
  double* out = counts.data<double>();
  double tp = 0, fp = 0, all_positive = 0, all_negative = 0;
  for (std::int64_t k = 0; k <= nt; ++k) {
    all_positive += positives[k];
    all_negative += negatives[k];
  }
  for (std::int64_t k = nt - 1; k >= 0; --k) {  // the predictions above the k-th threshold: index > k
    tp += positives[k + 1];
    fp += negatives[k + 1];
    const std::int64_t t = order[k];
    out[t] += tp;
    out[nt + t] += fp;
    out[2 * nt + t] += all_negative - fp;
    out[3 * nt + t] += all_positive - tp;
  }
}

// The rows in order, each column's sums in double.
template <class T>
void regression_sums_loop(const Tensor& pred, const Tensor& target, const Tensor& weights, Tensor& sums) {
  const std::int64_t C = pred.dim(-1), R = pred.numel() / C;
  const loss::RowWeights rw = loss::row_weights(weights, R);  // each row's sample's weight
  const T *pp = pred.data<T>(), *tp = target.data<T>();
  double* s = sums.data<double>();
  for (std::int64_t r = 0; r < R; ++r) {
    const double w = rw(r);
    for (std::int64_t c = 0; c < C; ++c) {
      const double t = double(tp[r * C + c]), d = t - double(pp[r * C + c]);
      s[c] += w * t;
      s[C + c] += w * t * t;
      s[2 * C + c] += w * d * d;
      s[3 * C + c] += 1;
    }
  }
}

// Each item's label class and predicted class, its cell counted (the items in order; whole numbers: exact).
template <class T>
void class_confusion_loop(const Tensor& pred, const Tensor& labels, const Tensor& weights, Tensor& counts,
                          const ClassConfusionParams& p) {
  const std::int64_t K = p.argmax_predictions ? pred.dim(-1) : 1, n = K ? pred.numel() / K : 0;
  const loss::RowWeights rw = loss::row_weights(weights, n);  // each item's sample's weight
  const std::int64_t KL = p.argmax_labels ? labels.dim(-1) : 1;
  const T* pp = pred.data<T>();
  const std::int32_t* sparse = labels.dtype() == DType::int32 ? labels.data<std::int32_t>() : nullptr;
  const T* dense = sparse ? nullptr : labels.data<T>();
  auto argmax = [](const T* row, std::int64_t k) {  // the first maximum
    std::int64_t best = 0;
    for (std::int64_t j = 1; j < k; ++j)
      if (row[j] > row[best]) best = j;
    return best;
  };
  double* out = counts.data<double>();
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t q = p.argmax_predictions ? argmax(pp + i * K, K)
                           : p.thresholded      ? (pp[i] >= T(p.threshold) ? 1 : 0)
                                                : confusion::value_class(double(pp[i]), p.classes);
    const std::int64_t t = sparse            ? confusion::value_class(double(sparse[i]), p.classes)
                           : p.argmax_labels ? argmax(dense + i * KL, KL)
                                             : confusion::value_class(double(dense[i]), p.classes);
    const std::int64_t cell = confusion::confusion_cell(p, t, q);
    if (cell >= 0) out[cell] += p.integer_weights ? std::trunc(rw(i)) : rw(i);
  }
}

// The rows in order: the row's maximum (with argmax), then each class's four sums in double.
template <class T>
void f_score_counts_loop(const Tensor& pred, const Tensor& labels, const Tensor& weights, Tensor& counts,
                         const FScoreParams& p) {
  if (pred.numel() == 0) return;
  const std::int64_t C = pred.dim(-1), R = pred.numel() / C;
  const loss::RowWeights rw = loss::row_weights(weights, R);
  const T *pp = pred.data<T>(), *lp = labels.data<T>();
  double* s = counts.data<double>();
  for (std::int64_t r = 0; r < R; ++r) {
    const T* x = pp + r * C;
    T row_max = x[0];
    if (p.argmax)
      for (std::int64_t c = 1; c < C; ++c) row_max = x[c] > row_max ? x[c] : row_max;
    const double w = rw(r);
    for (std::int64_t c = 0; c < C; ++c) {
      const double t = double(lp[r * C + c]);
      if (confusion::f_score_positive<T>(p, x[c], row_max)) {
        s[c] += t * w;
        s[C + c] += (1.0 - t) * w;
      } else {
        s[2 * C + c] += t * w;
      }
      s[3 * C + c] += t * w;
    }
  }
}

}  // namespace

const DTypes softmax_cross_entropy_dtypes = kFloats;
void softmax_cross_entropy(const Tensor& logits, const Tensor& labels, const Tensor& weights, Tensor& total,
                           Tensor& dlogits, double grad_scale) {
  visit_dtype<float, double>(logits.dtype(), [&](auto t) {
    softmax_cross_entropy_loop<typename decltype(t)::type>(logits, labels, weights, total, dlogits,
                                                           grad_scale);
  });
}

const DTypes crossentropy_from_probabilities_dtypes = kFloats;
void crossentropy_from_probabilities(const Tensor& probs, const Tensor& labels, const Tensor& weights,
                                     Tensor& total, Tensor& dprobs, double grad_scale, double eps) {
  visit_dtype<float, double>(probs.dtype(), [&](auto t) {
    crossentropy_from_probabilities_loop<typename decltype(t)::type>(probs, labels, weights, total, dprobs,
                                                                     grad_scale, eps);
  });
}

namespace {
// Calls f(set), set(i) telling whether value i of a Keras mask (any floating dtype; undefined: every value set) is
// not 0, read where it lies.
template <class F>
void with_mask(const Tensor& mask, F&& f) {
  if (!mask.defined()) return f([](std::int64_t) { return true; });
  visit_dtype<float, double, bfloat16>(mask.dtype(), [&](auto t) {
    const auto* m = mask.data<typename decltype(t)::type>();
    f([m](std::int64_t i) { return widen(m[i]) != 0; });
  });
}
}  // namespace

const DTypes ignore_class_dtypes = kFloats;
void ignore_class(const Tensor& labels, std::int32_t ignore, const Tensor& weights, const Tensor& mask,
                  Tensor& kept, Tensor& kept_weights) {
  visit_dtype<float, double>(kept_weights.dtype(), [&](auto t) {
    using W = typename decltype(t)::type;
    const std::int64_t n = labels.numel();
    const std::int32_t* l = labels.data<std::int32_t>();
    with_mask(mask, [&](auto set) {
      auto keep = [&](std::int64_t i) { return l[i] != ignore && set(i); };
      std::int64_t count = 0;
      for (std::int64_t i = 0; i < n; ++i) count += keep(i);
      const double scale = count ? double(n) / double(count) : 0.0;
      const loss::RowWeights rw = loss::row_weights(weights, n, scale);
      std::int32_t* k = kept.data<std::int32_t>();
      W* kw = kept_weights.data<W>();
      for (std::int64_t i = 0; i < n; ++i) {
        const bool kept_i = keep(i);
        const double w =
            kept_i ? rw(i) : 0.0;  // read before kept[i] is written, in case kept shares labels' memory
        k[i] = kept_i ? l[i] : 0;
        kw[i] = W(w);
      }
    });
  });
}

const DTypes mask_weights_dtypes = kFloats;
void mask_weights(const Tensor& mask, const Tensor& weights, bool normalize, Tensor& out) {
  visit_dtype<float, double>(out.dtype(), [&](auto t) {
    using W = typename decltype(t)::type;
    const std::int64_t n = mask.numel();
    with_mask(mask, [&](auto set) {
      std::int64_t valid = 0;
      for (std::int64_t i = 0; i < n; ++i) valid += set(i);
      const double scale = !normalize ? 1.0 : valid ? double(n) / double(valid) : 0.0;
      const loss::RowWeights rw = loss::row_weights(weights, n, scale);
      W* o = out.data<W>();
      for (std::int64_t i = 0; i < n; ++i) o[i] = W(set(i) ? rw(i) : 0.0);
    });
  });
}

const DTypes elementwise_loss_dtypes = kFloats;
void elementwise_loss(const Tensor& pred, const Tensor& target, const Tensor& weights, Tensor& total,
                      Tensor& dpred, const ElementLossParams& p, double grad_scale) {
  visit_dtype<float, double>(pred.dtype(), [&](auto t) {
    elementwise_loss_loop<typename decltype(t)::type>(pred, target, weights, total, dpred, p, grad_scale);
  });
}

const DTypes row_loss_dtypes = kFloats;
void row_loss(const Tensor& pred, const Tensor& target, const Tensor& weights, Tensor& total, Tensor& dpred,
              const RowLossParams& p, double grad_scale) {
  visit_dtype<float, double>(pred.dtype(), [&](auto t) {
    row_loss_loop<typename decltype(t)::type>(pred, target, weights, total, dpred, p, grad_scale);
  });
}

const DTypes accuracy_count_dtypes = kFloats;
void accuracy_count(const Tensor& pred, const Tensor& labels, const Tensor& weights, Tensor& total, int k) {
  visit_dtype<float, double>(pred.dtype(), [&](auto t) {
    accuracy_count_loop<typename decltype(t)::type>(pred, labels, weights, total, k);
  });
}

const DTypes add_sum_dtypes = kFloats;
void add_sum(const Tensor& x, Tensor& total) {
  visit_dtype<float, double>(x.dtype(), [&](auto t) {
    using T = typename decltype(t)::type;
    const T* p = x.data<T>();
    double sum = 0;
    for (std::int64_t i = 0; i < x.numel(); ++i) sum += double(p[i]);
    add_to_total(total, sum);
  });
}

const DTypes confusion_counts_dtypes = kFloats;
void confusion_counts(const Tensor& pred, const Tensor& labels, const Tensor& weights, Tensor& counts,
                      const ConfusionParams& p) {
  visit_dtype<float, double>(pred.dtype(), [&](auto t) {
    confusion_counts_loop<typename decltype(t)::type>(pred, labels, weights, counts, p);
  });
}

const DTypes regression_sums_dtypes = kFloats;
void regression_sums(const Tensor& pred, const Tensor& target, const Tensor& weights, Tensor& sums) {
  visit_dtype<float, double>(pred.dtype(), [&](auto t) {
    regression_sums_loop<typename decltype(t)::type>(pred, target, weights, sums);
  });
}

const DTypes class_confusion_dtypes = kFloats;
void class_confusion(const Tensor& pred, const Tensor& labels, const Tensor& weights, Tensor& counts,
                     const ClassConfusionParams& p) {
  visit_dtype<float, double>(pred.dtype(), [&](auto t) {
    class_confusion_loop<typename decltype(t)::type>(pred, labels, weights, counts, p);
  });
}

const DTypes f_score_counts_dtypes = kFloats;
void f_score_counts(const Tensor& pred, const Tensor& labels, const Tensor& weights, Tensor& counts,
                    const FScoreParams& p) {
  visit_dtype<float, double>(pred.dtype(), [&](auto t) {
    f_score_counts_loop<typename decltype(t)::type>(pred, labels, weights, counts, p);
  });
}

}  // namespace systolic::ops::cpu
