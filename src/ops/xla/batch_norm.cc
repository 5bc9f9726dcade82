// Batch normalisation on the XLA backend (xla_backend.h), as the CPU loops compute it: the channel statistics by
// two reductions (mean, then the centred squares: the biased variance), gamma and beta and the statistics in
// float32 for bfloat16 data. Across replicas the sums go through the strategy's all_reduce (CrossReplica), which
// on XLA devices is an all_reduce inside the same program.
#include "ops/xla/emit.h"
#include "ops/xla/xla_backend.h"

namespace systolic::ops::xla {

namespace {

// The statistics' element type (float32 for bfloat16 data).
Elem stats_elem(const Tensor& x) {
  return compute_elem(x.dtype());
}

// v summed over every replica of the step (through a float64 tensor on x's device, as the CPU's sums are).
E across(const CrossReplica* replicas, const E& v, const Tensor& x) {
  if (!replicas) return v;
  Tensor t(Shape(v.dims()), DType::float64, x.device());
  write(t, v);
  replicas->all_reduce(t);
  return convert(read_as(t, Elem::f64), v.elem());
}

E gamma_or(const Tensor& t, const Tensor& x, double value, std::int64_t C) {
  return t.defined() ? read_as(t, stats_elem(x)) : constant(value, Type{stats_elem(x), {C}});
}

}  // namespace

const DTypes batch_norm_forward_training_dtypes = kFloatsAndBf16;
void batch_norm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                                 Tensor& mean, Tensor& var, double eps, const CrossReplica* replicas) {
  traced([&] {
    const std::int64_t C = x.dim(-1), R = x.numel() / C;
    std::vector<std::int64_t> d{R, C};
    E xv = convert(reshape(read(x), d), stats_elem(x));
    E count = constant(double(R), Type{xv.elem(), {1}});
    E sums = across(replicas, hlo().concatenate({sum(xv, {0}).v, count.v}, 0), x);
    E n = hlo().slice(sums.v, {C}, {C + 1});
    E m = hlo().slice(sums.v, {0}, {C}) / broadcast(reshape(n, {}), {C}, {});
    E centred = xv - broadcast_last(m, d);
    E v = across(replicas, sum(centred * centred, {0}), x) / broadcast(reshape(n, {}), {C}, {});
    write(mean, m);
    write(var, v);
    E scale = gamma_or(gamma, x, 1.0, C) * rsqrt(v + eps);
    write(y, centred * broadcast_last(scale, d) + broadcast_last(gamma_or(beta, x, 0.0, C), d));
  });
}

const DTypes batch_norm_forward_inference_dtypes = kFloatsAndBf16;
void batch_norm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                                  const Tensor& mean, const Tensor& var, Tensor& y, double eps) {
  traced([&] {
    const std::int64_t C = x.dim(-1), R = x.numel() / C;
    std::vector<std::int64_t> d{R, C};
    E xv = convert(reshape(read(x), d), stats_elem(x));
    E scale = gamma_or(gamma, x, 1.0, C) / sqrt(read_as(var, stats_elem(x)) + eps);
    E shift = gamma_or(beta, x, 0.0, C) - read_as(mean, stats_elem(x)) * scale;
    write(y, xv * broadcast_last(scale, d) + broadcast_last(shift, d));
  });
}

const DTypes batch_norm_backward_dtypes = kFloatsAndBf16;
void batch_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& var,
                         const Tensor& dy, Tensor& dx, Tensor& dgamma, Tensor& dbeta, double eps,
                         const CrossReplica* replicas) {
  traced([&] {
    const std::int64_t C = x.dim(-1), R = x.numel() / C;
    std::vector<std::int64_t> d{R, C};
    Elem s = stats_elem(x);
    E xv = convert(reshape(read(x), d), s), g = convert(reshape(read(dy), d), s);
    E inv = rsqrt(read_as(var, s) + eps);
    E xhat = (xv - broadcast_last(read_as(mean, s), d)) * broadcast_last(inv, d);
    E sum_dy = sum(g, {0}), sum_dy_xhat = sum(g * xhat, {0});
    if (dgamma.defined()) accumulate_into(dgamma, sum_dy_xhat);
    if (dbeta.defined()) accumulate_into(dbeta, sum_dy);
    E count = constant(double(R), Type{s, {1}});
    E sums = across(replicas, hlo().concatenate({sum_dy.v, sum_dy_xhat.v, count.v}, 0), x);
    if (!dx.defined()) return;
    E n = broadcast(reshape(hlo().slice(sums.v, {2 * C}, {2 * C + 1}), {}), {C}, {});
    E a = hlo().slice(sums.v, {0}, {C}) / n, b = hlo().slice(sums.v, {C}, {2 * C}) / n;
    E k = gamma_or(gamma, x, 1.0, C) * inv;
    write(dx, broadcast_last(k, d) * (g - broadcast_last(a, d) - xhat * broadcast_last(b, d)));
  });
}

}  // namespace systolic::ops::xla
