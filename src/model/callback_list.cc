// CallbackList (callback_list.h), fit's own callbacks (the progress bar, History), and the Logs and Callback
// members of callbacks.h.
#include "model/callback_list.h"

#include <fmt/format.h>
#include <systolic/log.h>

#include <algorithm>
#include <optional>

#include "model/model_state.h"
#include "model/progbar.h"

namespace systolic {

namespace callbacks {

Logs Logs::deferred(std::function<Items()> read) {
  Logs logs;
  logs.read_ = std::move(read);
  return logs;
}

const Logs::Items& Logs::items() const {
  if (read_) {
    items_ = read_();
    read_ = nullptr;
  }
  return items_;
}

bool Logs::contains(const std::string& key) const {
  for (auto& [k, v] : items())
    if (k == key) return true;
  return false;
}

namespace {
template <class List>
std::string keys_of(const List& list) {
  std::string keys;
  for (auto& [k, v] : list) keys += (keys.empty() ? "" : ", ") + k;
  return keys.empty() ? "nothing" : keys;
}
}  // namespace

double Logs::operator[](const std::string& key) const {
  for (auto& [k, v] : items())
    if (k == key) return v;
  fail("logs have no '{}' (they have: {})", key, keys_of(items()));
}

void Logs::set(const std::string& key, double value) {
  items();  // deferred values are read first: they are the logs being added to
  for (auto& [k, v] : items_)
    if (k == key) {
      v = value;
      return;
    }
  items_.emplace_back(key, value);
}

const Tensor& Logs::tensor(const std::string& key) const {
  for (auto& [k, t] : tensors_)
    if (k == key) return t;
  fail("logs have no tensor '{}' (they have: {})", key, keys_of(tensors_));
}

void Logs::set_tensor(const std::string& key, Tensor value) {
  for (auto& [k, t] : tensors_)
    if (k == key) {
      t = std::move(value);
      return;
    }
  tensors_.emplace_back(key, std::move(value));
}

Model& Callback::model() {
  SYSTOLIC_CHECK(model_.has_value(), "callback: no model yet (fit sets it before on_train_begin)");
  return *model_;
}

bool Callback::is_chief() const {
  return !model_ || ModelInternals::state(*model_)->chief;
}

}  // namespace callbacks

namespace {

// Keras's ProgbarLogger: fit's epochs, evaluate's and predict's batches; silent in fit's validation.
class ProgbarLogger : public callbacks::Callback {
 public:
  void on_train_begin(callbacks::Logs&) override { in_fit_ = true; }
  void on_epoch_begin(int epoch, callbacks::Logs&) override {
    log_line(fmt::format("Epoch {}/{}", epoch + 1, params().epochs));
    bar_.emplace(params().steps, params().verbose);
  }
  void on_train_batch_end(std::int64_t batch, callbacks::Logs& logs) override { update(batch, &logs); }
  void on_epoch_end(int, callbacks::Logs& logs) override { bar_->finish(logs.items()); }

  void on_test_begin(callbacks::Logs&) override {
    if (!in_fit_) bar_.emplace(params().steps, params().verbose);
  }
  void on_test_batch_end(std::int64_t batch, callbacks::Logs& logs) override {
    if (!in_fit_) update(batch, &logs);
  }
  void on_test_end(callbacks::Logs& logs) override {
    if (!in_fit_) bar_->finish(logs.items());
  }

  void on_predict_begin(callbacks::Logs&) override { bar_.emplace(params().steps, params().verbose); }
  void on_predict_batch_end(std::int64_t batch, callbacks::Logs&) override { update(batch, nullptr); }
  void on_predict_end(callbacks::Logs&) override { bar_->finish({}); }

 private:
  // Keras's predict bar shows no values (the batch logs are the predictions).
  void update(std::int64_t batch, const callbacks::Logs* logs) {
    if (bar_->wants_update(batch + 1)) bar_->update(batch + 1, logs ? logs->items() : LogValues{});
  }
  std::optional<Progbar> bar_;
  bool in_fit_ = false;
};

}  // namespace

// Keras's History: one value per epoch for every key; a key first seen later (learning_rate, added by a
// callback) joins the keys then.
class CallbackList::HistoryRecorder : public callbacks::Callback {
 public:
  explicit HistoryRecorder(std::vector<std::string> keys) { history.keys = std::move(keys); }
  void on_epoch_end(int epoch, callbacks::Logs& logs) override {
    history.epoch.push_back(epoch);
    for (auto& [k, value] : logs.items()) {
      if (std::find(history.keys.begin(), history.keys.end(), k) == history.keys.end())
        history.keys.push_back(k);
      history.history[k].push_back(value);
    }
  }
  History history;
};

CallbackList::CallbackList(const char* call, const std::vector<std::shared_ptr<callbacks::Callback>>& given,
                           const Model& model, const callbacks::Params& params, bool with_history,
                           std::vector<std::string> history_keys) {
  if (params.verbose > 0) callbacks_.push_back(std::make_shared<ProgbarLogger>());
  for (auto& c : given) {
    SYSTOLIC_CHECK(c != nullptr, "{}: callback {} of {} is null", call, &c - given.data(), given.size());
    callbacks_.push_back(c);
  }
  if (with_history) {
    history_ = std::make_shared<HistoryRecorder>(std::move(history_keys));
    callbacks_.push_back(history_);
  }
  for (auto& c : callbacks_) {
    c->set_model(model);
    c->set_params(params);
  }
}

void CallbackList::on_train_begin() {
  callbacks::Logs logs;
  for (auto& c : callbacks_) c->on_train_begin(logs);
}

void CallbackList::on_train_end(callbacks::Logs logs) {
  for (auto& c : callbacks_) c->on_train_end(logs);
}

void CallbackList::on_epoch_begin(int epoch) {
  callbacks::Logs logs;
  for (auto& c : callbacks_) c->on_epoch_begin(epoch, logs);
}

void CallbackList::on_epoch_end(int epoch, callbacks::Logs logs) {
  for (auto& c : callbacks_) c->on_epoch_end(epoch, logs);
}

void CallbackList::on_train_batch_begin(std::int64_t batch) {
  callbacks::Logs logs;
  for (auto& c : callbacks_) c->on_train_batch_begin(batch, logs);
}

void CallbackList::on_train_batch_end(std::int64_t batch, callbacks::Logs logs) {
  for (auto& c : callbacks_) c->on_train_batch_end(batch, logs);
}

void CallbackList::on_test_begin() {
  callbacks::Logs logs;
  for (auto& c : callbacks_) c->on_test_begin(logs);
}

void CallbackList::on_test_end(callbacks::Logs logs) {
  for (auto& c : callbacks_) c->on_test_end(logs);
}

void CallbackList::on_test_batch_begin(std::int64_t batch) {
  callbacks::Logs logs;
  for (auto& c : callbacks_) c->on_test_batch_begin(batch, logs);
}

void CallbackList::on_test_batch_end(std::int64_t batch, callbacks::Logs logs) {
  for (auto& c : callbacks_) c->on_test_batch_end(batch, logs);
}

void CallbackList::on_predict_begin() {
  callbacks::Logs logs;
  for (auto& c : callbacks_) c->on_predict_begin(logs);
}

void CallbackList::on_predict_end() {
  callbacks::Logs logs;
  for (auto& c : callbacks_) c->on_predict_end(logs);
}

void CallbackList::on_predict_batch_begin(std::int64_t batch) {
  callbacks::Logs logs;
  for (auto& c : callbacks_) c->on_predict_batch_begin(batch, logs);
}

void CallbackList::on_predict_batch_end(std::int64_t batch, callbacks::Logs logs) {
  for (auto& c : callbacks_) c->on_predict_batch_end(batch, logs);
}

const History& CallbackList::history() const {
  SYSTOLIC_CHECK(history_, "CallbackList: no History (fit's only)");
  return history_->history;
}

}  // namespace systolic
