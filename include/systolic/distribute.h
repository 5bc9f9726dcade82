// Distribution strategies and the accelerator model: the seed's
//
//   strategy = tf.contrib.distribute.TPUStrategy(...)
//   tpu_model = tf.contrib.tpu.keras_to_tpu_model(model, strategy=strategy)
//
// is, in systolic,
//
//   auto strategy = systolic::distribute::OneDeviceStrategy();      // the best device present (a GPU if any)
//   systolic::Model accel = systolic::to_accelerator(model, strategy);
//
// to_accelerator copies the CPU model (layers, weights, compile settings, optimizer state) onto the strategy's
// device and logs what it found there; the CPU model is left as it was. fit/evaluate/predict/save_weights work on
// the copy unchanged (save_weights copies the weights to the host, and says so).
#pragma once

#include <systolic/device.h>
#include <systolic/model.h>

#include <string>
#include <vector>

namespace systolic {
namespace distribute {

class Strategy {
 public:
  Strategy(std::string name, std::vector<Device> devices);
  const std::string& name() const { return name_; }
  const std::vector<Device>& devices() const { return devices_; }
  int num_replicas_in_sync() const { return static_cast<int>(devices_.size()); }

 private:
  std::string name_;
  std::vector<Device> devices_;
};

// One replica on one device (default: default_device(), a GPU when one is present).
Strategy OneDeviceStrategy(Device device = default_device());

}  // namespace distribute

// The seed's keras_to_tpu_model: a copy of `cpu_model` on the strategy's device. Throws Error naming the device
// when it is not available, and for strategies of more than one replica (data-parallel replicas are not built
// yet).
Model to_accelerator(const Model& cpu_model, const distribute::Strategy& strategy);

// The log lines that describe a device ("cuda:0: NVIDIA H100 80GB HBM3, 79.2 GiB, 132 multiprocessors, compute
// capability 9.0" / "cpu: AMD EPYC, 2 cores, avx512_core"), as to_accelerator and `systolic info` print them.
std::string describe_device(Device device);

}  // namespace systolic
