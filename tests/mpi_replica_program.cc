// The program test_mpi_replicas.cc starts under mpirun (not a test itself).
//
//   mpi_replica_program train OUTDIR    trains the replica test model (replica_test_model.h) for 2 epochs
//                                       under an MPI launcher with MultiWorkerMirroredStrategy. The chief
//                                       writes OUTDIR/weights.txt (every weight, one per line) and
//                                       OUTDIR/scores.txt.
//   mpi_replica_program forever OUTDIR  writes OUTDIR/pid.RANK, then trains step after step until killed,
//                                       writing OUTDIR/started.RANK after its first step (for the fault
//                                       tests).
//   mpi_replica_program callbacks OUTDIR  trains with every kind of callback (fit_with_callbacks in
//                                       replica_test_model.h), each rank pointing them at its own empty
//                                       OUTDIR/rankRANK (so the test sees which writes), and writes
//                                       OUTDIR/decisions.RANK and OUTDIR/values.RANK (what it decided and
//                                       computed).
//   mpi_replica_program kv OUTDIR       the key-value store of PJRT's multi-host mode over MPI, through the C
//                                       callbacks a plugin calls: rank r puts "node/r" (a large value, so that MPI
//                                       sends it by rendezvous), gets every rank's, and a key nobody puts times out;
//                                       writes OUTDIR/kv.RANK (what it got, and the timeout's error).
#include <systolic/systolic.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/xla/pjrt.h"
#include "distribute/communicator.h"
#include "replica_test_model.h"

using namespace systolic;

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s train|forever|callbacks|kv OUTDIR\n", argv[0]);
    return 2;
  }
  std::string mode = argv[1], dir = argv[2];
  set_log_stream(stderr);
  try {
    if (mode == "kv") {
      auto world = distribute::mpi_world();
      auto store = distribute::make_mpi_key_value_store();
      auto value_of = [](int r) {
        return std::string(200000, static_cast<char>('a' + r)) + std::to_string(r);
      };
      xla::key_value_put_through_pjrt(*store, "node/" + std::to_string(world.rank), value_of(world.rank));
      std::ofstream out(dir + "/kv." + std::to_string(world.rank));
      for (int r = 0; r < world.size; ++r) {
        std::string got = xla::key_value_get_through_pjrt(*store, "node/" + std::to_string(r), 20000);
        out << "node/" << r << (got == value_of(r) ? " ok" : " WRONG") << "\n";
      }
      try {
        xla::key_value_get_through_pjrt(*store, "nobody/puts/this", 200);
        out << "no timeout\n";
      } catch (const Error& e) {
        out << "timeout: " << e.what() << "\n";
      }
      return 0;
    }
    Model cpu = testing::replica_test_model(false);
    auto d = testing::replica_test_data(96);
    int rank = 0;
    Model m = cpu;
    if (distribute::launched_by_mpi()) {
      distribute::MultiWorkerMirroredStrategy strategy;
      rank = strategy.worker_index();
      m = to_accelerator(cpu, strategy);
    }
    if (mode == "train") {
      History h = m.fit(d.x, d.y, {.batch_size = 32, .epochs = 2, .verbose = rank == 0 ? 2 : 0});
      auto scores = m.evaluate(d.x, d.y, {.batch_size = 32, .verbose = 0});
      if (rank == 0) {
        std::ofstream w(dir + "/weights.txt"), s(dir + "/scores.txt");
        w.precision(17);
        s.precision(17);
        for (double v : testing::all_weights(m)) w << v << "\n";
        for (double v : h["loss"]) s << v << "\n";
        for (double v : scores) s << v << "\n";
      }
      return 0;
    }
    if (mode == "callbacks") {
      std::string mine = dir + "/rank" + std::to_string(rank);
      std::filesystem::create_directories(mine);  // empty: the callbacks' files go there
      auto run = testing::fit_with_callbacks(m, mine);
      std::ofstream decisions(dir + "/decisions." + std::to_string(rank)),
          values(dir + "/values." + std::to_string(rank));
      values.precision(17);
      for (auto& line : run.decisions) decisions << line << "\n";
      for (double v : run.values) values << v << "\n";
      return 0;
    }
    if (mode == "forever") {
      std::ofstream(dir + "/pid." + std::to_string(rank)) << ::getpid() << "\n";
      Tensor x = d.x.slice(0, 32), y = d.y.slice(0, 32);
      for (long step = 0;; ++step) {
        m.train_on_batch(x, y);
        if (step == 0) std::ofstream(dir + "/started." + std::to_string(rank)) << "1\n";
      }
    }
    std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mpi_replica_program: error: %s\n", e.what());
    distribute::abort_workers(1);
    return 1;
  }
}
