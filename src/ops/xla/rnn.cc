// Recurrent cells on the XLA backend (xla_backend.h): rnn_math.h's formulas over whole tensors, each gate a slice
// [N, u] of the [N, G*u] parts; a masked row keeps its state (forward) and passes its gradients through (backward).
#include "ops/rnn_math.h"
#include "ops/xla/emit.h"
#include "ops/xla/xla_backend.h"

namespace systolic::ops::xla {

namespace {

// Gate g of a [N, G*u] value: [N, u].
E gate(const E& x, int g, std::int64_t u) {
  const std::int64_t N = x.dims()[0];
  return E(hlo().slice(x.v, {0, g * u}, {N, (g + 1) * u}));
}
E join(const std::vector<E>& parts) {
  std::vector<Value> v;
  for (auto& p : parts) v.push_back(p.v);
  return parts.size() == 1 ? parts[0] : E(hlo().concatenate(v, 1));
}
// The row mask [N] as a predicate [N, cols] (true: the step runs), or none.
E keep_rows(const Tensor& mask, std::int64_t N, std::int64_t cols) {
  E m = reshape(read(mask), {N});
  return broadcast(!eq(m, 0.0), {N, cols}, {0});
}

}  // namespace

const DTypes rnn_cell_forward_dtypes = kFloatsAndBf16;
void rnn_cell_forward(const RnnCellParams& p, const Tensor& x_part, const Tensor& h_part,
                      const Tensor& h_prev, const Tensor& c_prev, const Tensor& mask, Tensor& h, Tensor& c,
                      Tensor& z) {
  traced([&] {
    const std::int64_t N = h.dim(0), u = h.dim(1);
    const int G = rnn_math::gates(p.cell);
    E xp = reshape(read(x_part), {N, G * u}), hp = reshape(read(h_part), {N, G * u});
    E hprev = reshape(read(h_prev), {N, u});
    const auto act = [&](const E& v) { return activate(p.activation, v); };
    const auto rec = [&](const E& v) { return activate(p.recurrent_activation, v); };
    E hn, cn, zs;
    if (p.cell == RnnCell::simple) {
      zs = xp + hp;
      hn = act(zs);
    } else if (p.cell == RnnCell::lstm) {
      zs = xp + hp;
      E cprev = reshape(read(c_prev), {N, u});
      E i = rec(gate(zs, 0, u)), f = rec(gate(zs, 1, u)), cc = act(gate(zs, 2, u)), o = rec(gate(zs, 3, u));
      cn = f * cprev + i * cc;
      hn = o * act(cn);
    } else {
      E pz = gate(xp, 0, u) + gate(hp, 0, u), pr = gate(xp, 1, u) + gate(hp, 1, u);
      E zg = rec(pz);
      E ph = gate(xp, 2, u) + (p.reset_after ? rec(pr) * gate(hp, 2, u) : gate(hp, 2, u));
      hn = zg * hprev + (1.0 - zg) * act(ph);
      zs = join({pz, pr, ph});
    }
    if (mask.defined()) {
      hn = where(keep_rows(mask, N, u), hn, hprev);
      zs = where(keep_rows(mask, N, G * u), zs, 0.0);
      if (p.cell == RnnCell::lstm) cn = where(keep_rows(mask, N, u), cn, reshape(read(c_prev), {N, u}));
    }
    write(h, hn);
    write(z, zs);
    if (p.cell == RnnCell::lstm) write(c, cn);
  });
}

const DTypes rnn_cell_backward_dtypes = kFloatsAndBf16;
void rnn_cell_backward(const RnnCellParams& p, const Tensor& h_part, const Tensor& h_prev,
                       const Tensor& c_prev, const Tensor& z, const Tensor& c, const Tensor& mask,
                       const Tensor& dh, const Tensor& dc, Tensor& dx_part, Tensor& dh_part, Tensor& dh_prev,
                       Tensor& dc_prev) {
  traced([&] {
    const std::int64_t N = dh.dim(0), u = dh.dim(1);
    const int G = rnn_math::gates(p.cell);
    E zs = reshape(read(z), {N, G * u}), g = reshape(read(dh), {N, u});
    E dcn = dc.defined() ? reshape(read(dc), {N, u}) : like(0.0, g);
    const auto act = [&](const E& v) { return activate(p.activation, v); };
    const auto rec = [&](const E& v) { return activate(p.recurrent_activation, v); };
    const auto dact = [&](const E& x, const E& y, const E& dy) {
      return activate_grad(p.activation, x, y, dy);
    };
    const auto drec = [&](const E& x, const E& y, const E& dy) {
      return activate_grad(p.recurrent_activation, x, y, dy);
    };
    E dx, dhp, dhprev = like(0.0, g), dcprev;
    if (p.cell == RnnCell::simple) {
      dx = dact(zs, act(zs), g);
      dhp = dx;
    } else if (p.cell == RnnCell::lstm) {
      E zi = gate(zs, 0, u), zf = gate(zs, 1, u), zc = gate(zs, 2, u), zo = gate(zs, 3, u);
      E i = rec(zi), f = rec(zf), cc = act(zc), o = rec(zo);
      E cv = reshape(read(c), {N, u}), cprev = reshape(read(c_prev), {N, u});
      E tc = act(cv);
      E dct = dcn + dact(cv, tc, g * o);
      dx =
          join({drec(zi, i, dct * cc), drec(zf, f, dct * cprev), dact(zc, cc, dct * i), drec(zo, o, g * tc)});
      dcprev = dct * f;
      dhp = dx;
    } else {
      E zz = gate(zs, 0, u), zr = gate(zs, 1, u), zh = gate(zs, 2, u);
      E zg = rec(zz), hh = act(zh);
      E hprev = reshape(read(h_prev), {N, u});
      E dzh = dact(zh, hh, g * (1.0 - zg));
      E dzz = drec(zz, zg, g * (hprev - hh));
      if (p.reset_after) {
        E r = rec(zr), hp = reshape(read(h_part), {N, G * u});
        E dzr = drec(zr, r, dzh * gate(hp, 2, u));
        dx = join({dzz, dzr, dzh});
        dhp = join({dzz, dzr, dzh * r});
      } else {  // r's gradient is the caller's
        E zero = like(0.0, g);
        dx = join({dzz, zero, dzh});
        dhp = dx;
      }
      dhprev = g * zg;
    }
    if (mask.defined()) {
      E keep = keep_rows(mask, N, u), keep_g = keep_rows(mask, N, G * u);
      dx = where(keep_g, dx, 0.0);
      dhp = where(keep_g, dhp, 0.0);
      dhprev = where(keep, dhprev, g);
      if (p.cell == RnnCell::lstm) dcprev = where(keep, dcprev, dcn);
    }
    write(dx_part, dx);
    if (dh_part.defined()) write(dh_part, dhp);
    write(dh_prev, dhprev);
    if (p.cell == RnnCell::lstm) write(dc_prev, dcprev);
  });
}

// The whole recurrence as one op: not on this backend (no dtypes; the steps are traced one by one), so the layers run
// rnn_cell_forward and rnn_cell_backward step by step here.
const DTypes rnn_sequence_forward_dtypes{};
void rnn_sequence_forward(const RnnCellParams&, bool, const Tensor&, const Tensor&, const Tensor&,
                          const Tensor&, const Tensor&, const Tensor&, Tensor&, Tensor&, Tensor&, Tensor&) {
  fail("rnn_sequence_forward: not on the XLA backend");
}
const DTypes rnn_sequence_backward_dtypes{};
void rnn_sequence_backward(const RnnCellParams&, bool, const Tensor&, const Tensor&, const Tensor&,
                           const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                           const Tensor&, const Tensor&, const Tensor&, Tensor&, Tensor&, Tensor&, Tensor&,
                           Tensor&, Tensor&) {
  fail("rnn_sequence_backward: not on the XLA backend");
}

}  // namespace systolic::ops::xla
