// CallbackList (callback_list.h), fit's own callbacks (the progress bar, History), and the Logs and Callback
// members of callbacks.h.
#include "model/callback_list.h"

#include <fmt/format.h>
#include <systolic/log.h>

#include <optional>

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

double Logs::operator[](const std::string& key) const {
  std::string present;
  for (auto& [k, v] : items()) {
    if (k == key) return v;
    present += (present.empty() ? "" : ", ") + k;
  }
  fail("logs have no '{}' (they have: {})", key, present.empty() ? "nothing" : present);
}

Model& Callback::model() {
  SYSTOLIC_CHECK(model_.has_value(), "callback: no model yet (fit sets it before on_train_begin)");
  return *model_;
}

}  // namespace callbacks

namespace {

// Keras's ProgbarLogger.
class ProgbarLogger : public callbacks::Callback {
 public:
  void on_epoch_begin(int epoch, const callbacks::Logs&) override {
    log_line(fmt::format("Epoch {}/{}", epoch + 1, params().epochs));
    bar_.emplace(params().steps, params().verbose);
  }
  void on_train_batch_end(std::int64_t batch, const callbacks::Logs& logs) override {
    if (bar_->wants_update(batch + 1)) bar_->update(batch + 1, logs.items());
  }
  void on_epoch_end(int, const callbacks::Logs& logs) override { bar_->finish(logs.items()); }

 private:
  std::optional<Progbar> bar_;
};

}  // namespace

// Keras's History: one value per epoch for every key.
class CallbackList::HistoryRecorder : public callbacks::Callback {
 public:
  explicit HistoryRecorder(std::vector<std::string> keys) { history.keys = std::move(keys); }
  void on_epoch_end(int epoch, const callbacks::Logs& logs) override {
    history.epoch.push_back(epoch);
    for (auto& [k, value] : logs.items()) history.history[k].push_back(value);
  }
  History history;
};

CallbackList::CallbackList(const std::vector<std::shared_ptr<callbacks::Callback>>& given, const Model& model,
                           const callbacks::Params& params, std::vector<std::string> history_keys)
    : history_(std::make_shared<HistoryRecorder>(std::move(history_keys))) {
  if (params.verbose > 0) callbacks_.push_back(std::make_shared<ProgbarLogger>());
  for (auto& c : given) {
    SYSTOLIC_CHECK(c != nullptr, "fit: callback {} of {} is null", &c - given.data(), given.size());
    callbacks_.push_back(c);
  }
  callbacks_.push_back(history_);
  for (auto& c : callbacks_) {
    c->set_model(model);
    c->set_params(params);
  }
}

void CallbackList::on_train_begin() {
  for (auto& c : callbacks_) c->on_train_begin({});
}

void CallbackList::on_train_end(const callbacks::Logs& logs) {
  for (auto& c : callbacks_) c->on_train_end(logs);
}

void CallbackList::on_epoch_begin(int epoch) {
  for (auto& c : callbacks_) c->on_epoch_begin(epoch, {});
}

void CallbackList::on_epoch_end(int epoch, const callbacks::Logs& logs) {
  for (auto& c : callbacks_) c->on_epoch_end(epoch, logs);
}

void CallbackList::on_train_batch_begin(std::int64_t batch) {
  for (auto& c : callbacks_) c->on_train_batch_begin(batch, {});
}

void CallbackList::on_train_batch_end(std::int64_t batch, const callbacks::Logs& logs) {
  for (auto& c : callbacks_) c->on_train_batch_end(batch, logs);
}

const History& CallbackList::history() const {
  return history_->history;
}

}  // namespace systolic
