// Optimizer updates on the XLA backend (xla_backend.h) over flat parameter buffers, as the CPU loops compute them:
// the learning rate and Adam's bias correction in float64 from the device scalars `lr` and `iterations` (read by
// the program, so a recorded step runs with the rate and step of the moment), the update in the data's type.
#include "ops/optimizer_math.h"
#include "ops/xla/emit.h"
#include "ops/xla/xla_backend.h"

namespace systolic::ops::xla {

namespace {
// A float64 scalar as the data's compute type, broadcast to `like`.
E as_like(const E& scalar64, const E& like_value) {
  return broadcast(convert(scalar64, like_value.elem()), like_value.dims(), {});
}
E pow(const E& base, const E& exponent) {
  return hlo().binary("stablehlo.power", base.v, exponent.v);
}
// Value k of a step's float64 [n] values, as a float64 scalar.
E step_value(const E& values, int k) {
  return reshape(E(hlo().slice(values.v, {k}, {k + 1})), {});
}
}  // namespace

const DTypes adam_update_dtypes = kFloats;
void adam_update(Tensor& w, const Tensor& g, Tensor& m, Tensor& v, const AdamStep& s, const Tensor& lr,
                 const Tensor& iterations) {
  traced([&] {
    E t = read_scalar(iterations, Elem::f64) + 1.0;
    E b1 = constant(s.beta_1, t.type()), b2 = constant(s.beta_2, t.type());
    E lr_t = read_scalar(lr, Elem::f64) * sqrt(1.0 - pow(b2, t)) / (1.0 - pow(b1, t));
    E gv = read(g), mv = read(m), vv = read(v), wv = read(w);
    E m2 = mv + (gv - mv) * (1.0 - s.beta_1);
    E v2 = vv + (gv * gv - vv) * (1.0 - s.beta_2);
    write(m, m2);
    write(v, v2);
    write(w, wv - as_like(lr_t, wv) * m2 / (sqrt(v2) + s.epsilon));
  });
}

const DTypes sgd_update_dtypes = kFloats;
void sgd_update(Tensor& w, const Tensor& g, Tensor& velocity, const Tensor& lr, double momentum,
                bool nesterov) {
  traced([&] {
    E wv = read(w), gv = read(g);
    E a = as_like(read_scalar(lr, Elem::f64), wv);
    if (momentum == 0.0) {
      write(w, wv - a * gv);
      return;
    }
    E vel = read(velocity) * momentum - a * gv;
    write(velocity, vel);
    write(w, wv + (nesterov ? vel * momentum - a * gv : vel));
  });
}

const DTypes decay_weights_dtypes = kFloats;
void decay_weights(Tensor& w, const Tensor& lr, double decay) {
  traced([&] {
    E wv = read(w);
    E a = as_like(read_scalar(lr, Elem::f64), wv);
    write(w, wv - wv * like(decay, wv) * a);
  });
}

const DTypes rmsprop_update_dtypes = kFloats;
void rmsprop_update(Tensor& w, const Tensor& g, Tensor& ms, Tensor& mom, const Tensor& lr, double rho,
                    double momentum, double epsilon) {
  traced([&] {
    E wv = read(w), gv = read(g);
    E a = as_like(read_scalar(lr, Elem::f64), wv);
    E s2 = read(ms) * rho + gv * gv * (1.0 - rho);
    write(ms, s2);
    E step = a * gv / sqrt(s2 + epsilon);
    if (momentum > 0) {
      E m2 = read(mom) * momentum + step;
      write(mom, m2);
      write(w, wv - m2);
    } else {
      write(w, wv - step);
    }
  });
}

const DTypes clip_gradients_dtypes = kFloats;
void clip_gradients(Tensor& g, bool by_norm, double limit) {
  traced([&] {
    E gv = read(g);
    if (!by_norm) {
      write(g, clip(gv, -limit, limit));
      return;
    }
    E g64 = convert(gv, Elem::f64);
    E norm = sqrt(sum_all(g64 * g64));
    // limit / max(norm, limit); NaN when the norm is not finite (norm - norm is 0 for finite norms).
    E scale = limit / maximum(norm, limit) + (norm - norm);
    write(g, gv * as_like(scale, gv));
  });
}

const DTypes optimizer_update_dtypes = kFloats;
void optimizer_update(Tensor& w, const Tensor& g, Tensor& s0, Tensor& s1, Tensor& s2, const UpdateParams& p,
                      const Tensor& step) {
  traced([&] {
    E wv = read(w), gv = read(g);
    E values = read_as(step, Elem::f64);
    std::array<E, update::kStepValues> c;
    for (int k = 0; k < update::kStepValues; ++k) c[k] = as_like(step_value(values, k), wv);
    const int slots = update::slot_count(p.rule);
    Tensor* given[3] = {&s0, &s1, &s2};
    E sv[3];
    for (int k = 0; k < 3; ++k) sv[k] = k < slots ? read(*given[k]) : like(0.0, wv);
    update::element<Math>(p, c.data(), wv, gv, sv[0], sv[1], sv[2]);
    if (update::trust_ratio(p.rule)) {  // the ratio of the sums of squares, in float64
      E d = update::direction<Math>(p, c.data(), sv[0], sv[1]);
      E ratio = update::ratio<Math>(sum_all(square(convert(wv, Elem::f64))),
                                    sum_all(square(convert(d, Elem::f64))));
      wv = wv - c[0] * as_like(ratio, wv) * d;
    }
    write(w, wv);
    for (int k = 0; k < slots; ++k) write(*given[k], sv[k]);
  });
}

const DTypes adafactor_update_dtypes = kFloats;
void adafactor_update(Tensor& w, const Tensor& g, Tensor& r, Tensor& c, Tensor& v, const AdafactorStep& s,
                      const Tensor& step) {
  traced([&] {
    E wv = read(w), gv = read(g);
    E values = read_as(step, Elem::f64);
    E rho = step_value(values, 0), beta = step_value(values, 1);
    E G = adafactor::regulated(gv, s.epsilon_1), vv;
    if (r.defined()) {  // factored: w [B, R, C]
      const std::vector<std::int64_t> d = wv.dims();
      const double R = double(d[1]), C = double(d[2]);
      E rv = read(r), cv = read(c);
      E r2 = adafactor::moment(as_like(beta, rv), rv, sum(G, {2}) / C);
      E c2 = adafactor::moment(as_like(beta, cv), cv, sum(G, {1}) / R);
      write(r, r2);
      write(c, c2);
      E r_mean = sum(r2, {1}) / R;  // [B]
      vv = broadcast(r2 / broadcast(r_mean, r2.dims(), {0}), d, {0, 1}) * broadcast(c2, d, {0, 2});
    } else {
      E v0 = read(v);
      vv = adafactor::moment(as_like(beta, v0), v0, G);
    }
    write(v, vv);
    E u = gv / sqrt(vv);
    const double n = double(w.numel());
    E rms_w = sqrt(sum_all(square(convert(wv, Elem::f64))) / n);
    E rms_u = sqrt(sum_all(square(convert(u, Elem::f64))) / n);
    E scale = adafactor::scale<Math>(rms_w, rms_u, rho, s.epsilon_2, s.clip_threshold);
    write(w, wv - as_like(scale, wv) * u);
  });
}

const DTypes muon_update_dtypes = kFloats;
void muon_update(Tensor& w, const Tensor& g, Tensor& m, const MuonStep& s, const Tensor& lr) {
  traced([&] {
    E wv = read(w), gv = read(g);
    E mv = muon::moment(s, read(m), gv);
    write(m, mv);
    E x = muon::direction(s, mv, gv);
    const std::int64_t R = w.shape()[0], C = w.shape()[1];
    // X [R, C] in float64; with R > C the products of X^T's iteration, written for X: A = X^T X, X = a X + X B (A
    // and B are symmetric).
    const bool transposed = R > C;
    auto dot = [](const E& p, const E& q, std::int64_t p_contract, std::int64_t q_contract) {
      return E(hlo().dot_general(p.v, q.v, {}, {}, {p_contract}, {q_contract}, p.elem()));
    };
    x = convert(x, Elem::f64);
    x = x / as_like(sqrt(sum_all(x * x)) + muon::kNormEpsilon, x);
    for (int step = 0; step < s.steps; ++step) {
      E a = transposed ? dot(x, x, 0, 0) : dot(x, x, 1, 1);
      E b = a * s.b + dot(a, a, 1, 0) * s.c;
      x = x * s.a + (transposed ? dot(x, b, 1, 0) : dot(b, x, 1, 0));
    }
    E scale = read_scalar(lr, Elem::f64) * muon::adjust(s, R, C);
    write(w, wv - convert(x * as_like(scale, x), wv.elem()));
  });
}

}  // namespace systolic::ops::xla
