// The shared-memory all-reduce of CPU replicas running as threads of one process, and the replica timeout.
//
// all_reduce_sum(t, r): every replica publishes its buffer; replica r sums slice r of all buffers (in replica
// order, into its own buffer's slice r: nobody else reads that slice); then every replica copies the other
// slices from their owners. Three barriers: after publishing, after summing, after copying (so an owner does
// not overwrite its buffer, e.g. zero its gradients for the next step, while a peer still copies from it).
#include <systolic/error.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>

#include "distribute/communicator.h"

namespace systolic::distribute {

double replica_timeout_seconds() {
  const char* env = std::getenv("SYSTOLIC_REPLICA_TIMEOUT");
  if (!env || !*env) return 60.0;
  char* end = nullptr;
  double v = std::strtod(env, &end);
  SYSTOLIC_CHECK(end && *end == '\0' && v > 0,
                 "SYSTOLIC_REPLICA_TIMEOUT={}: expected a positive number of seconds", env);
  return v;
}

namespace {

class ThreadCommunicator final : public Communicator {
 public:
  ThreadCommunicator(int replicas, double timeout_s)
      : n_(replicas), timeout_s_(timeout_s), buffers_(replicas) {
    SYSTOLIC_CHECK(replicas >= 1, "thread communicator: {} replicas", replicas);
  }
  std::string name() const override { return "shared memory"; }
  int size() const override { return n_; }
  int local_size() const override { return n_; }

  void all_reduce_sum(Tensor& t, int local) override {
    SYSTOLIC_CHECK(t.device().is_cpu(),
                   "all-reduce over threads: replica {} holds its tensor on {}, not the CPU", local,
                   t.device().str());
    if (t.dtype() == DType::float32)
      reduce(t.data<float>(), t.numel(), local);
    else if (t.dtype() == DType::float64)
      reduce(t.data<double>(), t.numel(), local);
    else
      fail("all-reduce over threads: {} tensors are not supported (float32, float64)", dtype_name(t.dtype()));
  }
  void all_reduce_sum(std::vector<double>& v, int local) override {
    reduce(v.data(), static_cast<std::int64_t>(v.size()), local);
  }

  void abort(const std::string& why) override {
    std::lock_guard l(m_);
    if (!aborted_) {
      aborted_ = true;
      reason_ = why;
    }
    cv_.notify_all();
  }

 private:
  template <class T>
  void reduce(T* data, std::int64_t count, int local) {
    if (n_ == 1) return;
    buffers_[local] = {data, count};
    barrier("all-reduce");
    for (int k = 0; k < n_; ++k)
      SYSTOLIC_CHECK(buffers_[k].count == count,
                     "all-reduce over threads: replica {} sums {} values, replica {} {}", k,
                     buffers_[k].count, local, count);
    auto begin = [&](int r) { return count * r / n_; };
    for (std::int64_t i = begin(local); i < begin(local + 1); ++i) {
      T s = static_cast<const T*>(buffers_[0].data)[i];
      for (int k = 1; k < n_; ++k) s += static_cast<const T*>(buffers_[k].data)[i];
      data[i] = s;
    }
    barrier("all-reduce");
    for (int k = 0; k < n_; ++k)
      if (k != local)
        for (std::int64_t i = begin(k); i < begin(k + 1); ++i)
          data[i] = static_cast<const T*>(buffers_[k].data)[i];
    barrier("all-reduce");
  }

  // Waits for every replica; Error when the group was aborted or a replica does not arrive within the
  // timeout.
  void barrier(const char* what) {
    std::unique_lock l(m_);
    if (aborted_) fail("{}", reason_);
    std::uint64_t generation = generation_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s_);
    while (generation_ == generation && !aborted_) {
      if (cv_.wait_until(l, deadline) == std::cv_status::timeout && generation_ == generation && !aborted_) {
        aborted_ = true;
        reason_ = fmt::format(
            "replicas: {} of {} replicas reached the {} and the others did not answer within {} s "
            "(SYSTOLIC_REPLICA_TIMEOUT); giving up",
            arrived_, n_, what, timeout_s_);
        cv_.notify_all();
      }
    }
    if (generation_ == generation) fail("{}", reason_);
  }

  struct Buffer {
    const void* data = nullptr;
    std::int64_t count = 0;
  };
  int n_;
  double timeout_s_;
  std::vector<Buffer> buffers_;
  std::mutex m_;
  std::condition_variable cv_;
  int arrived_ = 0;
  std::uint64_t generation_ = 0;
  bool aborted_ = false;
  std::string reason_;
};

}  // namespace

std::unique_ptr<Communicator> make_thread_communicator(int replicas, double timeout_s) {
  return std::make_unique<ThreadCommunicator>(replicas, timeout_s);
}

}  // namespace systolic::distribute
