// ReplicaGroup: runs the replicas of a step side by side and keeps them identical (see replica_group.h).
#include "distribute/replica_group.h"

#include <fmt/format.h>
#include <omp.h>
#include <systolic/error.h>
#include <systolic/log.h>

#include <algorithm>
#include <numeric>

namespace systolic::distribute {

namespace {

// The calling thread's OpenMP thread count for the scope (omp_set_num_threads is per thread: it sets the
// thread-count ICV of the calling thread, which oneDNN's and our loops' parallel regions read).
class OmpThreads {
 public:
  explicit OmpThreads(int n) : saved_(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~OmpThreads() { omp_set_num_threads(saved_); }
  OmpThreads(const OmpThreads&) = delete;
  OmpThreads& operator=(const OmpThreads&) = delete;

 private:
  int saved_;
};

}  // namespace

ReplicaGroup::ReplicaGroup(const Strategy& strategy, Replica* first,
                           std::vector<std::shared_ptr<Replica>> others, std::unique_ptr<Communicator> comm,
                           int threads_per_replica)
    : strategy_(strategy),
      owned_(std::move(others)),
      comm_(std::move(comm)),
      threads_per_replica_(std::max(1, threads_per_replica)) {
  states_.push_back(first);
  for (auto& s : owned_) states_.push_back(s.get());
  SYSTOLIC_CHECK(comm_->local_size() == local_size(),
                 "replicas: the {} communicator drives {} local replicas, not {}", comm_->name(),
                 comm_->local_size(), local_size());
  cross_replicas_.resize(states_.size());
  for (int l = 0; l < local_size(); ++l) {
    const bool sync = strategy_.options().sync_batch_norm;
    if (sync) cross_replicas_[l].all_reduce = [this, l](Tensor& t) { comm_->all_reduce_sum(t, l); };
    replica(l).join_strategy(global_index(l), chief() && l == 0, sync ? &cross_replicas_[l] : nullptr);
  }
  for (int l = 1; l < local_size(); ++l) threads_.emplace_back([this, l] { worker_loop(l); });
  spmd_ = replica(0).replica_device().is_xla() && strategy_.num_workers() == 1;
}

ReplicaGroup::~ReplicaGroup() {
  {
    std::lock_guard l(m_);
    stop_ = true;
  }
  job_cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void ReplicaGroup::record_error(int local, std::exception_ptr e, const std::string& what) {
  {
    std::lock_guard l(m_);
    if (!first_error_) first_error_ = e;
  }
  // Release the replicas waiting for this one in a collective (threads, NCCL). MPI's abort ends the job,
  // which is right for a rank that cannot go on, but not here: the caller gets the error and decides (the
  // command aborts).
  if (comm_->name() != "MPI") comm_->abort(fmt::format("replica {} failed: {}", local, what));
}

void ReplicaGroup::worker_loop(int local) {
  omp_set_num_threads(threads_per_replica_);
  std::uint64_t seen = 0;
  for (;;) {
    const std::function<void(int, Replica&)>* job = nullptr;
    {
      std::unique_lock l(m_);
      job_cv_.wait(l, [&] { return stop_ || job_generation_ != seen; });
      if (stop_) return;
      seen = job_generation_;
      job = job_;
    }
    try {
      (*job)(local, replica(local));
    } catch (const std::exception& e) {
      record_error(local, std::current_exception(), e.what());
    } catch (...) {
      record_error(local, std::current_exception(), "unknown error");
    }
    std::lock_guard l(m_);
    if (--pending_ == 0) done_cv_.notify_all();
  }
}

void ReplicaGroup::run(const std::function<void(int, Replica&)>& fn) {
  {
    std::lock_guard l(m_);
    first_error_ = nullptr;
    job_ = &fn;
    pending_ = local_size() - 1;
    ++job_generation_;
  }
  job_cv_.notify_all();
  {
    OmpThreads threads(threads_per_replica_);
    try {
      fn(0, replica(0));
    } catch (const std::exception& e) {
      record_error(0, std::current_exception(), e.what());
    } catch (...) {
      record_error(0, std::current_exception(), "unknown error");
    }
  }
  std::unique_lock l(m_);
  done_cv_.wait(l, [&] { return pending_ == 0; });
  if (first_error_) std::rethrow_exception(first_error_);
}

void ReplicaGroup::train_step(const Arrays& x, const Arrays& y, const Tensor& w) {
  const std::int64_t n = x.samples();
  if (w.defined() != weighted_) {  // the programs read the sample weights, or not
    programs_.clear();
    weighted_ = w.defined();
  }
  // Every replica updates with the model's rate (replica 0's optimizer: the one callbacks and schedules change).
  const double lr = replica(0).learning_rate();
  auto load = [&](int local, Replica& r) {
    auto [begin, end] = shard(n, global_index(local));
    r.load_step(x, y, w, begin, end, lr);
  };
  auto step = [&](int local, Replica& r) {  // device work only: what an SPMD program records
    auto [begin, end] = shard(n, global_index(local));
    if (end > begin)
      r.compute_gradients(end - begin, n);
    else
      ops::fill(r.gradient_buffer(), 0.0);  // a last batch smaller than the replicas: zero gradients
    comm_->all_reduce_sum(r.gradient_buffer(), local);
    r.apply_update();
  };
  const bool one_program = spmd_ && n % size() == 0;  // one SPMD program, when every shard is of one size
  if (one_program) {
    for (int l = 0; l < local_size(); ++l) load(l, replica(l));
    if (StepGraph* program = spmd_program(n, step)) {
      program->replay();
      for (int l = 0; l < local_size(); ++l) replica(l).end_step();
      return;
    }
  }
  run([&](int local, Replica& r) {
    if (!one_program) load(local, r);  // else loaded above
    step(local, r);
    r.end_step();
  });
}

StepGraph* ReplicaGroup::spmd_program(std::int64_t n, const std::function<void(int, Replica&)>& step) {
  auto& program = programs_[{n, replica(0).accumulates_next_step()}];
  if (!program) program = std::make_unique<StepGraph>(replica(0).replica_device());
  if (program->captured() && program->current()) return program.get();
  std::string why;
  if (program->capture_replicas(
          local_size(), [&](int local) { step(local, replica(local)); }, why))
    return program.get();
  log_line(
      fmt::format("systolic: the {} replicas' steps run op by op, not as one XLA program: {}", size(), why));
  spmd_ = false;
  programs_.clear();
  return nullptr;
}

std::vector<double> ReplicaGroup::sum_totals() {
  std::vector<double> t = replica(0).totals_buffer().to_doubles();
  for (int l = 1; l < local_size(); ++l) {
    auto u = replica(l).totals_buffer().to_doubles();
    for (std::size_t i = 0; i < t.size(); ++i) t[i] += u[i];
  }
  if (strategy_.num_workers() > 1) comm_->all_reduce_sum(t, 0);  // one replica per worker: MPI
  return t;
}

void ReplicaGroup::reset_totals() {
  for (int l = 0; l < local_size(); ++l) ops::fill(replica(l).totals_buffer(), 0.0);
}

void ReplicaGroup::broadcast_weights() {
  run([&](int local, Replica& r) {
    // A broadcast as a sum: every replica but 0 contributes zeros (x + 0 is exact).
    bool root = global_index(local) == 0;
    auto share = [&](Tensor& t) {
      if (!root) ops::fill(t, 0.0);
      comm_->all_reduce_sum(t, local);
    };
    share(r.trainable_buffer());
    for (Tensor* t : r.non_trainable_weights()) share(*t);
    for (Tensor* t : r.optimizer_slots()) share(*t);
    std::vector<double> it{root ? double(r.iterations()) : 0.0};
    comm_->all_reduce_sum(it, local);
    r.set_iterations(static_cast<std::int64_t>(it[0]));
  });
}

std::vector<double> ReplicaGroup::gather_non_trainable_weights() {
  std::vector<double> rows;
  run([&](int local, Replica& r) {
    std::vector<double> v;
    for (Tensor* t : r.non_trainable_weights()) {
      auto d = t->to_doubles();
      v.insert(v.end(), d.begin(), d.end());
    }
    // Each replica fills its row of zeros; the sum over replicas is every row (x + 0 is exact).
    std::vector<double> all(v.size() * static_cast<std::size_t>(size()), 0.0);
    std::copy(v.begin(), v.end(), all.begin() + static_cast<std::ptrdiff_t>(v.size() * global_index(local)));
    comm_->all_reduce_sum(all, local);
    if (local == 0) rows = std::move(all);
  });
  return rows;
}

void ReplicaGroup::scatter_non_trainable_weights(const std::vector<double>& rows) {
  run([&](int local, Replica& r) {
    auto weights = r.non_trainable_weights();
    std::size_t per_replica = 0;
    for (Tensor* t : weights) per_replica += static_cast<std::size_t>(t->numel());
    SYSTOLIC_CHECK(rows.size() == per_replica * static_cast<std::size_t>(size()),
                   "replicas: {} non-trainable values for {} replicas of {}", rows.size(), size(),
                   per_replica);
    std::size_t at = per_replica * static_cast<std::size_t>(global_index(local));
    for (Tensor* t : weights) {
      auto n = static_cast<std::size_t>(t->numel());
      std::vector<double> v(rows.begin() + static_cast<std::ptrdiff_t>(at),
                            rows.begin() + static_cast<std::ptrdiff_t>(at + n));
      at += n;
      t->copy_from(Tensor::from_vector(v, t->shape()).to(t->dtype()).to(t->device()));
    }
  });
}

void ReplicaGroup::average_non_trainable_weights() {
  run([&](int local, Replica& r) {
    auto weights = r.non_trainable_weights();
    if (weights.empty()) return;
    std::vector<double> v;
    for (Tensor* t : weights) {
      auto d = t->to_doubles();
      v.insert(v.end(), d.begin(), d.end());
    }
    comm_->all_reduce_sum(v, local);
    std::size_t at = 0;
    for (Tensor* t : weights) {
      std::vector<double> mean(
          v.begin() + static_cast<std::ptrdiff_t>(at),
          v.begin() + static_cast<std::ptrdiff_t>(at + static_cast<std::size_t>(t->numel())));
      for (double& x : mean) x /= double(size());
      at += static_cast<std::size_t>(t->numel());
      t->copy_from(Tensor::from_vector(mean, t->shape()).to(t->dtype()).to(t->device()));
    }
  });
}

void ReplicaGroup::broadcast_from_chief(std::vector<double>& values) {
  if (strategy_.num_workers() == 1) return;
  if (!chief()) std::fill(values.begin(), values.end(), 0.0);
  comm_->all_reduce_sum(values, 0);
}

}  // namespace systolic::distribute
