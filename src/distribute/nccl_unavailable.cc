// Builds without NCCL (no CUDA, or CUDA without NCCL): GPU replicas of one process cannot be summed.
#if !SYSTOLIC_HAS_NCCL

#include <systolic/error.h>

#include "distribute/communicator.h"

namespace systolic::distribute {

bool nccl_compiled() {
  return false;
}

std::unique_ptr<Communicator> make_nccl_communicator(const std::vector<int>& gpus, double) {
#if SYSTOLIC_HAS_CUDA
  fail("{} GPU replicas need NCCL: this CUDA build of systolic did not find it (nccl.h, libnccl)",
       gpus.size());
#else
  fail("{} GPU replicas need NCCL: this build of systolic has no CUDA support", gpus.size());
#endif
}

}  // namespace systolic::distribute

#endif
