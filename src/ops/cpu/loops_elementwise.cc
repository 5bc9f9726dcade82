// Elementwise ops, dropout, concatenation, losses, metrics and optimizer updates as loops: the production CPU
// path for these (oneDNN has no primitives for them) and the float64 path.
#include "ops/cpu/loops.h"

#include "core/philox.h"
#include "ops/concat_layout.h"

#include <algorithm>
#include <cmath>

namespace systolic::ops::loops {

namespace {
template <class T>
void dropout_apply(const T* in, T* out, std::int64_t n, double rate, std::uint64_t key) {
  const T scale = T(1.0 / (1.0 - rate));
  const float threshold = static_cast<float>(rate);
#pragma omp parallel for
  for (std::int64_t g = 0; g < (n + 3) / 4; ++g) {
    auto r = philox::random4(key, static_cast<std::uint64_t>(g));
    for (int k = 0; k < 4 && g * 4 + k < n; ++k) {
      std::int64_t i = g * 4 + k;
      out[i] = philox::unit_float(r.v[k]) >= threshold ? in[i] * scale : T(0);
    }
  }
}

// Sparse labels: int32 with one label per row. Checked before any parallel loop (errors cannot leave OpenMP).
bool sparse_labels(const Tensor& labels, std::int64_t rows, std::int64_t classes) {
  if (labels.dtype() != DType::int32) {
    SYSTOLIC_CHECK(labels.numel() == rows * classes, "labels of shape {} do not match predictions with {} rows of {}",
                   labels.shape().str(), rows, classes);
    return false;
  }
  SYSTOLIC_CHECK(labels.numel() == rows, "{} integer labels for {} predictions", labels.numel(), rows);
  const std::int32_t* lp = labels.data<std::int32_t>();
  for (std::int64_t r = 0; r < rows; ++r)
    SYSTOLIC_CHECK(lp[r] >= 0 && lp[r] < classes, "label {} (sample {} of the batch) is out of range for {} classes",
                   lp[r], r, classes);
  return true;
}

void add_to_total(Tensor& total, double value) {
  total.data<double>()[0] += value;
}
}  // namespace

template <class T>
void dropout_forward(const Tensor& x, Tensor& y, double rate, std::uint64_t key) {
  dropout_apply(x.data<T>(), y.data<T>(), x.numel(), rate, key);
}

template <class T>
void dropout_backward(const Tensor& dy, Tensor& dx, double rate, std::uint64_t key) {
  dropout_apply(dy.data<T>(), dx.data<T>(), dy.numel(), rate, key);
}

template <class T>
void concat_forward(const std::vector<Tensor>& xs, Tensor& y, int axis) {
  for (auto& x : xs) SYSTOLIC_CHECK(x.defined(), "concat_forward: an input is undefined");
  ConcatLayout l = concat_layout("concat_forward", y, xs, axis);
  T* yp = y.data<T>();
  for (std::size_t k = 0; k < xs.size(); ++k) {
    const T* xp = xs[k].data<T>();
    const std::int64_t chunk = l.width[k], at = l.offset[k];
#pragma omp parallel for
    for (std::int64_t o = 0; o < l.outer; ++o) std::copy_n(xp + o * chunk, chunk, yp + o * l.row + at);
  }
}

template <class T>
void concat_backward(const Tensor& dy, std::vector<Tensor>& dxs, int axis) {
  ConcatLayout l = concat_layout("concat_backward", dy, dxs, axis);
  const T* gp = dy.data<T>();
  for (std::size_t k = 0; k < dxs.size(); ++k) {
    if (!dxs[k].defined()) continue;
    T* dxp = dxs[k].data<T>();
    const std::int64_t chunk = l.width[k], at = l.offset[k];
#pragma omp parallel for
    for (std::int64_t o = 0; o < l.outer; ++o) std::copy_n(gp + o * l.row + at, chunk, dxp + o * chunk);
  }
}

template <class T>
void add_n(const std::vector<Tensor>& xs, Tensor& y) {
  std::int64_t n = y.numel();
  T* yp = y.data<T>();
  std::vector<const T*> ins;
  for (auto& x : xs) ins.push_back(x.data<T>());
#pragma omp parallel for
  for (std::int64_t i = 0; i < n; ++i) {
    T s = 0;
    for (auto* p : ins) s += p[i];
    yp[i] = s;
  }
}

template <class T>
void accumulate(const Tensor& src, Tensor& dst) {
  std::int64_t n = dst.numel();
  const T* s = src.data<T>();
  T* d = dst.data<T>();
#pragma omp parallel for
  for (std::int64_t i = 0; i < n; ++i) d[i] += s[i];
}

template <class T>
void scale_shift(const Tensor& x, Tensor& y, double scale, double shift) {
  std::int64_t n = x.numel();
  const T* xp = x.data<T>();
  T* yp = y.data<T>();
  const T a = T(scale), b = T(shift);
#pragma omp parallel for
  for (std::int64_t i = 0; i < n; ++i) yp[i] = xp[i] * a + b;
}

template <class T>
void moving_average(Tensor& moving, const Tensor& value, double momentum) {
  T* m = moving.data<T>();
  const T* v = value.data<T>();
  for (std::int64_t i = 0; i < moving.numel(); ++i) m[i] = m[i] * T(momentum) + v[i] * T(1.0 - momentum);
}

template <class T>
void gather_rows(const Tensor& src, const std::vector<std::int64_t>& indices, Tensor& dst) {
  std::int64_t rows = src.dim(0), row = rows ? src.numel() / rows : 0;
  SYSTOLIC_CHECK(static_cast<std::int64_t>(indices.size()) * row == dst.numel(),
                 "gather_rows: {} rows of {} values do not fill {}", indices.size(), row, dst.shape().str());
  for (auto i : indices) SYSTOLIC_CHECK(i >= 0 && i < rows, "gather_rows: row {} out of range [0, {})", i, rows);
  T* out = dst.data<T>();
  auto run = [&](auto tag) {
    using S = decltype(tag);
    const S* in = static_cast<const S*>(src.raw_data());
    std::int64_t count = static_cast<std::int64_t>(indices.size());
#pragma omp parallel for
    for (std::int64_t k = 0; k < count; ++k) {
      const S* s = in + indices[k] * row;
      T* d = out + k * row;
      for (std::int64_t j = 0; j < row; ++j) d[j] = static_cast<T>(s[j]);
    }
  };
  switch (src.dtype()) {
    case DType::uint8: run(std::uint8_t{}); break;
    case DType::int32: run(std::int32_t{}); break;
    case DType::float32: run(float{}); break;
    case DType::float64: run(double{}); break;
    default: fail("gather_rows: source dtype {} is not supported", dtype_name(src.dtype()));
  }
}

template <class T>
void softmax_cross_entropy(const Tensor& logits, const Tensor& labels, Tensor& total, Tensor& dlogits,
                           double grad_scale) {
  std::int64_t C = logits.dim(-1), R = logits.numel() / C;
  bool sparse = sparse_labels(labels, R, C);
  const T* zp = logits.data<T>();
  T* gp = dlogits.defined() ? dlogits.data<T>() : nullptr;
  double sum = 0;
#pragma omp parallel for reduction(+ : sum)
  for (std::int64_t r = 0; r < R; ++r) {
    const T* z = zp + r * C;
    T mx = z[0];
    for (std::int64_t c = 1; c < C; ++c) mx = z[c] > mx ? z[c] : mx;
    double se = 0;
    for (std::int64_t c = 0; c < C; ++c) se += std::exp(double(z[c] - mx));
    double lse = double(mx) + std::log(se);
    if (sparse) {
      std::int32_t label = labels.data<std::int32_t>()[r];
      sum += lse - double(z[label]);
      if (gp)
        for (std::int64_t c = 0; c < C; ++c)
          gp[r * C + c] = T((std::exp(double(z[c]) - lse) - (c == label ? 1.0 : 0.0)) * grad_scale);
    } else {
      const T* y = labels.data<T>() + r * C;
      double ysum = 0;
      for (std::int64_t c = 0; c < C; ++c) {
        sum += double(y[c]) * (lse - double(z[c]));
        ysum += double(y[c]);
      }
      // d/dz of -sum_c y_c log softmax_c = softmax * sum(y) - y
      if (gp)
        for (std::int64_t c = 0; c < C; ++c)
          gp[r * C + c] = T((std::exp(double(z[c]) - lse) * ysum - double(y[c])) * grad_scale);
    }
  }
  add_to_total(total, sum);
}

template <class T>
void crossentropy_from_probabilities(const Tensor& probs, const Tensor& labels, Tensor& total, Tensor& dprobs,
                                     double grad_scale, double eps) {
  std::int64_t C = probs.dim(-1), R = probs.numel() / C;
  bool sparse = sparse_labels(labels, R, C);
  const T* pp = probs.data<T>();
  T* gp = dprobs.defined() ? dprobs.data<T>() : nullptr;
  double sum = 0;
  // The clip's derivative is 0 outside [eps, 1-eps]: clipped probabilities get no gradient.
  auto term = [&](double y, double p, T* g) {
    double clipped = std::clamp(p, eps, 1.0 - eps);
    if (g) *g = T((p > eps && p < 1.0 - eps) ? -y / p * grad_scale : 0.0);
    return -y * std::log(clipped);
  };
#pragma omp parallel for reduction(+ : sum)
  for (std::int64_t r = 0; r < R; ++r)
    for (std::int64_t c = 0; c < C; ++c) {
      double y = sparse ? (labels.data<std::int32_t>()[r] == c ? 1.0 : 0.0) : double(labels.data<T>()[r * C + c]);
      sum += term(y, double(pp[r * C + c]), gp ? gp + r * C + c : nullptr);
    }
  add_to_total(total, sum);
}

template <class T>
void mean_squared_error(const Tensor& pred, const Tensor& target, Tensor& total, Tensor& dpred, double grad_scale) {
  SYSTOLIC_CHECK(pred.numel() == target.numel(), "mean_squared_error: targets of shape {} for predictions of shape {}",
                 target.shape().str(), pred.shape().str());
  std::int64_t R = pred.dim(0), D = R ? pred.numel() / R : 0;
  const T* pp = pred.data<T>();
  const T* tp = target.data<T>();
  T* gp = dpred.defined() ? dpred.data<T>() : nullptr;
  double sum = 0;
#pragma omp parallel for reduction(+ : sum)
  for (std::int64_t i = 0; i < R * D; ++i) {
    double d = double(pp[i]) - double(tp[i]);
    sum += d * d / double(D);
    if (gp) gp[i] = T(2.0 * d / double(D) * grad_scale);
  }
  add_to_total(total, sum);
}

template <class T>
void accuracy_count(const Tensor& pred, const Tensor& labels, Tensor& total) {
  std::int64_t C = pred.dim(-1), R = pred.numel() / C;
  bool sparse = sparse_labels(labels, R, C);
  const T* pp = pred.data<T>();
  auto argmax = [C](const auto* row) {
    std::int64_t best = 0;
    for (std::int64_t c = 1; c < C; ++c)
      if (row[c] > row[best]) best = c;
    return best;
  };
  double correct = 0;
#pragma omp parallel for reduction(+ : correct)
  for (std::int64_t r = 0; r < R; ++r) {
    std::int64_t truth = sparse ? labels.data<std::int32_t>()[r] : argmax(labels.data<T>() + r * C);
    correct += argmax(pp + r * C) == truth ? 1.0 : 0.0;
  }
  add_to_total(total, correct);
}

template <class T>
void adam_update(Tensor& w, const Tensor& g, Tensor& m, Tensor& v, const AdamStep& s, double lr_t) {
  std::int64_t n = w.numel();
  T *wp = w.data<T>(), *mp = m.data<T>(), *vp = v.data<T>();
  const T* gp = g.data<T>();
  const T lr = T(lr_t), b1 = T(1.0 - s.beta_1), b2 = T(1.0 - s.beta_2), eps = T(s.epsilon);
#pragma omp parallel for simd
  for (std::int64_t i = 0; i < n; ++i) {
    T gi = gp[i];
    mp[i] += (gi - mp[i]) * b1;
    vp[i] += (gi * gi - vp[i]) * b2;
    wp[i] -= lr * mp[i] / (std::sqrt(vp[i]) + eps);
  }
}

template <class T>
void sgd_update(Tensor& w, const Tensor& g, Tensor& velocity, double lr, double momentum, bool nesterov) {
  std::int64_t n = w.numel();
  T* wp = w.data<T>();
  const T* gp = g.data<T>();
  const T a = T(lr), mu = T(momentum);
  if (momentum == 0.0) {
#pragma omp parallel for simd
    for (std::int64_t i = 0; i < n; ++i) wp[i] -= a * gp[i];
    return;
  }
  T* vp = velocity.data<T>();
#pragma omp parallel for simd
  for (std::int64_t i = 0; i < n; ++i) {
    vp[i] = mu * vp[i] - a * gp[i];
    wp[i] += nesterov ? mu * vp[i] - a * gp[i] : vp[i];
  }
}

template <class T>
void rmsprop_update(Tensor& w, const Tensor& g, Tensor& ms, Tensor& mom, double lr, double rho, double momentum,
                    double epsilon) {
  std::int64_t n = w.numel();
  T *wp = w.data<T>(), *sp = ms.data<T>();
  T* mp = momentum > 0 ? mom.data<T>() : nullptr;
  const T* gp = g.data<T>();
  const T a = T(lr), r = T(rho), mu = T(momentum), eps = T(epsilon);
#pragma omp parallel for
  for (std::int64_t i = 0; i < n; ++i) {
    sp[i] = r * sp[i] + (T(1) - r) * gp[i] * gp[i];
    T step = a * gp[i] / (std::sqrt(sp[i]) + eps);
    if (mp) {
      mp[i] = mu * mp[i] + step;
      wp[i] -= mp[i];
    } else {
      wp[i] -= step;
    }
  }
}

#define SYSTOLIC_INSTANTIATE(T)                                                                                    \
  template void dropout_forward<T>(const Tensor&, Tensor&, double, std::uint64_t);                                 \
  template void dropout_backward<T>(const Tensor&, Tensor&, double, std::uint64_t);                                \
  template void concat_forward<T>(const std::vector<Tensor>&, Tensor&, int);                                       \
  template void concat_backward<T>(const Tensor&, std::vector<Tensor>&, int);                                      \
  template void add_n<T>(const std::vector<Tensor>&, Tensor&);                                                     \
  template void accumulate<T>(const Tensor&, Tensor&);                                                             \
  template void scale_shift<T>(const Tensor&, Tensor&, double, double);                                            \
  template void moving_average<T>(Tensor&, const Tensor&, double);                                                 \
  template void gather_rows<T>(const Tensor&, const std::vector<std::int64_t>&, Tensor&);                          \
  template void softmax_cross_entropy<T>(const Tensor&, const Tensor&, Tensor&, Tensor&, double);                  \
  template void crossentropy_from_probabilities<T>(const Tensor&, const Tensor&, Tensor&, Tensor&, double, double); \
  template void mean_squared_error<T>(const Tensor&, const Tensor&, Tensor&, Tensor&, double);                     \
  template void accuracy_count<T>(const Tensor&, const Tensor&, Tensor&);                                          \
  template void adam_update<T>(Tensor&, const Tensor&, Tensor&, Tensor&, const AdamStep&, double);                 \
  template void sgd_update<T>(Tensor&, const Tensor&, Tensor&, double, double, bool);                              \
  template void rmsprop_update<T>(Tensor&, const Tensor&, Tensor&, Tensor&, double, double, double, double);
SYSTOLIC_INSTANTIATE(float)
SYSTOLIC_INSTANTIATE(double)
template void gather_rows<std::int32_t>(const Tensor&, const std::vector<std::int64_t>&, Tensor&);

}  // namespace systolic::ops::loops
