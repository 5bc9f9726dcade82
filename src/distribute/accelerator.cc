// to_accelerator: the CPU model copied through its Keras config, weights and compile settings, then moved.
#include <systolic/distribute.h>
#include <systolic/log.h>
#include <systolic/system.h>

#include "io/keras_io.h"

#include <fmt/format.h>

namespace systolic {

namespace distribute {

Strategy::Strategy(std::string name, std::vector<Device> devices) : name_(std::move(name)), devices_(std::move(devices)) {
  SYSTOLIC_CHECK(!devices_.empty(), "strategy {}: no devices", name_);
}

Strategy OneDeviceStrategy(Device device) { return Strategy("OneDeviceStrategy", {device}); }

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

Model to_accelerator(const Model& cpu_model, const distribute::Strategy& strategy) {
  SYSTOLIC_CHECK(strategy.num_replicas_in_sync() == 1,
                 "to_accelerator: strategy {} has {} replicas; this build trains one replica per model "
                 "(data-parallel replicas are not implemented yet)",
                 strategy.name(), strategy.num_replicas_in_sync());
  Device device = strategy.devices()[0];
  SYSTOLIC_CHECK(device_available(device), "to_accelerator: device {} is not available{}", device.str(),
                 build_info().cuda ? " (no such GPU found)" : " (this build of systolic has no CUDA support)");
  auto gpus = gpu_info();
  log_line(fmt::format("Found {} GPU{}{}", gpus.size(), gpus.size() == 1 ? "" : "s", gpus.empty() ? "" : ":"));
  for (auto& g : gpus) log_line("  " + describe_device(Device::cuda(g.index)));
  log_line(fmt::format("Host: {}", describe_device(Device::cpu())));
  log_line(fmt::format("Strategy {}: {} replica ({}), 1 worker; batches are not split", strategy.name(),
                       strategy.num_replicas_in_sync(), device.str()));

  Model& src = const_cast<Model&>(cpu_model);
  Model copy = keras_io::model_from_config(keras_io::model_config(src), "to_accelerator");
  auto from = src.layers(), to = copy.layers();
  SYSTOLIC_CHECK(from.size() == to.size(), "to_accelerator: the copy of model '{}' has {} layers, not {}", src.name(),
                 to.size(), from.size());
  for (std::size_t i = 0; i < from.size(); ++i) {
    auto &wf = from[i]->weights(), &wt = to[i]->weights();
    SYSTOLIC_CHECK(wf.size() == wt.size(), "to_accelerator: layer '{}' copied with other weights", from[i]->name());
    for (std::size_t j = 0; j < wf.size(); ++j) wt[j].value.copy_from(wf[j].value);
  }
  if (src.compiled()) {
    auto names = src.metrics_names();
    copy.compile(src.optimizer(), src.loss(), std::vector<std::string>(names.begin() + 1, names.end()));
    auto& opt = copy.optimizer();
    for (auto& [name, slot] : src.optimizer().slots()) opt.slot(name) = slot.clone();  // not shared with the CPU model
    opt.set_iterations(src.optimizer().iterations());
  }
  copy.to(device);
  return copy;
}

}  // namespace systolic
