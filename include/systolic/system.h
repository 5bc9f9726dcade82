// What this machine and this build offer: for logs, `systolic info` and benchmark records.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace systolic {

struct CpuInfo {
  std::string model;           // /proc/cpuinfo's model name
  int cores = 0;               // logical CPUs available to this process
  int threads = 0;             // OpenMP threads ops use
  std::string isa;             // the instruction set oneDNN's kernels use here, e.g. "avx512_core"
  std::int64_t memory_bytes = 0;
};
CpuInfo cpu_info();

struct BuildInfo {
  std::string version;
  std::string onednn_version;
  bool cuda = false;
  bool mpi = false;
};
BuildInfo build_info();

}  // namespace systolic
