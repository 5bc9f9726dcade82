// MPI: one replica per process. Launch detection, initialisation (once, finalised at exit), and the
// all-reduce.
//
// A plain MPI_Allreduce waits forever when a peer has died without the launcher noticing, or has stopped
// answering (stopped, swapping, a hung GPU). So every collective is started non-blocking (MPI_Iallreduce) and
// polled with MPI_Test against a deadline; past it, the process says which collective timed out and calls
// MPI_Abort, which ends every process of the job (no rank can continue alone: the replicas would diverge).
#include <systolic/error.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "distribute/communicator.h"

#if SYSTOLIC_HAS_MPI
#include <mpi.h>
#endif

namespace systolic::distribute {

bool launched_by_mpi() {
  // Open MPI's mpirun, MPICH/Hydra and Slurm (PMI), PMIx launchers.
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(v)) return true;
  return false;
}

int launched_world_size() {
  if (!launched_by_mpi()) return 1;
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
    if (const char* text = std::getenv(v)) {
      int n = std::atoi(text);
      if (n > 0) return n;
    }
  return 1;
}

#if SYSTOLIC_HAS_MPI

bool mpi_compiled() {
  return true;
}

namespace {

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

void ensure_initialized() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return;
  // Only the thread that drives the replica calls MPI.
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  // Errors come back as codes (and become systolic::Error) instead of aborting inside MPI.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  std::atexit(finalize_at_exit);
}

void check(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  fail("MPI: {} failed: {}", call, std::string(text, static_cast<std::size_t>(len)));
}

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(double timeout_s) : timeout_s_(timeout_s) {
    ensure_initialized();
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  std::string name() const override { return "MPI"; }
  int size() const override { return size_; }
  int local_size() const override { return 1; }

  void all_reduce_sum(Tensor& t, int) override {
    SYSTOLIC_CHECK(t.device().is_cpu(), "MPI all-reduce: the tensor is on {}; MPI sums host memory",
                   t.device().str());
    if (t.dtype() == DType::float32)
      reduce(t.raw_data(), t.numel(), MPI_FLOAT, "gradient all-reduce");
    else if (t.dtype() == DType::float64)
      reduce(t.raw_data(), t.numel(), MPI_DOUBLE, "all-reduce");
    else
      fail("MPI all-reduce: {} tensors are not supported (float32, float64)", dtype_name(t.dtype()));
  }
  void all_reduce_sum(std::vector<double>& v, int) override {
    reduce(v.data(), static_cast<std::int64_t>(v.size()), MPI_DOUBLE, "all-reduce of totals");
  }
  void abort(const std::string& why) override {
    std::fprintf(stderr, "systolic: error: worker %d of %d: %s; aborting every worker\n", rank_, size_,
                 why.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }

 private:
  void reduce(void* data, std::int64_t count, MPI_Datatype type, const char* what) {
    if (size_ == 1) return;
    SYSTOLIC_CHECK(count <= INT_MAX, "MPI all-reduce: {} values are more than one call takes ({})", count,
                   INT_MAX);
    MPI_Request request;
    check(
        MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(count), type, MPI_SUM, MPI_COMM_WORLD, &request),
        "MPI_Iallreduce");
    auto start = std::chrono::steady_clock::now();
    auto deadline = start + std::chrono::duration<double>(timeout_s_);
    for (long polls = 0;; ++polls) {
      int done = 0;
      check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (done) return;
      if (std::chrono::steady_clock::now() > deadline)
        abort(fmt::format(
            "the {} did not complete within {} s (SYSTOLIC_REPLICA_TIMEOUT): another worker died or "
            "stopped answering",
            what, timeout_s_));
      // Spin briefly (a step's all-reduce is usually done within microseconds of the last arrival), then poll
      // gently so a waiting rank leaves the CPU to the others.
      if (polls > 2000) std::this_thread::sleep_for(std::chrono::microseconds(polls > 20000 ? 1000 : 50));
    }
  }

  double timeout_s_;
  int rank_ = 0, size_ = 1;
};

}  // namespace

MpiWorld mpi_world() {
  ensure_initialized();
  MpiWorld w;
  MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &w.size);
  // The launcher's local rank/size when it gives them; else a split by shared-memory node.
  w.local_rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK", env_int("MPI_LOCALRANKID", -1));
  w.local_size = env_int("OMPI_COMM_WORLD_LOCAL_SIZE", env_int("MPI_LOCALNRANKS", -1));
  if (w.local_rank < 0 || w.local_size < 1) {
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, w.rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &w.local_rank);
    MPI_Comm_size(node, &w.local_size);
    MPI_Comm_free(&node);
  }
  return w;
}

std::unique_ptr<Communicator> make_mpi_communicator(double timeout_s) {
  return std::make_unique<MpiCommunicator>(timeout_s);
}

void abort_workers(int code) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return;
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size > 1) MPI_Abort(MPI_COMM_WORLD, code);
}

#else  // no MPI in this build

bool mpi_compiled() {
  return false;
}

MpiWorld mpi_world() {
  fail("this build of systolic has no MPI support (install Open MPI, libopenmpi-dev, and rebuild)");
}

std::unique_ptr<Communicator> make_mpi_communicator(double) {
  mpi_world();
  return nullptr;
}

void abort_workers(int) {}

#endif

}  // namespace systolic::distribute
