// The key-value store of PJRT's multi-host mode over MPI (xla::KeyValueStore, core/xla/pjrt.h): under an MPI
// launcher, every PJRT client this process creates is given it, so that the clients of a plugin in the job's
// processes (one per TPU VM host of a pod slice, say) can find each other.
//
// Point to point only, so that no process has to be inside the same call as another: put keeps the pair and sends
// it to every other rank (MPI_Isend on a communicator of its own, the buffers kept until the sends complete); get
// looks in the pairs this process knows, receiving every pair that has arrived (MPI_Iprobe, MPI_Recv), until the key
// is there or the timeout passes. MPI runs with MPI_THREAD_FUNNELED: the plugin calls the callbacks from the thread
// that creates its client, which is the thread that initialised MPI.
#include <systolic/error.h>

#include <chrono>
#include <list>
#include <map>
#include <mutex>
#include <thread>

#include "core/xla/pjrt.h"
#include "distribute/communicator.h"

#if SYSTOLIC_HAS_MPI
#include <mpi.h>
#endif

namespace systolic::distribute {

#if SYSTOLIC_HAS_MPI

namespace {

constexpr int kTag = 7301;

class MpiKeyValueStore final : public xla::KeyValueStore {
 public:
  MpiKeyValueStore() {
    MpiWorld world = mpi_world();  // initialises MPI
    rank_ = world.rank;
    size_ = world.size;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
  }
  ~MpiKeyValueStore() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    for (auto& s : sends_) MPI_Wait(&s.request, MPI_STATUS_IGNORE);
    MPI_Comm_free(&comm_);
  }

  void put(const std::string& key, const std::string& value) override {
    std::lock_guard lock(m_);
    SYSTOLIC_CHECK(key.find('\0') == std::string::npos, "key-value store: a key with a NUL byte");
    pairs_[key] = value;
    std::string message = key + '\0' + value;
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      sends_.push_back({message, MPI_REQUEST_NULL});
      Send& s = sends_.back();
      MPI_Isend(s.bytes.data(), static_cast<int>(s.bytes.size()), MPI_CHAR, r, kTag, comm_, &s.request);
    }
    reap();
  }

  std::string get(const std::string& key, int timeout_ms) override {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max(0, timeout_ms));
    for (;;) {
      {
        std::lock_guard lock(m_);
        receive();
        reap();
        auto it = pairs_.find(key);
        if (it != pairs_.end()) return it->second;
      }
      if (std::chrono::steady_clock::now() >= deadline)
        fail("key-value store over MPI (rank {} of {}): no process put '{}' within {} ms", rank_, size_, key,
             timeout_ms);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

 private:
  struct Send {
    std::string bytes;
    MPI_Request request;
  };
  // Every pair that has arrived.
  void receive() {
    for (;;) {
      int flag = 0;
      MPI_Status status;
      MPI_Iprobe(MPI_ANY_SOURCE, kTag, comm_, &flag, &status);
      if (!flag) return;
      int count = 0;
      MPI_Get_count(&status, MPI_CHAR, &count);
      std::string bytes(static_cast<std::size_t>(count), '\0');
      MPI_Recv(bytes.data(), count, MPI_CHAR, status.MPI_SOURCE, kTag, comm_, MPI_STATUS_IGNORE);
      auto nul = bytes.find('\0');
      SYSTOLIC_CHECK(nul != std::string::npos,
                     "key-value store over MPI: a message from rank {} without a key", status.MPI_SOURCE);
      pairs_[bytes.substr(0, nul)] = bytes.substr(nul + 1);
    }
  }
  // Frees the sends that completed.
  void reap() {
    for (auto it = sends_.begin(); it != sends_.end();) {
      int done = 0;
      MPI_Test(&it->request, &done, MPI_STATUS_IGNORE);
      it = done ? sends_.erase(it) : std::next(it);
    }
  }

  std::mutex m_;
  int rank_ = 0, size_ = 1;
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::map<std::string, std::string> pairs_;
  std::list<Send> sends_;  // a list: a pending send's buffer must not move
};

// Under an MPI launcher, the PJRT clients of this process get the MPI store.
const bool g_installed = [] {
  xla::set_key_value_store_factory([]() -> std::shared_ptr<xla::KeyValueStore> {
    if (!launched_by_mpi()) return nullptr;
    return make_mpi_key_value_store();
  });
  return true;
}();

}  // namespace

std::shared_ptr<xla::KeyValueStore> make_mpi_key_value_store() {
  return std::make_shared<MpiKeyValueStore>();
}

#else

std::shared_ptr<xla::KeyValueStore> make_mpi_key_value_store() {
  fail("a key-value store over MPI needs a build of systolic with MPI (install libopenmpi-dev and rebuild)");
}

#endif

}  // namespace systolic::distribute
