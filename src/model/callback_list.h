// The callbacks of one fit, evaluate or predict, called in order (Keras's CallbackList): the progress bar
// (verbose > 0), the callbacks given, and in fit its History, last (tf.keras 2.x's order). The progress bar is
// Keras's ProgbarLogger: in fit "Epoch i/N" when an epoch begins, the bar as batches end (it reads the batch logs
// only when it redraws), the epoch's line when it ends, and nothing for fit's validation; in evaluate and predict
// the bar of their batches. Each hook hands one Logs to every callback in turn, so what one adds (Keras's
// logs[key] = value) the ones after it see; the caller's logs are not changed (Keras passes a copy).
#pragma once

#include <systolic/callbacks.h>

#include <memory>
#include <string>
#include <vector>

namespace systolic {

class CallbackList {
 public:
  // `call` ("fit", "evaluate", "predict") names the call in errors; with_history: fit's History, whose keys
  // start as history_keys (Keras's order), whether or not an epoch runs.
  CallbackList(const char* call, const std::vector<std::shared_ptr<callbacks::Callback>>& given,
               const Model& model, const callbacks::Params& params, bool with_history = false,
               std::vector<std::string> history_keys = {});

  void on_train_begin();
  void on_train_end(callbacks::Logs logs);
  void on_epoch_begin(int epoch);
  void on_epoch_end(int epoch, callbacks::Logs logs);
  void on_train_batch_begin(std::int64_t batch);
  void on_train_batch_end(std::int64_t batch, callbacks::Logs logs);
  void on_test_begin();
  void on_test_end(callbacks::Logs logs);
  void on_test_batch_begin(std::int64_t batch);
  void on_test_batch_end(std::int64_t batch, callbacks::Logs logs);
  void on_predict_begin();
  void on_predict_end();
  void on_predict_batch_begin(std::int64_t batch);
  void on_predict_batch_end(std::int64_t batch, callbacks::Logs logs);

  // fit's History (Error without one).
  const History& history() const;

 private:
  class HistoryRecorder;
  std::vector<std::shared_ptr<callbacks::Callback>> callbacks_;
  std::shared_ptr<HistoryRecorder> history_;
};

}  // namespace systolic
