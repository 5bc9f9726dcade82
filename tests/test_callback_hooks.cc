// fit, evaluate and predict call their callbacks as Keras 3 does: tests/reference/callbacks.py ran Keras 3.15 on a
// tiny model with fixed weights and data (both in the fixture) with a callback that recorded every hook in
// order, with its index, logs and params ("HookOrder": fit's validation runs the on_test_* hooks with fit's
// params, evaluate and predict take callbacks, stop_evaluating / stop_predicting end them), and recorded where
// "learning_rate" appears in the logs ("LearningRateLogs": ReduceLROnPlateau and LearningRateScheduler add it to
// the epoch's logs, which History, a CSVLogger and a callback after them see, and a CSVLogger before them does
// not; TensorBoard does not add it). These tests make the same calls in systolic, with one replica and with two
// CPU replicas.
#include <systolic/systolic.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "keras_callbacks_fixture.h"
#include "test_util.h"
#include "tfevents_reader.h"

using namespace systolic;
using json = nlohmann::json;
using systolic::testing::keras_callback_cases;
using systolic::testing::keras_callbacks_fixture;
using systolic::testing::TempDir;

namespace {

// The script's tiny model: Dense(2, softmax) on 3 inputs with its fixed weights, SGD(lr), accuracy.
Model tiny_model(double lr = 0.1) {
  clear_session();
  Sequential m({layers::Input({3}), layers::Dense(2, {.activation = "softmax"})});
  m.compile(optimizers::SGD(lr), "sparse_categorical_crossentropy", {"accuracy"});
  const json& t = keras_callbacks_fixture()["tiny"];
  std::vector<float> kernel, bias;
  for (auto& row : t["kernel"])
    for (auto& v : row) kernel.push_back(v.get<float>());
  for (auto& v : t["bias"]) bias.push_back(v.get<float>());
  m.set_weights({Tensor::from_vector(kernel, {3, 2}), Tensor::from_vector(bias, {2})});
  return m;
}

struct Data {
  Tensor x, y;
};

// The first n samples of the script's tiny_data.
Data tiny_data(std::int64_t n) {
  const json& t = keras_callbacks_fixture()["tiny"];
  std::vector<float> x;
  std::vector<std::int32_t> y;
  for (std::int64_t i = 0; i < n; ++i) {
    for (auto& v : t["x"][i]) x.push_back(v.get<float>());
    y.push_back(t["y"][i].get<std::int32_t>());
  }
  return {Tensor::from_vector(x, {n, 3}), Tensor::from_vector(y, {n})};
}

struct Event {
  std::string hook;
  std::optional<std::int64_t> index;
  callbacks::Logs::Items logs;
  Tensor outputs;  // predict's batch outputs (a copy)
  std::optional<callbacks::Params> params;
};

// Every hook, in order, as the script's Recorder.
struct Recorder : callbacks::Callback {
  std::vector<Event> events;
  std::optional<std::int64_t> stop_evaluating_at, stop_predicting_at;

  void log(const std::string& hook, std::optional<std::int64_t> index, const callbacks::Logs& logs,
           bool with_params = false) {
    Event e{hook, index, logs.items(), Tensor(), std::nullopt};
    if (hook == "predict_batch_end") e.outputs = logs.tensor("outputs").clone();
    if (with_params) e.params = params();
    events.push_back(e);
  }
  void on_train_begin(callbacks::Logs& l) override { log("train_begin", {}, l, true); }
  void on_train_end(callbacks::Logs& l) override { log("train_end", {}, l); }
  void on_epoch_begin(int e, callbacks::Logs& l) override { log("epoch_begin", e, l); }
  void on_epoch_end(int e, callbacks::Logs& l) override { log("epoch_end", e, l); }
  void on_train_batch_begin(std::int64_t b, callbacks::Logs& l) override { log("train_batch_begin", b, l); }
  void on_train_batch_end(std::int64_t b, callbacks::Logs& l) override { log("train_batch_end", b, l); }
  void on_test_begin(callbacks::Logs& l) override { log("test_begin", {}, l, true); }
  void on_test_end(callbacks::Logs& l) override { log("test_end", {}, l); }
  void on_test_batch_begin(std::int64_t b, callbacks::Logs& l) override { log("test_batch_begin", b, l); }
  void on_test_batch_end(std::int64_t b, callbacks::Logs& l) override {
    log("test_batch_end", b, l);
    if (stop_evaluating_at == b) model().set_stop_evaluating(true);
  }
  void on_predict_begin(callbacks::Logs& l) override { log("predict_begin", {}, l, true); }
  void on_predict_end(callbacks::Logs& l) override { log("predict_end", {}, l); }
  void on_predict_batch_begin(std::int64_t b, callbacks::Logs& l) override {
    log("predict_batch_begin", b, l);
  }
  void on_predict_batch_end(std::int64_t b, callbacks::Logs& l) override {
    log("predict_batch_end", b, l);
    if (stop_predicting_at == b) model().set_stop_predicting(true);
  }
};

std::vector<std::string> sorted_keys(const callbacks::Logs::Items& items) {
  std::vector<std::string> keys;
  for (auto& [k, v] : items) keys.push_back(k);
  std::sort(keys.begin(), keys.end());
  return keys;
}

// Keras's logs are float32 values; systolic's are float64 sums: equal to 1e-6.
void expect_events(const json& want, const std::vector<Event>& got) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const json& w = want[i];
    const Event& g = got[i];
    SCOPED_TRACE("event " + std::to_string(i) + ": " + w.dump().substr(0, 300));
    EXPECT_EQ(g.hook, w["hook"].get<std::string>());
    EXPECT_EQ(g.index.has_value(), w.contains("index"));
    if (g.index && w.contains("index")) {
      EXPECT_EQ(*g.index, w["index"].get<std::int64_t>());
    }
    if (g.hook == "predict_batch_end") {
      auto& rows = w["logs"]["outputs"];
      ASSERT_EQ(g.outputs.dim(0), std::int64_t(rows.size()));
      auto v = g.outputs.to_doubles();
      for (std::size_t r = 0; r < rows.size(); ++r)
        for (std::size_t c = 0; c < rows[r].size(); ++c)
          EXPECT_NEAR(v[r * rows[r].size() + c], rows[r][c].get<double>(), 1e-6);
      EXPECT_TRUE(g.logs.empty());
    } else {
      std::vector<std::string> keys;
      for (auto& [k, v] : w["logs"].items()) keys.push_back(k);
      EXPECT_EQ(sorted_keys(g.logs), keys);  // json objects iterate sorted
      for (auto& [k, v] : g.logs) {
        if (!w["logs"].contains(k)) continue;
        EXPECT_NEAR(v, w["logs"][k].get<double>(), 1e-6) << k;
      }
    }
    EXPECT_EQ(g.params.has_value(), w.contains("params"));
    if (g.params && w.contains("params")) {
      EXPECT_EQ(g.params->verbose, w["params"]["verbose"].get<int>());
      EXPECT_EQ(g.params->epochs, w["params"]["epochs"].get<int>());
      EXPECT_EQ(g.params->steps, w["params"]["steps"].get<std::int64_t>());
    }
  }
}

// The script's call, on `m`, recorded by `rec`; checks its result against Keras's.
void run_case(const json& c, Model& m, const std::shared_ptr<Recorder>& rec) {
  if (!c["stop_evaluating_at"].is_null()) rec->stop_evaluating_at = c["stop_evaluating_at"].get<int>();
  if (!c["stop_predicting_at"].is_null()) rec->stop_predicting_at = c["stop_predicting_at"].get<int>();
  std::string call = c["call"];
  std::int64_t n = c["n"], batch_size = c["batch_size"];
  const json& o = c["options"];
  Data d = tiny_data(n);
  if (call == "fit") {
    FitOptions f{.batch_size = batch_size, .epochs = o["epochs"].get<int>(), .verbose = 0, .shuffle = false};
    f.validation_split = o.value("validation_split", 0.0);
    f.initial_epoch = o.value("initial_epoch", 0);
    f.validation_freq = o.value("validation_freq", 1);
    f.validation_batch_size = o.value("validation_batch_size", 0);
    if (o.contains("validation_n")) {
      Data v = tiny_data(o["validation_n"].get<std::int64_t>());
      f.validation_data = ValidationData{v.x, v.y};
    }
    f.callbacks = {rec};
    History h = m.fit(d.x, d.y, f);
    for (auto& [k, values] : c["result"].items()) {
      ASSERT_EQ(h[k].size(), values.size()) << k;
      for (std::size_t e = 0; e < values.size(); ++e)
        EXPECT_NEAR(h[k][e], values[e].get<double>(), 1e-6) << k;
    }
  } else if (call == "evaluate") {
    auto scores = m.evaluate(d.x, d.y, {.batch_size = batch_size, .verbose = 0, .callbacks = {rec}});
    auto names = m.metrics_names();
    for (std::size_t i = 0; i < names.size(); ++i)
      EXPECT_NEAR(scores[i], c["result"][names[i]].get<double>(), 1e-6) << names[i];
  } else {
    Tensor p = m.predict(d.x, {.batch_size = batch_size, .verbose = 0, .callbacks = {rec}});
    auto& rows = c["result"];
    EXPECT_EQ(p.dim(0), std::int64_t(rows.size()));  // stopped: the rows of the batches done
    auto v = p.to_doubles();
    for (std::size_t r = 0; r < rows.size() && r < std::size_t(p.dim(0)); ++r)
      for (std::size_t k = 0; k < 2; ++k) EXPECT_NEAR(v[r * 2 + k], rows[r][k].get<double>(), 1e-6);
  }
}

}  // namespace

TEST(CallbackHooks, FitEvaluateAndPredictCallTheHooksAsKeras) {
  auto all = keras_callback_cases("HookOrder");
  ASSERT_EQ(all.size(), 7u);
  for (auto& c : all) {
    SCOPED_TRACE(c["call"].get<std::string>() + " " + c["options"].dump() + " stop " +
                 c["stop_evaluating_at"].dump() + " " + c["stop_predicting_at"].dump());
    Model m = tiny_model();
    auto rec = std::make_shared<Recorder>();
    run_case(c, m, rec);
    expect_events(c["events"], rec->events);
  }
}

TEST(CallbackHooks, UnderTwoReplicasTheHooksAndLogsAreKeras) {
  // Each global batch is split between the replicas; the logs are the sums over both, as one replica's.
  for (auto& c : keras_callback_cases("HookOrder")) {
    if (c["call"] == "fit" && c["batch_size"].get<int>() % 2 != 0) continue;  // fit: the batch divides
    SCOPED_TRACE(c["call"].get<std::string>() + " " + c["options"].dump());
    Model m = to_accelerator(tiny_model(), distribute::MirroredStrategy::cpu(2));
    auto rec = std::make_shared<Recorder>();
    run_case(c, m, rec);
    expect_events(c["events"], rec->events);
  }
}

TEST(CallbackHooks, LearningRateInTheLogsAsKeras) {
  auto all = keras_callback_cases("LearningRateLogs");
  ASSERT_EQ(all.size(), 4u);
  for (auto& c : all) {
    std::string name = c["name"];
    SCOPED_TRACE(name);
    TempDir dir;
    Model m = tiny_model();
    auto rec = std::make_shared<Recorder>();
    std::vector<std::shared_ptr<callbacks::Callback>> cbs;
    if (name.starts_with("ReduceLROnPlateau")) {
      cbs = {std::make_shared<callbacks::CSVLogger>(dir.file("a_before.csv")),
             std::make_shared<callbacks::ReduceLROnPlateau>(callbacks::ReduceLROnPlateauOptions{
                 .monitor = "loss", .factor = 0.5, .patience = 1, .min_delta = 10.0}),
             std::make_shared<callbacks::CSVLogger>(dir.file("b_after.csv")), rec};
    } else if (name == "LearningRateScheduler") {
      cbs = {std::make_shared<callbacks::LearningRateScheduler>(
                 [](int epoch, double lr) { return epoch > 0 ? lr * 0.5 : lr; }),
             std::make_shared<callbacks::CSVLogger>(dir.file("log.csv")), rec};
    } else {
      ASSERT_EQ(name, "TensorBoard");
      cbs = {std::make_shared<callbacks::TensorBoard>(dir.file("tb")),
             std::make_shared<callbacks::CSVLogger>(dir.file("log.csv")), rec};
    }
    Data d = tiny_data(c["n"].get<std::int64_t>());
    FitOptions f{.batch_size = 4, .epochs = c["epochs"].get<int>(), .verbose = 0, .shuffle = false};
    f.validation_split = c["options"].value("validation_split", 0.0);
    f.callbacks = cbs;
    History h = m.fit(d.x, d.y, f);

    // History: Keras's keys (systolic keeps loss first, Keras 3 sorts them), learning_rate last when added.
    std::vector<std::string> want_keys = c["history_keys"], got_keys = h.keys;
    EXPECT_EQ(got_keys.back() == "learning_rate", want_keys.back() == "learning_rate");
    std::sort(want_keys.begin(), want_keys.end());
    std::sort(got_keys.begin(), got_keys.end());
    EXPECT_EQ(got_keys, want_keys);
    if (c["history_learning_rate"].is_null()) {
      EXPECT_EQ(h.history.count("learning_rate"), 0u);
    } else {
      // float(float32 rate): exactly Keras's numbers.
      EXPECT_EQ(h["learning_rate"], c["history_learning_rate"].get<std::vector<double>>());
    }
    // What a callback after them sees at each epoch's end, and at the end of training (not changed).
    std::vector<std::vector<std::string>> epoch_end_keys;
    for (auto& e : rec->events)
      if (e.hook == "epoch_end") epoch_end_keys.push_back(sorted_keys(e.logs));
    EXPECT_EQ(epoch_end_keys, c["epoch_end_keys"].get<std::vector<std::vector<std::string>>>());
    EXPECT_EQ(sorted_keys(rec->events.back().logs), c["train_end_keys"].get<std::vector<std::string>>());
    // The CSV logs: the header and the learning_rate column, byte for byte.
    for (auto& [file, want] : c["csv"].items()) {
      SCOPED_TRACE(file);
      std::string text = systolic::testing::read_text(dir.file(file));
      std::vector<std::vector<std::string>> rows;
      for (std::size_t start = 0; start < text.size();) {
        std::size_t end = text.find("\r\n", start);
        ASSERT_NE(end, std::string::npos);
        std::vector<std::string> fields;
        std::string line = text.substr(start, end - start);
        for (std::size_t p = 0;;) {
          std::size_t q = line.find(',', p);
          fields.push_back(line.substr(p, q == std::string::npos ? std::string::npos : q - p));
          if (q == std::string::npos) break;
          p = q + 1;
        }
        rows.push_back(fields);
        start = end + 2;
      }
      ASSERT_FALSE(rows.empty());
      EXPECT_EQ(rows[0], want["header"].get<std::vector<std::string>>());
      auto column = std::find(rows[0].begin(), rows[0].end(), "learning_rate");
      if (want["learning_rate"].is_null()) {
        EXPECT_EQ(column, rows[0].end());
      } else {
        ASSERT_NE(column, rows[0].end());
        std::vector<std::string> values;
        for (std::size_t r = 1; r < rows.size(); ++r) values.push_back(rows[r][column - rows[0].begin()]);
        EXPECT_EQ(values, want["learning_rate"].get<std::vector<std::string>>());
      }
    }
  }
}

TEST(CallbackHooks, LogsAreOneDictPerHook) {
  // What a callback adds, the callbacks after it see; the caller's logs do not change (Keras passes a copy).
  Model m = tiny_model();
  Data d = tiny_data(8);
  std::vector<double> seen_after;
  auto add = std::make_shared<callbacks::LambdaCallback>();
  add->on_epoch_end_fn = [](int e, callbacks::Logs& logs) { logs.set("extra", 10.0 + e); };
  auto look = std::make_shared<callbacks::LambdaCallback>();
  look->on_epoch_end_fn = [&](int, callbacks::Logs& logs) { seen_after.push_back(logs["extra"]); };
  callbacks::Logs::Items train_end;
  look->on_train_end_fn = [&](callbacks::Logs& logs) { train_end = logs.items(); };
  History h = m.fit(d.x, d.y, {.batch_size = 4, .epochs = 2, .verbose = 0, .callbacks = {add, look}});
  EXPECT_EQ(seen_after, (std::vector<double>{10.0, 11.0}));
  EXPECT_EQ(h["extra"], (std::vector<double>{10.0, 11.0}));
  EXPECT_EQ(h.keys, (std::vector<std::string>{"loss", "accuracy", "extra"}));
  EXPECT_EQ(sorted_keys(train_end), (std::vector<std::string>{"accuracy", "loss"}));

  // set replaces a value; a tensor missing from the logs is an Error naming it.
  callbacks::Logs logs(callbacks::Logs::Items{{"loss", 1.0}});
  logs.set("loss", 2.0);
  EXPECT_EQ(logs.items(), (callbacks::Logs::Items{{"loss", 2.0}}));
  std::string e = systolic::testing::error_of([&] { logs.tensor("outputs"); });
  EXPECT_NE(e.find("no tensor 'outputs'"), std::string::npos) << e;
}

TEST(CallbackHooks, ValidationSplitAsKeras) {
  // Keras trains on the first floor(n * (1 - validation_split)) samples: 9 of 14 at 0.3 (5 validate), where
  // floor(n * validation_split) validation samples would give 10 and 4.
  Model m = tiny_model();
  Data d = tiny_data(14);
  auto rec = std::make_shared<Recorder>();
  m.fit(d.x, d.y, {.batch_size = 3, .epochs = 1, .verbose = 0, .validation_split = 0.3, .callbacks = {rec}});
  EXPECT_EQ(rec->params().steps, 3);
  // A split that leaves no training or no validation sample is an error, as in Keras.
  Data two = tiny_data(2);
  for (double split : {0.6, 1e-17}) {  // floor(2 * 0.4) = 0 training samples; floor(2 * (1 - 1e-17)) = 2
    std::string e = systolic::testing::error_of([&] {
      m.fit(two.x, two.y, {.batch_size = 3, .epochs = 1, .verbose = 0, .validation_split = split});
    });
    EXPECT_NE(e.find("not sufficient to split"), std::string::npos) << e;
  }
}

TEST(CallbackHooks, TensorBoardWritesWhatKerasWrites) {
  // A fit with validation, then an evaluate given the same callback: every tag, step and scalar value Keras's
  // TensorBoard wrote (read by TensorBoard's reader), under train/ and validation/, with update_freq "epoch"
  // and 1 (evaluation_<key>_vs_iterations at the optimizer's iterations after each evaluation), and with
  // write_steps_per_second.
  auto all = keras_callback_cases("TensorBoardTags");
  ASSERT_EQ(all.size(), 3u);
  for (auto& c : all) {
    SCOPED_TRACE("update_freq " + c["update_freq"].dump());
    TempDir dir;
    Model m = tiny_model();
    auto tb = std::make_shared<callbacks::TensorBoard>(
        dir.str(),
        callbacks::TensorBoardOptions{.histogram_freq = 1,
                                      .update_freq = c["update_freq"].is_string() ? 0 : 1,
                                      .write_steps_per_second = c["write_steps_per_second"].get<bool>()});
    Data d = tiny_data(12);
    m.fit(d.x, d.y,
          {.batch_size = 4,
           .epochs = 2,
           .verbose = 0,
           .validation_split = 0.25,
           .shuffle = false,
           .callbacks = {tb}});
    m.evaluate(d.x, d.y, {.batch_size = 4, .verbose = 0, .callbacks = {tb}});
    for (auto& [run, tags] : c["runs"].items()) {
      SCOPED_TRACE(run);
      // The fit's train and validation files, and a second validation file from the evaluate (Keras's writers
      // close when training ends and open again).
      std::map<std::string, std::vector<std::pair<std::int64_t, float>>> got;
      for (auto& f : std::filesystem::directory_iterator(dir.path() / run))
        for (auto& r : systolic::testing::read_events(f.path()))
          for (std::size_t i = 0; i < r.tags.size(); ++i) got[r.tags[i]].push_back({r.step, r.values[i]});
      std::vector<std::string> got_tags, want_tags;
      for (auto& [t, v] : got) got_tags.push_back(t);
      for (auto& [t, v] : tags.items()) want_tags.push_back(t);
      EXPECT_EQ(got_tags, want_tags);
      // Per tag, (step, value) in order (two evaluations at the same step, in two files: ordered by value).
      for (auto& [tag, events] : tags.items()) {
        auto& g = got[tag];
        std::vector<std::pair<std::int64_t, float>> want;
        for (auto& e : events)
          want.push_back({e[0].get<std::int64_t>(), e[1].is_null() ? NAN : e[1].get<float>()});
        auto order = [](auto& a, auto& b) {
          return a.first != b.first ? a.first < b.first : a.second < b.second;
        };
        std::sort(g.begin(), g.end(), order);
        std::sort(want.begin(), want.end(), order);
        ASSERT_EQ(g.size(), want.size()) << tag;
        for (std::size_t i = 0; i < g.size(); ++i) {
          EXPECT_EQ(g[i].first, want[i].first) << tag;
          if (tag.ends_with("steps_per_second")) {
            EXPECT_GT(g[i].second, 0) << tag;  // a timing: its value is the machine's
          } else if (std::isnan(want[i].second)) {
            EXPECT_TRUE(std::isnan(g[i].second)) << tag;  // a histogram
          } else {
            EXPECT_NEAR(g[i].second, want[i].second, 1e-6) << tag;
          }
        }
      }
    }
  }
}
