// Keras's TensorBoard callback (callbacks.h): scalars and weight histograms in TensorBoard event files
// (io/tfevents.h), with Keras 3's tags, folders and steps (keras/src/callbacks/tensorboard.py).
#include <systolic/callbacks.h>
#include <systolic/layer.h>

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "io/tfevents.h"

namespace systolic::callbacks {

namespace {
double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

struct TensorBoard::Writers {
  std::unique_ptr<io::EventFileWriter> train, validation;
  io::EventFileWriter& get(std::unique_ptr<io::EventFileWriter>& w, const std::string& dir) {
    if (!w) w = std::make_unique<io::EventFileWriter>(dir);
    return *w;
  }
};

TensorBoard::TensorBoard(std::string log_dir, TensorBoardOptions options)
    : log_dir_(std::move(log_dir)), o_(options) {
  SYSTOLIC_CHECK(o_.histogram_freq >= 0, "TensorBoard: histogram_freq must be >= 0, got {}",
                 o_.histogram_freq);
  SYSTOLIC_CHECK(o_.update_freq >= 0,
                 "TensorBoard: update_freq must be 'epoch' (0) or a positive batch count, got {}",
                 o_.update_freq);
}

TensorBoard::~TensorBoard() = default;

TensorBoard::Writers& TensorBoard::writers() {
  if (!writers_) writers_ = std::make_unique<Writers>();
  return *writers_;
}

void TensorBoard::on_train_begin(Logs&) {
  global_batch_ = 0;
  // Keras opens the train writer when training begins, the validation one when first written.
  if (is_chief()) writers().get(writers().train, (std::filesystem::path(log_dir_) / "train").string());
}

void TensorBoard::on_train_batch_begin(std::int64_t, Logs&) {
  ++global_batch_;
  if (o_.write_steps_per_second) batch_start_ = now_seconds();
}

void TensorBoard::on_train_batch_end(std::int64_t, Logs& logs) {
  if (o_.update_freq == 0 || global_batch_ % o_.update_freq != 0 || !is_chief()) return;
  auto& train = writers().get(writers().train, (std::filesystem::path(log_dir_) / "train").string());
  if (o_.write_steps_per_second)
    train.add_scalar("batch_steps_per_second", 1.0 / std::max(now_seconds() - batch_start_, 1e-9),
                     global_batch_);
  for (auto& [k, v] : logs.items()) train.add_scalar("batch_" + k, v, global_batch_);
}

void TensorBoard::on_epoch_begin(int, Logs&) {
  if (!o_.write_steps_per_second) return;
  epoch_start_iterations_ = model().optimizer().iterations();
  epoch_start_ = now_seconds();
}

void TensorBoard::on_test_batch_begin(std::int64_t, Logs&) {
  ++global_test_batch_;
}

void TensorBoard::on_test_end(Logs& logs) {
  if (!is_chief() || logs.empty()) return;
  auto& val = writers().get(writers().validation, (std::filesystem::path(log_dir_) / "validation").string());
  for (auto& [k, v] : logs.items())
    val.add_scalar("evaluation_" + k + "_vs_iterations", v, model().optimizer().iterations());
}

void TensorBoard::on_epoch_end(int epoch, Logs& logs) {
  if (!is_chief()) return;
  auto& w = writers();
  auto& train = w.get(w.train, (std::filesystem::path(log_dir_) / "train").string());
  if (!logs.empty()) {
    // Keras: the training logs with learning_rate set to the optimizer's rate now (a learning_rate already in
    // the logs, from ReduceLROnPlateau before this callback, is replaced: one value per epoch).
    Logs::Items train_logs;
    for (auto& [k, v] : logs.items())
      if (!k.starts_with("val_") && k != "learning_rate") train_logs.emplace_back(k, v);
    train_logs.emplace_back("learning_rate", logged_learning_rate(model()));
    if (o_.write_steps_per_second)
      train_logs.emplace_back("steps_per_second",
                              double(model().optimizer().iterations() - epoch_start_iterations_) /
                                  std::max(now_seconds() - epoch_start_, 1e-9));
    for (auto& [k, v] : train_logs) train.add_scalar("epoch_" + k, v, epoch);
    for (auto& [k, v] : logs.items())
      if (k.starts_with("val_"))
        w.get(w.validation, (std::filesystem::path(log_dir_) / "validation").string())
            .add_scalar("epoch_" + k.substr(4), v, epoch);
  }
  if (o_.histogram_freq > 0 && epoch % o_.histogram_freq == 0) {
    for (auto& layer : model().layers())
      for (Weight* w : all_weights(*layer))
        train.add_histogram(model().name() + "/" + layer->name() + "/" + w->name + "/histogram",
                            io::make_histogram(w->value.to_doubles()), epoch);
  }
}

void TensorBoard::on_train_end(Logs&) {
  writers_.reset();  // closes the files; a later evaluate or fit opens new ones, as Keras's
}

}  // namespace systolic::callbacks
