// fit / evaluate / predict / train_on_batch. fit builds batches in one of two ways: on the CPU the
// BatchPipeline (background threads, prefetch, augmentation); on a GPU the data set is copied there once and
// each batch is gathered, converted and augmented by device ops from a device tensor of row indices, after
// which the step runs, replayed from a captured CUDA graph (StepGraph) once a warm-up step has sized every
// buffer. Metrics accumulate on the device and are read at the end of an epoch or when the progress bar
// redraws. evaluate/predict gather rows (converted per batch) into the model's input buffer on the model's
// device. Keras's console output and History. Under a strategy of several replicas (s.replicas), training
// steps and inference run on every replica (distribute/replica_group.h): each takes its shard of every batch,
// or its share of the samples.
#include <systolic/log.h>
#include <systolic/system.h>

#include <cmath>
#include <numeric>
#include <optional>

#include "core/step_graph.h"
#include "distribute/replica_group.h"
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
    if (y) s.loss_and_metrics(end - begin, false);
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

// fit's batches on the model's device: the training data copied there once, the epoch's order as an int32
// device tensor; each batch is gathered (and converted) by ops from a fixed index buffer, then augmented.
struct DeviceBatches {
  Tensor x, y, order, idx, raw, augmented;  // float32 batches before and after augmentation
  void prepare(ModelState& s, const Tensor& xt, const Tensor& yt, std::int64_t batch, bool augment) {
    Device d = s.device();
    SYSTOLIC_CHECK(xt.dim(0) < (std::int64_t(1) << 31), "fit: {} samples are too many for int32 row indices",
                   xt.dim(0));
    x = xt.to(d);
    y = yt.to(d);
    s.ensure_capacity(batch);
    idx = Tensor({batch}, DType::int32, d);
    // Augmentation works on float32 images; under mixed precision its result is cast to the compute dtype.
    raw = augment ? Tensor(s.x_buf.shape(), DType::float32, d) : Tensor();
    augmented =
        augment && s.x_buf.dtype() != DType::float32 ? Tensor(s.x_buf.shape(), DType::float32, d) : Tensor();
  }
  void set_order(const std::vector<std::int64_t>& rows) {
    Tensor host({static_cast<std::int64_t>(rows.size())}, DType::int32);
    auto* p = host.data<std::int32_t>();
    for (std::size_t i = 0; i < rows.size(); ++i) p[i] = static_cast<std::int32_t>(rows[i]);
    order = host.to(x.device());  // one copy per epoch
  }
  void load(ModelState& s, std::int64_t begin, std::int64_t n, const Augmentation& a, std::uint64_t seed) {
    Tensor rows = idx.slice(0, n), src = order.slice(begin, begin + n);
    ops::copy(src, rows);
    Tensor xb = s.x_buf.slice(0, n), yb = s.y_buf.slice(0, n);
    if (a.enabled()) {
      Tensor r = raw.slice(0, n);
      ops::gather_rows(x, rows, r);
      auto images = [](const Tensor& t) {
        return t.rank() == 3 ? t.reshape({t.dim(0), t.dim(1), t.dim(2), 1}) : t;
      };
      Tensor out = augmented.defined() ? images(augmented.slice(0, n)) : images(xb);
      ops::augment_images(images(r), out, augment_params(a), seed, static_cast<std::uint64_t>(begin));
      if (augmented.defined()) ops::cast(out, xb);
    } else {
      ops::gather_rows(x, rows, xb);
    }
    ops::gather_rows(y, rows, yb);
  }
  static ops::AugmentParams augment_params(const Augmentation& a) {
    return {.width_shift_range = a.width_shift_range,
            .height_shift_range = a.height_shift_range,
            .horizontal_flip = a.horizontal_flip,
            .fill_constant = a.fill_mode == "constant",
            .cval = a.cval};
  }
};

}  // namespace

History Model::fit(const Tensor& x, const Tensor& y, const FitOptions& o) {
  ModelState& s = *state_;
  SYSTOLIC_CHECK(s.loss, "fit: compile model '{}' first", s.name);
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
    std::int64_t last = n_train % o.batch_size;
    SYSTOLIC_CHECK(
        !group->strategy().options().sync_batch_norm || last == 0 || last >= replicas,
        "fit: with synchronised batch norm every replica needs samples in every batch, but the last batch "
        "of {} training samples in batches of {} has {} samples for {} replicas; use another batch size or "
        "sample count",
        n_train, o.batch_size, last, replicas);
  }
  // Progress and logs from the chief only (every worker computes the same values).
  const int verbose = s.chief ? o.verbose : 0;
  // Fixes the batch dtypes (y_buf: int32 or float); a replica holds only its shard.
  s.ensure_capacity(group ? std::max<std::int64_t>(1, std::min(o.batch_size, n_train) / group->size())
                          : std::min(o.batch_size, n_train));

  History history;
  history.keys = metrics_names();
  if (val)
    for (auto& k : metrics_names()) history.keys.push_back("val_" + k);
  std::int64_t steps = (n_train + o.batch_size - 1) / o.batch_size;
  std::int64_t full_batch = std::min(o.batch_size, n_train);

  bool on_device = !group && (o.batches == FitOptions::Batches::on_device ||
                              (o.batches == FitOptions::Batches::automatic && !s.device().is_cpu()));
  DeviceBatches dev;
  std::optional<ValidationData> val_dev;
  if (on_device) {
    dev.prepare(s, xt, yt, full_batch, o.augmentation.enabled());
    if (val) val_dev = ValidationData{val->x.to(s.device()), val->y.to(s.device())};  // copied once per fit
  }
  if (!s.graph || s.graph_batch != full_batch) {
    s.drop_graph();
    s.graph = std::make_shared<StepGraph>(s.device());
    s.graph_batch = full_batch;
  }
  StepGraph& graph = *s.graph;
  bool use_graph = on_device && o.step_graph && graph.supported() && !s.graph_refused;
  s.step_mode =
      on_device && !s.device().is_cpu() ? (graph.captured() && use_graph ? "graph" : "eager") : "host";
  s.step_mode_reason = group                ? "replicas: batches built on the host and split"
                       : !on_device         ? "batches built on the host"
                       : !o.step_graph      ? "step graphs turned off (FitOptions::step_graph)"
                       : !graph.supported() ? "CUDA graphs need a GPU"
                       : s.graph_refused    ? s.step_mode_reason
                                            : "";

  for (int epoch = o.initial_epoch; epoch < o.epochs; ++epoch) {
    if (verbose) log_line(fmt::format("Epoch {}/{}", epoch + 1, o.epochs));
    std::vector<std::int64_t> order =
        o.shuffle ? global_generator().permutation(n_train) : range_rows(0, n_train);
    // Drawn only when augmenting, so runs without augmentation see the same random stream as before.
    std::uint64_t augmentation_seed = o.augmentation.enabled() ? global_generator().split() : 0;
    if (group && group->strategy().num_workers() > 1) {
      // Every worker builds the same global batches: the chief's order and seed (32-bit halves: exact in
      // doubles).
      std::vector<double> shared(order.begin(), order.end());
      shared.push_back(double(augmentation_seed >> 32));
      shared.push_back(double(augmentation_seed & 0xffffffffu));
      group->broadcast_from_chief(shared);
      for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::int64_t>(shared[i]);
      augmentation_seed = (static_cast<std::uint64_t>(shared[order.size()]) << 32) |
                          static_cast<std::uint64_t>(shared[order.size() + 1]);
    }
    if (group)
      group->reset_totals();
    else
      ops::fill(s.totals, 0.0);
    Progbar bar(steps, verbose);
    std::int64_t seen = 0;
    if (on_device) {
      dev.set_order(order);
      for (std::int64_t step = 0; step < steps; ++step) {
        std::int64_t begin = step * o.batch_size, n = std::min(o.batch_size, n_train - begin);
        dev.load(s, begin, n, o.augmentation, augmentation_seed);
        bool full = n == full_batch;
        if (use_graph && full && graph.captured() && s.optimizer->learning_rate() != s.graph_lr)
          graph.reset();
        if (use_graph && full && !graph.captured() && s.graph_warm >= 1) {
          // Record one step, then replay it for this and every later full batch. Host-side counters moved
          // while recording (nothing ran): put them back; each replay advances them.
          s.sync_step_counter();
          std::int64_t iterations = s.optimizer->iterations(), on_dev = s.step_on_device;
          std::string why;
          bool ok = graph.capture([&] { s.train_step(n); }, why);
          s.optimizer->set_iterations(iterations);
          s.step_on_device = on_dev;
          if (ok) {
            s.graph_lr = s.optimizer->learning_rate();
            s.step_mode = "graph";
            s.step_mode_reason.clear();
          } else {
            use_graph = false;
            s.graph_refused = true;
            s.step_mode_reason = why;
            log_line("systolic: training steps run without a CUDA graph: " + why);
          }
        }
        if (use_graph && full && graph.captured()) {
          s.sync_step_counter();
          graph.replay();
          s.optimizer->set_iterations(s.optimizer->iterations() + 1);
          ++s.step_on_device;
        } else {
          s.train_step(n);
          if (full) ++s.graph_warm;
        }
        seen += n;
        if (bar.wants_update(step + 1)) bar.update(step + 1, read_totals(s, seen));
      }
      synchronize(s.device());  // raises what GPU kernels flagged (a label out of range)
    } else {
      BatchPipeline pipeline(xt, yt, std::move(order),
                             {.batch_size = o.batch_size,
                              .augmentation = o.augmentation,
                              .seed = augmentation_seed,
                              .workers = o.workers,
                              .max_queue_size = o.max_queue_size,
                              .x_dtype = s.dtype,
                              .y_dtype = s.y_buf.dtype()});
      Tensor xb, yb;
      for (std::int64_t step = 0; step < steps && pipeline.next(xb, yb); ++step) {
        std::int64_t n = xb.dim(0);
        seen += n;
        if (group) {
          group->train_step(xb, yb);
          // Summed on every step: across workers it is a collective, which every worker must call alike.
          auto totals = group->sum_totals();
          if (bar.wants_update(step + 1)) bar.update(step + 1, log_values(s, totals, seen));
          continue;
        }
        s.set_batch(xb, yb);
        s.train_step(n);
        if (bar.wants_update(step + 1)) bar.update(step + 1, read_totals(s, seen));
      }
    }
    LogValues logs = group ? log_values(s, group->sum_totals(), seen) : read_totals(s, seen);
    // Per-replica batch norm: the replicas' moving statistics are averaged, so every replica evaluates alike.
    if (group) group->average_non_trainable_weights();
    if (val) {
      const ValidationData& v_data = val_dev ? *val_dev : *val;
      LogValues v = infer(s, v_data.x, &v_data.y, o.batch_size, 0, nullptr);
      for (auto& [k, value] : v) logs.emplace_back("val_" + k, value);
    }
    bar.finish(logs);
    history.epoch.push_back(epoch);
    for (auto& [k, value] : logs) history.history[k].push_back(value);
  }
  return history;
}

std::string Model::step_mode() const {
  return state_->step_mode;
}
std::string Model::step_mode_reason() const {
  return state_->step_mode_reason;
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
  Tensor out = s.replicas ? Tensor::zeros(s.outputs[0].shape().with_batch(x.dim(0)), s.dtype)
                          : Tensor(s.outputs[0].shape().with_batch(x.dim(0)), s.dtype);
  infer(s, x, nullptr, o.batch_size, 0, &out);
  if (out.dtype() == DType::bfloat16) out = out.to(DType::float32);  // mixed precision: float32 results
  return out;
}

std::vector<double> Model::train_on_batch(const Tensor& x, const Tensor& y) {
  ModelState& s = *state_;
  SYSTOLIC_CHECK(s.loss, "train_on_batch: compile model '{}' first", s.name);
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
  s.train_step(x.dim(0));
  std::vector<double> out;
  for (auto& [k, v] : read_totals(s, x.dim(0))) out.push_back(v);
  return out;
}

}  // namespace systolic
