// What this machine and this build offer: for logs, `systolic info` and benchmark records.
#pragma once

#include <systolic/device.h>

#include <cstdint>
#include <string>
#include <vector>

namespace systolic {

struct CpuInfo {
  std::string model;  // /proc/cpuinfo's model name
  int cores = 0;      // logical CPUs available to this process
  int threads = 0;    // OpenMP threads ops use
  std::string isa;    // the instruction set oneDNN's kernels use here, e.g. "avx512_core"
  // bfloat16 data (policy mixed_bfloat16) runs on native bfloat16 kernels (AVX-512 BF16, AMX); else it is widened
  // to float32 around the float32 kernels, and runs slower than float32 (docs/cpu.md).
  bool native_bfloat16 = false;
  std::int64_t memory_bytes = 0;
};
CpuInfo cpu_info();

struct BuildInfo {
  std::string version;
  std::string onednn_version;
  bool cuda = false;           // the CUDA backend is compiled in
  std::string cuda_runtime;    // "13.0" (CUDA builds)
  std::string cudnn_version;   // "9.13.0" (CUDA builds)
  std::string cublas_version;  // (CUDA builds)
  bool mpi = false;
};
BuildInfo build_info();

// The GPUs this process can use (empty in a build without CUDA or on a machine without a GPU).
struct GpuInfo {
  int index = 0;
  std::string name;  // "NVIDIA H100 80GB HBM3"
  std::int64_t memory_bytes = 0;
  int multiprocessors = 0;
  std::string compute_capability;  // "9.0"
  std::string driver_version;      // the CUDA version the driver supports, "13.0"
};
std::vector<GpuInfo> gpu_info();

// The PJRT plugin that serves an XLA platform (xla:cpu, xla:cuda, xla:tpu; docs/xla.md): loaded at first use from
// $SYSTOLIC_PJRT_PLUGIN or the known install locations. `available` false: `why` says what is missing or wrong.
struct XlaPluginInfo {
  bool available = false;
  std::string why;
  std::string path;              // the shared library
  std::string platform_version;  // the plugin's own ("PJRT C API", a libtpu build)
  int api_major = 0, api_minor = 0;
  std::vector<std::string> devices;  // one line per addressable device: "xla:cpu:0 (cpu)"
};
XlaPluginInfo xla_plugin_info(XlaPlatform platform);

// Deterministic ops: the same inputs give bit-identical results from run to run, and a step replayed from a CUDA
// graph gives the eager step's bits (TensorFlow's tf.config.experimental.enable_op_determinism, PyTorch's
// torch.backends.cudnn.deterministic). Off by default: cuDNN may then pick its fastest convolution algorithms,
// some of which add partial sums with atomics in a varying order. On: only algorithms cuDNN reports as
// deterministic. Every other op of systolic is deterministic either way (fixed-order reductions). The
// environment variable SYSTOLIC_DETERMINISTIC_OPS=1 (or TensorFlow's TF_DETERMINISTIC_OPS=1) turns it on at start.
// A change applies to convolutions whose algorithms are chosen afterwards (each shape's choice is cached).
void enable_op_determinism(bool enabled = true);
bool op_determinism_enabled();

// Waits until every op queued on the device has finished (a no-op on the CPU). Errors raised inside GPU kernels
// surface here (or at the next copy to the host).
void synchronize(Device device);

}  // namespace systolic
