// Keras's TensorBoard callback (callbacks.h): scalars and weight histograms in TensorBoard event files
// (io/tfevents.h), with Keras 3's tags, folders and steps (keras/src/callbacks/tensorboard.py).
#include <systolic/callbacks.h>
#include <systolic/layer.h>

#include <filesystem>

#include "io/tfevents.h"

namespace systolic::callbacks {

struct TensorBoard::Writers {
  std::unique_ptr<io::EventFileWriter> train, validation;
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

void TensorBoard::on_train_begin(const Logs&) {
  global_batch_ = 0;
  // Keras opens both writers lazily; the validation one only when there are val_ logs (on_epoch_end).
  writers_ = std::make_unique<Writers>();
  writers_->train =
      std::make_unique<io::EventFileWriter>((std::filesystem::path(log_dir_) / "train").string());
}

void TensorBoard::on_train_batch_begin(std::int64_t, const Logs&) {
  ++global_batch_;
}

void TensorBoard::on_train_batch_end(std::int64_t, const Logs& logs) {
  if (o_.update_freq == 0 || global_batch_ % o_.update_freq != 0 || !writers_) return;
  for (auto& [k, v] : logs.items()) writers_->train->add_scalar("batch_" + k, v, global_batch_);
}

void TensorBoard::on_epoch_end(int epoch, const Logs& logs) {
  if (!writers_) return;
  bool any_val = false;
  for (auto& [k, v] : logs.items()) {
    if (k.starts_with("val_")) {
      any_val = true;
      continue;
    }
    writers_->train->add_scalar("epoch_" + k, v, epoch);
  }
  writers_->train->add_scalar("epoch_learning_rate", float(model().optimizer().learning_rate()), epoch);
  if (any_val) {
    if (!writers_->validation)
      writers_->validation =
          std::make_unique<io::EventFileWriter>((std::filesystem::path(log_dir_) / "validation").string());
    for (auto& [k, v] : logs.items())
      if (k.starts_with("val_")) writers_->validation->add_scalar("epoch_" + k.substr(4), v, epoch);
  }
  if (o_.histogram_freq > 0 && epoch % o_.histogram_freq == 0) {
    for (auto& layer : model().layers())
      for (Weight* w : all_weights(*layer))
        writers_->train->add_histogram(model().name() + "/" + layer->name() + "/" + w->name + "/histogram",
                                       io::make_histogram(w->value.to_doubles()), epoch);
  }
}

void TensorBoard::on_train_end(const Logs&) {
  writers_.reset();
}

}  // namespace systolic::callbacks
