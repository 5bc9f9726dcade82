// Optimizer updates on the CPU over flat parameter buffers, one OpenMP loop each (Keras's formulas; contracts:
// include/systolic/ops.h).
#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/cpu/cpu_backend.h"
#include "ops/optimizer_math.h"

namespace systolic::ops::cpu {

namespace {

template <class T>
void adam_update_loop(Tensor& w, const Tensor& g, Tensor& m, Tensor& v, const AdamStep& s, double lr_t) {
  std::int64_t n = w.numel();
  T *wp = w.data<T>(), *mp = m.data<T>(), *vp = v.data<T>();
  const T* gp = g.data<T>();
  const T lr = T(lr_t), b1 = T(1.0 - s.beta_1), b2 = T(1.0 - s.beta_2), eps = T(s.epsilon);
  parallel_ranges(n, n, [&](std::int64_t i0, std::int64_t i1) {
#pragma omp simd
    for (std::int64_t i = i0; i < i1; ++i) {
      T gi = gp[i];
      mp[i] += (gi - mp[i]) * b1;
      vp[i] += (gi * gi - vp[i]) * b2;
      wp[i] -= lr * mp[i] / (std::sqrt(vp[i]) + eps);
    }
  });
}

template <class T>
void sgd_update_loop(Tensor& w, const Tensor& g, Tensor& velocity, double lr, double momentum,
                     bool nesterov) {
  std::int64_t n = w.numel();
  T* wp = w.data<T>();
  const T* gp = g.data<T>();
  const T a = T(lr), mu = T(momentum);
  if (momentum == 0.0) {
    parallel_ranges(n, n, [&](std::int64_t i0, std::int64_t i1) {
#pragma omp simd
      for (std::int64_t i = i0; i < i1; ++i) wp[i] -= a * gp[i];
    });
    return;
  }
  T* vp = velocity.data<T>();
  parallel_ranges(n, n, [&](std::int64_t i0, std::int64_t i1) {
#pragma omp simd
    for (std::int64_t i = i0; i < i1; ++i) {
      vp[i] = mu * vp[i] - a * gp[i];
      wp[i] += nesterov ? mu * vp[i] - a * gp[i] : vp[i];
    }
  });
}

template <class T>
void rmsprop_update_loop(Tensor& w, const Tensor& g, Tensor& ms, Tensor& mom, double lr, double rho,
                         double momentum, double epsilon) {
  std::int64_t n = w.numel();
  T *wp = w.data<T>(), *sp = ms.data<T>();
  T* mp = momentum > 0 ? mom.data<T>() : nullptr;
  const T* gp = g.data<T>();
  const T a = T(lr), r = T(rho), mu = T(momentum), eps = T(epsilon);
  parallel_ranges(n, n, [&](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t i = i0; i < i1; ++i) {
      sp[i] = r * sp[i] + (T(1) - r) * gp[i] * gp[i];
      T step = a * gp[i] / std::sqrt(sp[i] + eps);
      if (mp) {
        mp[i] = mu * mp[i] + step;
        wp[i] -= mp[i];
      } else {
        wp[i] -= step;
      }
    }
  });
}

#define SYSTOLIC_INSTANTIATE(T)

}  // namespace

const DTypes adam_update_dtypes = kFloats;
void adam_update(Tensor& w, const Tensor& g, Tensor& m, Tensor& v, const AdamStep& s, const Tensor& lr,
                 const Tensor& iterations) {
  double t = (iterations.defined() ? iterations.data<double>()[0] : 0.0) + 1.0;
  double lr_t = lr.data<double>()[0] * std::sqrt(1.0 - std::pow(s.beta_2, t)) / (1.0 - std::pow(s.beta_1, t));
  visit_dtype<float, double>(
      w.dtype(), [&](auto type) { adam_update_loop<typename decltype(type)::type>(w, g, m, v, s, lr_t); });
}

const DTypes sgd_update_dtypes = kFloats;
void sgd_update(Tensor& w, const Tensor& g, Tensor& velocity, const Tensor& lr, double momentum,
                bool nesterov) {
  double rate = lr.data<double>()[0];
  visit_dtype<float, double>(w.dtype(), [&](auto t) {
    sgd_update_loop<typename decltype(t)::type>(w, g, velocity, rate, momentum, nesterov);
  });
}

const DTypes decay_weights_dtypes = kFloats;
void decay_weights(Tensor& w, const Tensor& lr, double decay) {
  const double rate = lr.data<double>()[0];
  visit_dtype<float, double>(w.dtype(), [&](auto t) {
    using T = typename decltype(t)::type;
    T* wp = w.data<T>();
    const T d = T(decay), a = T(rate);
    const std::int64_t n = w.numel();
    parallel_ranges(n, n, [&](std::int64_t i0, std::int64_t i1) {
#pragma omp simd
      for (std::int64_t i = i0; i < i1; ++i) wp[i] = wp[i] - wp[i] * d * a;
    });
  });
}

const DTypes rmsprop_update_dtypes = kFloats;
void rmsprop_update(Tensor& w, const Tensor& g, Tensor& ms, Tensor& mom, const Tensor& lr, double rho,
                    double momentum, double epsilon) {
  double rate = lr.data<double>()[0];
  visit_dtype<float, double>(w.dtype(), [&](auto t) {
    rmsprop_update_loop<typename decltype(t)::type>(w, g, ms, mom, rate, rho, momentum, epsilon);
  });
}

const DTypes clip_gradients_dtypes = kFloats;
void clip_gradients(Tensor& g, bool by_norm, double limit) {
  visit_dtype<float, double>(g.dtype(), [&](auto type) {
    using T = typename decltype(type)::type;
    T* gp = g.data<T>();
    const std::int64_t n = g.numel();
    if (!by_norm) {
      const T hi = T(limit), lo = T(-limit);
      parallel_ranges(n, n, [&](std::int64_t i0, std::int64_t i1) {
#pragma omp simd
        for (std::int64_t i = i0; i < i1; ++i) gp[i] = gp[i] < lo ? lo : gp[i] > hi ? hi : gp[i];
      });
      return;
    }
    double sum = 0;  // in order: the same on every run
    for (std::int64_t i = 0; i < n; ++i) sum += double(gp[i]) * double(gp[i]);
    const double norm = std::sqrt(sum);
    const T scale = T(std::isfinite(norm) ? limit / std::max(norm, limit) : NAN);
    parallel_ranges(n, n, [&](std::int64_t i0, std::int64_t i1) {
#pragma omp simd
      for (std::int64_t i = i0; i < i1; ++i) gp[i] = gp[i] * scale;
    });
  });
}

const DTypes optimizer_update_dtypes = kFloats;
void optimizer_update(Tensor& w, const Tensor& g, Tensor& s0, Tensor& s1, Tensor& s2, const UpdateParams& p,
                      const Tensor& step) {
  update::StepValues c;
  std::copy_n(step.data<double>(), update::kStepValues, c.begin());
  const int slots = update::slot_count(p.rule);
  visit_dtype<float, double>(w.dtype(), [&](auto type) {
    using T = typename decltype(type)::type;
    T* wp = w.data<T>();
    const T* gp = g.data<T>();
    T* sp[3] = {slots > 0 ? s0.data<T>() : nullptr, slots > 1 ? s1.data<T>() : nullptr,
                slots > 2 ? s2.data<T>() : nullptr};
    const std::int64_t n = w.numel();
    parallel_ranges(n, n, [&](std::int64_t i0, std::int64_t i1) {
      for (std::int64_t i = i0; i < i1; ++i) {
        double wi = wp[i], v[3] = {sp[0] ? double(sp[0][i]) : 0.0, sp[1] ? double(sp[1][i]) : 0.0,
                                   sp[2] ? double(sp[2][i]) : 0.0};
        update::element<DoubleMath>(p, c.data(), wi, double(gp[i]), v[0], v[1], v[2]);
        wp[i] = T(wi);
        for (int k = 0; k < 3; ++k)
          if (sp[k]) sp[k][i] = T(v[k]);
      }
    });
    if (!update::trust_ratio(p.rule)) return;
    auto direction = [&](std::int64_t i) {
      return T(update::direction<DoubleMath>(p, c.data(), double(sp[0][i]), double(sp[1][i])));
    };
    double w_squares = 0, d_squares = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const double d = direction(i);
      w_squares += double(wp[i]) * double(wp[i]);
      d_squares += d * d;
    }
    const double step = c[0] * update::ratio<DoubleMath>(w_squares, d_squares);
    parallel_ranges(n, n, [&](std::int64_t i0, std::int64_t i1) {
      for (std::int64_t i = i0; i < i1; ++i) wp[i] = T(double(wp[i]) - step * double(direction(i)));
    });
  });
}

const DTypes adafactor_update_dtypes = kFloats;
void adafactor_update(Tensor& w, const Tensor& g, Tensor& r, Tensor& c, Tensor& v, const AdafactorStep& s,
                      const Tensor& step) {
  const double rho = step.data<double>()[0], beta = step.data<double>()[1];
  visit_dtype<float, double>(w.dtype(), [&](auto type) {
    using T = typename decltype(type)::type;
    T* wp = w.data<T>();
    T* vp = v.data<T>();
    const T* gp = g.data<T>();
    const std::int64_t n = w.numel();
    auto G = [&](std::int64_t i) { return adafactor::regulated(double(gp[i]), s.epsilon_1); };
    if (r.defined()) {  // factored: w [B, R, C]
      const std::int64_t B = w.shape()[0], R = w.shape()[1], C = w.shape()[2];
      T* rp = r.data<T>();
      T* cp = c.data<T>();
      parallel_ranges(B, n, [&](std::int64_t b0, std::int64_t b1) {
        for (std::int64_t b = b0; b < b1; ++b) {
          for (std::int64_t i = 0; i < R; ++i) {  // r: the mean over C
            double sum = 0;
            for (std::int64_t j = 0; j < C; ++j) sum += G((b * R + i) * C + j);
            rp[b * R + i] = T(adafactor::moment(beta, double(rp[b * R + i]), sum / double(C)));
          }
          for (std::int64_t j = 0; j < C; ++j) {  // c: the mean over R
            double sum = 0;
            for (std::int64_t i = 0; i < R; ++i) sum += G((b * R + i) * C + j);
            cp[b * C + j] = T(adafactor::moment(beta, double(cp[b * C + j]), sum / double(R)));
          }
          double r_sum = 0;
          for (std::int64_t i = 0; i < R; ++i) r_sum += double(rp[b * R + i]);
          const double r_mean = r_sum / double(R);
          for (std::int64_t i = 0; i < R; ++i)
            for (std::int64_t j = 0; j < C; ++j)
              vp[(b * R + i) * C + j] = T(double(rp[b * R + i]) / r_mean * double(cp[b * C + j]));
        }
      });
    } else {
      parallel_ranges(n, n, [&](std::int64_t i0, std::int64_t i1) {
        for (std::int64_t i = i0; i < i1; ++i) vp[i] = T(adafactor::moment(beta, double(vp[i]), G(i)));
      });
    }
    double w_squares = 0, u_squares = 0;  // in order: the same on every run
    for (std::int64_t i = 0; i < n; ++i) {
      const double u = double(gp[i]) / std::sqrt(double(vp[i]));
      w_squares += double(wp[i]) * double(wp[i]);
      u_squares += u * u;
    }
    const double scale =
        adafactor::scale<DoubleMath>(std::sqrt(w_squares / double(n)), std::sqrt(u_squares / double(n)), rho,
                                     s.epsilon_2, s.clip_threshold);
    parallel_ranges(n, n, [&](std::int64_t i0, std::int64_t i1) {
      for (std::int64_t i = i0; i < i1; ++i)
        wp[i] = T(double(wp[i]) - scale * double(gp[i]) / std::sqrt(double(vp[i])));
    });
  });
}

namespace {

// out [M, N] = alpha e + beta p q, p [M, K], q [K, N] (e null: 0), row-major, in double.
void matmul_add(const double* p, const double* q, const double* e, double* out, std::int64_t M,
                std::int64_t N, std::int64_t K, double alpha, double beta) {
  parallel_ranges(M, M * N * K, [&](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t i = i0; i < i1; ++i) {
      double* row = out + i * N;
      for (std::int64_t j = 0; j < N; ++j) row[j] = 0;
      for (std::int64_t k = 0; k < K; ++k) {
        const double pik = p[i * K + k];
        const double* qk = q + k * N;
        for (std::int64_t j = 0; j < N; ++j) row[j] += pik * qk[j];
      }
      for (std::int64_t j = 0; j < N; ++j) row[j] = (e ? alpha * e[i * N + j] : 0.0) + beta * row[j];
    }
  });
}

// The Newton-Schulz iterations on X [r, c] (row-major), in place: float64 data in double loops; float32 data in
// float32 with oneDNN's matrix products (dense_forward), as Keras computes a float32 variable's.
void newton_schulz(std::vector<double>& x, std::int64_t r, std::int64_t c, const MuonStep& s, DType dtype) {
  if (s.steps == 0) return;
  if (dtype == DType::float64) {
    std::vector<double> t(r * c), a(r * r), b(r * r);
    for (int step = 0; step < s.steps; ++step) {
      for (std::int64_t i = 0; i < c; ++i)  // t = X^T [c, r], for A = X X^T
        for (std::int64_t j = 0; j < r; ++j) t[i * r + j] = x[j * c + i];
      matmul_add(x.data(), t.data(), nullptr, a.data(), r, r, c, 0.0, 1.0);   // A = X X^T
      matmul_add(a.data(), a.data(), a.data(), b.data(), r, r, r, s.b, s.c);  // B = b A + c A A
      matmul_add(b.data(), x.data(), x.data(), t.data(), r, c, r, s.a, 1.0);  // a X + B X
      std::swap(x, t);
    }
    return;
  }
  Tensor X({r, c}), T({c, r}), A({r, r}), AA({r, r}), BX({r, c}), none;
  float *xp = X.data<float>(), *tp = T.data<float>(), *ap = A.data<float>(), *aap = AA.data<float>(),
        *bxp = BX.data<float>();
  for (std::int64_t i = 0; i < r * c; ++i) xp[i] = float(x[i]);
  const float fa = float(s.a), fb = float(s.b), fc = float(s.c);
  for (int step = 0; step < s.steps; ++step) {
    for (std::int64_t i = 0; i < c; ++i)
      for (std::int64_t j = 0; j < r; ++j) tp[i * r + j] = xp[j * c + i];
    dense_forward(X, T, none, A);                                                // A = X X^T
    dense_forward(A, A, none, AA);                                               // A A
    for (std::int64_t i = 0; i < r * r; ++i) aap[i] = fb * ap[i] + fc * aap[i];  // B = b A + c A A
    dense_forward(AA, X, none, BX);                                              // B X
    for (std::int64_t i = 0; i < r * c; ++i) xp[i] = fa * xp[i] + bxp[i];
  }
  for (std::int64_t i = 0; i < r * c; ++i) x[i] = xp[i];
}

}  // namespace

const DTypes muon_update_dtypes = kFloats;
void muon_update(Tensor& w, const Tensor& g, Tensor& m, const MuonStep& s, const Tensor& lr) {
  const double rate = lr.data<double>()[0];
  const std::int64_t R = w.shape()[0], C = w.shape()[1], n = R * C;
  const bool transposed = R > C;  // X is [r, c], r <= c
  const std::int64_t r = transposed ? C : R, c = transposed ? R : C;
  std::vector<double> x(n);
  visit_dtype<float, double>(w.dtype(), [&](auto type) {
    using T = typename decltype(type)::type;
    T* wp = w.data<T>();
    T* mp = m.data<T>();
    const T* gp = g.data<T>();
    double squares = 0;  // in order: the same on every run
    for (std::int64_t i = 0; i < R; ++i)
      for (std::int64_t j = 0; j < C; ++j) {
        const double gi = gp[i * C + j];
        const T mi = T(muon::moment(s, double(mp[i * C + j]), gi));
        mp[i * C + j] = mi;
        const double xi = muon::direction(s, double(mi), gi);
        x[transposed ? j * R + i : i * C + j] = xi;
        squares += xi * xi;
      }
    const double norm = std::sqrt(squares) + muon::kNormEpsilon;
    for (double& v : x) v /= norm;
    newton_schulz(x, r, c, s, w.dtype());
    const double scale = rate * muon::adjust(s, R, C);
    parallel_ranges(R, R * C, [&](std::int64_t i0, std::int64_t i1) {
      for (std::int64_t i = i0; i < i1; ++i)
        for (std::int64_t j = 0; j < C; ++j)
          wp[i * C + j] = T(double(wp[i * C + j]) - scale * x[transposed ? j * R + i : i * C + j]);
    });
  });
}

}  // namespace systolic::ops::cpu
