// The replicas of a model under a data-parallel strategy: one Replica (replica.h) per local replica (index 0 is
// the model's own), the threads that drive replicas 1..L-1, and the communicator that sums across every replica.
// The model's state owns the group; the group owns the other replicas.
#pragma once

#include <systolic/distribute.h>

#include <condition_variable>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "core/step_graph.h"
#include "distribute/communicator.h"
#include "distribute/replica.h"

namespace systolic::distribute {

class ReplicaGroup {
 public:
  // `first` is the model's own replica; `others` the rest of this process's replicas.
  ReplicaGroup(const Strategy& strategy, Replica* first, std::vector<std::shared_ptr<Replica>> others,
               std::unique_ptr<Communicator> comm, int threads_per_replica);
  ~ReplicaGroup();
  ReplicaGroup(const ReplicaGroup&) = delete;
  ReplicaGroup& operator=(const ReplicaGroup&) = delete;

  const Strategy& strategy() const { return strategy_; }
  int local_size() const { return static_cast<int>(states_.size()); }
  int size() const { return local_size() * strategy_.num_workers(); }  // every replica, every worker
  int global_index(int local) const { return strategy_.worker_index() * local_size() + local; }
  bool chief() const { return strategy_.is_chief(); }
  Communicator& comm() { return *comm_; }
  Replica& replica(int local) { return *states_[static_cast<std::size_t>(local)]; }

  // Rows [begin, end) of n that replica `global` takes: contiguous, as even as n allows.
  std::pair<std::int64_t, std::int64_t> shard(std::int64_t n, int global) const {
    return {n * global / size(), n * (global + 1) / size()};
  }

  // Runs fn(local, state) for every local replica at once (local 0 on the calling thread), each on its share
  // of the cores. When one replica throws, the collectives are aborted (so no replica waits for it) and the
  // first error is rethrown here.
  void run(const std::function<void(int, Replica&)>& fn);

  // One training step on a global batch (host tensors; every worker passes the same batch): each replica
  // computes the gradients of its shard scaled by 1 / batch, the gradients are summed, every replica applies
  // the update with the model's learning rate (replica 0's optimizer, which callbacks and schedules change).
  // Replicas on XLA devices run the step as one SPMD program (the sum an all_reduce inside it), recorded once per
  // shard size, when the batch splits into shards of one size; otherwise, and on other devices, each replica runs
  // its ops on its own thread.
  void train_step(const Arrays& x, const Arrays& y, const Tensor& w = Tensor());
  // Whether the steps run as SPMD programs (XLA replicas, once one is recorded and none was refused).
  bool runs_programs() const { return spmd_ && !programs_.empty(); }
  // Metric totals (loss sum, metric counts) summed over every replica. Collective across workers.
  std::vector<double> sum_totals();
  void reset_totals();

  // Replica 0's trainable and non-trainable weights, optimizer slots and iteration count on every replica.
  void broadcast_weights();
  // The mean over replicas of the non-trainable weights (per-replica batch norm statistics), on every
  // replica: what TensorFlow reads from variables synchronised ON_READ with aggregation MEAN.
  void average_non_trainable_weights();
  // Every replica's non-trainable weights, one row per replica in global order, on every worker (collective):
  // with per-replica batch norm they differ until the epoch's end, so a backup made inside an epoch keeps
  // them all. scatter gives replica g its row back.
  std::vector<double> gather_non_trainable_weights();
  void scatter_non_trainable_weights(const std::vector<double>& rows);
  // The chief's values on every worker (epoch order, seeds); a no-op with one worker.
  void broadcast_from_chief(std::vector<double>& values);

 private:
  void worker_loop(int local);
  // The SPMD program of a global batch of n (its shards loaded), recorded at first use or when a buffer it used was
  // replaced; null (logged once, and steps then run op by op) when the step cannot be one program.
  StepGraph* spmd_program(std::int64_t n, const std::function<void(int, Replica&)>& step);
  void record_error(int local, std::exception_ptr e, const std::string& what);

  Strategy strategy_;
  std::vector<Replica*> states_;
  std::vector<std::shared_ptr<Replica>> owned_;
  std::unique_ptr<Communicator> comm_;
  int threads_per_replica_;
  std::vector<ops::CrossReplica> cross_replicas_;  // what the replicas' synchronised batch norm sums with
  bool spmd_ = false;                              // XLA replicas of one process: steps as SPMD programs
  bool weighted_ = false;                          // the last step had sample weights
  // By global batch, and whether the step only accumulates its gradients (Replica::accumulates_next_step).
  std::map<std::pair<std::int64_t, bool>, std::unique_ptr<StepGraph>> programs_;

  std::vector<std::thread> threads_;
  std::mutex m_;
  std::condition_variable job_cv_, done_cv_;
  const std::function<void(int, Replica&)>* job_ = nullptr;
  std::uint64_t job_generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
  std::exception_ptr first_error_;
};

// Saving under a strategy. Only the chief (worker 0) writes files: every worker holds the same weights, and
// one writer keeps a file whole. Weights read into a model's first replica go to every replica; across workers
// the chief's file wins. A null group is a model of one replica: it writes, and has nothing to share.
inline bool writes_files(const ReplicaGroup* group) {
  return !group || group->chief();
}
inline void share_loaded_weights(ReplicaGroup* group) {
  if (group) group->broadcast_weights();
}

}  // namespace systolic::distribute
