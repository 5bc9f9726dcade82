// BackupAndRestore (backup_and_restore.h) and exact resume:
//  - a fit interrupted mid-epoch (an exception in a callback) and fit again with the same backup folder
//    resumes in the backed-up batch and ends with the weights of a fit never interrupted: shuffled, with
//    dropout and augmentation, on host batches, on device batches (the GPU path's logic on the CPU) and with 2
//    CPU replicas;
//  - when it saves and what training_metadata.json says, against Keras 3.15 (tests/reference/
//    backup_and_restore.py), and a backup Keras wrote restores its weights, optimizer step and epoch;
//  - damaged backups and bad options are one-line errors;
//  - the command: `systolic train ... --backup-dir B` killed with SIGKILL mid-epoch and run again resumes
//    (not at epoch 1) and ends with the weights of an uninterrupted run: one process, 2 CPU replicas, and
//    mpirun -np 2.
#include <signal.h>
#include <sys/wait.h>
#include <systolic/systolic.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "replica_test_model.h"
#include "saving/keras_io.h"
#include "test_util.h"

using namespace systolic;
using namespace systolic::testing;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

const std::string kFixtures = std::string(SYSTOLIC_SOURCE_DIR) + "/tests/fixtures/backup_and_restore";

// Conv, dropout and a softmax head on 8x8x1 images (5 classes), Adam: every random stream fit has (the
// shuffle, the dropout masks, the augmentation) and optimizer slots.
Model resume_model(bool batch_norm = false) {
  set_random_seed(11);
  clear_session();
  auto in = layers::Input({8, 8, 1});
  auto x = layers::Rescaling(1.0 / 255)(in);
  x = layers::Conv2D(4, {3, 3}, {.padding = "same", .activation = "relu"})(x);
  if (batch_norm) x = layers::BatchNormalization()(x);
  x = layers::Dropout(0.25)(x);
  x = layers::MaxPooling2D({2, 2})(x);
  x = layers::Flatten()(x);
  auto out = layers::Dense(5, {.activation = "softmax"})(x);
  Model m(in, out);
  m.compile(optimizers::Adam(0.01), "sparse_categorical_crossentropy", {"accuracy"});
  return m;
}

Model placed(Model m, int replicas) {
  return replicas > 1 ? to_accelerator(m, distribute::MirroredStrategy::cpu(replicas)) : m;
}

// Throws at (epoch, batch): what a crash looks like to fit (no on_train_end, the backup stays).
struct Crash : callbacks::Callback {
  int epoch = 0, at_epoch;
  std::int64_t at_batch;
  Crash(int e, std::int64_t b) : at_epoch(e), at_batch(b) {}
  void on_epoch_begin(int e, callbacks::Logs&) override { epoch = e; }
  void on_train_batch_end(std::int64_t batch, callbacks::Logs&) override {
    if (epoch == at_epoch && batch == at_batch) throw std::runtime_error("crash");
  }
};

// The epochs begun and the batches run.
struct Trace : callbacks::Callback {
  std::vector<int> epochs;
  std::vector<std::int64_t> batches;
  void on_epoch_begin(int e, callbacks::Logs&) override { epochs.push_back(e); }
  void on_train_batch_begin(std::int64_t b, callbacks::Logs&) override { batches.push_back(b); }
};

double max_diff(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

json read_json(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

struct ResumeCase {
  std::string name;
  int replicas;
  FitOptions::Batches batches;
  std::int64_t save_freq;  // 0: every epoch
  int crash_epoch;
  std::int64_t crash_batch;
  bool batch_norm = false;
};

void PrintTo(const ResumeCase& c, std::ostream* os) {
  *os << c.name;
}

class Resume : public ::testing::TestWithParam<ResumeCase> {};

TEST_P(Resume, EndsWithTheWeightsOfAnUninterruptedFit) {
  const ResumeCase& c = GetParam();
  auto d = replica_test_data(96);
  FitOptions o{.batch_size = 16, .epochs = 3, .verbose = 0};
  o.augmentation = {.width_shift_range = 0.25, .horizontal_flip = true};
  o.batches = c.batches;

  Model whole = placed(resume_model(c.batch_norm), c.replicas);
  History h_whole = whole.fit(d.x, d.y, o);
  auto expected = all_weights(whole);

  TempDir dir;
  std::string backup = dir.file("backup");
  auto options = callbacks::BackupAndRestoreOptions{.save_freq = c.save_freq};
  Model first = placed(resume_model(c.batch_norm), c.replicas);
  FitOptions o1 = o;
  o1.callbacks = {std::make_shared<callbacks::BackupAndRestore>(backup, options),
                  std::make_shared<Crash>(c.crash_epoch, c.crash_batch)};
  EXPECT_THROW(first.fit(d.x, d.y, o1), std::runtime_error);
  ASSERT_TRUE(fs::exists(backup + "/latest.weights.h5"));
  json metadata = read_json(backup + "/training_metadata.json");

  // A new process would build the same model from the same seed, as this does. Whatever the global
  // generator drew since, the backup's seed orders the epochs.
  Model second = placed(resume_model(c.batch_norm), c.replicas);
  global_generator().split();
  auto trace = std::make_shared<Trace>();
  FitOptions o2 = o;
  o2.callbacks = {std::make_shared<callbacks::BackupAndRestore>(backup, options), trace};
  History h_second = second.fit(d.x, d.y, o2);

  // Where it resumed: the backup's epoch, after the batches it had done.
  int resumed_epoch = metadata["epoch"].get<int>();
  std::int64_t first_batch = c.save_freq == 0 ? 0 : metadata["batch"].get<std::int64_t>() + 1;
  ASSERT_FALSE(trace->epochs.empty());
  EXPECT_EQ(trace->epochs.front(), resumed_epoch);
  EXPECT_GE(resumed_epoch, 1);
  // The batches left (6 an epoch): none of the resumed epoch when it was backed up after its last.
  EXPECT_EQ(std::int64_t(trace->batches.size()), (3 - resumed_epoch) * 6 - first_batch);
  if (first_batch < 6) {
    ASSERT_FALSE(trace->batches.empty());
    EXPECT_EQ(trace->batches.front(), first_batch);
  }
  if (c.save_freq > 0) {
    EXPECT_GT(first_batch, 0) << "the case should resume mid-epoch";
  }

  auto got = all_weights(second);
  double diff = max_diff(got, expected);
  EXPECT_LE(diff, 1e-6) << c.name;
  EXPECT_EQ(second.optimizer().iterations(), whole.optimizer().iterations());
  // The epochs it ran end with the uninterrupted fit's logs (the resumed one from its restored sums).
  ASSERT_EQ(h_second["loss"].size(), std::size_t(3 - resumed_epoch));
  for (std::size_t i = 0; i < h_second["loss"].size(); ++i) {
    EXPECT_NEAR(h_second["loss"][i], h_whole["loss"][resumed_epoch + i], 1e-9);
    EXPECT_NEAR(h_second["accuracy"][i], h_whole["accuracy"][resumed_epoch + i], 1e-9);
  }
  EXPECT_FALSE(fs::exists(backup)) << "delete_checkpoint: the backup folder goes when training ends";
}

INSTANTIATE_TEST_SUITE_P(
    BackupAndRestore, Resume,
    ::testing::Values(
        ResumeCase{"HostBatches", 1, FitOptions::Batches::host_pipeline, 4, 1, 2},
        ResumeCase{"DeviceBatches", 1, FitOptions::Batches::on_device, 4, 1, 2},
        ResumeCase{"TwoReplicas", 2, FitOptions::Batches::automatic, 4, 1, 2},
        // Per-replica batch norm: each replica's moving statistics differ until the epoch's end.
        ResumeCase{"TwoReplicasBatchNorm", 2, FitOptions::Batches::automatic, 4, 1, 2, true},
        ResumeCase{"EveryEpoch", 1, FitOptions::Batches::host_pipeline, 0, 2, 1},
        // The backup after an epoch's last batch: the resumed fit runs none of its batches, then its end.
        ResumeCase{"AfterTheLastBatch", 1, FitOptions::Batches::host_pipeline, 6, 2, 2}),
    [](const auto& info) { return info.param.name; });

// A kill while a backup is written leaves the previous backup and a temporary file: the restore reads the
// backup and removes the temporary.
TEST(BackupAndRestore, AnInterruptedWriteLeavesThePreviousBackup) {
  auto d = replica_test_data(64);
  FitOptions o{.batch_size = 16, .epochs = 2, .verbose = 0};
  Model whole = resume_model();
  whole.fit(d.x, d.y, o);

  TempDir dir;
  std::string backup = dir.file("backup");
  auto options = callbacks::BackupAndRestoreOptions{.save_freq = 3, .delete_checkpoint = false};
  Model first = resume_model();
  FitOptions o1 = o;
  o1.callbacks = {std::make_shared<callbacks::BackupAndRestore>(backup, options),
                  std::make_shared<Crash>(1, 1)};
  EXPECT_THROW(first.fit(d.x, d.y, o1), std::runtime_error);
  // What write_atomically leaves when killed before its rename: half a file under a temporary name.
  std::string leftover = backup + "/.latest.weights.h5.tmp-Ab12Cd",
              meta = backup + "/.training_metadata.json.tmp-x";
  std::ofstream(leftover) << "half an HDF5 file";
  std::ofstream(meta) << "{\"epo";

  Model second = resume_model();
  FitOptions o2 = o;
  o2.callbacks = {std::make_shared<callbacks::BackupAndRestore>(backup, options)};
  second.fit(d.x, d.y, o2);
  EXPECT_FALSE(fs::exists(leftover));
  EXPECT_FALSE(fs::exists(meta));
  EXPECT_TRUE(fs::exists(backup + "/latest.weights.h5")) << "delete_checkpoint false keeps the backup";
  EXPECT_LE(max_diff(all_weights(second), all_weights(whole)), 1e-6);
}

// ---- against Keras -------------------------------------------------------------------------------------

// Keras's model of the fixtures: Dense(4, relu), Dense(2) logits, Adam(0.01).
Model keras_fixture_model() {
  set_random_seed(7);
  clear_session();
  auto in = layers::Input({3});
  auto x = layers::Dense(4, {.activation = "relu"})(in);
  auto out = layers::Dense(2)(x);
  Model m(in, out);
  m.compile(optimizers::Adam(0.01), losses::SparseCategoricalCrossentropy({.from_logits = true}));
  return m;
}

// Reads training_metadata.json (null while absent) after every batch and epoch, as the fixture script does.
struct MetadataRecorder : callbacks::Callback {
  std::string path;
  int epoch = 0;
  json events = json::array();
  explicit MetadataRecorder(std::string p) : path(std::move(p)) {}
  json read() const { return fs::exists(path) ? read_json(path) : json(nullptr); }
  void on_epoch_begin(int e, callbacks::Logs&) override { epoch = e; }
  void on_train_batch_end(std::int64_t batch, callbacks::Logs&) override {
    events.push_back({{"epoch", epoch}, {"batch", batch}, {"metadata", read()}});
  }
  void on_epoch_end(int e, callbacks::Logs&) override {
    events.push_back({{"epoch", e}, {"end_of_epoch", true}, {"metadata", read()}});
  }
};

TEST(BackupAndRestore, SavesWhenKerasSaves) {
  json fixture = read_json(kFixtures + "/keras_saves.json");
  Tensor x = Tensor::zeros({14, 3}), y = Tensor::zeros({14}, DType::int32);
  for (std::int64_t i = 0; i < 14; ++i) {
    for (int j = 0; j < 3; ++j) x.data<float>()[i * 3 + j] = float((i * 7 + j * 3) % 5) - 2.0f;
    y.data<std::int32_t>()[i] = std::int32_t(i % 2);
  }
  ASSERT_EQ(fixture["runs"].size(), 4u);
  for (auto& run : fixture["runs"]) {
    std::string freq = run["save_freq"].is_string() ? run["save_freq"].get<std::string>()
                                                    : std::to_string(run["save_freq"].get<int>());
    bool remove = !run.contains("delete_checkpoint") || run["delete_checkpoint"].get<bool>();
    SCOPED_TRACE("save_freq " + freq + (remove ? "" : ", delete_checkpoint false"));
    TempDir dir;
    std::string backup = dir.file("backup");
    Model m = keras_fixture_model();
    auto recorder = std::make_shared<MetadataRecorder>(backup + "/training_metadata.json");
    m.fit(x, y,
          {.batch_size = 4,
           .epochs = 3,
           .verbose = 0,
           .shuffle = false,
           .callbacks = {std::make_shared<callbacks::BackupAndRestore>(
                             backup,
                             callbacks::BackupAndRestoreOptions{
                                 .save_freq = callbacks::BackupAndRestore::parse_save_freq(freq),
                                 .delete_checkpoint = remove}),
                         recorder}});
    EXPECT_EQ(recorder->events, run["events"]);
    EXPECT_EQ(fs::exists(backup), run["backup_left"].get<bool>());
  }
}

TEST(BackupAndRestore, DoubleCheckpointAsKeras) {
  // double_checkpoint: after every epoch the folder holds Keras's files (the previous backup as .bkp), and a
  // damaged latest.weights.h5 gives way to the previous backup, resumed at Keras's epoch and step.
  json fixture = read_json(kFixtures + "/keras_double_checkpoint.json");
  Tensor x = Tensor::zeros({14, 3}), y = Tensor::zeros({14}, DType::int32);
  TempDir dir;
  std::string backup = dir.file("backup");
  struct Listing : callbacks::Callback {
    std::string backup;
    json events = json::array();
    void on_epoch_end(int epoch, callbacks::Logs&) override {
      std::vector<std::string> files;
      for (auto& f : fs::directory_iterator(backup)) files.push_back(f.path().filename().string());
      std::sort(files.begin(), files.end());
      auto read = [&](const std::string& name) {
        return fs::exists(backup + "/" + name) ? read_json(backup + "/" + name) : json(nullptr);
      };
      events.push_back({{"epoch", epoch},
                        {"files", files},
                        {"metadata", read("training_metadata.json")},
                        {"previous_metadata", read("training_metadata.json.bkp")}});
    }
  };
  auto listing = std::make_shared<Listing>();
  listing->backup = backup;
  callbacks::BackupAndRestoreOptions options{.double_checkpoint = true, .delete_checkpoint = false};
  Model m = keras_fixture_model();
  m.fit(x, y,
        {.batch_size = 4,
         .epochs = 3,
         .verbose = 0,
         .shuffle = false,
         .callbacks = {std::make_shared<callbacks::BackupAndRestore>(backup, options), listing}});
  EXPECT_EQ(listing->events, fixture["events"]);

  std::ofstream(backup + "/latest.weights.h5", std::ios::trunc) << "damaged: not an HDF5 file";
  struct FirstEpoch : callbacks::Callback {
    int epoch = -1;
    std::int64_t iterations = -1;
    void on_epoch_begin(int e, callbacks::Logs&) override {
      if (epoch < 0) epoch = e, iterations = model().optimizer().iterations();
    }
  };
  auto first = std::make_shared<FirstEpoch>();
  Model again = keras_fixture_model();
  again.fit(x, y,
            {.batch_size = 4,
             .epochs = 4,
             .verbose = 0,
             .shuffle = false,
             .callbacks = {std::make_shared<callbacks::BackupAndRestore>(
                               backup, callbacks::BackupAndRestoreOptions{.double_checkpoint = true}),
                           first}});
  EXPECT_EQ(first->epoch, fixture["resumed_epoch"].get<int>());
  EXPECT_EQ(first->iterations, fixture["resumed_iterations"].get<std::int64_t>());

  // Without double_checkpoint a damaged backup is an error naming it.
  Model third = keras_fixture_model();
  TempDir other;
  fs::create_directories(other.file("backup"));
  std::ofstream(other.file("backup/latest.weights.h5")) << "damaged";
  std::string e = systolic::testing::error_of([&] {
    third.fit(x, y,
              {.batch_size = 4,
               .epochs = 1,
               .verbose = 0,
               .callbacks = {std::make_shared<callbacks::BackupAndRestore>(other.file("backup"))}});
  });
  EXPECT_NE(e.find("latest.weights.h5"), std::string::npos) << e;
}

// The backup Keras 3.15 wrote in a fit interrupted in its third epoch (save_freq "epoch").
TEST(BackupAndRestore, RestoresABackupKerasWrote) {
  json fixture = read_json(kFixtures + "/keras_backup.json");
  TempDir dir;
  fs::copy(kFixtures + "/keras_backup", dir.file("backup"));
  Model m = keras_fixture_model();
  // Seen at the first epoch's start: the restored weights and step.
  struct AtStart : callbacks::Callback {
    std::vector<int> epochs;
    std::vector<double> weights;
    std::int64_t iterations = -1;
    void on_epoch_begin(int e, callbacks::Logs&) override {
      if (epochs.empty()) {
        weights = all_weights(model());
        iterations = model().optimizer().iterations();
      }
      epochs.push_back(e);
    }
  };
  auto start = std::make_shared<AtStart>();
  Tensor x = Tensor::zeros({14, 3}), y = Tensor::zeros({14}, DType::int32);
  m.fit(x, y,
        {.batch_size = 4,
         .epochs = 3,
         .verbose = 0,
         .callbacks = {std::make_shared<callbacks::BackupAndRestore>(dir.file("backup")), start}});
  EXPECT_EQ(start->epochs, std::vector<int>{fixture["metadata"]["epoch"].get<int>()});
  EXPECT_EQ(start->iterations, fixture["iterations"].get<std::int64_t>());
  std::vector<double> want;
  for (auto& w : fixture["weights"])
    for (auto& v : w) want.push_back(v.get<double>());
  EXPECT_LE(max_diff(start->weights, want), 0.0) << "float32 values read back exactly";
  EXPECT_FALSE(fs::exists(dir.file("backup")));
}

// ---- bad input ---------------------------------------------------------------------------------------

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

void expect_error(const std::function<void()>& f, const std::string& mention) {
  std::string msg = error_of(f);
  EXPECT_NE(msg.find(mention), std::string::npos) << "message: " << msg << "\nexpected: " << mention;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;
}

TEST(BackupAndRestore, BadOptionsAreErrors) {
  expect_error([] { callbacks::BackupAndRestore b(""); }, "empty backup_dir");
  expect_error([] { callbacks::BackupAndRestore b("x", {.save_freq = -1}); }, "save_freq");
  for (const char* bad : {"0", "-3", "", "3x", "batch", "99999999999999999999999"})
    expect_error(
        [&] { callbacks::BackupAndRestore::parse_save_freq(bad); },
        "save_freq must be \"epoch\" or a positive number of batches, got '" + std::string(bad) + "'");
  EXPECT_EQ(callbacks::BackupAndRestore::parse_save_freq("epoch"), 0);
  EXPECT_EQ(callbacks::BackupAndRestore::parse_save_freq("12"), 12);
}

// A fit of resume_model with a backup folder holding latest.weights.h5 as `write` makes it.
std::string restore_error(const std::function<void(const std::string& backup)>& write) {
  TempDir dir;
  std::string backup = dir.file("backup");
  fs::create_directories(backup);
  write(backup);
  auto d = replica_test_data(32);
  Model m = resume_model();
  return error_of([&] {
    m.fit(d.x, d.y,
          {.batch_size = 16,
           .epochs = 2,
           .verbose = 0,
           .callbacks = {std::make_shared<callbacks::BackupAndRestore>(backup)}});
  });
}

void expect_restore_error(const std::string& state, const std::string& mention) {
  SCOPED_TRACE(state);
  std::string msg = restore_error([&](const std::string& backup) {
    keras_io::save_weights(resume_model(), backup + "/latest.weights.h5",
                           {{"systolic_training_state", state}});
  });
  EXPECT_NE(msg.find(mention), std::string::npos) << "message: " << msg << "\nexpected: " << mention;
  EXPECT_NE(msg.find("latest.weights.h5"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

TEST(BackupAndRestore, DamagedBackupsAreErrors) {
  json good = {{"format", 1},         {"epoch", 1},       {"batches", 1},    {"seed", 5},
               {"samples", 32},       {"batch_size", 16}, {"iterations", 3}, {"learning_rate", 0.01},
               {"totals", {1.0, 2.0}}};
  auto with = [&](const char* key, json value) {
    json j = good;
    if (value.is_discarded())
      j.erase(key);
    else
      j[key] = value;
    return j.dump();
  };
  expect_restore_error("{not json", "is not valid JSON");
  expect_restore_error("[1, 2]", "has no 'format'");
  expect_restore_error(with("format", 2), "unknown format 2");
  expect_restore_error(with("epoch", json::value_t::discarded), "has no 'epoch'");
  expect_restore_error(with("epoch", -1), "'epoch' must be an integer >= 0, got -1");
  expect_restore_error(with("batches", "two"), "'batches' must be an integer >= 0, got \"two\"");
  expect_restore_error(with("seed", -5), "'seed' must be an unsigned integer");
  expect_restore_error(with("learning_rate", "fast"), "'learning_rate' must be a number");
  expect_restore_error(with("totals", 3), "'totals' must be an array");
  expect_restore_error(with("totals", {1.0}), "1 loss and metric sums, the model has 2");
  expect_restore_error(
      with("batch_size", 8),
      "was made by a fit of 32 training samples in batches of 8; this fit has 32 in batches of 16");
  expect_restore_error(with("batches", 7), "batch 7 is past the 2 batches of an epoch");

  // Not an HDF5 file at all.
  std::string msg = restore_error(
      [](const std::string& backup) { std::ofstream(backup + "/latest.weights.h5") << "half a file"; });
  EXPECT_NE(msg.find("latest.weights.h5"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  // A Keras backup whose metadata is damaged.
  for (const char* text : {"{\"epoch\": ", "{\"batch\": 1}", "{\"epoch\": -2}"}) {
    msg = restore_error([&](const std::string& backup) {
      resume_model().save_weights(backup + "/latest.weights.h5");
      std::ofstream(backup + "/training_metadata.json") << text;
    });
    EXPECT_NE(msg.find("training_metadata.json"), std::string::npos) << text << ": " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

// ---- the command, killed with SIGKILL -------------------------------------------------------------------

// A small model for the command (Keras JSON): conv, batch norm (per replica under replicas), dropout, softmax
// on Fashion-MNIST's 28x28x1.
std::string write_cli_model(const TempDir& dir) {
  set_random_seed(3);
  clear_session();
  auto in = layers::Input({28, 28, 1});
  auto x = layers::Rescaling(1.0 / 255)(in);
  x = layers::Conv2D(4, {3, 3}, {.strides = {2, 2}, .activation = "relu"})(x);
  x = layers::BatchNormalization()(x);
  x = layers::Dropout(0.3)(x);
  x = layers::Flatten()(x);
  auto out = layers::Dense(10, {.activation = "softmax"})(x);
  Model m(in, out);
  std::string path = dir.file("model.json");
  std::ofstream(path) << m.to_json();
  return path;
}

// Starts `command` (through sh, in a process group of its own) with its output in `log`.
pid_t start(const std::string& command, const std::string& log) {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    // One OpenMP thread: the model is tiny, and on a busy machine spinning OpenMP threads made a run 15 times
    // slower (1.4 s against 23 s); every run of a test has the same setting.
    ::setenv("OMP_NUM_THREADS", "1", 1);
    std::string cmd = "exec " + command + " > '" + log + "' 2>&1";
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  return pid;
}

// Waits for the process (up to `limit` s, then SIGKILL to its group): its wait status.
int wait_status(pid_t pid, double limit) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit);
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) != pid) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return status;
}

std::vector<double> weights_of(const std::string& model_json, const std::string& weights) {
  Model m = model_from_json_file(model_json);
  m.load_weights(weights);
  return all_weights(m);
}

// Trains uninterrupted; trains with --backup-dir and SIGKILLs the job (its whole process group) as soon as a
// backup from the second epoch on exists; runs the same command again. `launcher`: "" or "mpirun ... -np 2".
// `expect` is a line the runs log (how many replicas and workers they train on).
void kill_and_resume(const std::string& launcher, const std::string& extra, const std::string& expect) {
  if (!fashion_mnist_installed()) GTEST_SKIP() << "Fashion-MNIST is not installed in " << kFashionMnistDir;
  TempDir dir;
  std::string model = write_cli_model(dir);
  // 31 batches an epoch, a backup every 7: every backup before epoch 7 is inside an epoch.
  std::string args = " train --model '" + model +
                     "' --dataset fashion_mnist --limit 992 --epochs 6 --batch-size 32 --verbose 2 --seed 4 "
                     "--device cpu " +
                     extra;
  std::string cli = launcher + "'" + cli_path() + "'" + args;
  std::string whole = dir.file("whole.weights.h5"), resumed = dir.file("resumed.weights.h5");
  std::string backup = dir.file("backup");

  int status = wait_status(start(cli + " --save-weights '" + whole + "'", dir.file("whole.log")), 300);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << read_text(dir.file("whole.log"));
  EXPECT_NE(read_text(dir.file("whole.log")).find(expect), std::string::npos)
      << read_text(dir.file("whole.log"));

  std::string resumed_cli =
      cli + " --backup-dir '" + backup + "' --backup-freq 7 --save-weights '" + resumed + "'";
  pid_t pid = start(resumed_cli, dir.file("first.log"));
  // Polls Keras's metadata until a backup of epoch 2 or later exists, then kills the job.
  bool killed = false;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  while (std::chrono::steady_clock::now() < deadline) {
    int st = 0;
    if (::waitpid(pid, &st, WNOHANG) == pid)
      FAIL() << "the run ended before it was killed\n" << read_text(dir.file("first.log"));
    std::ifstream in(backup + "/training_metadata.json");
    json m = json::parse(in, nullptr, false);
    if (!m.is_discarded() && m.contains("epoch") && m["epoch"].get<int>() >= 1) {
      ::kill(-pid, SIGKILL);
      killed = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_TRUE(killed) << read_text(dir.file("first.log"));
  status = wait_status(pid, 60);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "status " << status << "\n"
                                                                  << read_text(dir.file("first.log"));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // MPI ranks go with their launcher's group
  ASSERT_FALSE(fs::exists(resumed)) << "the killed run finished";
  json metadata = read_json(backup + "/training_metadata.json");
  int epoch = metadata["epoch"].get<int>();
  std::int64_t batch = metadata["batch"].get<std::int64_t>();
  ASSERT_GE(epoch, 1);

  status = wait_status(start(resumed_cli, dir.file("second.log")), 300);
  std::string log = read_text(dir.file("second.log"));
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << log;
  std::string resuming = "BackupAndRestore: resuming from " + backup + " at epoch " +
                         std::to_string(epoch + 1) + ", batch " + std::to_string(batch + 2);
  EXPECT_NE(log.find(resuming), std::string::npos) << "expected '" << resuming << "'\n" << log;
  EXPECT_EQ(log.find("Epoch 1/6"), std::string::npos) << log;
  EXPECT_NE(log.find("Epoch 6/6"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(backup)) << "the finished run removes its backup";
  double diff = max_diff(weights_of(model, resumed), weights_of(model, whole));
  EXPECT_LE(diff, 1e-6);
  EXPECT_NE(log.find(expect), std::string::npos) << log;
}

// Bad --backup-freq values are usage errors (exit 2, one line naming the flag).
TEST(BackupAndRestoreCli, BadBackupFreqIsAUsageError) {
  TempDir dir;
  for (std::string bad :
       {"--backup-dir B --backup-freq 0", "--backup-dir B --backup-freq often", "--backup-freq 5"}) {
    SCOPED_TRACE(bad);
    int status = wait_status(
        start("'" + cli_path() + "' train --dataset fashion_mnist --limit 32 " + bad, dir.file("log")), 60);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2) << read_text(dir.file("log"));
    std::string log = read_text(dir.file("log"));
    EXPECT_EQ(log.rfind("systolic: error: --backup-freq", 0), 0u) << log;
  }
}

TEST(BackupAndRestoreCli, KilledRunResumesExactly) {
  kill_and_resume("", "", "Epoch 6/6");
}

TEST(BackupAndRestoreCli, KilledRunResumesExactlyWithTwoReplicas) {
  kill_and_resume("", "--replicas 2", "Num replicas per worker: 2");
}

TEST(BackupAndRestoreCli, KilledMpiRunResumesExactly) {
  if (!build_info().mpi) GTEST_SKIP() << "MPI test not run: this build of systolic has no MPI";
  if (std::string(SYSTOLIC_MPIEXEC).empty()) GTEST_SKIP() << "MPI test not run: CMake found no mpiexec";
  kill_and_resume(std::string(SYSTOLIC_MPIEXEC) + " --allow-run-as-root --oversubscribe -np 2 ", "",
                  "Num workers: 2");
}

}  // namespace
