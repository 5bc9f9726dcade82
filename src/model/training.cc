// fit / evaluate / predict / train_on_batch: fit's batches come from the BatchPipeline (background threads,
// prefetch, augmentation); evaluate/predict gather rows (converted from uint8 per batch) into the model's input
// buffer. Steps run by ModelState; Keras's console output and History.
#include <systolic/log.h>

#include "model/model_state.h"
#include "model/progbar.h"

#include <cmath>
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
LogValues run_inference(ModelState& s, const Tensor& x, const Tensor* y, std::int64_t batch_size, int verbose,
                        Tensor* out) {
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
      ops::copy(s.nodes[o].call.output, rows);
    }
    if (y && verbose == 1) bar.update(step + 1, read_totals(s, end));
  }
  LogValues v = y && n > 0 ? read_totals(s, n) : LogValues{};
  if (y) bar.finish(v);
  return v;
}

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
  for (int epoch = o.initial_epoch; epoch < o.epochs; ++epoch) {
    if (o.verbose) log_line(fmt::format("Epoch {}/{}", epoch + 1, o.epochs));
    std::vector<std::int64_t> order =
        o.shuffle ? global_generator().permutation(n_train) : range_rows(0, n_train);
    // Drawn only when augmenting, so runs without augmentation see the same random stream as before.
    std::uint64_t augmentation_seed = o.augmentation.enabled() ? global_generator().split() : 0;
    BatchPipeline pipeline(xt, yt, std::move(order),
                           {.batch_size = o.batch_size, .augmentation = o.augmentation, .seed = augmentation_seed,
                            .workers = o.workers, .max_queue_size = o.max_queue_size, .x_dtype = s.dtype,
                            .y_dtype = s.y_buf.dtype()});
    ops::fill(s.totals, 0.0);
    Progbar bar(steps, o.verbose);
    std::int64_t seen = 0;
    Tensor xb, yb;
    for (std::int64_t step = 0; step < steps && pipeline.next(xb, yb); ++step) {
      std::int64_t n = xb.dim(0);
      s.set_batch(xb, yb);
      s.train_step(n);
      seen += n;
      if (o.verbose == 1) bar.update(step + 1, read_totals(s, seen));
    }
    LogValues logs = read_totals(s, seen);
    if (val) {
      LogValues v = run_inference(s, val->x, &val->y, o.batch_size, 0, nullptr);
      for (auto& [k, value] : v) logs.emplace_back("val_" + k, value);
    }
    bar.finish(logs);
    history.epoch.push_back(epoch);
    for (auto& [k, value] : logs) history.history[k].push_back(value);
  }
  return history;
}

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
  return out;
}

std::vector<double> Model::train_on_batch(const Tensor& x, const Tensor& y) {
  ModelState& s = *state_;
  SYSTOLIC_CHECK(s.loss, "train_on_batch: compile model '{}' first", s.name);
  s.check_single_io("train_on_batch");
  s.check_xy(x, &y, "train_on_batch");
  ops::fill(s.totals, 0.0);
  s.load_batch(x, &y, range_rows(0, x.dim(0)));
  s.train_step(x.dim(0));
  std::vector<double> out;
  for (auto& [k, v] : read_totals(s, x.dim(0))) out.push_back(v);
  return out;
}

}  // namespace systolic
