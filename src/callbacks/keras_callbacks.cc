// Keras's callbacks (callbacks.h): ModelCheckpoint, EarlyStopping, ReduceLROnPlateau, LearningRateScheduler,
// TerminateOnNaN, CSVLogger. Each follows Keras 3's keras/src/callbacks/<name>.py decision for decision: when it
// saves, stops or changes the rate (tests/test_callbacks.cc replays sequences recorded from Keras).
#include <fmt/args.h>
#include <fmt/format.h>
#include <systolic/callbacks.h>
#include <systolic/error.h>
#include <systolic/log.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

namespace systolic::callbacks {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string keys_list(const Logs& logs) {
  std::string s;
  for (auto& [k, v] : logs.items()) s += (s.empty() ? "" : ",") + k;
  return s;
}

std::optional<double> get(const Logs& logs, const std::string& key) {
  for (auto& [k, v] : logs.items())
    if (k == key) return v;
  return std::nullopt;
}

}  // namespace

double logged_learning_rate(Model& model) {
  return static_cast<float>(model.optimizer().learning_rate());
}

std::string python_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::string s = fmt::format("{}", v);  // shortest round trip, as Python's repr
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

// ---- MonitorCallback ----

MonitorCallback::MonitorCallback(std::string monitor, std::string mode, double min_delta,
                                 std::optional<double> baseline)
    : monitor_(std::move(monitor)), mode_(std::move(mode)), min_delta_(std::abs(min_delta)), best_(baseline) {
  if (mode_ != "auto" && mode_ != "min" && mode_ != "max") {
    log_line(fmt::format("Warning: mode '{}' is unknown, fallback to auto mode.", mode_));
    mode_ = "auto";
  }
}

void MonitorCallback::set_monitor_op() {
  if (mode_ == "min") {
    op_ = -1;
  } else if (mode_ == "max") {
    op_ = 1;
  } else {
    std::string name = monitor_.starts_with("val_") ? monitor_.substr(4) : monitor_;
    if (name == "loss") op_ = -1;
    // Keras asks the model's metric for its direction: accuracies go up, the error metrics down.
    for (auto& m : model().metrics_names()) {
      if (m != name || m == "loss") continue;
      bool up = m.find("acc") != std::string::npos || m.find("auc") != std::string::npos ||
                m.find("precision") != std::string::npos || m.find("recall") != std::string::npos;
      op_ = up ? 1 : -1;
    }
    SYSTOLIC_CHECK(op_ != 0,
                   "callback received monitor={}, but it is not able to automatically determine whether that "
                   "metric should be maximized or minimized: pass mode max or min",
                   monitor_);
  }
  if (op_ < 0) min_delta_ = -min_delta_;
}

bool MonitorCallback::is_improvement(double value, std::optional<double> reference) {
  if (!reference) return true;
  // Keras compares in float32 (ops.less on Python floats gives float32 tensors).
  float a = static_cast<float>(value - min_delta_), b = static_cast<float>(*reference);
  return op_ < 0 ? a < b : a > b;
}

// ---- ModelCheckpoint ----

ModelCheckpoint::ModelCheckpoint(std::string filepath, ModelCheckpointOptions options)
    : MonitorCallback(options.monitor, options.mode, 0.0, options.initial_value_threshold),
      filepath_(std::move(filepath)),
      o_(std::move(options)) {
  SYSTOLIC_CHECK(o_.save_freq >= 0,
                 "ModelCheckpoint: save_freq must be 'epoch' (0) or a positive batch count, got {}",
                 o_.save_freq);
  if (o_.save_weights_only)
    SYSTOLIC_CHECK(ends_with(filepath_, ".weights.h5"),
                   "ModelCheckpoint: with save_weights_only the filepath must end in .weights.h5, got {}",
                   filepath_);
  else
    SYSTOLIC_CHECK(ends_with(filepath_, ".keras") || ends_with(filepath_, ".h5"),
                   "ModelCheckpoint: the filepath must end in .keras or .h5, got {}", filepath_);
}

std::string ModelCheckpoint::file_path(int epoch, std::int64_t batch, const Logs& logs) const {
  // Python's str.format with named fields; fmt's format spec is Python's.
  fmt::dynamic_format_arg_store<fmt::format_context> args;
  bool logs_have_batch = false;
  for (auto& [k, v] : logs.items()) {
    if (k == "epoch") continue;
    if (k == "batch") logs_have_batch = true;
    args.push_back(fmt::arg(k.c_str(), v));  // the names live in logs, which outlive the call
  }
  args.push_back(fmt::arg("epoch", epoch + 1));
  if (batch >= 0 && !logs_have_batch) args.push_back(fmt::arg("batch", batch + 1));
  try {
    return fmt::vformat(filepath_, args);
  } catch (const fmt::format_error& e) {
    throw Error(
        fmt::format("ModelCheckpoint: failed to format the filepath \"{}\" with epoch{} and the logs "
                    "({}): {}",
                    filepath_, batch >= 0 ? ", batch" : "", keys_list(logs), e.what()));
  }
}

void ModelCheckpoint::on_epoch_begin(int epoch, Logs&) {
  current_epoch_ = epoch;
}

void ModelCheckpoint::on_epoch_end(int epoch, Logs& logs) {
  if (op_ == 0) set_monitor_op();
  if (o_.save_freq == 0) save(epoch, -1, logs);
}

void ModelCheckpoint::on_train_batch_end(std::int64_t batch, Logs& logs) {
  if (o_.save_freq == 0) return;
  std::int64_t add = (!last_batch_ || batch <= *last_batch_) ? batch + 1 : batch - *last_batch_;
  batches_since_save_ += add;
  last_batch_ = batch;
  if (batches_since_save_ >= o_.save_freq) {
    batches_since_save_ = 0;
    if (op_ == 0) set_monitor_op();
    save(current_epoch_, batch, logs);
  }
}

void ModelCheckpoint::save(int epoch, std::int64_t batch, const Logs& logs) {
  std::string path = file_path(epoch, batch, logs);
  bool should = true;
  if (o_.save_best_only) {
    std::optional<double> current = get(logs, monitor_);
    if (!current) {
      log_line(fmt::format("Warning: can save best model only with {} available.", monitor_));
    } else {
      std::string best_str = best_ ? fmt::format("{:.5f}", *best_) : "None";
      if (is_improvement(*current, best_)) {
        if (o_.verbose > 0)
          log_line(fmt::format("\nEpoch {}: {} improved from {} to {:.5f}, saving model to {}", epoch + 1,
                               monitor_, best_str, *current, path));
        best_ = *current;
      } else {
        if (o_.verbose > 0)
          log_line(fmt::format("\nEpoch {}: {} did not improve from {}", epoch + 1, monitor_, best_str));
        should = false;
      }
    }
  } else if (o_.verbose > 0) {
    log_line(fmt::format("\nEpoch {}: saving model to {}", epoch + 1, path));
  }
  if (!should) return;
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (!dir.empty() && is_chief()) {  // the chief saves (Model::save)
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    SYSTOLIC_CHECK(!ec, "ModelCheckpoint: cannot create the folder {}: {}", dir.string(), ec.message());
  }
  SYSTOLIC_CHECK(!std::filesystem::is_directory(path),
                 "ModelCheckpoint: the filepath is an existing directory: {} (give a file path)", path);
  if (o_.save_weights_only)
    model().save_weights(path);
  else
    model().save(path);
  saved_.push_back(path);
  if (o_.verbose > 0) log_line(fmt::format("\nEpoch {}: finished saving model to {}", epoch + 1, path));
}

// ---- EarlyStopping ----

EarlyStopping::EarlyStopping(EarlyStoppingOptions options)
    : MonitorCallback(options.monitor, options.mode, options.min_delta, std::nullopt),
      o_(std::move(options)) {}

void EarlyStopping::on_train_begin(Logs&) {
  wait_ = 0;
  stopped_epoch_ = 0;
  best_.reset();
  best_weights_.clear();
  best_epoch_ = 0;
}

void EarlyStopping::on_epoch_end(int epoch, Logs& logs) {
  if (op_ == 0) set_monitor_op();
  std::optional<double> current = get(logs, monitor_);
  if (!current)
    log_line(
        fmt::format("Warning: early stopping conditioned on metric `{}` which is not available. Available "
                    "metrics are: {}",
                    monitor_, keys_list(logs)));
  if (!current || epoch < o_.start_from_epoch) return;
  if (o_.restore_best_weights && best_weights_.empty()) {
    best_weights_ = model().get_weights();
    best_epoch_ = epoch;
  }
  ++wait_;
  if (is_improvement(*current, best_)) {
    best_ = *current;
    best_epoch_ = epoch;
    if (o_.restore_best_weights) best_weights_ = model().get_weights();
    // Only restart wait when the value beats both the baseline and the best so far.
    if (!o_.baseline || is_improvement(*current, o_.baseline)) wait_ = 0;
    return;
  }
  if (wait_ >= o_.patience && epoch > 0) {
    stopped_epoch_ = epoch;
    model().set_stop_training(true);
  }
}

void EarlyStopping::on_train_end(Logs&) {
  if (stopped_epoch_ > 0 && o_.verbose > 0)
    log_line(fmt::format("Epoch {}: early stopping", stopped_epoch_ + 1));
  if (o_.restore_best_weights && !best_weights_.empty()) {
    if (o_.verbose > 0)
      log_line(fmt::format("Restoring model weights from the end of the best epoch: {}.", best_epoch_ + 1));
    model().set_weights(best_weights_);
  }
}

// ---- ReduceLROnPlateau ----

ReduceLROnPlateau::ReduceLROnPlateau(ReduceLROnPlateauOptions options)
    : MonitorCallback(options.monitor, options.mode, options.min_delta, std::nullopt),
      o_(std::move(options)) {
  SYSTOLIC_CHECK(o_.factor < 1.0, "ReduceLROnPlateau does not support a factor >= 1.0, got factor={}",
                 o_.factor);
}

void ReduceLROnPlateau::on_train_begin(Logs&) {
  best_.reset();
  cooldown_counter_ = 0;
  wait_ = 0;
}

void ReduceLROnPlateau::on_epoch_end(int epoch, Logs& logs) {
  if (op_ == 0) set_monitor_op();
  logs.set("learning_rate", logged_learning_rate(model()));
  std::optional<double> current = get(logs, monitor_);
  if (!current) {
    log_line(
        fmt::format("Warning: learning rate reduction is conditioned on metric `{}` which is not available. "
                    "Available metrics are: {}.",
                    monitor_, keys_list(logs)));
    return;
  }
  if (cooldown_counter_ > 0) {
    --cooldown_counter_;
    wait_ = 0;
  }
  if (is_improvement(*current, best_)) {
    best_ = *current;
    wait_ = 0;
  } else if (cooldown_counter_ <= 0) {
    if (++wait_ >= o_.patience) {
      optimizers::Optimizer& opt = model().optimizer();
      double old_lr = static_cast<float>(opt.learning_rate());  // Keras's rate is a float32 variable
      if (old_lr > static_cast<float>(o_.min_lr)) {
        double new_lr = std::max(old_lr * o_.factor, o_.min_lr);
        opt.set_learning_rate(new_lr);
        if (o_.verbose > 0)
          log_line(fmt::format("\nEpoch {}: ReduceLROnPlateau reducing learning rate to {}.", epoch + 1,
                               python_repr(new_lr)));
        cooldown_counter_ = o_.cooldown;
        wait_ = 0;
      }
    }
  }
}

// ---- LearningRateScheduler ----

LearningRateScheduler::LearningRateScheduler(std::function<double(int, double)> schedule, int verbose)
    : schedule_(std::move(schedule)), verbose_(verbose) {
  SYSTOLIC_CHECK(bool(schedule_), "LearningRateScheduler: no schedule given");
}

void LearningRateScheduler::on_epoch_begin(int epoch, Logs&) {
  optimizers::Optimizer& opt = model().optimizer();
  double lr = schedule_(epoch, static_cast<float>(opt.learning_rate()));
  SYSTOLIC_CHECK(std::isfinite(lr), "LearningRateScheduler: the schedule gave {} at epoch {}", lr, epoch);
  opt.set_learning_rate(lr);
  if (verbose_ > 0)
    log_line(fmt::format("\nEpoch {}: LearningRateScheduler setting learning rate to {}.", epoch + 1,
                         python_repr(lr)));
}

void LearningRateScheduler::on_epoch_end(int, Logs& logs) {
  logs.set("learning_rate", logged_learning_rate(model()));
}

// ---- TerminateOnNaN ----

void TerminateOnNaN::on_train_batch_end(std::int64_t batch, Logs& logs) {
  std::optional<double> loss = get(logs, "loss");
  if (!loss || std::isfinite(*loss)) return;
  SYSTOLIC_CHECK(!raise_error_,
                 "NaN or Inf loss encountered at batch {}. Loss value: {}. Terminating training "
                 "immediately.",
                 batch, *loss);
  log_line(fmt::format("Batch {}: Invalid loss, terminating training", batch));
  model().set_stop_training(true);
}

// ---- CSVLogger ----

CSVLogger::CSVLogger(std::string filename, std::string separator, bool append)
    : filename_(std::move(filename)), sep_(std::move(separator)), append_(append) {
  SYSTOLIC_CHECK(sep_.size() == 1, "CSVLogger: the separator must be one character, got '{}'", sep_);
}

CSVLogger::~CSVLogger() {
  if (file_) std::fclose(file_);
}

void CSVLogger::on_train_begin(Logs&) {
  if (file_) std::fclose(file_);
  file_ = nullptr;
  if (!is_chief()) return;  // under MPI the chief writes the log
  append_header_ = true;
  if (append_ && std::filesystem::exists(filename_)) {
    std::FILE* f = std::fopen(filename_.c_str(), "r");
    if (f) {
      int c = std::fgetc(f);  // Keras: a header unless the file has a first line
      append_header_ = c == EOF;
      std::fclose(f);
    }
  }
  file_ = std::fopen(filename_.c_str(), append_ ? "a" : "w");
  SYSTOLIC_CHECK(file_, "CSVLogger: cannot open {} for writing", filename_);
  keys_.reset();
  header_written_ = false;
}

void CSVLogger::on_epoch_end(int epoch, Logs& logs) {
  if (!file_) return;
  if (!keys_) {
    std::vector<std::string> keys;
    for (auto& [k, v] : logs.items()) keys.push_back(k);
    std::sort(keys.begin(), keys.end());
    bool has_val = std::any_of(keys.begin(), keys.end(), [](auto& k) { return k.starts_with("val_"); });
    if (!has_val && !keys.empty()) {
      std::size_t n = keys.size();
      for (std::size_t i = 0; i < n; ++i) keys.push_back("val_" + keys[i]);
    }
    keys_ = keys;
  }
  std::string line;
  if (!header_written_) {
    header_written_ = true;
    if (append_header_) {
      line = "epoch";
      for (auto& k : *keys_) line += sep_ + k;
      line += "\r\n";  // Python's csv (excel dialect) ends rows with \r\n
    }
  }
  line += std::to_string(epoch);
  for (auto& k : *keys_) {
    std::optional<double> v = get(logs, k);
    // Python writes floats with repr(): shortest round trip, "nan", "inf".
    line += sep_ + (v ? python_repr(*v) : std::string("NA"));
  }
  line += "\r\n";
  SYSTOLIC_CHECK(std::fputs(line.c_str(), file_) >= 0 && std::fflush(file_) == 0,
                 "CSVLogger: cannot write {}", filename_);
}

void CSVLogger::on_train_end(Logs&) {
  if (file_) std::fclose(file_);
  file_ = nullptr;
}

}  // namespace systolic::callbacks
