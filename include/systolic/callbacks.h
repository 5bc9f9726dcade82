// Callbacks (Keras's keras.callbacks.Callback): hooks that fit, evaluate and predict call at Keras's points, with
// Keras's logs.
//
//   fit:       on_train_begin
//              each epoch:  on_epoch_begin(epoch)
//                           each batch: on_train_batch_begin(batch), the step, on_train_batch_end(batch, logs)
//                           with validation data: on_test_begin, each validation batch on_test_batch_begin /
//                           on_test_batch_end(batch, logs), on_test_end(logs)
//                           on_epoch_end(epoch, logs)
//              on_train_end(logs)
//   evaluate:  on_test_begin, on_test_batch_begin / on_test_batch_end per batch, on_test_end(logs)
//   predict:   on_predict_begin, on_predict_batch_begin / on_predict_batch_end(batch, logs) per batch (the logs
//              hold the batch's predictions as the tensor "outputs"), on_predict_end
//
//   struct StopAtLoss : systolic::callbacks::Callback {
//     void on_epoch_end(int epoch, systolic::callbacks::Logs& logs) override {
//       if (logs["loss"] < 0.1) model().set_stop_training(true);
//     }
//   };
//   model.fit(x, y, {.epochs = 50, .callbacks = {std::make_shared<StopAtLoss>()}});
//
// logs hold the loss and the metrics by name, in Keras's order (loss, metrics, then val_loss, val_metrics):
// at the end of a batch the running means so far (of the epoch, or of the evaluation; read from the device only
// when a hook looks at them: that read waits for the device), at the end of an epoch its values with
// validation, at the end of an evaluation its values, at the end of training the last epoch's. As Keras's logs
// dict, one Logs goes to every callback of a hook in turn, and a callback may add to it (set): the callbacks
// after it see what it added (ReduceLROnPlateau and LearningRateScheduler add "learning_rate" at the end of an
// epoch, so a CSVLogger or History after them records it). Batch logs are valid during the call; keep items()
// to keep them.
// A callback reaches the model through model() and params() (set before the first hook). It ends training as
// Keras's model.stop_training = True does: fit stops after the current batch, then ends that epoch
// (validation, on_epoch_end) and on_train_end; set_stop_evaluating / set_stop_predicting end evaluate or
// predict after the current batch (Keras's stop_evaluating / stop_predicting).
// fit's own progress bar (verbose > 0) and History are callbacks too, in tf.keras 2.x's order: the progress
// bar first, then the callbacks given, History last (so the epoch's line does not show a learning_rate that a
// later callback adds, as tf.keras 2.x's does not; Keras 3 puts its progress bar last, after History).
#pragma once

#include <systolic/model.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace systolic::callbacks {

class Logs {
 public:
  using Items = std::vector<std::pair<std::string, double>>;
  Logs() = default;
  Logs(Items items) : items_(std::move(items)) {}  // implicit: a Logs is its items
  // Values that `read` gives on first use.
  static Logs deferred(std::function<Items()> read);

  const Items& items() const;
  bool empty() const { return items().empty() && tensors_.empty(); }
  bool contains(const std::string& key) const;
  // The value of `key`; Error naming the key and the keys present when it is absent.
  double operator[](const std::string& key) const;
  // Keras's logs[key] = value: replaces the value of `key`, or adds it at the end.
  void set(const std::string& key, double value);

  // Tensors in the logs (predict's batch "outputs", on the host); Error naming the key when it is absent.
  const Tensor& tensor(const std::string& key) const;
  void set_tensor(const std::string& key, Tensor value);

 private:
  mutable Items items_;
  mutable std::function<Items()> read_;
  std::vector<std::pair<std::string, Tensor>> tensors_;
};

// What fit, evaluate or predict tells its callbacks (Keras's callback.params): in fit's validation, fit's.
struct Params {
  int verbose = 0;
  int epochs = 0;          // evaluate, predict: 1
  std::int64_t steps = 0;  // batches per epoch (of training in fit; of evaluate or predict)
};

class Callback {
 public:
  virtual ~Callback() = default;
  virtual void on_train_begin(Logs& logs) { (void)logs; }
  virtual void on_train_end(Logs& logs) { (void)logs; }
  virtual void on_epoch_begin(int epoch, Logs& logs) { (void)epoch, (void)logs; }
  virtual void on_epoch_end(int epoch, Logs& logs) { (void)epoch, (void)logs; }
  virtual void on_train_batch_begin(std::int64_t batch, Logs& logs) { (void)batch, (void)logs; }
  virtual void on_train_batch_end(std::int64_t batch, Logs& logs) { (void)batch, (void)logs; }
  virtual void on_test_begin(Logs& logs) { (void)logs; }
  virtual void on_test_end(Logs& logs) { (void)logs; }
  virtual void on_test_batch_begin(std::int64_t batch, Logs& logs) { (void)batch, (void)logs; }
  virtual void on_test_batch_end(std::int64_t batch, Logs& logs) { (void)batch, (void)logs; }
  virtual void on_predict_begin(Logs& logs) { (void)logs; }
  virtual void on_predict_end(Logs& logs) { (void)logs; }
  virtual void on_predict_batch_begin(std::int64_t batch, Logs& logs) { (void)batch, (void)logs; }
  virtual void on_predict_batch_end(std::int64_t batch, Logs& logs) { (void)batch, (void)logs; }

  // Set by fit, evaluate and predict before their first hook.
  void set_model(const Model& model) { model_.emplace(model); }
  void set_params(const Params& params) { params_ = params; }
  // The model being trained (a handle: it shares the model); Error before fit has set it.
  Model& model();
  const Params& params() const { return params_; }
  // Whether this process is the chief: false on the workers other than worker 0 of a model under
  // MultiWorkerMirroredStrategy (MPI), true otherwise (also before a model is set). Callbacks that write files
  // (CSVLogger, TensorBoard, BackupAndRestore; ModelCheckpoint through Model::save) write only on the chief,
  // while every worker makes the same decisions from the same, globally reduced, logs.
  bool is_chief() const;

 private:
  std::optional<Model> model_;
  Params params_;
};

}  // namespace systolic::callbacks

// Keras's callbacks (keras.callbacks), with Keras 3's options, defaults and decisions. `mode` is "auto", "min"
// or "max"; auto minimises a monitor named loss/val_loss (or any name with "loss"), maximises one naming
// "acc"/"accuracy" (Keras: the metric's direction), and is an Error for anything else, as in Keras.
namespace systolic::callbacks {

// A double as Python's repr() writes it ("0.1", "1.0", "1e-05", "nan"), as Keras's logs and messages show it.
std::string python_repr(double v);
// The optimizer's learning rate as Keras logs it: float(optimizer.learning_rate), a float32 variable (or the
// schedule's float32 value at the optimizer's iterations): 0.1 logs as 0.10000000149011612.
double logged_learning_rate(Model& model);

// Saves the model (save_weights_only: its weights) at the end of each epoch, or every save_freq batches
// (save_freq > 0), to filepath formatted with Python's str.format fields: {epoch} (1-based), {batch} (1-based,
// batch saves), and any log key: "ckpt-{epoch:02d}-{val_loss:.2f}.h5". save_best_only saves only when
// `monitor` improves on the best seen (initially initial_value_threshold). A model path must end in .keras or
// .h5, a weights path in .weights.h5 (Keras's rule); files are written atomically by Model::save/save_weights.
struct ModelCheckpointOptions {
  std::string monitor = "val_loss";
  int verbose = 0;
  bool save_best_only = false;
  bool save_weights_only = false;
  std::string mode = "auto";
  std::int64_t save_freq = 0;  // 0: "epoch"; N > 0: every N batches
  std::optional<double> initial_value_threshold;
};

// The monitor's direction and improvement test shared by the monitoring callbacks (Keras's MonitorCallback).
class MonitorCallback : public Callback {
 public:
  MonitorCallback(std::string monitor, std::string mode, double min_delta, std::optional<double> baseline);
  const std::string& monitor() const { return monitor_; }
  std::optional<double> best() const { return best_; }

 protected:
  // Keras's _is_improvement: monitor_op(value - min_delta, reference); no reference is an improvement.
  bool is_improvement(double value, std::optional<double> reference);
  void set_monitor_op();  // on first use, as Keras does
  std::string monitor_, mode_;
  double min_delta_;
  std::optional<double> best_;
  int op_ = 0;  // 0 unset, -1 less (minimise), +1 greater (maximise)
};

class ModelCheckpoint : public MonitorCallback {
 public:
  explicit ModelCheckpoint(std::string filepath, ModelCheckpointOptions options = {});
  void on_epoch_begin(int epoch, Logs& logs) override;
  void on_epoch_end(int epoch, Logs& logs) override;
  void on_train_batch_end(std::int64_t batch, Logs& logs) override;
  // The paths saved so far, in order.
  const std::vector<std::string>& saved() const { return saved_; }
  // The filepath formatted for this epoch (0-based), batch (0-based, or -1) and logs; Error naming the
  // template and the missing field when a field is not in the logs.
  std::string file_path(int epoch, std::int64_t batch, const Logs& logs) const;

 private:
  void save(int epoch, std::int64_t batch, const Logs& logs);
  std::string filepath_;
  ModelCheckpointOptions o_;
  int current_epoch_ = 0;
  std::int64_t batches_since_save_ = 0;
  std::optional<std::int64_t> last_batch_;
  std::vector<std::string> saved_;
};

struct EarlyStoppingOptions {
  std::string monitor = "val_loss";
  double min_delta = 0;
  int patience = 0;
  int verbose = 0;
  std::string mode = "auto";
  std::optional<double> baseline;
  bool restore_best_weights = false;
  int start_from_epoch = 0;
};

// Stops training when `monitor` has not improved for `patience` epochs (Keras 3's EarlyStopping).
class EarlyStopping : public MonitorCallback {
 public:
  explicit EarlyStopping(EarlyStoppingOptions options = {});
  void on_train_begin(Logs& logs) override;
  void on_epoch_end(int epoch, Logs& logs) override;
  void on_train_end(Logs& logs) override;
  int stopped_epoch() const { return stopped_epoch_; }  // 0-based; 0: did not stop
  int best_epoch() const { return best_epoch_; }
  int wait() const { return wait_; }

 private:
  EarlyStoppingOptions o_;
  int wait_ = 0, stopped_epoch_ = 0, best_epoch_ = 0;
  std::vector<Tensor> best_weights_;
};

struct ReduceLROnPlateauOptions {
  std::string monitor = "val_loss";
  double factor = 0.1;
  int patience = 10;
  int verbose = 0;
  std::string mode = "auto";
  double min_delta = 1e-4;
  int cooldown = 0;
  double min_lr = 0.0;
};

// Multiplies the optimizer's learning rate by `factor` when `monitor` has not improved for `patience` epochs.
// As Keras's, it adds the rate of the epoch (before any reduction at its end) to the epoch's logs as
// "learning_rate" (the optimizer's float32 rate).
class ReduceLROnPlateau : public MonitorCallback {
 public:
  explicit ReduceLROnPlateau(ReduceLROnPlateauOptions options = {});
  void on_train_begin(Logs& logs) override;
  void on_epoch_end(int epoch, Logs& logs) override;

 private:
  ReduceLROnPlateauOptions o_;
  int wait_ = 0, cooldown_counter_ = 0;
};

// Sets the learning rate at the start of each epoch to schedule(epoch, current rate), and adds the rate to the
// epoch's logs as "learning_rate" at its end (Keras's).
class LearningRateScheduler : public Callback {
 public:
  explicit LearningRateScheduler(std::function<double(int epoch, double lr)> schedule, int verbose = 0);
  void on_epoch_begin(int epoch, Logs& logs) override;
  void on_epoch_end(int epoch, Logs& logs) override;

 private:
  std::function<double(int, double)> schedule_;
  int verbose_;
};

// Stops training at the first batch whose loss is NaN or infinite (raise_error: throws Error instead).
class TerminateOnNaN : public Callback {
 public:
  explicit TerminateOnNaN(bool raise_error = false) : raise_error_(raise_error) {}
  void on_train_batch_end(std::int64_t batch, Logs& logs) override;

 private:
  bool raise_error_;
};

// Keras's CSVLogger: a header "epoch" + the sorted log keys (with val_ keys added when the first epoch has
// none), then one row per epoch; append keeps an existing file (and writes no header when it has a line).
class CSVLogger : public Callback {
 public:
  explicit CSVLogger(std::string filename, std::string separator = ",", bool append = false);
  ~CSVLogger() override;
  void on_train_begin(Logs& logs) override;
  void on_epoch_end(int epoch, Logs& logs) override;
  void on_train_end(Logs& logs) override;

 private:
  std::string filename_, sep_;
  bool append_, append_header_ = true;
  std::FILE* file_ = nullptr;
  std::optional<std::vector<std::string>> keys_;
  bool header_written_ = false;
};

struct TensorBoardOptions {
  int histogram_freq = 0;        // weight histograms every N epochs (0: none)
  std::int64_t update_freq = 0;  // 0: "epoch"; N > 0: batch_<key> scalars every N batches
  // epoch_steps_per_second (the optimizer's steps in the epoch over its seconds) under train, and with
  // update_freq batch_steps_per_second (one over the batch's seconds) beside the batch scalars.
  bool write_steps_per_second = false;
};

// Keras's TensorBoard: event files under log_dir/train (epoch_<key> for the training logs and
// epoch_learning_rate: the optimizer's rate at the end of the epoch) and log_dir/validation (epoch_<key> for
// val_<key>), at step = epoch; at the end of every evaluation (fit's validation, or evaluate given this
// callback) evaluation_<key>_vs_iterations under validation at step = the optimizer's iterations; with
// update_freq N, batch_<key> under train at the global batch count when it divides by N (and the evaluation
// scalars only when the count of validation batches so far does, as Keras's record_if); with histogram_freq,
// <model>/<layer>/<weight>/histogram (Keras 3 writes its scalars as TF2 tensor summaries; these are the classic
// simple_value scalars, which TensorBoard shows alike). Files are opened when first written; under replicas
// and MPI only the chief writes them.
class TensorBoard : public Callback {
 public:
  explicit TensorBoard(std::string log_dir = "logs", TensorBoardOptions options = {});
  ~TensorBoard() override;
  void on_train_begin(Logs& logs) override;
  void on_train_batch_begin(std::int64_t batch, Logs& logs) override;
  void on_train_batch_end(std::int64_t batch, Logs& logs) override;
  void on_test_batch_begin(std::int64_t batch, Logs& logs) override;
  void on_test_end(Logs& logs) override;
  void on_epoch_begin(int epoch, Logs& logs) override;
  void on_epoch_end(int epoch, Logs& logs) override;
  void on_train_end(Logs& logs) override;

 private:
  struct Writers;
  Writers& writers();  // made on first use (Keras's lazy writers)
  std::string log_dir_;
  TensorBoardOptions o_;
  std::int64_t global_batch_ = 0, global_test_batch_ = 0;
  std::int64_t epoch_start_iterations_ = 0;
  double epoch_start_ = 0, batch_start_ = 0;  // seconds (steady clock)
  std::unique_ptr<Writers> writers_;
};

// Keras's LambdaCallback: each hook given is called at its point (Keras takes the test and predict hooks as
// keyword arguments too). The train batch hooks are on_batch_begin_fn / on_batch_end_fn (Keras's on_batch_*).
struct LambdaCallback : Callback {
  using EpochFn = std::function<void(int, Logs&)>;
  using BatchFn = std::function<void(std::int64_t, Logs&)>;
  using LogsFn = std::function<void(Logs&)>;
  EpochFn on_epoch_begin_fn, on_epoch_end_fn;
  BatchFn on_batch_begin_fn, on_batch_end_fn, on_test_batch_begin_fn, on_test_batch_end_fn,
      on_predict_batch_begin_fn, on_predict_batch_end_fn;
  LogsFn on_train_begin_fn, on_train_end_fn, on_test_begin_fn, on_test_end_fn, on_predict_begin_fn,
      on_predict_end_fn;

  void on_epoch_begin(int e, Logs& l) override { call(on_epoch_begin_fn, e, l); }
  void on_epoch_end(int e, Logs& l) override { call(on_epoch_end_fn, e, l); }
  void on_train_batch_begin(std::int64_t b, Logs& l) override { call(on_batch_begin_fn, b, l); }
  void on_train_batch_end(std::int64_t b, Logs& l) override { call(on_batch_end_fn, b, l); }
  void on_test_batch_begin(std::int64_t b, Logs& l) override { call(on_test_batch_begin_fn, b, l); }
  void on_test_batch_end(std::int64_t b, Logs& l) override { call(on_test_batch_end_fn, b, l); }
  void on_predict_batch_begin(std::int64_t b, Logs& l) override { call(on_predict_batch_begin_fn, b, l); }
  void on_predict_batch_end(std::int64_t b, Logs& l) override { call(on_predict_batch_end_fn, b, l); }
  void on_train_begin(Logs& l) override { call(on_train_begin_fn, l); }
  void on_train_end(Logs& l) override { call(on_train_end_fn, l); }
  void on_test_begin(Logs& l) override { call(on_test_begin_fn, l); }
  void on_test_end(Logs& l) override { call(on_test_end_fn, l); }
  void on_predict_begin(Logs& l) override { call(on_predict_begin_fn, l); }
  void on_predict_end(Logs& l) override { call(on_predict_end_fn, l); }

 private:
  template <class F, class... A>
  static void call(const F& f, A&&... a) {
    if (f) f(std::forward<A>(a)...);
  }
};

}  // namespace systolic::callbacks
