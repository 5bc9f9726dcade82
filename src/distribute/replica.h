// What a data-parallel strategy needs of one replica of a model: the narrow interface through which
// src/distribute drives the model's copies (src/model's ModelState implements it). A replica runs forward and
// backward on its shard of a global batch, and exposes its flat gradient and totals buffers, its weights and its
// optimizer's state, which the ReplicaGroup sums, shares and averages.
#pragma once

#include <systolic/device.h>
#include <systolic/ops.h>
#include <systolic/tensor.h>

#include <cstdint>
#include <vector>

namespace systolic::distribute {

class Replica {
 public:
  virtual ~Replica() = default;

  virtual Device replica_device() const = 0;
  // Its place in the strategy: its index across every worker (each replica draws its own dropout masks),
  // whether it is the chief's first replica (the one that writes files), and what its synchronised batch norm
  // sums its statistics with (null: statistics per replica).
  virtual void join_strategy(int global_index, bool chief, const ops::CrossReplica* sync_batch_norm) = 0;

  // The host's part of a step, before it: rows [begin, end) of the global batch (x and y, an array per input and
  // output, and the sample weights w when defined) (host tensors) into the replica's input buffers, and the step's learning rate where its update
  // reads it (a recorded step reads both from the device). A replica with no rows (a last batch smaller than the
  // replicas) loads only the rate.
  virtual void load_step(const Arrays& x, const Arrays& y, const Tensor& w, std::int64_t begin,
                         std::int64_t end, double learning_rate) = 0;
  // Forward, loss, metrics and backward on the `rows` rows loaded: the gradients land in gradient_buffer(),
  // scaled by 1 / global_batch so that their sum over replicas is the gradient of the global batch's mean loss;
  // the loss and metric sums are added to totals_buffer(). Device work only (it may be recorded).
  virtual void compute_gradients(std::int64_t rows, std::int64_t global_batch) = 0;
  // The optimizer's update with the summed gradients at the loaded rate. Device work only.
  virtual void apply_update() = 0;
  // After the step ran (or its recording was replayed): the step counter advances.
  virtual void end_step() = 0;
  // The learning rate of the coming step (the model's: callbacks and schedules change it on the first replica).
  virtual double learning_rate() const = 0;
  // Whether the coming step only accumulates its gradients (the optimizer's gradient_accumulation_steps): a
  // program of such steps is recorded apart from that of the updating ones.
  virtual bool accumulates_next_step() const = 0;

  virtual Tensor& gradient_buffer() = 0;   // every trainable weight's gradient, flat
  virtual Tensor& trainable_buffer() = 0;  // every trainable weight, flat
  virtual Tensor& totals_buffer() = 0;     // float64 [1 + metrics]: the loss sum, the metric counts
  // Every non-trainable weight (batch norm's moving statistics), in Keras's weight order.
  virtual std::vector<Tensor*> non_trainable_weights() = 0;
  // The optimizer's slots (Adam's m and v: flat, laid out as the trainable buffer) and its iteration count;
  // empty and 0 for a model that is not compiled.
  virtual std::vector<Tensor*> optimizer_slots() = 0;
  virtual std::int64_t iterations() const = 0;
  virtual void set_iterations(std::int64_t iterations) = 0;
};

}  // namespace systolic::distribute
