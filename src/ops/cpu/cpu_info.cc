// CPU and build facts for `systolic info` and logs.
#include <omp.h>
#include <sys/sysinfo.h>
#include <systolic/system.h>
#include <unistd.h>

#include <fstream>

#include "ops/cpu/onednn.h"

namespace systolic {

CpuInfo cpu_info() {
  CpuInfo info;
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("model name", 0) == 0) {
      auto at = line.find(':');
      if (at != std::string::npos) info.model = line.substr(line.find_first_not_of(' ', at + 1));
      break;
    }
  if (info.model.empty()) info.model = "unknown";
  info.cores = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  info.threads = omp_get_max_threads();
  info.isa = ops::onednn::cpu_isa();
  info.native_bfloat16 = ops::onednn::runs_bf16();
  struct sysinfo s {};
  if (sysinfo(&s) == 0) info.memory_bytes = static_cast<std::int64_t>(s.totalram) * s.mem_unit;
  return info;
}

#if SYSTOLIC_HAS_CUDA
namespace ops::cuda {
void fill_build_info(BuildInfo& b);  // ops/cuda/context.cc
}
#endif

BuildInfo build_info() {
  BuildInfo b;
  b.version = SYSTOLIC_VERSION;
  b.onednn_version = ops::onednn::version();
#if SYSTOLIC_HAS_MPI
  b.mpi = true;
#endif
#if SYSTOLIC_HAS_CUDA
  ops::cuda::fill_build_info(b);
#endif
  return b;
}

}  // namespace systolic
