// fit / evaluate / predict / train_on_batch. fit is three named pieces and a loop, as Keras's trainer is:
// the EpochIterator yields the batches of each epoch (built on the host by the BatchPipeline, or on the
// model's device), the model's TrainFunction runs a step on each (recorded once as a CUDA graph and replayed,
// where it can be), and the CallbackList calls the hooks at Keras's points (the progress bar and History are
// callbacks too). Metrics accumulate on the device and are read at the end of an epoch or when a callback
// looks at a batch's logs. evaluate/predict gather rows (converted per batch) into the model's input buffer
// on the model's device. Under a strategy of several replicas (s.replicas), training steps and inference run
// on every replica (distribute/replica_group.h): each takes its shard of every batch, or its share of the
// samples.
#include <systolic/callbacks.h>
#include <systolic/log.h>
#include <systolic/system.h>

#include <cmath>
#include <numeric>
#include <optional>

#include "distribute/replica_group.h"
#include "model/callback_list.h"
#include "model/epoch_iterator.h"
#include "model/model_state.h"
#include "model/progbar.h"

namespace systolic {

namespace {

std::vector<std::int64_t> range_rows(std::int64_t begin, std::int64_t end) {
  std::vector<std::int64_t> r(static_cast<std::size_t>(end - begin));
  std::iota(r.begin(), r.end(), begin);
  return r;
}

LogValues log_values(const ModelState& s, const std::vector<double>& t, std::int64_t seen,
                     const std::string& prefix = "") {
  LogValues v{{prefix + "loss", t[0] / double(seen)}};
  for (std::size_t m = 0; m < s.metrics.size(); ++m)
    v.emplace_back(prefix + s.metrics[m]->name(), t[m + 1] / double(seen));
  return v;
}

LogValues read_totals(ModelState& s, std::int64_t seen, const std::string& prefix = "") {
  return log_values(s, s.totals.to_doubles(), seen, prefix);
}

// Keras's reset_metrics: the loss and metric sums start again (every replica's).
void reset_totals(ModelState& s) {
  if (s.replicas)
    s.replicas->reset_totals();
  else
    ops::fill(s.totals, 0.0);
}

// A resumed epoch's sums so far (after reset_totals): under replicas they go to the first replica of the
// chief, the others' stay zero, so the sum over replicas is `totals`.
void set_totals(ModelState& s, const std::vector<double>& totals) {
  SYSTOLIC_CHECK(totals.size() == static_cast<std::size_t>(s.totals.numel()),
                 "fit: resuming with {} loss and metric sums, the model has {}", totals.size(),
                 s.totals.numel());
  Tensor host = Tensor::from_vector(totals, s.totals.shape());
  if (!s.replicas || s.replicas->global_index(0) == 0) s.totals.copy_from(host);
}

// Runs the model in inference mode over x (and y): loss and metrics, or predictions into `out`.
LogValues run_inference(ModelState& s, const Tensor& x_in, const Tensor* y_in, std::int64_t batch_size,
                        int verbose, Tensor* out) {
  // On a GPU the samples are copied there once (uint8 stays uint8) and gathered per batch by device ops.
  Tensor x = x_in.to(s.device()), y_dev = y_in ? y_in->to(s.device()) : Tensor();
  const Tensor* y = y_in ? &y_dev : nullptr;
  std::int64_t n = x.dim(0), steps = (n + batch_size - 1) / batch_size;
  if (y) ops::fill(s.totals, 0.0);
  Progbar bar(steps, verbose);
  int o = s.output_node();
  for (std::int64_t step = 0; step < steps; ++step) {
    std::int64_t begin = step * batch_size, end = std::min(n, begin + batch_size);
    s.load_batch(x, y, range_rows(begin, end));
    s.forward(end - begin, false);
    if (y) {
      s.compute_loss(end - begin);
      s.compute_metrics(end - begin);
    }
    if (out) {
      Tensor rows = out->slice(begin, end);
      rows.copy_from(s.nodes[o].call.output);  // from the device to the host when the model is on a GPU
    }
    if (y && bar.wants_update(step + 1)) bar.update(step + 1, read_totals(s, end));
  }
  synchronize(s.device());  // raises what GPU kernels flagged (a label out of range)
  LogValues v = y && n > 0 ? read_totals(s, n) : LogValues{};
  if (y) bar.finish(v);
  return v;
}

// run_inference under replicas: replica g takes rows [g*n/G, (g+1)*n/G) (so every sample counts exactly once,
// whatever n), in batches of batch_size / G; the loss and metric sums are added over replicas, and
// predictions land in their rows of `out` (across workers, out starts zeroed and is summed, so every worker
// gets every row).
LogValues run_replicated_inference(ModelState& s, const Tensor& x, const Tensor* y, std::int64_t batch_size,
                                   int verbose, Tensor* out) {
  distribute::ReplicaGroup& g = *s.replicas;
  std::int64_t n = x.dim(0), per_replica = std::max<std::int64_t>(1, batch_size / g.size());
  g.run([&](int local, ModelState& r) {
    auto [begin, end] = g.shard(n, g.global_index(local));
    if (y) ops::fill(r.totals, 0.0);
    if (end == begin) return;
    Tensor xs = x.slice(begin, end), ys = y ? y->slice(begin, end) : Tensor(),
           os = out ? out->slice(begin, end) : Tensor();
    run_inference(r, xs, y ? &ys : nullptr, per_replica, 0, out ? &os : nullptr);
  });
  if (out && g.strategy().num_workers() > 1) g.comm().all_reduce_sum(*out, 0);
  if (!y) return {};
  LogValues v = n > 0 ? log_values(s, g.sum_totals(), n) : LogValues{};
  Progbar bar((n + batch_size - 1) / batch_size, s.chief ? verbose : 0);
  bar.finish(v);
  return v;
}

LogValues infer(ModelState& s, const Tensor& x, const Tensor* y, std::int64_t batch_size, int verbose,
                Tensor* out) {
  return s.replicas ? run_replicated_inference(s, x, y, batch_size, verbose, out)
                    : run_inference(s, x, y, batch_size, verbose, out);
}

}  // namespace

// fit: its batches come from the EpochIterator, its steps from the model's TrainFunction, and what happens
// around them (progress bar, History, the callbacks given) from the CallbackList, at Keras's points.
History Model::fit(const Tensor& x, const Tensor& y, const FitOptions& o) {
  ModelState& s = *state_;
  SYSTOLIC_CHECK(s.loss, "fit: compile model '{}' first", s.name);
  s.check_trainable("fit");
  s.check_single_io("fit");
  s.check_xy(x, &y, "fit");
  SYSTOLIC_CHECK(o.batch_size > 0, "fit: batch_size must be positive, got {}", o.batch_size);
  SYSTOLIC_CHECK(o.validation_split >= 0 && o.validation_split < 1,
                 "fit: validation_split must be in [0, 1), got {}", o.validation_split);
  SYSTOLIC_CHECK(o.verbose >= 0 && o.verbose <= 2, "fit: verbose must be 0, 1 or 2, got {}", o.verbose);

  // Keras: the validation set is the last fraction of the samples, taken before any shuffling.
  std::int64_t n = x.dim(0);
  std::int64_t n_val =
      o.validation_data ? 0 : static_cast<std::int64_t>(std::floor(double(n) * o.validation_split));
  std::int64_t n_train = n - n_val;
  SYSTOLIC_CHECK(n_train > 0, "fit: no training samples ({} samples, validation_split {})", n,
                 o.validation_split);
  Tensor xt = x.slice(0, n_train), yt = y.slice(0, n_train);
  std::optional<ValidationData> val = o.validation_data;
  if (n_val > 0) val = ValidationData{x.slice(n_train, n), y.slice(n_train, n)};
  if (val) s.check_xy(val->x, &val->y, "fit (validation data)");
  o.augmentation.check();
  if (o.augmentation.enabled())
    SYSTOLIC_CHECK(x.rank() == 3 || x.rank() == 4,
                   "fit: augmentation needs images (N, H, W, C); x has shape {}", x.shape().str());
  SYSTOLIC_CHECK(o.workers >= 0 && o.workers <= 64, "fit: workers must be 0 to 64, got {}", o.workers);
  SYSTOLIC_CHECK(o.max_queue_size >= 1, "fit: max_queue_size must be at least 1, got {}", o.max_queue_size);
  distribute::ReplicaGroup* group = s.replicas.get();
  if (group) {
    int replicas = group->size();
    SYSTOLIC_CHECK(
        o.batch_size % replicas == 0,
        "fit: batch_size {} does not divide among the {} replicas of strategy {}: use a multiple of {} (each "
        "replica takes batch_size / {} samples of every batch)",
        o.batch_size, replicas, group->strategy().name(), replicas, replicas);
    SYSTOLIC_CHECK(
        o.batches != FitOptions::Batches::on_device,
        "fit: on-device batches are not supported with {} replicas (strategy {}); batches are built on the "
        "host and split",
        replicas, group->strategy().name());
    // Keras's BatchNormalization(synchronized=True) takes the global batch's statistics under a strategy; here a
    // strategy's sync_batch_norm does that for every batch-norm layer, and replicas without it would not.
    if (!group->strategy().options().sync_batch_norm)
      for (auto* l : s.weight_layers()) {
        nlohmann::ordered_json config;
        l->get_config(config);
        SYSTOLIC_CHECK(
            !config.value("synchronized", false),
            "fit: layer '{}' has synchronized=True, which needs synchronised batch norm across the {} "
            "replicas: use a strategy with sync_batch_norm (train --sync-batch-norm)",
            l->name(), replicas);
      }
    std::int64_t last = n_train % o.batch_size;
    SYSTOLIC_CHECK(
        !group->strategy().options().sync_batch_norm || last == 0 || last >= replicas,
        "fit: with synchronised batch norm every replica needs samples in every batch, but the last batch "
        "of {} training samples in batches of {} has {} samples for {} replicas; use another batch size or "
        "sample count",
        n_train, o.batch_size, last, replicas);
  }

  EpochIterator epochs(s, xt, yt, o);
  if (val) val = epochs.place(*val);
  TrainFunction& train_function = s.train_function;
  train_function.begin_fit(epochs.on_device(), o.step_graph, epochs.full_batch());

  std::vector<std::string> history_keys = metrics_names();
  if (val)
    for (auto& k : metrics_names()) history_keys.push_back("val_" + k);
  // Progress and logs from the chief only (every worker computes the same values).
  callbacks::Params params{.verbose = s.chief ? o.verbose : 0, .epochs = o.epochs, .steps = epochs.steps()};
  CallbackList callbacks(o.callbacks, *this, params, std::move(history_keys));

  s.stop_training = false;
  std::vector<double> summed;  // under replicas: the sums over replicas at the end of the last batch
  s.fit = {.seed = epochs.seed(), .samples = n_train, .batch_size = o.batch_size, .steps = epochs.steps()};
  s.fit.totals = [&s, &summed, group] { return group ? summed : s.totals.to_doubles(); };
  callbacks.on_train_begin();
  // A callback that restored a backup (BackupAndRestore) says where the backed-up fit was.
  std::optional<ModelState::FitProgress::Resume> resume = std::move(s.fit.resume);
  s.fit.resume.reset();
  if (resume) epochs.set_seed(s.fit.seed = resume->seed);
  LogValues logs;  // the last epoch's
  for (int epoch = resume ? resume->epoch : o.initial_epoch; epoch < o.epochs && !s.stop_training; ++epoch) {
    s.fit.epoch = epoch;
    s.fit.batches = 0;
    callbacks.on_epoch_begin(epoch);
    reset_totals(s);
    std::int64_t seen = 0;
    if (resume && resume->epoch == epoch && resume->batches > 0) {
      epochs.begin_epoch(epoch, resume->batches);
      set_totals(s, resume->totals);
      summed = resume->totals;
      s.fit.batches = resume->batches;
      seen = std::min(n_train, resume->batches * o.batch_size);
    } else {
      epochs.begin_epoch(epoch);
    }
    for (Batch batch; epochs.next(batch);) {
      callbacks.on_train_batch_begin(batch.index);
      train_function(batch);
      seen += batch.size;
      s.fit.batches = batch.index + 1;
      if (group) {
        // Summed on every step: across workers it is a collective, which every worker must call alike.
        summed = group->sum_totals();
        callbacks.on_train_batch_end(batch.index, log_values(s, summed, seen));
      } else {
        // Read from the device only when a callback looks (the progress bar, when it redraws).
        callbacks.on_train_batch_end(batch.index,
                                     callbacks::Logs::deferred([&s, seen] { return read_totals(s, seen); }));
      }
      if (s.stop_training) break;
    }
    synchronize(s.device());  // raises what the steps' kernels flagged on a GPU (a label out of range)
    logs = group ? log_values(s, group->sum_totals(), seen) : read_totals(s, seen);
    // Per-replica batch norm: the replicas' moving statistics are averaged, so every replica evaluates alike.
    if (group) group->average_non_trainable_weights();
    if (val)
      for (auto& [k, value] : infer(s, val->x, &val->y, o.batch_size, 0, nullptr))
        logs.emplace_back("val_" + k, value);
    callbacks.on_epoch_end(epoch, logs);
  }
  callbacks.on_train_end(logs);
  s.fit.totals = nullptr;  // it refers to this call's locals
  return callbacks.history();
}

std::string Model::step_mode() const {
  return state_->train_function.step_mode();
}
std::string Model::step_mode_reason() const {
  return state_->train_function.step_mode_reason();
}
bool Model::stop_training() const {
  return state_->stop_training;
}
void Model::set_stop_training(bool stop) {
  state_->stop_training = stop;
}

std::vector<double> Model::evaluate(const Tensor& x, const Tensor& y, const EvaluateOptions& o) {
  ModelState& s = *state_;
  SYSTOLIC_CHECK(s.loss, "evaluate: compile model '{}' first", s.name);
  s.check_single_io("evaluate");
  s.check_xy(x, &y, "evaluate");
  SYSTOLIC_CHECK(o.batch_size > 0, "evaluate: batch_size must be positive, got {}", o.batch_size);
  SYSTOLIC_CHECK(x.dim(0) > 0, "evaluate: no samples");
  LogValues v = infer(s, x, &y, o.batch_size, o.verbose, nullptr);
  std::vector<double> out;
  for (auto& [k, value] : v) out.push_back(value);
  return out;
}

Tensor Model::predict(const Tensor& x, const PredictOptions& o) {
  ModelState& s = *state_;
  s.check_single_io("predict");
  s.check_xy(x, nullptr, "predict");
  SYSTOLIC_CHECK(o.batch_size > 0, "predict: batch_size must be positive, got {}", o.batch_size);
  // Across workers every worker's rows are summed into every worker's copy: start from zeros.
  const DType out_dtype = s.outputs[0].dtype();
  Tensor out = s.replicas ? Tensor::zeros(s.outputs[0].shape().with_batch(x.dim(0)), out_dtype)
                          : Tensor(s.outputs[0].shape().with_batch(x.dim(0)), out_dtype);
  infer(s, x, nullptr, o.batch_size, 0, &out);
  if (out.dtype() == DType::bfloat16) out = out.to(DType::float32);  // mixed precision: float32 results
  return out;
}

std::vector<double> Model::train_on_batch(const Tensor& x, const Tensor& y) {
  ModelState& s = *state_;
  SYSTOLIC_CHECK(s.loss, "train_on_batch: compile model '{}' first", s.name);
  s.check_trainable("train_on_batch");
  s.check_single_io("train_on_batch");
  s.check_xy(x, &y, "train_on_batch");
  if (s.replicas) {
    distribute::ReplicaGroup& g = *s.replicas;
    SYSTOLIC_CHECK(
        x.dim(0) % g.size() == 0,
        "train_on_batch: a batch of {} samples does not divide among the {} replicas of strategy {}",
        x.dim(0), g.size(), g.strategy().name());
    g.reset_totals();
    g.train_step(x, y);
    std::vector<double> out;
    for (auto& [k, v] : log_values(s, g.sum_totals(), x.dim(0))) out.push_back(v);
    return out;
  }
  ops::fill(s.totals, 0.0);
  Tensor yd = y.to(s.device());
  s.load_batch(x.to(s.device()), &yd, range_rows(0, x.dim(0)));
  s.train_function.run_eagerly(x.dim(0));
  std::vector<double> out;
  for (auto& [k, v] : read_totals(s, x.dim(0))) out.push_back(v);
  return out;
}

}  // namespace systolic
