// Keras's callbacks (callbacks.h) against Keras 3: tests/reference/callbacks.py fed Keras's EarlyStopping,
// ReduceLROnPlateau, ModelCheckpoint, CSVLogger, LearningRateScheduler and TerminateOnNaN fixed sequences of
// logs and recorded when each stopped, changed the rate, saved (and to which path) or what it wrote; these tests
// replay the same sequences through systolic's callbacks. Then the callbacks inside a real fit.
#include <systolic/systolic.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/files.h"
#include "io/tfevents.h"
#include "keras_callbacks_fixture.h"
#include "replica_test_model.h"
#include "test_util.h"
#include "tfevents_reader.h"

using namespace systolic;
using json = nlohmann::json;
using systolic::testing::keras_callback_cases;
using systolic::testing::keras_callbacks_fixture;
namespace fs = std::filesystem;
using systolic::testing::only_file;
using systolic::testing::read_events;
using systolic::testing::Record;
using systolic::testing::replica_test_data;
using systolic::testing::replica_test_model;
using systolic::testing::temp_logs;

namespace {

// The logs the reference script gave at this epoch: the monitored key follows the sequence.
callbacks::Logs logs_for(const json& c, const std::string& monitor, int epoch) {
  double v = keras_callbacks_fixture()["sequences"][c["seq"].get<std::string>()][epoch].get<double>();
  std::vector<std::pair<std::string, double>> items = {
      {"accuracy", 0.5}, {"loss", 1.5 - 0.01 * epoch}, {"val_accuracy", 0.5}, {"val_loss", 1.0}};
  for (auto& [k, x] : items)
    if (k == monitor) x = v;
  return items;
}

int epochs_of(const json& c) {
  return int(keras_callbacks_fixture()["sequences"][c["seq"].get<std::string>()].size());
}

// A compiled model (metrics: accuracy) that the callbacks can reach, as the script's.
Model small_model(double lr = 0.1) {
  Model m = replica_test_model(false);
  m.compile(optimizers::SGD(lr), "sparse_categorical_crossentropy", {"accuracy"});
  return m;
}

template <class C>
void attach(C& cb, Model& m) {
  cb.set_model(m);
  cb.set_params({});
}

std::string describe(const json& c) {
  return c.dump();
}

}  // namespace

TEST(KerasCallbacks, EarlyStoppingStopsWhereKerasStops) {
  auto all = keras_callback_cases("EarlyStopping");
  ASSERT_GE(all.size(), 20u);
  for (auto& c : all) {
    SCOPED_TRACE(c["seq"].get<std::string>() + " " + c["options"].dump());
    auto& o = c["options"];
    callbacks::EarlyStoppingOptions opt;
    opt.monitor = o.value("monitor", "val_loss");
    opt.patience = o.value("patience", 0);
    opt.min_delta = o.value("min_delta", 0.0);
    opt.mode = o.value("mode", "auto");
    if (o.contains("baseline")) opt.baseline = o["baseline"].get<double>();
    opt.start_from_epoch = o.value("start_from_epoch", 0);
    opt.restore_best_weights = o.value("restore_best_weights", false);
    Model m = small_model();
    callbacks::EarlyStopping cb(opt);
    attach(cb, m);
    m.set_stop_training(false);
    cb.on_train_begin(temp_logs());
    std::vector<int> waits;
    json stopped_at = nullptr;
    for (int epoch = 0; epoch < epochs_of(c); ++epoch) {
      cb.on_epoch_end(epoch, temp_logs(logs_for(c, opt.monitor, epoch)));
      waits.push_back(cb.wait());
      if (m.stop_training()) {
        stopped_at = epoch;
        break;
      }
    }
    cb.on_train_end(temp_logs());
    EXPECT_EQ(stopped_at, c["stopped_at"]);
    EXPECT_EQ(json(waits), c["waits"]);
    EXPECT_EQ(cb.stopped_epoch(), c["stopped_epoch"].get<int>());
    EXPECT_EQ(cb.best_epoch(), c["best_epoch"].get<int>());
    ASSERT_TRUE(cb.best().has_value());
    EXPECT_DOUBLE_EQ(*cb.best(), c["best"].get<double>());
  }
}

TEST(KerasCallbacks, ReduceLROnPlateauChangesTheRateWhereKerasDoes) {
  auto all = keras_callback_cases("ReduceLROnPlateau");
  ASSERT_GE(all.size(), 10u);
  for (auto& c : all) {
    SCOPED_TRACE(c["seq"].get<std::string>() + " " + c["options"].dump());
    auto& o = c["options"];
    callbacks::ReduceLROnPlateauOptions opt;
    opt.monitor = o.value("monitor", "val_loss");
    opt.patience = o.value("patience", 10);
    opt.factor = o.value("factor", 0.1);
    opt.cooldown = o.value("cooldown", 0);
    opt.min_lr = o.value("min_lr", 0.0);
    opt.min_delta = o.value("min_delta", 1e-4);
    Model m = small_model(0.1);
    callbacks::ReduceLROnPlateau cb(opt);
    attach(cb, m);
    cb.on_train_begin(temp_logs());
    auto expected = c["learning_rates"];
    for (int epoch = 0; epoch < epochs_of(c); ++epoch) {
      cb.on_epoch_end(epoch, temp_logs(logs_for(c, opt.monitor, epoch)));
      // Keras's rate is a float32 variable.
      EXPECT_EQ(float(m.optimizer().learning_rate()), float(expected[epoch].get<double>()))
          << "epoch " << epoch;
    }
  }
}

TEST(KerasCallbacks, ModelCheckpointSavesWhereKerasSaves) {
  auto all = keras_callback_cases("ModelCheckpoint");
  ASSERT_GE(all.size(), 10u);
  for (auto& c : all) {
    SCOPED_TRACE(describe(c));
    io::TempFolder dir(fs::temp_directory_path(), "ckpt");
    auto& o = c["options"];
    callbacks::ModelCheckpointOptions opt;
    opt.monitor = o.value("monitor", "val_loss");
    opt.save_best_only = o.value("save_best_only", false);
    opt.save_weights_only = o.value("save_weights_only", false);
    opt.mode = o.value("mode", "auto");
    if (o.contains("initial_value_threshold"))
      opt.initial_value_threshold = o["initial_value_threshold"].get<double>();
    Model m = small_model();
    callbacks::ModelCheckpoint cb((dir.path() / c["filepath"].get<std::string>()).string(), opt);
    attach(cb, m);
    cb.on_train_begin(temp_logs());
    json saves = json::array();
    for (int epoch = 0; epoch < epochs_of(c); ++epoch) {
      std::size_t before = cb.saved().size();
      cb.on_epoch_begin(epoch, temp_logs());
      cb.on_epoch_end(epoch, temp_logs(logs_for(c, opt.monitor, epoch)));
      if (cb.saved().size() > before) {
        fs::path p = cb.saved().back();
        EXPECT_TRUE(fs::exists(p)) << p;
        saves.push_back(p.filename().string());
      } else {
        saves.push_back(nullptr);
      }
    }
    EXPECT_EQ(saves, c["saves"]);
  }
}

TEST(KerasCallbacks, ModelCheckpointSavesEveryNBatchesAsKeras) {
  auto all = keras_callback_cases("ModelCheckpointBatches");
  ASSERT_EQ(all.size(), 2u);
  for (auto& c : all) {
    SCOPED_TRACE(describe(c));
    io::TempFolder dir(fs::temp_directory_path(), "ckpt");
    Model m = small_model();
    callbacks::ModelCheckpoint cb((dir.path() / "b-{epoch}-{batch}-{loss:.3f}.h5").string(),
                                  {.save_freq = c["save_freq"].get<int>()});
    attach(cb, m);
    cb.on_train_begin(temp_logs());
    int steps = c["steps"];
    for (int epoch = 0; epoch < c["epochs"].get<int>(); ++epoch) {
      cb.on_epoch_begin(epoch, temp_logs());
      for (int batch = 0; batch < steps; ++batch)
        cb.on_train_batch_end(batch,
                              temp_logs(callbacks::Logs::Items{{"loss", 1.0 / (1 + epoch * steps + batch)}}));
      cb.on_epoch_end(epoch, temp_logs(callbacks::Logs::Items{{"loss", 0.5}}));
    }
    json saves = json::array();
    for (auto& p : cb.saved()) saves.push_back(fs::path(p).filename().string());
    EXPECT_EQ(saves, c["saves"]);
  }
}

TEST(KerasCallbacks, ModelCheckpointRejectsBadPathsAndTemplates) {
  EXPECT_NE(systolic::testing::error_of([] {
              callbacks::ModelCheckpoint("model.txt");
            }).find("must end in .keras or .h5"),
            std::string::npos);
  EXPECT_NE(systolic::testing::error_of([] {
              callbacks::ModelCheckpoint("w.h5", {.save_weights_only = true});
            }).find("must end in .weights.h5"),
            std::string::npos);
  callbacks::ModelCheckpoint cb("ckpt-{epoch:02d}-{val_acc:.2f}.h5");
  std::string e = systolic::testing::error_of([&] {
    cb.file_path(0, -1, callbacks::Logs::Items{{"loss", 1.0}});
  });
  EXPECT_NE(e.find("failed to format the filepath \"ckpt-{epoch:02d}-{val_acc:.2f}.h5\""), std::string::npos)
      << e;
  EXPECT_NE(e.find("(loss)"), std::string::npos) << e;
  EXPECT_EQ(cb.file_path(4, -1, callbacks::Logs::Items{{"val_acc", 0.123}}), "ckpt-05-0.12.h5");
}

TEST(KerasCallbacks, CSVLoggerWritesKerasBytes) {
  auto all = keras_callback_cases("CSVLogger");
  ASSERT_EQ(all.size(), 3u);
  for (auto& c : all) {
    SCOPED_TRACE(describe(c));
    io::TempFolder dir(fs::temp_directory_path(), "csv");
    std::string path = (dir.path() / "log.csv").string();
    bool append = c["append"];
    if (append) std::ofstream(path) << "previous\n";
    callbacks::CSVLogger cb(path, c["separator"], append);
    cb.on_train_begin(temp_logs());
    int epoch = 0;
    for (auto& row : c["rows"]) {
      // Keras's logs keep fit's order, not the JSON's; the logger sorts them anyway.
      callbacks::Logs::Items items;
      for (auto& [k, v] : row.items()) items.emplace_back(k, v.get<double>());
      cb.on_epoch_end(epoch++, temp_logs(items));
    }
    cb.on_train_end(temp_logs());
    EXPECT_EQ(systolic::testing::read_text(path), c["content"].get<std::string>());
  }
}

TEST(KerasCallbacks, LearningRateSchedulerAndTerminateOnNaNAsKeras) {
  auto lrs = keras_callback_cases("LearningRateScheduler").at(0)["learning_rates"];
  Model m = small_model(0.1);
  callbacks::LearningRateScheduler sched([](int epoch, double lr) { return epoch < 3 ? lr : lr * 0.5; });
  attach(sched, m);
  for (int epoch = 0; epoch < int(lrs.size()); ++epoch) {
    sched.on_epoch_begin(epoch, temp_logs());
    EXPECT_EQ(float(m.optimizer().learning_rate()), float(lrs[epoch].get<double>())) << epoch;
  }

  auto t = keras_callback_cases("TerminateOnNaN").at(0);
  callbacks::TerminateOnNaN nan_cb;
  attach(nan_cb, m);
  m.set_stop_training(false);
  json stopped_at = nullptr;
  int batch = 0;
  for (auto& l : t["losses"]) {
    double loss = l.is_string() ? INFINITY : l.get<double>();
    nan_cb.on_train_batch_end(batch, temp_logs(callbacks::Logs::Items{{"loss", loss}}));
    if (m.stop_training()) {
      stopped_at = batch;
      break;
    }
    ++batch;
  }
  EXPECT_EQ(stopped_at, t["stopped_at"]);
  callbacks::TerminateOnNaN raising(true);
  attach(raising, m);
  EXPECT_NE(systolic::testing::error_of([&] {
              raising.on_train_batch_end(3, temp_logs(callbacks::Logs::Items{{"loss", NAN}}));
            }).find("NaN or Inf loss encountered at batch 3"),
            std::string::npos);
}

TEST(KerasCallbacks, MonitorWithoutDirectionIsAnError) {
  Model m = small_model();
  callbacks::EarlyStopping cb({.monitor = "val_something"});
  attach(cb, m);
  cb.on_train_begin(temp_logs());
  std::string e = systolic::testing::error_of([&] {
    cb.on_epoch_end(0, temp_logs(callbacks::Logs::Items{{"val_something", 1.0}}));
  });
  EXPECT_NE(e.find("monitor=val_something"), std::string::npos) << e;
  EXPECT_NE(systolic::testing::error_of([] { callbacks::ReduceLROnPlateau({.factor = 1.5}); }).find("factor"),
            std::string::npos);
}

// In a real fit: EarlyStopping ends training early and restore_best_weights puts back the weights of the best
// epoch (recorded here by a LambdaCallback at each epoch's end).
TEST(KerasCallbacks, EarlyStoppingInFitRestoresTheBestWeights) {
  Model m = replica_test_model(false);
  auto d = replica_test_data(64);
  std::vector<std::vector<double>> weights_at_end;
  auto record = std::make_shared<callbacks::LambdaCallback>();
  record->on_epoch_end_fn = [&](int, const callbacks::Logs&) {
    weights_at_end.push_back(systolic::testing::all_weights(m));
  };
  // Monitor the training loss with mode max: as it falls, the best epoch is an early one and training stops.
  auto es = std::make_shared<callbacks::EarlyStopping>(callbacks::EarlyStoppingOptions{
      .monitor = "loss", .patience = 2, .mode = "max", .restore_best_weights = true});
  History h = m.fit(d.x, d.y, {.batch_size = 16, .epochs = 30, .verbose = 0, .callbacks = {record, es}});
  ASSERT_LT(h.epoch.size(), 30u) << "did not stop early";
  ASSERT_EQ(es->stopped_epoch(), int(h.epoch.size()) - 1);
  EXPECT_EQ(systolic::testing::all_weights(m), weights_at_end.at(es->best_epoch()));
  // The best epoch is where the loss was highest (ties: the first).
  auto& loss = h["loss"];
  int best = int(std::max_element(loss.begin(), loss.end()) - loss.begin());
  EXPECT_EQ(es->best_epoch(), best);
}

// ---- TensorBoard ----

TEST(KerasCallbacks, TensorBoardRecordsVerifyOnARealKerasFile) {
  // The CRC-32C check value of "123456789" (RFC 3720's polynomial).
  EXPECT_EQ(io::crc32c("123456789", 9), 0xe3069283u);
  // An event file written by Keras 3's TensorBoard callback: every CRC verifies, and the scalar tags and steps
  // are those TensorBoard's reader found in it (tests/reference/tensorboard_read.py).
  std::string dir = systolic::testing::source_dir() + "/tests/fixtures/callbacks/";
  auto records = read_events(dir + "keras_train.tfevents");
  std::ifstream in(dir + "keras_train.json");
  json expected = json::parse(in);
  std::map<std::string, std::vector<std::int64_t>> steps;
  for (auto& r : records)
    for (auto& t : r.tags) steps[t].push_back(r.step);
  for (auto& [tag, values] : expected["tensors"].items()) {
    std::vector<std::int64_t> want;
    for (auto& v : values) want.push_back(v[0]);
    EXPECT_EQ(steps[tag], want) << tag;
  }
  EXPECT_EQ(steps.size(), expected["tensors"].size());
}

TEST(KerasCallbacks, TensorBoardWritesKerasTagsInFit) {
  io::TempFolder dir(fs::temp_directory_path(), "tb");
  Model m = replica_test_model(false);
  auto d = replica_test_data(40);
  auto tb = std::make_shared<callbacks::TensorBoard>(dir.path().string(),
                                                     callbacks::TensorBoardOptions{.histogram_freq = 2});
  History h = m.fit(
      d.x, d.y, {.batch_size = 16, .epochs = 3, .verbose = 0, .validation_split = 0.2, .callbacks = {tb}});
  auto train = read_events(only_file(dir.path() / "train"));
  auto val = read_events(only_file(dir.path() / "validation"));
  // Per tag: the steps and values written.
  auto by_tag = [](const std::vector<Record>& records) {
    std::map<std::string, std::vector<std::pair<std::int64_t, float>>> out;
    for (auto& r : records)
      for (std::size_t i = 0; i < r.tags.size(); ++i) out[r.tags[i]].push_back({r.step, r.values[i]});
    return out;
  };
  auto t = by_tag(train), v = by_tag(val);
  for (auto [tags, key] : {std::pair{&t, "loss"}, {&t, "accuracy"}, {&v, "loss"}, {&v, "accuracy"}}) {
    std::string log_key = (tags == &v ? "val_" : "") + std::string(key);
    auto& written = (*tags)["epoch_" + std::string(key)];
    ASSERT_EQ(written.size(), 3u) << log_key;
    for (int e = 0; e < 3; ++e) {
      EXPECT_EQ(written[e].first, e);
      EXPECT_EQ(written[e].second, float(h[log_key][e])) << log_key << " epoch " << e;
    }
  }
  ASSERT_EQ(t["epoch_learning_rate"].size(), 3u);
  EXPECT_EQ(t["epoch_learning_rate"][0].second, 0.05f);
  // Histograms at epochs 0 and 2, one per weight, named as Keras 3's weight paths.
  std::string conv = m.name() + "/" + m.layers()[2]->name() + "/kernel/histogram";
  ASSERT_EQ(t.count(conv), 1u) << conv;
  EXPECT_EQ(t[conv].size(), 2u);
  EXPECT_EQ(t[conv][1].first, 2);
  // The first record of each file is the version event, as TensorFlow writes it.
  EXPECT_TRUE(train.at(0).tags.empty());
}
