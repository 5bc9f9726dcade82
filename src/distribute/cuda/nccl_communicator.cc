// NCCL: GPU replicas of one process, one communicator per GPU (ncclCommInitAll), each driven by its replica's
// thread, all-reducing on that device's stream. Compiled in CUDA builds that found NCCL (SYSTOLIC_HAS_NCCL).
//
// Faults: a collective is enqueued asynchronously, so the calling thread polls the stream (cudaStreamQuery)
// and NCCL's asynchronous error state against the deadline; past it, the communicators are aborted
// (ncclCommAbort, which releases the kernels stuck waiting for a peer) and the replica raises Error.
#if SYSTOLIC_HAS_NCCL

#include <cuda_runtime.h>
#include <nccl.h>
#include <systolic/error.h>

#include <chrono>
#include <mutex>
#include <thread>

#include "core/cuda/check.h"
#include "core/cuda/runtime.h"
#include "distribute/communicator.h"

namespace systolic::distribute {

bool nccl_compiled() {
  return true;
}

namespace {

void check_nccl(ncclResult_t r, const char* call) {
  if (r != ncclSuccess && r != ncclInProgress) fail("NCCL: {} failed: {}", call, ncclGetErrorString(r));
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(const std::vector<int>& gpus, double timeout_s) : gpus_(gpus), timeout_s_(timeout_s) {
    SYSTOLIC_CHECK(!gpus.empty(), "NCCL: no GPUs given");
    comms_.resize(gpus.size());
    check_nccl(ncclCommInitAll(comms_.data(), static_cast<int>(gpus.size()), gpus.data()), "ncclCommInitAll");
  }
  ~NcclCommunicator() override {
    for (auto c : comms_)
      if (c) ncclCommDestroy(c);
  }
  std::string name() const override { return "NCCL"; }
  int size() const override { return static_cast<int>(gpus_.size()); }
  int local_size() const override { return size(); }

  void all_reduce_sum(Tensor& t, int local) override {
    int gpu = gpus_.at(static_cast<std::size_t>(local));
    SYSTOLIC_CHECK(t.device() == Device::cuda(gpu),
                   "NCCL all-reduce: replica {} holds its tensor on {}, not cuda:{}", local, t.device().str(),
                   gpu);
    ncclDataType_t type = t.dtype() == DType::float32 ? ncclFloat32
                          : t.dtype() == DType::float64
                              ? ncclFloat64
                              : throw Error("NCCL all-reduce: float32 or float64 tensors only");
    cuda::set_device(gpu);
    auto stream = static_cast<cudaStream_t>(cuda::stream(gpu));
    check_nccl(ncclAllReduce(t.raw_data(), t.raw_data(), static_cast<std::size_t>(t.numel()), type, ncclSum,
                             comms_[local], stream),
               "ncclAllReduce");
    wait(local, stream);
  }

  void all_reduce_sum(std::vector<double>& v, int local) override {
    Tensor d =
        Tensor::from_vector(v, {static_cast<std::int64_t>(v.size())}).to(Device::cuda(gpus_.at(local)));
    all_reduce_sum(d, local);
    v = d.to_doubles();
  }

  void abort(const std::string& why) override {
    std::lock_guard l(m_);
    if (aborted_) return;
    aborted_ = true;
    reason_ = why;
    for (auto c : comms_) ncclCommAbort(c);
  }

 private:
  // Polls until the stream has finished the collective; aborts every communicator past the deadline.
  void wait(int local, cudaStream_t stream) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s_);
    for (;;) {
      cudaError_t q = cudaStreamQuery(stream);
      if (q == cudaSuccess) return;
      if (q != cudaErrorNotReady) SYSTOLIC_CUDA_CHECK(q);
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comms_[local], &async);
      {
        std::lock_guard l(m_);
        if (aborted_) fail("{}", reason_);
      }
      if (async != ncclSuccess && async != ncclInProgress)
        abort(fmt::format("NCCL: replica {} failed in the all-reduce: {}", local, ncclGetErrorString(async)));
      else if (std::chrono::steady_clock::now() > deadline)
        abort(fmt::format(
            "replicas: the NCCL all-reduce did not complete within {} s (SYSTOLIC_REPLICA_TIMEOUT): a "
            "replica failed or stopped answering",
            timeout_s_));
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  std::vector<int> gpus_;
  double timeout_s_;
  std::vector<ncclComm_t> comms_;
  std::mutex m_;
  bool aborted_ = false;
  std::string reason_;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(const std::vector<int>& gpus, double timeout_s) {
  return std::make_unique<NcclCommunicator>(gpus, timeout_s);
}

}  // namespace systolic::distribute

#endif  // SYSTOLIC_HAS_NCCL
