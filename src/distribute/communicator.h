// Communicators: how replicas sum their gradients. Every replica of a step calls the same collectives in the
// same order; a call returns once every replica has contributed, with the sum in every replica's buffer.
//
// - threads (CPU replicas in one process): a shared-memory reduction; replica r sums slice r of every
//   replica's buffer in replica order 0..N-1, so every replica gets bit-identical sums.
// - MPI (one replica per process): MPI_Iallreduce, polled with MPI_Test against a deadline.
// - NCCL (GPU replicas in one process; CUDA builds with NCCL): ncclAllReduce on each device's stream.
// - XLA (replicas on the devices of a PJRT plugin): stablehlo.all_reduce inside the step's SPMD program.
//
// Faults: a replica that fails or does not arrive within the timeout (SYSTOLIC_REPLICA_TIMEOUT seconds,
// default 60) never makes the others wait forever: threads raise Error in every replica; MPI prints why and
// calls MPI_Abort, which ends every process of the job.
#pragma once

#include <systolic/distribute.h>
#include <systolic/tensor.h>

#include <memory>
#include <string>
#include <vector>

namespace systolic::xla {
class KeyValueStore;
}

namespace systolic::distribute {

class Communicator {
 public:
  virtual ~Communicator() = default;
  // "shared memory", "MPI", "NCCL": for logs.
  virtual std::string name() const = 0;
  // Replicas across every process, and how many of them this process drives (local indices 0..local_size-1).
  virtual int size() const = 0;
  virtual int local_size() const = 0;
  // In place: t = sum over every replica of its t. Called by each local replica (its thread) with its own
  // tensor; all of the same numel and dtype (float32 or float64).
  virtual void all_reduce_sum(Tensor& t, int local) = 0;
  // The same for a small host vector (metric totals, batch norm statistics).
  virtual void all_reduce_sum(std::vector<double>& v, int local) = 0;
  // Ends the collectives: replicas waiting in one (or arriving later) raise Error with `why`. Used when one
  // local replica failed, so the others do not wait for it until the timeout.
  virtual void abort(const std::string& why) = 0;
};

// The replica timeout in seconds: SYSTOLIC_REPLICA_TIMEOUT when set (a positive number), else 60. Error
// naming the variable when it is set to something else.
double replica_timeout_seconds();

std::unique_ptr<Communicator> make_thread_communicator(int replicas, double timeout_s);
// XLA replicas of one process: an all_reduce inside the step's SPMD program when one is being traced, else
// through the host (xla_communicator.cc).
std::unique_ptr<Communicator> make_xla_communicator(int replicas, double timeout_s);

// MPI (builds with MPI only; Error otherwise). MPI is initialised on first use and finalised at exit.
bool mpi_compiled();
struct MpiWorld {
  int rank = 0, size = 1;
  int local_rank = 0, local_size = 1;  // processes on this machine
};
MpiWorld mpi_world();  // initialises MPI
std::unique_ptr<Communicator> make_mpi_communicator(double timeout_s);
// The key-value store of PJRT's multi-host mode over MPI (mpi_key_value_store.cc), which every PJRT client of a
// process started by an MPI launcher is given.
std::shared_ptr<xla::KeyValueStore> make_mpi_key_value_store();

// NCCL over the given GPUs of this process (CUDA builds with NCCL only; Error otherwise).
bool nccl_compiled();
std::unique_ptr<Communicator> make_nccl_communicator(const std::vector<int>& gpus, double timeout_s);

}  // namespace systolic::distribute
