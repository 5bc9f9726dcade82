// The strategies (OneDeviceStrategy, MirroredStrategy, MultiWorkerMirroredStrategy): which devices and workers
// replicate a model, and how (include/systolic/distribute.h); describe_device for logs. to_accelerator, which
// applies a strategy to a model, is the model's (src/model/accelerator.cc).
#include <fmt/format.h>
#include <omp.h>
#include <systolic/distribute.h>
#include <systolic/log.h>
#include <systolic/random.h>
#include <systolic/system.h>

#include "distribute/communicator.h"

namespace systolic {

namespace distribute {

Strategy::Strategy(std::string name, std::vector<Device> devices, StrategyOptions options)
    : name_(std::move(name)), devices_(std::move(devices)), options_(options) {
  SYSTOLIC_CHECK(!devices_.empty(), "strategy {}: no devices", name_);
  SYSTOLIC_CHECK(options_.timeout_seconds >= 0, "strategy {}: timeout_seconds must not be negative, got {}",
                 name_, options_.timeout_seconds);
}

Strategy OneDeviceStrategy(Device device) {
  return Strategy("OneDeviceStrategy", {device});
}

namespace {
std::vector<Device> all_gpus_else_cpu() {
  std::vector<Device> d;
  for (auto& g : gpu_info()) d.push_back(Device::cuda(g.index));
  if (d.empty()) d.push_back(Device::cpu());
  return d;
}
}  // namespace

MirroredStrategy::MirroredStrategy(std::vector<Device> devices, StrategyOptions options)
    : Strategy("MirroredStrategy", devices.empty() ? all_gpus_else_cpu() : std::move(devices), options) {
  bool cpu = devices_[0].is_cpu();
  for (auto& d : devices_) {
    SYSTOLIC_CHECK(d.is_cpu() == cpu,
                   "MirroredStrategy: replicas on {} and {}: mix CPU and GPU replicas is not "
                   "supported",
                   devices_[0].str(), d.str());
    if (!cpu)
      for (auto& e : devices_)
        SYSTOLIC_CHECK(&e == &d || !(e == d),
                       "MirroredStrategy: GPU {} is listed twice (one replica per GPU)", d.str());
  }
}

MirroredStrategy MirroredStrategy::cpu(int replicas, StrategyOptions options) {
  SYSTOLIC_CHECK(replicas >= 1, "MirroredStrategy::cpu: replicas must be at least 1, got {}", replicas);
  return MirroredStrategy(std::vector<Device>(static_cast<std::size_t>(replicas), Device::cpu()), options);
}

MultiWorkerMirroredStrategy::MultiWorkerMirroredStrategy(StrategyOptions options)
    : Strategy("MultiWorkerMirroredStrategy", {Device::cpu()}, options) {
  SYSTOLIC_CHECK(mpi_compiled(),
                 "MultiWorkerMirroredStrategy: this build of systolic has no MPI support (install "
                 "Open MPI, libopenmpi-dev, and rebuild)");
  MpiWorld w = mpi_world();
  num_workers_ = w.size;
  worker_index_ = w.rank;
  // The processes on this machine share its cores: each takes its part, so K processes on K cores do not run
  // K OpenMP threads each.
  omp_set_num_threads(std::max(1, omp_get_max_threads() / std::max(1, w.local_size)));
}

}  // namespace distribute

std::string describe_device(Device device) {
  if (device.is_cpu()) {
    CpuInfo c = cpu_info();
    return fmt::format("cpu: {}, {} cores, {}, {:.1f} GiB", c.model, c.cores, c.isa,
                       double(c.memory_bytes) / double(1ull << 30));
  }
  for (auto& g : gpu_info())
    if (g.index == device.index())
      return fmt::format("{}: {}, {:.1f} GiB, {} multiprocessors, compute capability {}, driver for CUDA {}",
                         device.str(), g.name, double(g.memory_bytes) / double(1ull << 30), g.multiprocessors,
                         g.compute_capability, g.driver_version);
  return fmt::format("{}: not available", device.str());
}

}  // namespace systolic
