// fit's callback hooks (callbacks.h): called in Keras's order with Keras's logs, on host and on-device
// batches and under replicas; model.stop_training ends fit after a batch or an epoch; batch logs are the
// epoch's running means, read only when a hook looks.
#include <systolic/systolic.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "distribute/replica_group.h"
#include "model/model_state.h"
#include "replica_test_model.h"
#include "test_util.h"

using namespace systolic;
using systolic::testing::replica_test_data;
using systolic::testing::replica_test_model;

namespace {

// Writes one line per hook: "train_begin", "epoch_begin 0", "batch_begin 0", "batch_end 0 loss=...", ...
struct Recorder : callbacks::Callback {
  std::vector<std::string> events;
  std::vector<callbacks::Logs::Items> epoch_logs, batch_logs;
  callbacks::Logs::Items train_end_logs;
  bool read_batch_logs = true;

  void on_train_begin(callbacks::Logs& logs) override {
    events.push_back("train_begin" + std::string(logs.empty() ? "" : " logs"));
  }
  void on_train_end(callbacks::Logs& logs) override {
    events.push_back("train_end");
    train_end_logs = logs.items();
  }
  void on_epoch_begin(int epoch, callbacks::Logs&) override {
    events.push_back("epoch_begin " + std::to_string(epoch));
  }
  void on_epoch_end(int epoch, callbacks::Logs& logs) override {
    events.push_back("epoch_end " + std::to_string(epoch));
    epoch_logs.push_back(logs.items());
  }
  void on_train_batch_begin(std::int64_t batch, callbacks::Logs&) override {
    events.push_back("batch_begin " + std::to_string(batch));
  }
  void on_train_batch_end(std::int64_t batch, callbacks::Logs& logs) override {
    events.push_back("batch_end " + std::to_string(batch));
    if (read_batch_logs) batch_logs.push_back(logs.items());
  }
};

std::vector<std::string> keys_of(const callbacks::Logs::Items& items) {
  std::vector<std::string> keys;
  for (auto& [k, v] : items) keys.push_back(k);
  return keys;
}

// Sets model.stop_training at (epoch, batch), or at the end of `epoch` when batch < 0.
struct StopAt : callbacks::Callback {
  int epoch = 0, at_epoch = 0;
  std::int64_t at_batch = -1;
  StopAt(int e, std::int64_t b) : at_epoch(e), at_batch(b) {}
  void on_epoch_begin(int e, callbacks::Logs&) override { epoch = e; }
  void on_train_batch_end(std::int64_t batch, callbacks::Logs&) override {
    if (epoch == at_epoch && batch == at_batch) model().set_stop_training(true);
  }
  void on_epoch_end(int e, callbacks::Logs&) override {
    if (e == at_epoch && at_batch < 0) model().set_stop_training(true);
  }
};

}  // namespace

TEST(Callbacks, HooksInKerasOrderWithKerasLogs) {
  for (auto batches : {FitOptions::Batches::host_pipeline, FitOptions::Batches::on_device}) {
    SCOPED_TRACE(batches == FitOptions::Batches::on_device ? "on_device" : "host_pipeline");
    Model m = replica_test_model(false);
    auto d = replica_test_data(50);  // 45 training samples after the split: batches of 16, 16, 13
    auto recorder = std::make_shared<Recorder>();
    FitOptions o{.batch_size = 16, .epochs = 3, .verbose = 0, .validation_split = 0.1, .initial_epoch = 1};
    o.batches = batches;
    o.callbacks = {recorder};
    History h = m.fit(d.x, d.y, o);

    std::vector<std::string> want{"train_begin"};
    for (int e : {1, 2}) {
      want.push_back("epoch_begin " + std::to_string(e));
      for (int b = 0; b < 3; ++b) {
        want.push_back("batch_begin " + std::to_string(b));
        want.push_back("batch_end " + std::to_string(b));
      }
      want.push_back("epoch_end " + std::to_string(e));
    }
    want.push_back("train_end");
    EXPECT_EQ(recorder->events, want);

    EXPECT_EQ(recorder->params().epochs, 3);
    EXPECT_EQ(recorder->params().steps, 3);
    EXPECT_EQ(recorder->params().verbose, 0);
    EXPECT_EQ(recorder->model().optimizer().iterations(), 6);  // the handle shares the model

    // Epoch logs are what History records; batch logs are the epoch's running means (the last one is the
    // epoch's training values); the end of training sees the last epoch's logs.
    std::vector<std::string> keys{"loss", "accuracy", "val_loss", "val_accuracy"};
    ASSERT_EQ(recorder->epoch_logs.size(), 2u);
    for (std::size_t e = 0; e < 2; ++e) {
      EXPECT_EQ(keys_of(recorder->epoch_logs[e]), keys);
      for (auto& [k, v] : recorder->epoch_logs[e]) EXPECT_EQ(v, h[k][e]) << k;
    }
    EXPECT_EQ(h.epoch, (std::vector<int>{1, 2}));
    EXPECT_EQ(recorder->train_end_logs, recorder->epoch_logs[1]);
    ASSERT_EQ(recorder->batch_logs.size(), 6u);
    EXPECT_EQ(keys_of(recorder->batch_logs[0]), (std::vector<std::string>{"loss", "accuracy"}));
    for (std::size_t e = 0; e < 2; ++e) {
      auto& last = recorder->batch_logs[3 * e + 2];
      EXPECT_EQ(last[0].second, h["loss"][e]);
      EXPECT_EQ(last[1].second, h["accuracy"][e]);
    }
  }
}

TEST(Callbacks, BatchLogsAreReadOnlyWhenLookedAt) {
  int reads = 0;
  auto logs = callbacks::Logs::deferred([&] {
    ++reads;
    return callbacks::Logs::Items{{"loss", 0.5}, {"accuracy", 0.25}};
  });
  EXPECT_EQ(reads, 0);
  EXPECT_EQ(logs["accuracy"], 0.25);
  EXPECT_TRUE(logs.contains("loss"));
  EXPECT_FALSE(logs.contains("val_loss"));
  EXPECT_EQ(reads, 1);
  std::string e = systolic::testing::error_of([&] { (void)logs["val_loss"]; });
  EXPECT_NE(e.find("'val_loss'"), std::string::npos) << e;
  EXPECT_NE(e.find("loss, accuracy"), std::string::npos) << e;

  // A fit whose callbacks never look at batch logs trains the same as one whose callbacks do.
  auto train = [](bool read) {
    Model m = replica_test_model(false);
    auto d = replica_test_data(40);
    auto recorder = std::make_shared<Recorder>();
    recorder->read_batch_logs = read;
    m.fit(d.x, d.y, {.batch_size = 8, .epochs = 2, .verbose = 0, .callbacks = {recorder}});
    return m.trainable_parameters().to_doubles();
  };
  EXPECT_EQ(train(false), train(true));
}

TEST(Callbacks, StopTrainingEndsFitAfterTheBatchOrTheEpoch) {
  auto d = replica_test_data(40);
  {
    Model m = replica_test_model(false);
    auto recorder = std::make_shared<Recorder>();
    // Stops after batch 1 of epoch 0: the epoch still ends (its logs cover the 16 samples seen), then fit.
    History h = m.fit(d.x, d.y,
                      {.batch_size = 8,
                       .epochs = 5,
                       .verbose = 0,
                       .callbacks = {std::make_shared<StopAt>(0, 1), recorder}});
    EXPECT_TRUE(m.stop_training());
    EXPECT_EQ(m.optimizer().iterations(), 2);
    EXPECT_EQ(h.epoch, std::vector<int>{0});
    EXPECT_EQ(recorder->events.back(), "train_end");
    EXPECT_EQ(recorder->events[recorder->events.size() - 2], "epoch_end 0");
    ASSERT_EQ(recorder->batch_logs.size(), 2u);
    EXPECT_EQ(recorder->batch_logs[1][0].second, h["loss"][0]);

    // fit clears the flag when it starts.
    m.fit(d.x, d.y, {.batch_size = 8, .epochs = 1, .verbose = 0});
    EXPECT_FALSE(m.stop_training());
    EXPECT_EQ(m.optimizer().iterations(), 7);
  }
  {
    Model m = replica_test_model(false);
    History h =
        m.fit(d.x, d.y,
              {.batch_size = 8, .epochs = 5, .verbose = 0, .callbacks = {std::make_shared<StopAt>(1, -1)}});
    EXPECT_EQ(h.epoch, (std::vector<int>{0, 1}));
    EXPECT_EQ(m.optimizer().iterations(), 10);
  }
}

TEST(Callbacks, UnderReplicas) {
  Model cpu = replica_test_model(true);
  auto d = replica_test_data(40);
  Model m = to_accelerator(cpu, distribute::MirroredStrategy::cpu(2));
  auto recorder = std::make_shared<Recorder>();
  History h = m.fit(d.x, d.y, {.batch_size = 16, .epochs = 2, .verbose = 0, .callbacks = {recorder}});
  EXPECT_EQ(recorder->events.size(), 1u + 2 * (2 + 2 * 3) + 1u);
  ASSERT_EQ(recorder->epoch_logs.size(), 2u);
  EXPECT_EQ(recorder->epoch_logs[1][0].second, h["loss"][1]);
  EXPECT_EQ(recorder->batch_logs[5][0].second, h["loss"][1]);
}

TEST(Callbacks, ErrorsNameWhatIsMissing) {
  callbacks::Callback c;
  std::string e = systolic::testing::error_of([&] { c.model(); });
  EXPECT_NE(e.find("no model yet"), std::string::npos) << e;
  Model m = replica_test_model(false);
  auto d = replica_test_data(8);
  e = systolic::testing::error_of([&] { m.fit(d.x, d.y, {.verbose = 0, .callbacks = {nullptr}}); });
  EXPECT_NE(e.find("callback 0 of 1 is null"), std::string::npos) << e;
}

namespace {

// Every replica's trainable parameters (replica 0 first).
std::vector<std::vector<double>> replica_params(Model& m) {
  std::vector<std::vector<double>> out;
  auto& s = *ModelInternals::state(m);
  if (!s.replicas) return {s.params.to_doubles()};
  for (int l = 0; l < s.replicas->local_size(); ++l)
    out.push_back(s.replicas->replica(l).trainable_buffer().to_doubles());
  return out;
}

double max_difference(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

}  // namespace

TEST(Callbacks, RatesThatChangeReachEveryStepAndEveryReplica) {
  // The rate the optimizer loads before each step is the model's: a LearningRateScheduler's, a
  // ReduceLROnPlateau's or a schedule set on the model's optimizer after to_accelerator. Every step of a fit
  // uses it (host or device batches), and so does every replica: the replicas stay identical and end where one
  // replica ends. The reference: train_on_batch over the same batches with the rates set by hand.
  auto d = replica_test_data(40);  // 5 batches of 8 per epoch, in order
  const std::vector<double> rates{0.05, 0.02, 0.01};
  std::vector<double> reference;
  {
    Model m = replica_test_model(false);
    for (int epoch = 0; epoch < 3; ++epoch) {
      m.optimizer().set_learning_rate(rates[epoch]);
      for (int b = 0; b < 5; ++b) m.train_on_batch(d.x.slice(8 * b, 8 * b + 8), d.y.slice(8 * b, 8 * b + 8));
    }
    reference = m.trainable_parameters().to_doubles();
  }
  auto scheduler = [&] {
    return std::make_shared<callbacks::LearningRateScheduler>(
        [&](int epoch, double) { return rates[epoch]; });
  };
  for (auto batches : {FitOptions::Batches::host_pipeline, FitOptions::Batches::on_device}) {
    Model m = replica_test_model(false);
    FitOptions o{.batch_size = 8, .epochs = 3, .verbose = 0, .shuffle = false, .callbacks = {scheduler()}};
    o.batches = batches;
    m.fit(d.x, d.y, o);
    EXPECT_LT(max_difference(m.trainable_parameters().to_doubles(), reference), 1e-6);
  }
  {
    Model m = to_accelerator(replica_test_model(false), distribute::MirroredStrategy::cpu(2));
    m.fit(d.x, d.y,
          {.batch_size = 8, .epochs = 3, .verbose = 0, .shuffle = false, .callbacks = {scheduler()}});
    auto params = replica_params(m);
    ASSERT_EQ(params.size(), 2u);
    EXPECT_EQ(params[0], params[1]);
    EXPECT_LT(max_difference(params[0], reference), 1e-5);
  }
  // ReduceLROnPlateau (halving after every epoch without a 10.0 improvement in loss) and a schedule set after
  // to_accelerator: two replicas end as one does.
  auto reduce = [] {
    return std::make_shared<callbacks::ReduceLROnPlateau>(callbacks::ReduceLROnPlateauOptions{
        .monitor = "loss", .factor = 0.5, .patience = 0, .min_delta = 10.0});
  };
  auto schedule = optimizers::schedules::ExponentialDecay(0.05, 4, 0.5);
  for (bool scheduled : {false, true}) {
    SCOPED_TRACE(scheduled ? "schedule" : "ReduceLROnPlateau");
    std::vector<std::vector<double>> ends;
    for (int replicas : {1, 2}) {
      Model m = replica_test_model(false);
      if (replicas > 1) m = to_accelerator(m, distribute::MirroredStrategy::cpu(replicas));
      if (scheduled) m.optimizer().set_learning_rate_schedule(schedule);
      FitOptions o{.batch_size = 8, .epochs = 3, .verbose = 0, .shuffle = false};
      if (!scheduled) o.callbacks = {reduce()};
      History h = m.fit(d.x, d.y, o);
      if (!scheduled) {
        EXPECT_EQ(h["learning_rate"], (std::vector<double>{0.05f, 0.05f, 0.025f}));
      }
      auto params = replica_params(m);
      for (auto& p : params) EXPECT_EQ(p, params[0]);
      ends.push_back(params[0]);
    }
    EXPECT_LT(max_difference(ends[0], ends[1]), 1e-5);
    EXPECT_GT(max_difference(ends[0], reference), 1e-3);  // the rates did change the training
  }
}

TEST(Callbacks, UnderTwoReplicasEveryCallbackDecidesAsOne) {
  // Every kind of callback (fit_with_callbacks: EarlyStopping restoring the best weights, ReduceLROnPlateau,
  // ModelCheckpoint, CSVLogger, TensorBoard, BackupAndRestore): two CPU replicas decide what one replica decides
  // (they see the logs summed over both), write the same files, and stay identical (restoring the best weights
  // sets every replica).
  systolic::testing::TempDir one_dir, two_dir;
  Model one = replica_test_model(false);
  auto a = systolic::testing::fit_with_callbacks(one, one_dir.str());
  Model two = to_accelerator(replica_test_model(false), distribute::MirroredStrategy::cpu(2));
  auto b = systolic::testing::fit_with_callbacks(two, two_dir.str());
  EXPECT_EQ(b.decisions, a.decisions);
  ASSERT_EQ(b.values.size(), a.values.size());
  EXPECT_LT(max_difference(b.values, a.values), 1e-5);
  auto params = replica_params(two);
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0], params[1]);
  for (auto f : {"log.csv", "tb/train", "tb/validation", "backup/latest.weights.h5", "ckpt/01-02.keras"})
    EXPECT_TRUE(std::filesystem::exists(two_dir.path() / f)) << f;
  // The run stopped after its third epoch and ended with the first epoch's weights.
  EXPECT_EQ(a.decisions[3], "stopped_epoch 2 best_epoch 0");
}
