// Dense layers on the XLA backend (xla_backend.h): dot_general, x's leading dimensions flattened into rows.
#include "ops/xla/emit.h"
#include "ops/xla/xla_backend.h"

namespace systolic::ops::xla {

namespace {
// x as [M, K] in the compute type.
E rows(const Tensor& x, std::int64_t k) {
  E v = read(x);
  return reshape(v, {x.numel() / k, k});
}
E matmul(const E& a, const E& b, std::int64_t a_contract, std::int64_t b_contract) {
  return hlo().dot_general(a.v, b.v, {}, {}, {a_contract}, {b_contract}, a.elem());
}
}  // namespace

const DTypes dense_forward_dtypes = kFloatsAndBf16;
void dense_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) {
  traced([&] {
    const std::int64_t k = w.dim(0), u = w.dim(1);
    E xm = rows(x, k), wm = read(w);
    E out = matmul(xm, convert(wm, xm.elem()), 1, 0);
    if (b.defined()) out = out + broadcast_last(convert(read(b), out.elem()), {xm.dims()[0], u});
    write(y, out);
  });
}

const DTypes dense_backward_dtypes = kFloatsAndBf16;
void dense_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw, Tensor& db) {
  traced([&] {
    const std::int64_t k = w.dim(0), u = w.dim(1);
    E g = rows(dy, u);
    if (dx.defined()) write(dx, matmul(g, convert(read(w), g.elem()), 1, 1));
    if (dw.defined()) accumulate_into(dw, matmul(convert(rows(x, k), g.elem()), g, 0, 0));
    if (db.defined()) accumulate_into(db, sum(g, {0}));
  });
}

}  // namespace systolic::ops::xla
