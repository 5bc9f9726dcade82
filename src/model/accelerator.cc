// to_accelerator (the seed's keras_to_tpu_model): the CPU model copied through its Keras config, weights and
// compile settings, then moved; under a strategy of several replicas, one such copy per replica, tied together
// by a ReplicaGroup (src/distribute/replica_group.h) that drives them through their Replica interface.
#include <fmt/format.h>
#include <omp.h>
#include <systolic/distribute.h>
#include <systolic/log.h>
#include <systolic/random.h>
#include <systolic/system.h>

#include "distribute/communicator.h"
#include "distribute/replica_group.h"
#include "model/model_config.h"
#include "model/model_state.h"
#include "model/saving_access.h"

namespace systolic {

namespace {

// A copy of `src` (layers, weights, compile settings, optimizer state) on `device`.
Model copy_model(const Model& cpu_model, Device device) {
  Model& src = const_cast<Model&>(cpu_model);
  // Building the copy runs the layers' initialisers (then overwritten): put the global generator back, so fit
  // shuffles as it would have without the copy (with a strategy or without, the same seed gives the same
  // batches).
  Generator saved = global_generator();
  Model copy = keras_config::model_from_config(keras_config::model_config(src), "to_accelerator");
  global_generator() = saved;
  auto from = src.layers(), to = copy.layers();
  SYSTOLIC_CHECK(from.size() == to.size(), "to_accelerator: the copy of model '{}' has {} layers, not {}",
                 src.name(), to.size(), from.size());
  for (std::size_t i = 0; i < from.size(); ++i) {
    auto wf = all_weights(*from[i]), wt = all_weights(*to[i]);  // a nested model's too
    SYSTOLIC_CHECK(wf.size() == wt.size(), "to_accelerator: layer '{}' copied with other weights",
                   from[i]->name());
    for (std::size_t j = 0; j < wf.size(); ++j) wt[j]->value.copy_from(wf[j]->value);
  }
  if (src.compiled()) {
    copy.compile(src.optimizer(), saving_access::compile_settings(src));
    auto& opt = copy.optimizer();
    for (auto& [name, slot] : src.optimizer().slots())
      opt.slot(name) = slot.clone();  // not shared with the CPU model
    opt.set_iterations(src.optimizer().iterations());
  }
  copy.to(device);
  return copy;
}

void log_hardware(const distribute::Strategy& strategy, int threads_per_replica) {
  auto gpus = gpu_info();
  log_line(
      fmt::format("Found {} GPU{}{}", gpus.size(), gpus.size() == 1 ? "" : "s", gpus.empty() ? "" : ":"));
  for (auto& g : gpus) log_line("  " + describe_device(Device::cuda(g.index)));
  log_line(fmt::format("Host: {}", describe_device(Device::cpu())));
  const auto& devices = strategy.devices();
  int replicas = strategy.num_replicas_in_sync(), workers = strategy.num_workers();
  if (replicas == 1) {
    log_line(fmt::format("Strategy {}: 1 replica ({}), 1 worker; batches are not split", strategy.name(),
                         devices[0].str()));
    return;
  }
  // As the seed's TPU log: the replicas with their devices, then the worker counts.
  std::string list;
  for (int w = 0; w < workers; ++w)
    for (std::size_t i = 0; i < devices.size(); ++i)
      list += fmt::format("{}{}{}", list.empty() ? "" : ", ", devices[i].str(),
                          workers > 1 ? fmt::format(" (worker {})", w) : "");
  log_line(fmt::format("Found {} replicas: {}", replicas, list));
  log_line(fmt::format("  Num replicas: {}", replicas));
  log_line(fmt::format("  Num workers: {}", workers));
  log_line(fmt::format("  Num replicas per worker: {}", devices.size()));
  if (devices[0].is_cpu()) log_line(fmt::format("  OpenMP threads per replica: {}", threads_per_replica));
  log_line(
      fmt::format("Strategy {}: global batches are split into {} equal shards; gradients are summed by {}{}",
                  strategy.name(), replicas,
                  workers > 1           ? "MPI"
                  : devices[0].is_cpu() ? "a shared-memory all-reduce"
                  : devices[0].is_xla() ? "an all_reduce inside one XLA program over the replicas"
                                        : "NCCL",
                  strategy.options().sync_batch_norm ? "; batch norm statistics are synchronised"
                                                     : "; batch norm statistics are per replica"));
}

}  // namespace

Model to_accelerator(const Model& cpu_model, const distribute::Strategy& strategy) {
  const auto& devices = strategy.devices();
  for (auto& device : devices)
    SYSTOLIC_CHECK(
        device_available(device), "to_accelerator: device {} is not available{}", device.str(),
        build_info().cuda ? " (no such GPU found)" : " (this build of systolic has no CUDA support)");
  int local = static_cast<int>(devices.size());
  // CPU replicas of one process split its OpenMP threads.
  int threads = std::max(1, omp_get_max_threads() / local);
  if (strategy.is_chief()) log_hardware(strategy, threads);

  Model copy = copy_model(cpu_model, devices[0]);
  if (strategy.num_replicas_in_sync() == 1) return copy;  // one replica: the plain model, nothing to sum

  SYSTOLIC_CHECK(!strategy.options().sync_batch_norm || devices[0].is_cpu() || devices[0].is_xla(),
                 "to_accelerator: synchronised batch norm runs on CPU and XLA replicas (strategy {} has {})",
                 strategy.name(), devices[0].str());
  if (devices[0].is_xla()) {
    // One SPMD program runs replica r on the plugin's device r.
    for (int i = 0; i < local; ++i)
      SYSTOLIC_CHECK(
          devices[static_cast<std::size_t>(i)] == Device::xla(devices[0].xla_platform(), i),
          "to_accelerator: XLA replicas run on the plugin's devices 0..{} in order (strategy {} has {} "
          "as replica {})",
          local - 1, strategy.name(), devices[static_cast<std::size_t>(i)].str(), i);
    SYSTOLIC_CHECK(
        strategy.num_workers() == 1,
        "to_accelerator: XLA replicas across workers are not supported yet: their clients share a key-value "
        "store over MPI, but one SPMD program over several hosts is not built (strategy {} has {} workers; "
        "docs/xla.md)",
        strategy.name(), strategy.num_workers());
  }
  double timeout = strategy.options().timeout_seconds > 0 ? strategy.options().timeout_seconds
                                                          : distribute::replica_timeout_seconds();
  std::unique_ptr<distribute::Communicator> comm;
  if (strategy.num_workers() > 1) {
    SYSTOLIC_CHECK(
        local == 1 && devices[0].is_cpu(),
        "to_accelerator: across workers each process drives one CPU replica (strategy {} has {} on {})",
        strategy.name(), local, devices[0].str());
    comm = distribute::make_mpi_communicator(timeout);
  } else if (devices[0].is_cpu()) {
    comm = distribute::make_thread_communicator(local, timeout);
  } else if (devices[0].is_xla()) {
    comm = distribute::make_xla_communicator(local, timeout);
  } else {
    SYSTOLIC_CHECK(distribute::nccl_compiled(),
                   "to_accelerator: {} GPU replicas need NCCL, which this build of "
                   "systolic was compiled without",
                   local);
    std::vector<int> gpus;
    for (auto& d : devices) gpus.push_back(d.index());
    comm = distribute::make_nccl_communicator(gpus, timeout);
  }
  std::vector<std::shared_ptr<distribute::Replica>> others;
  for (int i = 1; i < local; ++i) {
    Model r = copy_model(cpu_model, devices[static_cast<std::size_t>(i)]);
    others.push_back(ModelInternals::state(r));
  }
  auto& state = ModelInternals::state(copy);
  state->replicas = std::make_shared<distribute::ReplicaGroup>(strategy, state.get(), std::move(others),
                                                               std::move(comm), threads);
  state->replicas->broadcast_weights();  // across workers: every process starts from worker 0's weights
  return copy;
}

}  // namespace systolic
