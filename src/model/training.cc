// fit / evaluate / predict / train_on_batch. fit builds batches in one of two ways: on the CPU the BatchPipeline
// (background threads, prefetch, augmentation); on a GPU the data set is copied there once and each batch is
// gathered, converted and augmented by device ops from a device tensor of row indices, after which the step runs,
// replayed from a captured CUDA graph (StepGraph) once a warm-up step has sized every buffer. Metrics accumulate
// on the device and are read at the end of an epoch or when the progress bar redraws. evaluate/predict gather
// rows (converted per batch) into the model's input buffer on the model's device. Keras's console output and
// History.
#include <systolic/log.h>
#include <systolic/system.h>

#include "model/model_state.h"
#include "model/progbar.h"
#include "core/step_graph.h"

#include <cmath>
#include <optional>
#include <numeric>

namespace systolic {

namespace {

std::vector<std::int64_t> range_rows(std::int64_t begin, std::int64_t end) {
  std::vector<std::int64_t> r(static_cast<std::size_t>(end - begin));
  std::iota(r.begin(), r.end(), begin);
  return r;
}

LogValues read_totals(ModelState& s, std::int64_t seen, const std::string& prefix = "") {
  auto t = s.totals.to_doubles();
  LogValues v{{prefix + "loss", t[0] / double(seen)}};
  for (std::size_t m = 0; m < s.metrics.size(); ++m) v.emplace_back(prefix + s.metrics[m]->name(), t[m + 1] / double(seen));
  return v;
}

// Runs the model in inference mode over x (and y): loss and metrics, or predictions into `out`.
LogValues run_inference(ModelState& s, const Tensor& x_in, const Tensor* y_in, std::int64_t batch_size, int verbose,
                        Tensor* out) {
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
    augmented = augment && s.x_buf.dtype() != DType::float32 ? Tensor(s.x_buf.shape(), DType::float32, d) : Tensor();
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
      auto images = [](const Tensor& t) { return t.rank() == 3 ? t.reshape({t.dim(0), t.dim(1), t.dim(2), 1}) : t; };
      Tensor out = augmented.defined() ? images(augmented.slice(0, n)) : images(xb);
      ops::augment_images(images(r), out, augment_params(a), seed, static_cast<std::uint64_t>(begin));
      if (augmented.defined()) ops::cast(out, xb);
    } else {
      ops::gather_rows(x, rows, xb);
    }
    ops::gather_rows(y, rows, yb);
  }
  static ops::AugmentParams augment_params(const Augmentation& a) {
    return {.width_shift_range = a.width_shift_range, .height_shift_range = a.height_shift_range,
            .horizontal_flip = a.horizontal_flip, .fill_constant = a.fill_mode == "constant", .cval = a.cval};
  }
};

}  // namespace

History Model::fit(const Tensor& x, const Tensor& y, const FitOptions& o) {
  ModelState& s = *state_;
  SYSTOLIC_CHECK(s.loss, "fit: compile model '{}' first", s.name);
  s.check_single_io("fit");
  s.check_xy(x, &y, "fit");
  SYSTOLIC_CHECK(o.batch_size > 0, "fit: batch_size must be positive, got {}", o.batch_size);
  SYSTOLIC_CHECK(o.validation_split >= 0 && o.validation_split < 1, "fit: validation_split must be in [0, 1), got {}",
                 o.validation_split);
  SYSTOLIC_CHECK(o.verbose >= 0 && o.verbose <= 2, "fit: verbose must be 0, 1 or 2, got {}", o.verbose);

  // Keras: the validation set is the last fraction of the samples, taken before any shuffling.
  std::int64_t n = x.dim(0);
  std::int64_t n_val = o.validation_data ? 0 : static_cast<std::int64_t>(std::floor(double(n) * o.validation_split));
  std::int64_t n_train = n - n_val;
  SYSTOLIC_CHECK(n_train > 0, "fit: no training samples ({} samples, validation_split {})", n, o.validation_split);
  Tensor xt = x.slice(0, n_train), yt = y.slice(0, n_train);
  std::optional<ValidationData> val = o.validation_data;
  if (n_val > 0) val = ValidationData{x.slice(n_train, n), y.slice(n_train, n)};
  if (val) s.check_xy(val->x, &val->y, "fit (validation data)");
  o.augmentation.check();
  if (o.augmentation.enabled())
    SYSTOLIC_CHECK(x.rank() == 3 || x.rank() == 4, "fit: augmentation needs images (N, H, W, C); x has shape {}",
                   x.shape().str());
  SYSTOLIC_CHECK(o.workers >= 0 && o.workers <= 64, "fit: workers must be 0 to 64, got {}", o.workers);
  SYSTOLIC_CHECK(o.max_queue_size >= 1, "fit: max_queue_size must be at least 1, got {}", o.max_queue_size);
  s.ensure_capacity(std::min(o.batch_size, n_train));  // fixes the batch dtypes (y_buf: int32 or float)

  History history;
  history.keys = metrics_names();
  if (val)
    for (auto& k : metrics_names()) history.keys.push_back("val_" + k);
  std::int64_t steps = (n_train + o.batch_size - 1) / o.batch_size;
  std::int64_t full_batch = std::min(o.batch_size, n_train);

  bool on_device = o.batches == FitOptions::Batches::on_device ||
                   (o.batches == FitOptions::Batches::automatic && !s.device().is_cpu());
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
  s.step_mode = on_device && !s.device().is_cpu() ? (graph.captured() && use_graph ? "graph" : "eager") : "host";
  s.step_mode_reason = !on_device ? "batches built on the host"
                       : !o.step_graph ? "step graphs turned off (FitOptions::step_graph)"
                       : !graph.supported() ? "CUDA graphs need a GPU"
                       : s.graph_refused ? s.step_mode_reason : "";

  for (int epoch = o.initial_epoch; epoch < o.epochs; ++epoch) {
    if (o.verbose) log_line(fmt::format("Epoch {}/{}", epoch + 1, o.epochs));
    std::vector<std::int64_t> order =
        o.shuffle ? global_generator().permutation(n_train) : range_rows(0, n_train);
    // Drawn only when augmenting, so runs without augmentation see the same random stream as before.
    std::uint64_t augmentation_seed = o.augmentation.enabled() ? global_generator().split() : 0;
    ops::fill(s.totals, 0.0);
    Progbar bar(steps, o.verbose);
    std::int64_t seen = 0;
    if (on_device) {
      dev.set_order(order);
      for (std::int64_t step = 0; step < steps; ++step) {
        std::int64_t begin = step * o.batch_size, n = std::min(o.batch_size, n_train - begin);
        dev.load(s, begin, n, o.augmentation, augmentation_seed);
        bool full = n == full_batch;
        if (use_graph && full && graph.captured() && s.optimizer->learning_rate() != s.graph_lr) graph.reset();
        if (use_graph && full && !graph.captured() && s.graph_warm >= 1) {
          // Record one step, then replay it for this and every later full batch. Host-side counters moved while
          // recording (nothing ran): put them back; each replay advances them.
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
                             {.batch_size = o.batch_size, .augmentation = o.augmentation, .seed = augmentation_seed,
                              .workers = o.workers, .max_queue_size = o.max_queue_size, .x_dtype = s.dtype,
                              .y_dtype = s.y_buf.dtype()});
      Tensor xb, yb;
      for (std::int64_t step = 0; step < steps && pipeline.next(xb, yb); ++step) {
        std::int64_t n = xb.dim(0);
        s.set_batch(xb, yb);
        s.train_step(n);
        seen += n;
        if (bar.wants_update(step + 1)) bar.update(step + 1, read_totals(s, seen));
      }
    }
    LogValues logs = read_totals(s, seen);
    if (val) {
      const ValidationData& v_data = val_dev ? *val_dev : *val;
      LogValues v = run_inference(s, v_data.x, &v_data.y, o.batch_size, 0, nullptr);
      for (auto& [k, value] : v) logs.emplace_back("val_" + k, value);
    }
    bar.finish(logs);
    history.epoch.push_back(epoch);
    for (auto& [k, value] : logs) history.history[k].push_back(value);
  }
  return history;
}

std::string Model::step_mode() const { return state_->step_mode; }
std::string Model::step_mode_reason() const { return state_->step_mode_reason; }

std::vector<double> Model::evaluate(const Tensor& x, const Tensor& y, const EvaluateOptions& o) {
  ModelState& s = *state_;
  SYSTOLIC_CHECK(s.loss, "evaluate: compile model '{}' first", s.name);
  s.check_single_io("evaluate");
  s.check_xy(x, &y, "evaluate");
  SYSTOLIC_CHECK(o.batch_size > 0, "evaluate: batch_size must be positive, got {}", o.batch_size);
  SYSTOLIC_CHECK(x.dim(0) > 0, "evaluate: no samples");
  LogValues v = run_inference(s, x, &y, o.batch_size, o.verbose, nullptr);
  std::vector<double> out;
  for (auto& [k, value] : v) out.push_back(value);
  return out;
}

Tensor Model::predict(const Tensor& x, const PredictOptions& o) {
  ModelState& s = *state_;
  s.check_single_io("predict");
  s.check_xy(x, nullptr, "predict");
  SYSTOLIC_CHECK(o.batch_size > 0, "predict: batch_size must be positive, got {}", o.batch_size);
  Tensor out(s.outputs[0].shape().with_batch(x.dim(0)), s.dtype);
  run_inference(s, x, nullptr, o.batch_size, 0, &out);
  if (out.dtype() == DType::bfloat16) out = out.to(DType::float32);  // mixed precision: float32 results
  return out;
}

std::vector<double> Model::train_on_batch(const Tensor& x, const Tensor& y) {
  ModelState& s = *state_;
  SYSTOLIC_CHECK(s.loss, "train_on_batch: compile model '{}' first", s.name);
  s.check_single_io("train_on_batch");
  s.check_xy(x, &y, "train_on_batch");
  ops::fill(s.totals, 0.0);
  Tensor yd = y.to(s.device());
  s.load_batch(x.to(s.device()), &yd, range_rows(0, x.dim(0)));
  s.train_step(x.dim(0));
  std::vector<double> out;
  for (auto& [k, v] : read_totals(s, x.dim(0))) out.push_back(v);
  return out;
}

}  // namespace systolic
