// The callbacks of one fit, called in order (Keras's CallbackList): fit's progress bar (verbose > 0), the
// callbacks given in FitOptions, and fit's History, last (tf.keras 2.x's order). The progress bar is Keras's
// ProgbarLogger: "Epoch i/N" when an epoch begins, the bar as batches end (it reads the batch logs only when
// it redraws), the epoch's line when it ends.
#pragma once

#include <systolic/callbacks.h>

#include <memory>
#include <string>
#include <vector>

namespace systolic {

class CallbackList {
 public:
  // history_keys: History's keys, in Keras's order, whether or not an epoch runs.
  CallbackList(const std::vector<std::shared_ptr<callbacks::Callback>>& given, const Model& model,
               const callbacks::Params& params, std::vector<std::string> history_keys);

  void on_train_begin();
  void on_train_end(const callbacks::Logs& logs);
  void on_epoch_begin(int epoch);
  void on_epoch_end(int epoch, const callbacks::Logs& logs);
  void on_train_batch_begin(std::int64_t batch);
  void on_train_batch_end(std::int64_t batch, const callbacks::Logs& logs);

  const History& history() const;

 private:
  class HistoryRecorder;
  std::vector<std::shared_ptr<callbacks::Callback>> callbacks_;
  std::shared_ptr<HistoryRecorder> history_;
};

}  // namespace systolic
