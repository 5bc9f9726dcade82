// Distribution strategies and the accelerator model: the seed's
//
//   strategy = tf.contrib.distribute.TPUStrategy(...)
//   tpu_model = tf.contrib.tpu.keras_to_tpu_model(model, strategy=strategy)
//
// is, in systolic,
//
//   auto strategy = systolic::distribute::OneDeviceStrategy();      // the best device present (a GPU if any)
//   systolic::Model accel = systolic::to_accelerator(model, strategy);
//
// to_accelerator copies the CPU model (layers, weights, compile settings, optimizer state) onto the
// strategy's device and logs what it found there; the CPU model is left as it was.
// fit/evaluate/predict/save_weights work on the copy unchanged (save_weights copies the weights to the host,
// and says so).
//
// Data-parallel replicas (tf.distribute.MirroredStrategy / MultiWorkerMirroredStrategy semantics):
//
//   distribute::MirroredStrategy strategy;         // every GPU, else one CPU replica
//   auto strategy = distribute::MirroredStrategy::cpu(2);   // 2 CPU replicas, sharing the cores
//   distribute::MultiWorkerMirroredStrategy strategy;       // one replica per MPI process (mpirun -np K ...)
//
// The model under a strategy holds one copy per replica, all starting from replica 0's weights. fit splits
// every global batch of B samples into equal shards of B / replicas (B must divide; the last, partial batch
// is split as evenly as it goes); each replica computes the gradients of its shard scaled by 1/B, an
// all-reduce sums them, and every replica applies the same optimizer update, so the copies stay identical.
// evaluate and predict split the samples across replicas and count each exactly once. Only the chief (worker
// 0) prints progress and writes files: save_weights/save on other workers do nothing. docs/distributed.md has
// the details.
#pragma once

#include <systolic/device.h>
#include <systolic/model.h>

#include <string>
#include <vector>

namespace systolic {
namespace distribute {

struct StrategyOptions {
  // Batch normalisation in training: false (the default, as on a TPU) normalises each replica's shard with
  // its own statistics and averages the moving statistics across replicas at the end of every epoch; true
  // all-reduces the per-channel sums so every replica normalises with the statistics of the whole global
  // batch (Keras's BatchNormalization(synchronized=True)). CPU replicas only (threads or MPI).
  bool sync_batch_norm = false;
  // Seconds a replica waits for the others in a collective before the run ends with an error; 0: the
  // environment's SYSTOLIC_REPLICA_TIMEOUT, else 60.
  double timeout_seconds = 0;
};

class Strategy {
 public:
  Strategy(std::string name, std::vector<Device> devices, StrategyOptions options = {});
  const std::string& name() const { return name_; }
  // The devices of this process's replicas (a device may repeat: CPU replicas).
  const std::vector<Device>& devices() const { return devices_; }
  const StrategyOptions& options() const { return options_; }
  // Processes taking part (MPI), and this one's index; 1 and 0 without MPI. Worker 0 is the chief.
  int num_workers() const { return num_workers_; }
  int worker_index() const { return worker_index_; }
  bool is_chief() const { return worker_index_ == 0; }
  // Replicas across every worker.
  int num_replicas_in_sync() const { return static_cast<int>(devices_.size()) * num_workers_; }

 protected:
  std::string name_;
  std::vector<Device> devices_;
  StrategyOptions options_;
  int num_workers_ = 1, worker_index_ = 0;
};

// One replica on one device (default: default_device(), a GPU when one is present).
Strategy OneDeviceStrategy(Device device = default_device());

// One process, several replicas: GPUs (summed with NCCL) or CPU replicas (threads summed in shared memory;
// each replica thread runs its ops on cores / replicas OpenMP threads, so replicas split the cores rather
// than fight over them). Default devices: every GPU present, else one CPU replica.
class MirroredStrategy : public Strategy {
 public:
  explicit MirroredStrategy(std::vector<Device> devices = {}, StrategyOptions options = {});
  // `replicas` CPU replicas.
  static MirroredStrategy cpu(int replicas, StrategyOptions options = {});
};

// Several processes, one replica each, summed with MPI (started by mpirun/mpiexec or another MPI launcher; a
// process started alone is a job of one worker). Each process drives the CPU and uses cores / (processes on
// its machine) OpenMP threads. Throws Error when the build has no MPI.
class MultiWorkerMirroredStrategy : public Strategy {
 public:
  explicit MultiWorkerMirroredStrategy(StrategyOptions options = {});
};

// Whether this process was started by an MPI launcher (mpirun/mpiexec of Open MPI, or a PMI/PMIx launcher
// such as srun; read from the environment, before MPI is initialised). The command then trains with
// MultiWorkerMirroredStrategy.
bool launched_by_mpi();
// The processes of the MPI job that started this one, from the environment (OMPI_COMM_WORLD_SIZE, else
// PMI_SIZE; MPI is not initialised): what the job's replicas will number. 1 when not started by an MPI
// launcher, or when the launcher does not say (PMIx alone) or says something that is not a positive number.
int launched_world_size();
// Ends every process of the MPI job (MPI_Abort) when MPI is initialised and the job has several processes;
// returns otherwise. For a worker that cannot go on (an error on this rank), so the others do not wait for
// it.
void abort_workers(int code);

}  // namespace distribute

// The seed's keras_to_tpu_model: a copy of `cpu_model` on the strategy's devices, one per replica (weights,
// optimizer state and, across workers, the weights of worker 0). Logs the devices found ("Found N replicas:
// ...") on the chief. Throws Error naming a device that is not available.
Model to_accelerator(const Model& cpu_model, const distribute::Strategy& strategy);

// The log lines that describe a device ("cuda:0: NVIDIA H100 80GB HBM3, 79.2 GiB, 132 multiprocessors,
// compute capability 9.0" / "cpu: AMD EPYC, 2 cores, avx512_core"), as to_accelerator and `systolic info`
// print them.
std::string describe_device(Device device);

}  // namespace systolic
