// Batch normalisation on the XLA backend (xla_backend.h), as the CPU loops compute it: the channel statistics by
// two reductions (mean, then the centred squares: the biased variance), gamma and beta and the statistics in
// float32 for bfloat16 data. Across replicas the sums go through the strategy's all_reduce (CrossReplica), which
// on XLA devices is an all_reduce inside the step's SPMD program (ReplicaSums).
#include <functional>
#include <vector>

#include "ops/xla/emit.h"
#include "ops/xla/xla_backend.h"

namespace systolic::ops::xla {

namespace {

// The statistics' element type (float32 for bfloat16 data).
Elem stats_elem(const Tensor& x) {
  return compute_elem(x.dtype());
}

// The statistics of batch norm summed over every replica of the step (CrossReplica) between the stages of an op.
// Without replicas, or inside a trace (an SPMD step, where the sum is an all_reduce of the program), the stages are
// one program; an op run eagerly with replicas (the uneven shards of a last batch) runs each stage as a program of
// its own, with the sums through the host between them. A stage computes what it needs from tensors and from
// get(), never from the values of an earlier stage.
class ReplicaSums {
 public:
  ReplicaSums(const CrossReplica* replicas, Device device)
      : replicas_(replicas),
        device_(device),
        eager_(replicas && !Trace::current()),
        values_(2),
        tensors_(2) {}

  void run(const std::vector<std::function<void()>>& stages) {
    if (!eager_)
      return traced([&] {
        for (auto& stage : stages) stage();
      });
    for (auto& stage : stages) {
      traced(stage);
      for (Tensor* t : pending_) replicas_->all_reduce(*t);
      pending_.clear();
    }
  }
  // Sums `i` of this replica's shard; get(i) in a later stage gives them summed over every replica (through a
  // float64 tensor on the device, as the CPU's sums are).
  void put(int i, const E& v) {
    values_[i] = v;
    if (!replicas_) return;
    Tensor& t = tensors_[i] = Tensor(Shape(v.dims()), DType::float64, device_);
    write(t, v);
    if (eager_)
      pending_.push_back(&t);
    else
      replicas_->all_reduce(t);
  }
  E get(int i) {
    if (!replicas_) return values_[i];
    return convert(read_as(tensors_[i], Elem::f64), values_[i].elem());
  }

 private:
  const CrossReplica* replicas_;
  Device device_;
  bool eager_;
  std::vector<E> values_;
  std::vector<Tensor> tensors_;
  std::vector<Tensor*> pending_;
};

E gamma_or(const Tensor& t, const Tensor& x, double value, std::int64_t C) {
  return t.defined() ? read_as(t, stats_elem(x)) : constant(value, Type{stats_elem(x), {C}});
}

}  // namespace

const DTypes batch_norm_forward_training_dtypes = kFloatsAndBf16;
void batch_norm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y,
                                 Tensor& mean, Tensor& var, double eps, const CrossReplica* replicas) {
  const std::int64_t C = x.dim(-1), R = x.numel() / C;
  const std::vector<std::int64_t> d{R, C};
  auto input = [&] { return convert(reshape(read(x), d), stats_elem(x)); };
  ReplicaSums sums(replicas, x.device());
  // The count and the mean over every replica's rows, from the first sums.
  auto count = [&] { return hlo().slice(sums.get(0).v, {C}, {C + 1}); };
  auto mean_of = [&] {
    return E(hlo().slice(sums.get(0).v, {0}, {C})) / broadcast(reshape(count(), {}), {C}, {});
  };
  sums.run({
      [&] {
        E xv = input();
        sums.put(0, hlo().concatenate({sum(xv, {0}).v, constant(double(R), Type{xv.elem(), {1}}).v}, 0));
      },
      [&] {
        E centred = input() - broadcast_last(mean_of(), d);
        sums.put(1, sum(centred * centred, {0}));
      },
      [&] {
        E m = mean_of(), centred = input() - broadcast_last(m, d);
        E v = sums.get(1) / broadcast(reshape(count(), {}), {C}, {});
        write(mean, m);
        write(var, v);
        E scale = gamma_or(gamma, x, 1.0, C) * rsqrt(v + eps);
        write(y, centred * broadcast_last(scale, d) + broadcast_last(gamma_or(beta, x, 0.0, C), d));
      },
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
  const std::int64_t C = x.dim(-1), R = x.numel() / C;
  const std::vector<std::int64_t> d{R, C};
  const Elem s = stats_elem(x);
  auto inv = [&] { return rsqrt(read_as(var, s) + eps); };
  auto xhat = [&] {
    return (convert(reshape(read(x), d), s) - broadcast_last(read_as(mean, s), d)) * broadcast_last(inv(), d);
  };
  auto grad = [&] { return convert(reshape(read(dy), d), s); };
  ReplicaSums sums(replicas, x.device());
  sums.run({
      [&] {
        E g = grad();
        E sum_dy = sum(g, {0}), sum_dy_xhat = sum(g * xhat(), {0});
        if (dgamma.defined()) accumulate_into(dgamma, sum_dy_xhat);
        if (dbeta.defined()) accumulate_into(dbeta, sum_dy);
        sums.put(0, hlo().concatenate({sum_dy.v, sum_dy_xhat.v, constant(double(R), Type{s, {1}}).v}, 0));
      },
      [&] {
        if (!dx.defined()) return;
        E all = sums.get(0);
        E n = broadcast(reshape(hlo().slice(all.v, {2 * C}, {2 * C + 1}), {}), {C}, {});
        E a = hlo().slice(all.v, {0}, {C}) / n, b = hlo().slice(all.v, {C}, {2 * C}) / n;
        E k = gamma_or(gamma, x, 1.0, C) * inv();
        write(dx, broadcast_last(k, d) * (grad() - broadcast_last(a, d) - xhat() * broadcast_last(b, d)));
      },
  });
}

}  // namespace systolic::ops::xla
