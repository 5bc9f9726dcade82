// Callbacks (Keras's keras.callbacks.Callback): hooks that fit calls at Keras's points, with Keras's logs.
//
//   on_train_begin
//   each epoch:  on_epoch_begin(epoch)
//                each batch: on_train_batch_begin(batch), the training step, on_train_batch_end(batch, logs)
//                validation, then on_epoch_end(epoch, logs)
//   on_train_end(logs)
//
//   struct StopAtLoss : systolic::callbacks::Callback {
//     void on_epoch_end(int epoch, const systolic::callbacks::Logs& logs) override {
//       if (logs["loss"] < 0.1) model().set_stop_training(true);
//     }
//   };
//   model.fit(x, y, {.epochs = 50, .callbacks = {std::make_shared<StopAtLoss>()}});
//
// logs hold the loss and the metrics by name, in Keras's order (loss, metrics, then val_loss, val_metrics):
// at the end of a batch the epoch's running means so far (read from the device only when a hook looks at
// them: that read waits for the device), at the end of an epoch its values with validation, at the end of
// training the last epoch's. Batch logs are valid during the call; keep items() to keep them.
// A callback reaches the model through model() and params() (set by fit before on_train_begin). It ends
// training as Keras's model.stop_training = True does: fit stops after the current batch, then ends that
// epoch (validation, on_epoch_end) and on_train_end.
// fit's own progress bar (verbose > 0) and History are callbacks too, in tf.keras 2.x's order: the progress
// bar first, then the callbacks given, History last.
#pragma once

#include <systolic/model.h>

#include <cstdint>
#include <functional>
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
  bool empty() const { return items().empty(); }
  bool contains(const std::string& key) const;
  // The value of `key`; Error naming the key and the keys present when it is absent.
  double operator[](const std::string& key) const;

 private:
  mutable Items items_;
  mutable std::function<Items()> read_;
};

// What fit tells its callbacks (Keras's callback.params).
struct Params {
  int verbose = 0;
  int epochs = 0;
  std::int64_t steps = 0;  // batches per epoch
};

class Callback {
 public:
  virtual ~Callback() = default;
  virtual void on_train_begin(const Logs& logs) { (void)logs; }
  virtual void on_train_end(const Logs& logs) { (void)logs; }
  virtual void on_epoch_begin(int epoch, const Logs& logs) { (void)epoch, (void)logs; }
  virtual void on_epoch_end(int epoch, const Logs& logs) { (void)epoch, (void)logs; }
  virtual void on_train_batch_begin(std::int64_t batch, const Logs& logs) { (void)batch, (void)logs; }
  virtual void on_train_batch_end(std::int64_t batch, const Logs& logs) { (void)batch, (void)logs; }

  // Set by fit before on_train_begin.
  void set_model(const Model& model) { model_.emplace(model); }
  void set_params(const Params& params) { params_ = params; }
  // The model being trained (a handle: it shares the model); Error before fit has set it.
  Model& model();
  const Params& params() const { return params_; }

 private:
  std::optional<Model> model_;
  Params params_;
};

}  // namespace systolic::callbacks
