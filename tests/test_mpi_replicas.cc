// Replicas across processes: `mpirun -np 2` on this machine (tests/mpi_replica_program.cc) ends with the
// weights one process reaches with the same global batch, and a worker that dies or stops answering ends the
// run with an error within the replica timeout. Skipped visibly in builds without MPI.
#include <signal.h>
#include <sys/wait.h>
#include <systolic/systolic.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "replica_test_model.h"
#include "test_util.h"

using namespace systolic;
using namespace systolic::testing;

namespace {

#define SYSTOLIC_REQUIRE_MPI()                                                                             \
  do {                                                                                                     \
    if (!build_info().mpi)                                                                                 \
      GTEST_SKIP()                                                                                         \
          << "MPI test not run: this build of systolic has no MPI (install libopenmpi-dev and rebuild)";   \
    if (std::string(SYSTOLIC_MPIEXEC).empty()) GTEST_SKIP() << "MPI test not run: CMake found no mpiexec"; \
  } while (0)

// mpirun -np 2 of the replica program, in the background; output to `log`.
pid_t start_mpirun(const std::string& mode, const std::string& dir, const std::string& log,
                   double timeout_s) {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);  // test machines and containers often run as root
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    ::setenv("SYSTOLIC_REPLICA_TIMEOUT", std::to_string(timeout_s).c_str(), 1);
    std::string cmd = std::string("exec ") + SYSTOLIC_MPIEXEC +
                      " --allow-run-as-root --oversubscribe -np 2 " + SYSTOLIC_MPI_REPLICA_PROGRAM + " " +
                      mode + " " + dir + " > " + log + " 2>&1";
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

// Waits up to `limit` seconds for the process; its exit status, or -1 (then it is killed) when it did not
// end.
int wait_for(pid_t pid, double limit) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit);
  for (;;) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid)
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

bool wait_for_file(const std::string& path, double limit) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit);
  while (!std::filesystem::exists(path))
    if (std::chrono::steady_clock::now() > deadline)
      return false;
    else
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return true;
}

std::vector<double> read_numbers(const std::string& path) {
  std::ifstream in(path);
  std::vector<double> v;
  for (double x; in >> x;) v.push_back(x);
  return v;
}

// Kills the rank 1 process with `signal` once both ranks train; returns (exit status, seconds until mpirun
// ended).
std::pair<int, double> fault(int signal, const TempDir& dir, double timeout_s, std::string& log) {
  pid_t mpirun = start_mpirun("forever", dir.str(), dir.file("log.txt"), timeout_s);
  bool started = wait_for_file(dir.file("started.0"), 60) && wait_for_file(dir.file("started.1"), 60);
  pid_t rank1 = static_cast<pid_t>(read_numbers(dir.file("pid.1")).at(0));
  EXPECT_TRUE(started) << read_text(dir.file("log.txt"));
  ::kill(rank1, signal);
  auto t0 = std::chrono::steady_clock::now();
  int status = wait_for(mpirun, 60);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ::kill(rank1, SIGKILL);  // a stopped rank may outlive the job; never leave it behind
  log = read_text(dir.file("log.txt"));
  return {status, took};
}

// mpirun -np 2 of the replica program in `mode`, waited for up to `limit_s`: its exit status and its log (to print
// on failure).
struct MpiRun {
  int status;
  std::string log;
};
MpiRun run_mpirun(const std::string& mode, TempDir& dir, double limit_s) {
  pid_t mpirun = start_mpirun(mode, dir.str(), dir.file("log.txt"), 30);
  int status = wait_for(mpirun, limit_s);
  return {status, read_text(dir.file("log.txt"))};
}

}  // namespace

TEST(MpiReplicas, TwoProcessesEndWithTheWeightsOfOne) {
  SYSTOLIC_REQUIRE_MPI();
  TempDir dir;
  auto [status, log] = run_mpirun("train", dir, 120);
  ASSERT_EQ(status, 0) << log;
  EXPECT_NE(log.find("Found 2 replicas: cpu (worker 0), cpu (worker 1)"), std::string::npos) << log;
  EXPECT_NE(log.find("Num workers: 2"), std::string::npos) << log;
  auto two = read_numbers(dir.file("weights.txt")), scores2 = read_numbers(dir.file("scores.txt"));

  // The same model, data and global batch in this process, one replica.
  Model one = replica_test_model(false);
  auto d = replica_test_data(96);
  History h = one.fit(d.x, d.y, {.batch_size = 32, .epochs = 2, .verbose = 0});
  auto weights = all_weights(one);
  auto scores = one.evaluate(d.x, d.y, {.batch_size = 32, .verbose = 0});
  ASSERT_EQ(two.size(), weights.size()) << log;
  EXPECT_LT(normalised_max_error(Tensor::from_vector(two, {std::int64_t(two.size())}),
                                 Tensor::from_vector(weights, {std::int64_t(weights.size())})),
            1e-5);
  ASSERT_EQ(scores2.size(), 4u);
  EXPECT_NEAR(scores2[0], h["loss"][0], 1e-5);
  EXPECT_NEAR(scores2[1], h["loss"][1], 1e-5);
  EXPECT_NEAR(scores2[2], scores[0], 1e-5);
  EXPECT_NEAR(scores2[3], scores[1], 1e-9);
}

TEST(MpiReplicas, AKilledWorkerEndsTheRunWithinTheTimeout) {
  SYSTOLIC_REQUIRE_MPI();
  TempDir dir;
  std::string log;
  auto [status, took] = fault(SIGKILL, dir, 5, log);
  EXPECT_NE(status, 0) << log;
  EXPECT_NE(status, -1) << "mpirun did not end within 60 s after a worker was killed\n" << log;
  // The launcher notices a dead rank at once; where it does not, the survivors' watchdog ends the job after 5
  // s.
  EXPECT_LT(took, 5 + 10.0) << log;
}

TEST(MpiReplicas, AStoppedWorkerTripsTheWatchdog) {
  SYSTOLIC_REQUIRE_MPI();
  TempDir dir;
  std::string log;
  // SIGSTOP: the process lives but does not answer, which the launcher cannot see: only the watchdog ends the
  // run.
  auto [status, took] = fault(SIGSTOP, dir, 5, log);
  EXPECT_NE(status, 0) << log;
  EXPECT_NE(status, -1) << "mpirun did not end within 60 s after a worker stopped\n" << log;
  EXPECT_NE(log.find("did not complete within 5 s (SYSTOLIC_REPLICA_TIMEOUT)"), std::string::npos) << log;
  EXPECT_NE(log.find("worker 0 of 2"), std::string::npos) << log;
  EXPECT_GE(took, 4.0) << log;
  EXPECT_LT(took, 5 + 10.0) << log;
}

TEST(MpiReplicas, CallbacksDecideAlikeAndOnlyTheChiefWrites) {
  // Both processes run every kind of callback (fit_with_callbacks), each pointing them at its own folder: both
  // decide alike (the same stop, the same rates, the same saves, from the same globally summed logs), only the
  // chief's folder gets files, and what they decide is what one process decides.
  SYSTOLIC_REQUIRE_MPI();
  TempDir dir;
  auto [status, log] = run_mpirun("callbacks", dir, 120);
  ASSERT_EQ(status, 0) << log;
  std::string decisions = read_text(dir.file("decisions.0"));
  EXPECT_EQ(read_text(dir.file("decisions.1")), decisions);
  EXPECT_EQ(read_text(dir.file("values.1")), read_text(dir.file("values.0")));  // bit for bit
  EXPECT_NE(decisions.find("stopped_epoch 2 best_epoch 0"), std::string::npos) << decisions;

  namespace fs = std::filesystem;
  fs::path chief = dir.path() / "rank0";
  for (auto f : {"log.csv", "tb/train", "tb/validation", "backup/latest.weights.h5", "ckpt/01-02.keras"})
    EXPECT_TRUE(fs::exists(chief / f)) << f;
  ASSERT_TRUE(fs::is_directory(dir.path() / "rank1"));
  EXPECT_TRUE(fs::is_empty(dir.path() / "rank1")) << "a worker wrote files";

  // One process, one replica: the same decisions, the same values to rounding.
  TempDir one_dir;
  Model one = replica_test_model(false);
  CallbackRun run = fit_with_callbacks(one, one_dir.str());
  std::string one_decisions;
  for (auto& line : run.decisions) one_decisions += line + "\n";
  EXPECT_EQ(one_decisions, decisions);
  auto values = read_numbers(dir.file("values.0"));
  ASSERT_EQ(values.size(), run.values.size());
  for (std::size_t i = 0; i < values.size(); ++i) EXPECT_NEAR(values[i], run.values[i], 1e-5) << i;
}

// PJRT's multi-host mode needs a key-value store shared by the job's processes (PJRT_Client_Create's kv callbacks).
// Under mpirun each process's PJRT clients get one over MPI; the CPU plugin has no multi-host mode to use it, so the
// store is tested alone, through the same C callbacks a plugin calls: each of 2 ranks puts a 200 kB value and gets
// both, and a key nobody puts times out with an error naming it.
TEST(MpiKeyValueStore, TwoProcessesShareValuesThroughThePjrtCallbacks) {
  SYSTOLIC_REQUIRE_MPI();
  TempDir dir;
  auto [status, log] = run_mpirun("kv", dir, 60);
  ASSERT_EQ(status, 0) << log;
  for (int rank = 0; rank < 2; ++rank) {
    std::string got = read_text(dir.file("kv." + std::to_string(rank)));
    EXPECT_NE(got.find("node/0 ok\nnode/1 ok\n"), std::string::npos) << "rank " << rank << ": " << got;
    EXPECT_NE(got.find("timeout: key-value store over MPI (rank " + std::to_string(rank) +
                       " of 2): no process put 'nobody/puts/this' within 200 ms"),
              std::string::npos)
        << "rank " << rank << ": " << got;
  }
}
