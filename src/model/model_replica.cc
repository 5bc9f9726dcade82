// ModelState as one replica of a model under a strategy (distribute/replica.h): what the ReplicaGroup calls to
// run a shard of a global batch and to share, sum and average the replica's buffers.
#include <numeric>

#include "model/model_state.h"

namespace systolic {

void ModelState::join_strategy(int global_index, bool is_chief, const ops::CrossReplica* sync_batch_norm) {
  chief = is_chief;
  training_step.replica = global_index;
  training_step.replicas = sync_batch_norm;
}

void ModelState::load_step(const Arrays& x, const Arrays& y, const Tensor& w, std::int64_t begin,
                           std::int64_t end, double learning_rate) {
  optimizer->load_learning_rate(learning_rate);
  weigh_samples_like(w);
  make_step_scalars();
  if (end <= begin) return;
  std::vector<std::int64_t> rows(static_cast<std::size_t>(end - begin));
  if (device().is_cpu()) {
    std::iota(rows.begin(), rows.end(), begin);
    load_batch(x, &y, rows, &w);
  } else {  // the shard goes to the replica's device first
    Arrays xs = x.slice(begin, end).to(device()), ys = y.slice(begin, end).to(device());
    Tensor ws = w.defined() ? w.slice(begin, end).to(device()) : Tensor();
    std::iota(rows.begin(), rows.end(), 0);
    load_batch(xs, &ys, rows, &ws);
  }
}

void ModelState::compute_gradients(std::int64_t m, std::int64_t global_batch) {
  forward(m, /*training=*/true);
  compute_loss(m, optimizer->scale_loss(1.0 / double(global_batch)));
  compute_metrics(m);
  backward(m);
}

void ModelState::apply_update() {
  apply_gradients();
}

void ModelState::end_step() {
  step_counter().advance();
}

double ModelState::learning_rate() const {
  return optimizer->learning_rate();
}

std::vector<Tensor*> ModelState::non_trainable_weights() {
  std::vector<Tensor*> out;
  for (auto* l : weight_layers())
    for (auto& w : l->weights())
      if (!w.trainable) out.push_back(&w.value);
  return out;
}

std::vector<Tensor*> ModelState::optimizer_slots() {
  std::vector<Tensor*> out;
  if (optimizer)
    for (auto& [name, slot] : optimizer->slots()) out.push_back(&optimizer->slot(name));
  return out;
}

bool ModelState::accumulates_next_step() const {
  return optimizer && optimizer->accumulates_next_step();
}

std::int64_t ModelState::iterations() const {
  return optimizer ? optimizer->iterations() : 0;
}

void ModelState::set_iterations(std::int64_t iterations) {
  if (optimizer) optimizer->set_iterations(iterations);
}

}  // namespace systolic
