// fit / evaluate / predict / train_on_batch. fit is three named pieces and a loop, as Keras's trainer is:
// the EpochIterator yields the batches of each epoch (built on the host by the BatchPipeline, or on the
// model's device), the model's TrainFunction runs a step on each (recorded once as a CUDA graph and replayed,
// where it can be), and the CallbackList calls the hooks at Keras's points (the progress bar and History are
// callbacks too). Metrics accumulate on the device and are read at the end of an epoch or when a callback
// looks at a batch's logs. evaluate/predict (and fit's validation, which is evaluate with fit's callbacks, as
// in Keras) gather rows (converted per batch) into the model's input buffer on the model's device, calling the
// on_test_* / on_predict_* hooks. Under a strategy of several replicas (s.replicas), training steps and
// inference run on every replica (distribute/replica_group.h): each takes its shard of every batch.
#include <systolic/callbacks.h>
#include <systolic/log.h>
#include <systolic/system.h>

#include <cmath>
#include <numeric>
#include <optional>

#include "distribute/replica_group.h"
#include "model/callback_list.h"
#include "model/epoch_iterator.h"
#include "model/fit_plan.h"
#include "model/model_state.h"
#include "model/progbar.h"

namespace systolic {

namespace {

std::int64_t batches_of(const Arrays& x, std::int64_t batch_size) {
  return (x.samples() + batch_size - 1) / batch_size;
}

std::vector<std::int64_t> range_rows(std::int64_t begin, std::int64_t end) {
  std::vector<std::int64_t> r(static_cast<std::size_t>(end - begin));
  std::iota(r.begin(), r.end(), begin);
  return r;
}

LogValues log_values(const ModelState& s, const std::vector<double>& t, std::int64_t seen,
                     const std::string& prefix = "") {
  const std::vector<std::string> names = s.log_names();
  const std::vector<double> values = s.log_values(t.data(), double(seen));
  LogValues v;
  for (std::size_t i = 0; i < names.size(); ++i) v.emplace_back(prefix + names[i], values[i]);
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

// Runs the model in inference mode over x in batches (Keras's test or predict loop): with y, the loss and
// metric sums (in the totals) and the test hooks, with the running means as each batch's logs; without, the
// predictions into `out`'s rows and the predict hooks, with the batch's rows as logs["outputs"]. A callback's
// stop_evaluating / stop_predicting ends it after the batch; `done` says how many samples it ran.
// Under replicas every global batch is split among them, as a training batch is (each replica takes its
// contiguous share of the batch's rows): the loss and metric sums are added over replicas after every batch
// (a collective across workers, which every worker calls alike) and predictions land in their rows of `out`
// (across workers `out` starts zeroed and each batch's rows are summed, so every worker gets every row).
LogValues run_inference(ModelState& s, const Arrays& x_in, const Arrays* y_in, const Tensor& w_in,
                        std::int64_t batch_size, CallbackList& callbacks, std::vector<Tensor>* out,
                        std::int64_t& done) {
  distribute::ReplicaGroup* group = s.replicas.get();
  const int local = group ? group->local_size() : 1;
  auto replica = [&](int l) -> ModelState& { return group ? state_of(group->replica(l)) : s; };
  // On a GPU the samples are copied there once (uint8 stays uint8) and gathered per batch by device ops.
  std::vector<Arrays> xs, ys;
  std::vector<Tensor> ws;
  for (int l = 0; l < local; ++l) {
    xs.push_back(x_in.to(replica(l).device()));
    ys.push_back(y_in ? y_in->to(replica(l).device()) : Arrays());
    ws.push_back(w_in.defined() ? w_in.to(replica(l).device()) : Tensor());
    // Weighted test batches turn the sample weights on; while they are on (after a weighted fit) a batch
    // without them weighs each sample 1.
    if (w_in.defined()) replica(l).weigh_samples(true, w_in.shape().without_batch());
  }
  const bool testing = y_in != nullptr;
  if (testing) reset_totals(s);
  const std::int64_t n = x_in.samples(), steps = batches_of(x_in, batch_size);
  const std::vector<int> outs = s.output_nodes();
  // One replica's part of a batch: rows [begin, end) of x.
  auto run = [&](int l, std::int64_t begin, std::int64_t end) {
    if (end == begin) return;
    ModelState& r = replica(l);
    r.load_batch(xs[l], testing ? &ys[l] : nullptr, range_rows(begin, end), &ws[l]);
    r.train_function.inference_step(end - begin, testing);
    if (!testing)
      for (std::size_t k = 0; k < outs.size(); ++k) {
        Tensor rows = (*out)[k].slice(begin, end);
        rows.copy_from(r.nodes[outs[k]].call.output);  // from the device to the host when on a GPU
      }
  };
  std::vector<double> summed;  // under replicas: the sums over replicas after the last batch
  done = 0;
  for (std::int64_t step = 0; step < steps; ++step) {
    std::int64_t begin = step * batch_size, end = std::min(n, begin + batch_size);
    testing ? callbacks.on_test_batch_begin(step) : callbacks.on_predict_batch_begin(step);
    if (group) {
      group->run([&](int l, distribute::Replica&) {
        auto [b, e] = group->shard(end - begin, group->global_index(l));
        run(l, begin + b, begin + e);
      });
      if (testing) summed = group->sum_totals();
      if (!testing && group->strategy().num_workers() > 1)
        for (Tensor& o : *out) {
          Tensor rows = o.slice(begin, end);
          group->comm().all_reduce_sum(rows, 0);
        }
    } else {
      run(0, begin, end);
    }
    done = end;
    if (testing) {
      // Read from the device only when a callback looks (the progress bar, when it redraws).
      callbacks.on_test_batch_end(
          step, group ? callbacks::Logs(log_values(s, summed, end))
                      : callbacks::Logs::deferred([&s, end] { return read_totals(s, end); }));
      if (s.stop_evaluating) break;
    } else {
      callbacks::Logs logs;
      logs.set_tensor("outputs", (*out)[0].slice(begin, end));
      callbacks.on_predict_batch_end(step, std::move(logs));
      if (s.stop_predicting) break;
    }
  }
  for (int l = 0; l < local; ++l) synchronize(replica(l).device());  // raises what GPU kernels flagged
  if (!testing || done == 0) return {};
  return group ? log_values(s, summed, done) : read_totals(s, done);
}

// Keras's evaluate loop between on_test_begin and on_test_end (fit's validation, and evaluate).
LogValues run_test(ModelState& s, const Arrays& x, const Arrays& y, const Tensor& w, std::int64_t batch_size,
                   CallbackList& callbacks) {
  s.stop_evaluating = false;
  callbacks.on_test_begin();
  std::int64_t done = 0;
  LogValues v = run_inference(s, x, &y, w, batch_size, callbacks, nullptr, done);
  callbacks.on_test_end(v);
  return v;
}

}  // namespace

namespace {

// One epoch of fit: its batches (from a restored backup's point when `resume` says so), each a step between the
// batch hooks; then the epoch's logs, the replicas' moving statistics averaged (per-replica batch norm: every
// replica then evaluates alike) and the validation, which Keras's fit runs as evaluate with fit's callbacks.
// `summed` gets the sums over replicas after each step (what BackupAndRestore saves).
LogValues run_epoch(ModelState& s, const FitPlan& plan, const FitOptions& o, EpochIterator& epochs,
                    CallbackList& callbacks, int epoch,
                    const std::optional<ModelState::FitProgress::Resume>& resume,
                    std::vector<double>& summed) {
  distribute::ReplicaGroup* group = plan.replicas;
  reset_totals(s);
  std::int64_t seen = 0;
  if (resume && resume->epoch == epoch && resume->batches > 0) {
    epochs.begin_epoch(epoch, resume->batches);
    set_totals(s, resume->totals);
    summed = resume->totals;
    s.fit.batches = resume->batches;
    seen = std::min(plan.x.samples(), resume->batches * o.batch_size);
  } else {
    epochs.begin_epoch(epoch);
  }
  for (Batch batch; epochs.next(batch);) {
    callbacks.on_train_batch_begin(batch.index);
    s.train_function(batch);
    seen += batch.size;
    s.fit.batches = batch.index + 1;
    if (group) {  // summed on every step: across workers a collective, which every worker must call alike
      summed = group->sum_totals();
      callbacks.on_train_batch_end(batch.index, log_values(s, summed, seen));
    } else {  // read from the device only when a callback looks (the progress bar, when it redraws)
      callbacks.on_train_batch_end(batch.index,
                                   callbacks::Logs::deferred([&s, seen] { return read_totals(s, seen); }));
    }
    if (s.stop_training) break;
  }
  synchronize(s.device());  // raises what the steps' kernels flagged on a GPU (a label out of range)
  LogValues logs = group ? log_values(s, group->sum_totals(), seen) : read_totals(s, seen);
  if (group) group->average_non_trainable_weights();
  if (plan.validation && (epoch + 1) % o.validation_freq == 0)
    for (auto& [k, value] : run_test(s, plan.validation->x, plan.validation->y,
                                     plan.validation->sample_weight, plan.validation_batch_size, callbacks))
      logs.emplace_back("val_" + k, value);
  return logs;
}

}  // namespace

// fit, as Keras's: the plan (every check, before the first step), the EpochIterator for the batches, the model's
// TrainFunction for the steps, and the CallbackList for what happens around them (progress bar, History, the
// callbacks given), at Keras's points.
History Model::fit(const Arrays& x, const Arrays& y, const FitOptions& o) {
  ModelState& s = *state_;
  FitPlan plan = FitPlan::make(s, x, y, o);
  EpochIterator epochs(s, plan.x, plan.y, plan.w, o);
  if (plan.validation) plan.validation = epochs.place(*plan.validation);
  s.train_function.begin_fit(epochs.on_device(), o.step_graph, epochs.full_batch());
  CallbackList callbacks("fit", o.callbacks, *this, plan.callback_params(o, epochs.steps()),
                         /*with_history=*/true, plan.history_keys);

  s.stop_training = false;
  std::vector<double> summed;  // under replicas: the sums over replicas at the end of the last batch
  s.fit = {.seed = epochs.seed(),
           .samples = plan.x.samples(),
           .batch_size = o.batch_size,
           .steps = epochs.steps()};
  s.fit.totals = [&s, &summed, group = plan.replicas] { return group ? summed : s.totals.to_doubles(); };
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
    logs = run_epoch(s, plan, o, epochs, callbacks, epoch, resume, summed);
    callbacks.on_epoch_end(epoch, logs);
  }
  // Keras's fit ends with optimizer.finalize_variable_values: with use_ema the weights take their moving average
  // (every replica's).
  if (o.epochs > 0) {
    if (plan.replicas)
      for (int l = 0; l < plan.replicas->local_size(); ++l) {
        ModelState& r = state_of(plan.replicas->replica(l));
        r.optimizer->finalize_variable_values(r.params);
      }
    else
      s.optimizer->finalize_variable_values(s.params);
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
bool Model::stop_evaluating() const {
  return state_->stop_evaluating;
}
void Model::set_stop_evaluating(bool stop) {
  state_->stop_evaluating = stop;
}
bool Model::stop_predicting() const {
  return state_->stop_predicting;
}
void Model::set_stop_predicting(bool stop) {
  state_->stop_predicting = stop;
}

std::vector<double> Model::evaluate(const Arrays& x, const Arrays& y, const EvaluateOptions& o) {
  ModelState& s = *state_;
  SYSTOLIC_CHECK(s.compiled(), "evaluate: compile model '{}' first", s.name);
  s.check_xy(x, &y, "evaluate");
  SYSTOLIC_CHECK(o.batch_size > 0, "evaluate: batch_size must be positive, got {}", o.batch_size);
  SYSTOLIC_CHECK(x.samples() > 0, "evaluate: no samples");
  CallbackList callbacks(
      "evaluate", o.callbacks, *this,
      {.verbose = s.chief ? o.verbose : 0, .epochs = 1, .steps = batches_of(x, o.batch_size)});
  LogValues v =
      run_test(s, x, y, sample_weights(s, o.sample_weight, x.samples(), "evaluate"), o.batch_size, callbacks);
  std::vector<double> out;
  if (v.empty()) return out;  // a callback stopped it before the first batch
  for (std::size_t i : s.evaluate_order()) out.push_back(v[i].second);
  return out;
}

std::vector<Tensor> Model::predict_outputs(const Arrays& x, const PredictOptions& o) {
  ModelState& s = *state_;
  s.check_xy(x, nullptr, "predict");
  SYSTOLIC_CHECK(o.batch_size > 0, "predict: batch_size must be positive, got {}", o.batch_size);
  // Across workers every worker's rows are summed into every worker's copy: start from zeros.
  std::vector<Tensor> out;
  for (auto& output : s.outputs) {
    const Shape shape = output.shape().with_batch(x.samples());
    out.push_back(s.replicas ? Tensor::zeros(shape, output.dtype()) : Tensor(shape, output.dtype()));
  }
  CallbackList callbacks(
      "predict", o.callbacks, *this,
      {.verbose = s.chief ? o.verbose : 0, .epochs = 1, .steps = batches_of(x, o.batch_size)});
  s.stop_predicting = false;
  callbacks.on_predict_begin();
  std::int64_t done = 0;
  run_inference(s, x, nullptr, Tensor(), o.batch_size, callbacks, &out, done);
  callbacks.on_predict_end();
  for (Tensor& t : out) {
    if (done < t.dim(0)) t = t.slice(0, done).clone();  // stopped: the batches done, as Keras returns
    if (t.dtype() == DType::bfloat16) t = t.to(DType::float32);  // mixed precision: float32 results
  }
  return out;
}

Tensor Model::predict(const Arrays& x, const PredictOptions& o) {
  SYSTOLIC_CHECK(state_->outputs.size() == 1,
                 "predict: model '{}' has {} outputs; predict_outputs returns each of them", state_->name,
                 state_->outputs.size());
  return predict_outputs(x, o)[0];
}

std::vector<double> Model::train_on_batch(const Arrays& x, const Arrays& y) {
  ModelState& s = *state_;
  SYSTOLIC_CHECK(s.compiled(), "train_on_batch: compile model '{}' first", s.name);
  s.check_trainable("train_on_batch");
  s.check_xy(x, &y, "train_on_batch");
  const std::int64_t n = x.samples();
  std::vector<double> totals;
  if (s.replicas) {
    distribute::ReplicaGroup& g = *s.replicas;
    SYSTOLIC_CHECK(
        n % g.size() == 0,
        "train_on_batch: a batch of {} samples does not divide among the {} replicas of strategy {}", n,
        g.size(), g.strategy().name());
    g.reset_totals();
    g.train_step(x, y);
    totals = g.sum_totals();
  } else {
    ops::fill(s.totals, 0.0);
    Arrays yd = y.to(s.device());
    s.load_batch(x.to(s.device()), &yd, range_rows(0, n));
    s.train_function.run_eagerly(n);
    totals = s.totals.to_doubles();
  }
  const LogValues v = log_values(s, totals, n);
  std::vector<double> out;
  for (std::size_t i : s.evaluate_order()) out.push_back(v[i].second);
  return out;
}

}  // namespace systolic
