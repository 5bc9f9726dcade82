// BackupAndRestore (backup_and_restore.h): Keras 3's callback, with the exact resume that fit's resume point
// (ModelState::FitProgress) allows. A backup is latest.weights.h5, holding the training state as a root
// attribute so that one atomic rename commits all of it, then Keras's training_metadata.json.
#include <systolic/backup_and_restore.h>
#include <systolic/log.h>

#include <charconv>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "distribute/replica_group.h"
#include "io/files.h"
#include "io/hdf5.h"
#include "model/model_state.h"
#include "saving/keras_io.h"

namespace systolic::callbacks {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kStateAttribute = "systolic_training_state";
// Every replica's non-trainable weights (one row per replica), in a backup made inside an epoch under
// replicas with per-replica batch norm: until the epoch's end they differ.
constexpr const char* kReplicaRows = "systolic/replica_non_trainable";

// Under replicas whose batch norm statistics are their own: how many non-trainable values each replica has.
std::int64_t per_replica_rows(ModelState& s) {
  distribute::ReplicaGroup* group = s.replicas.get();
  if (!group || group->size() < 2 || group->strategy().options().sync_batch_norm) return 0;
  std::int64_t n = 0;
  for (auto* l : s.weight_layers())
    for (auto& w : l->weights())
      if (!w.trainable) n += w.value.numel();
  return n;
}

// What a backup holds besides the weights, or what a Keras backup tells (its epoch only).
struct Restored {
  int epoch = 0;
  std::int64_t batches = 0;  // of that epoch, done
  bool exact = false;        // a systolic backup: the rest is known
  std::uint64_t seed = 0;
  std::int64_t iterations = 0;
  double learning_rate = 0;
  std::vector<double> totals;
};

json parse_json(const std::string& text, const std::string& where) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    fail("BackupAndRestore: {} is not valid JSON ({})", where, e.what());
  }
}

// Copies `from` to `to` atomically (a kill leaves `to` whole, old or new).
void copy_atomically(const std::string& from, const std::string& to) {
  io::write_atomically(to, [&](const std::string& temporary) {
    std::error_code ec;
    fs::copy_file(from, temporary, fs::copy_options::overwrite_existing, ec);
    if (ec) fail("BackupAndRestore: cannot copy {} to {}: {}", from, to, ec.message());
  });
}

std::string read_text(const std::string& path) {
  auto bytes = io::read_file(path);
  return std::string(bytes.begin(), bytes.end());
}

// The training state a systolic backup stores: checked field by field, so a damaged one is named.
Restored parse_state(const json& j, const std::string& where, const ModelState::FitProgress& fit,
                     std::int64_t totals_size) {
  auto field = [&](const char* key) -> const json& {
    if (!j.is_object() || !j.contains(key)) fail("BackupAndRestore: {} has no '{}'", where, key);
    return j.at(key);
  };
  auto integer = [&](const char* key, std::int64_t lo) {
    const json& v = field(key);
    if (!v.is_number_integer() || v.get<std::int64_t>() < lo)
      fail("BackupAndRestore: {}: '{}' must be an integer >= {}, got {}", where, key, lo, v.dump());
    return v.get<std::int64_t>();
  };
  Restored r;
  r.exact = true;
  if (integer("format", 1) != 1)
    fail("BackupAndRestore: {}: unknown format {}", where, field("format").dump());
  r.epoch = static_cast<int>(integer("epoch", 0));
  r.batches = integer("batches", 0);
  const json& seed = field("seed");
  if (!seed.is_number_unsigned() && !(seed.is_number_integer() && seed.get<std::int64_t>() >= 0))
    fail("BackupAndRestore: {}: 'seed' must be an unsigned integer, got {}", where, seed.dump());
  r.seed = seed.get<std::uint64_t>();
  r.iterations = integer("iterations", 0);
  const json& lr = field("learning_rate");
  if (!lr.is_number())
    fail("BackupAndRestore: {}: 'learning_rate' must be a number, got {}", where, lr.dump());
  r.learning_rate = lr.get<double>();
  std::int64_t samples = integer("samples", 1), batch_size = integer("batch_size", 1);
  const json& totals = field("totals");
  if (!totals.is_array()) fail("BackupAndRestore: {}: 'totals' must be an array", where);
  for (auto& t : totals) {
    if (!t.is_number()) fail("BackupAndRestore: {}: 'totals' must hold numbers, got {}", where, t.dump());
    r.totals.push_back(t.get<double>());
  }
  if (r.batches > 0) {
    // Resuming inside an epoch needs the same epoch: the same samples in the same batches.
    if (samples != fit.samples || batch_size != fit.batch_size)
      fail(
          "BackupAndRestore: {} was made by a fit of {} training samples in batches of {}; this fit has {} "
          "in batches of {}: resume with the same data and batch size, or remove the backup",
          where, samples, batch_size, fit.samples, fit.batch_size);
    if (r.batches > fit.steps)
      fail("BackupAndRestore: {}: batch {} is past the {} batches of an epoch", where, r.batches, fit.steps);
    if (static_cast<std::int64_t>(r.totals.size()) != totals_size)
      fail("BackupAndRestore: {}: {} loss and metric sums, the model has {}", where, r.totals.size(),
           totals_size);
  }
  return r;
}

}  // namespace

BackupAndRestore::BackupAndRestore(std::string backup_dir, const BackupAndRestoreOptions& options)
    : backup_dir_(std::move(backup_dir)), options_(options) {
  SYSTOLIC_CHECK(!backup_dir_.empty(), "BackupAndRestore: empty backup_dir");
  SYSTOLIC_CHECK(options_.save_freq >= 0,
                 "BackupAndRestore: save_freq must be \"epoch\" (0) or a positive number of batches, got {}",
                 options_.save_freq);
  weights_path_ = (fs::path(backup_dir_) / "latest.weights.h5").string();
  metadata_path_ = (fs::path(backup_dir_) / "training_metadata.json").string();
}

std::int64_t BackupAndRestore::parse_save_freq(const std::string& text) {
  if (text == "epoch") return 0;
  std::int64_t n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size() || n <= 0)
    fail("BackupAndRestore: save_freq must be \"epoch\" or a positive number of batches, got '{}'", text);
  return n;
}

void BackupAndRestore::on_train_begin(Logs&) {
  batches_since_save_ = 0;
  last_batch_seen_ = 0;
  restore();
}

// Keras 3's counting: a batch index not above the last one seen starts a new epoch.
void BackupAndRestore::on_train_batch_end(std::int64_t batch, Logs&) {
  if (options_.save_freq == 0) return;
  batches_since_save_ += batch <= last_batch_seen_ ? batch + 1 : batch - last_batch_seen_;
  last_batch_seen_ = batch;
  if (batches_since_save_ < options_.save_freq) return;
  batches_since_save_ = 0;
  save();
}

void BackupAndRestore::on_epoch_end(int, Logs&) {
  last_batch_seen_ = 0;
  if (options_.save_freq == 0) save();
}

void BackupAndRestore::on_train_end(Logs&) {
  ModelState& s = *ModelInternals::state(model());
  if (!options_.delete_checkpoint || !s.chief) return;
  std::error_code ec;
  fs::remove_all(backup_dir_, ec);
  if (ec)
    log_line(fmt::format("WARNING: BackupAndRestore: could not remove {}: {}", backup_dir_, ec.message()));
}

void BackupAndRestore::save() {
  ModelState& s = *ModelInternals::state(model());
  const auto& fit = s.fit;
  SYSTOLIC_CHECK(s.optimizer && fit.totals, "BackupAndRestore: backups are made during fit only");
  // Where a resumed fit starts: after the batches done, or at the next epoch when this one is done (its
  // validation and on_epoch_end have run).
  bool epoch_done = options_.save_freq == 0;
  int epoch = epoch_done ? fit.epoch + 1 : fit.epoch;
  std::int64_t batches = epoch_done ? 0 : fit.batches;
  // Inside an epoch per-replica statistics are not yet averaged: keep every replica's (collective, so every
  // worker gathers; then the chief writes).
  std::vector<std::pair<std::string, Tensor>> datasets;
  if (std::int64_t k = per_replica_rows(s); k > 0 && batches > 0) {
    auto rows = s.replicas->gather_non_trainable_weights();
    std::vector<float> values(rows.begin(), rows.end());  // the weights' own float32 values
    datasets.emplace_back(kReplicaRows, Tensor::from_vector(values, {std::int64_t(s.replicas->size()), k}));
  }
  if (!s.chief) return;  // every worker holds the same state; the chief writes it
  json state = {{"format", 1},
                {"epoch", epoch},
                {"batches", batches},
                {"seed", fit.seed},
                {"samples", fit.samples},
                {"batch_size", fit.batch_size},
                {"iterations", s.optimizer->iterations()},
                {"learning_rate", s.optimizer->learning_rate()},
                {"totals", batches > 0 ? fit.totals() : std::vector<double>{}}};
  std::error_code ec;
  fs::create_directories(backup_dir_, ec);
  if (ec) fail("BackupAndRestore: cannot create {}: {}", backup_dir_, ec.message());
  // Keras's double_checkpoint: the backup being replaced becomes the previous one (.bkp), each copy atomic.
  if (options_.double_checkpoint)
    for (auto& path : {weights_path_, metadata_path_})
      if (fs::exists(path)) copy_atomically(path, path + ".bkp");
  keras_io::save_weights(model(), weights_path_, {{kStateAttribute, state.dump()}}, datasets);
  // Keras's metadata: the epoch to resume and the last batch done in it (0 after an epoch's end).
  json keras = {{"epoch", epoch}, {"batch", batches > 0 ? batches - 1 : 0}};
  std::string text = keras.dump();
  io::write_file_atomic(metadata_path_, text.data(), text.size());
}

// The temporary files of writes a kill interrupted (io::write_atomically names them .<file>.tmp-XXXXXX).
void BackupAndRestore::remove_leftovers() const {
  std::error_code ec;
  if (!fs::is_directory(backup_dir_, ec)) return;
  for (auto& e : fs::directory_iterator(backup_dir_, ec)) {
    std::string name = e.path().filename().string();
    if (name.starts_with(".latest.weights.h5.tmp-") || name.starts_with(".training_metadata.json.tmp-"))
      fs::remove(e.path(), ec);
  }
}

void BackupAndRestore::restore() {
  ModelState& s = *ModelInternals::state(model());
  SYSTOLIC_CHECK(s.optimizer, "BackupAndRestore: the model must be compiled");
  distribute::ReplicaGroup* group = s.replicas.get();
  std::int64_t totals_size = s.totals.numel();
  // The chief reads; every worker takes what it read (one broadcast of numbers, then of the weights).
  std::int64_t k = per_replica_rows(s);
  std::size_t row_values = group ? static_cast<std::size_t>(k * group->size()) : 0;
  std::optional<Restored> found;
  std::vector<double> rows;  // every replica's non-trainable weights, when the backup has them
  std::exception_ptr error;
  if (s.chief) {
    auto read = [&] {
      found.reset();
      rows.clear();
      remove_leftovers();
      if (fs::exists(weights_path_)) {
        std::optional<std::string> state;
        Tensor replica_rows;
        // Read once (in the contained child, as every file: docs/security.md), used for the state and the weights.
        auto root = hdf5::read_file(weights_path_);
        if (root.has_attribute(kStateAttribute)) state = root.string_attribute(kStateAttribute);
        if (row_values > 0 && root.has_dataset(kReplicaRows)) replica_rows = root.read_float32(kReplicaRows);
        if (state) {
          std::string where = weights_path_ + " (" + kStateAttribute + ")";
          found = parse_state(parse_json(*state, where), where, s.fit, totals_size);
          if (found->batches > 0 && replica_rows.defined()) {
            if (replica_rows.shape() != Shape({std::int64_t(group->size()), k}))
              fail(
                  "BackupAndRestore: {}: {} has shape {}, for {} replicas of {} non-trainable values: resume "
                  "with as many replicas as the backed-up fit had",
                  weights_path_, kReplicaRows, replica_rows.shape().str(), group->size(), k);
            rows = replica_rows.to_doubles();
          }
        } else {
          found = Restored{};  // written by Keras: the weights, and the epoch its metadata names
          if (fs::exists(metadata_path_)) {
            json m = parse_json(read_text(metadata_path_), metadata_path_);
            if (!m.is_object() || !m.contains("epoch") || !m["epoch"].is_number_integer() ||
                m["epoch"].get<std::int64_t>() < 0)
              fail("BackupAndRestore: {} has no epoch (a non-negative integer)", metadata_path_);
            found->epoch = m["epoch"].get<int>();
          }
        }
        keras_io::load_weights(model(), root, {});
      }
    };
    try {
      read();
    } catch (const Error& e) {
      // Keras's double_checkpoint: a backup that cannot be read gives way to the previous one.
      std::string previous = weights_path_ + ".bkp";
      if (options_.double_checkpoint && fs::exists(previous)) {
        log_line(fmt::format("BackupAndRestore: {} cannot be read ({}); restoring the previous backup",
                             weights_path_, e.what()));
        try {
          copy_atomically(previous, weights_path_);
          std::error_code ec;
          if (fs::exists(metadata_path_ + ".bkp"))
            copy_atomically(metadata_path_ + ".bkp", metadata_path_);
          else
            fs::remove(metadata_path_, ec);
          read();
        } catch (...) {
          error = std::current_exception();
        }
      } else {
        error = std::current_exception();
      }
    } catch (...) {
      error = std::current_exception();
    }
  }
  // [status (0 none, 1 found, -1 the chief failed), epoch, batches, exact, seed hi, seed lo, iterations,
  // learning rate, has rows, totals..., rows...]: exact in doubles.
  constexpr std::size_t head = 9;
  std::vector<double> shared(head + static_cast<std::size_t>(totals_size) + row_values, 0.0);
  if (error) {
    shared[0] = -1;
  } else if (found) {
    const Restored& r = *found;
    shared[0] = 1, shared[1] = r.epoch, shared[2] = double(r.batches), shared[3] = r.exact;
    shared[4] = double(r.seed >> 32), shared[5] = double(r.seed & 0xffffffffu);
    shared[6] = double(r.iterations), shared[7] = r.learning_rate, shared[8] = !rows.empty();
    for (std::size_t i = 0; i < r.totals.size(); ++i) shared[head + i] = r.totals[i];
    std::copy(rows.begin(), rows.end(), shared.begin() + static_cast<std::ptrdiff_t>(head + totals_size));
  }
  if (group) group->broadcast_from_chief(shared);
  if (error) std::rethrow_exception(error);
  if (shared[0] < 0) fail("BackupAndRestore: the chief could not restore the backup in {}", backup_dir_);
  if (shared[0] == 0) return;

  if (group) group->broadcast_weights();  // replica 0 of the chief read them
  if (group && shared[8] != 0)
    group->scatter_non_trainable_weights(
        std::vector<double>(shared.begin() + static_cast<std::ptrdiff_t>(head + totals_size), shared.end()));
  Restored r;
  r.epoch = static_cast<int>(shared[1]);
  r.batches = static_cast<std::int64_t>(shared[2]);
  r.exact = shared[3] != 0;
  if (r.exact) {
    // The step (Keras's iterations, which dropout masks are keyed by) and the learning rate exactly: an
    // optimizer without slots writes no variables, and the file holds the rate as float32.
    for (int l = 0; l < (group ? group->local_size() : 1); ++l) {
      ModelState& replica = group ? state_of(group->replica(l)) : s;
      replica.optimizer->set_iterations(static_cast<std::int64_t>(shared[6]));
      // A schedule's rate follows from the step; a constant one (changed by ReduceLROnPlateau) is restored.
      if (!replica.optimizer->learning_rate_schedule()) replica.optimizer->set_learning_rate(shared[7]);
    }
    r.seed = (static_cast<std::uint64_t>(shared[4]) << 32) | static_cast<std::uint64_t>(shared[5]);
    if (r.batches > 0)
      r.totals.assign(shared.begin() + head,
                      shared.begin() + static_cast<std::ptrdiff_t>(head + totals_size));
    s.fit.resume = ModelState::FitProgress::Resume{
        .epoch = r.epoch, .batches = r.batches, .seed = r.seed, .totals = r.totals};
  } else {
    s.fit.resume = ModelState::FitProgress::Resume{.epoch = r.epoch, .batches = 0, .seed = s.fit.seed};
  }
  last_batch_seen_ = r.batches > 0 ? r.batches - 1 : 0;
  if (s.chief)
    log_line(r.batches > 0
                 ? fmt::format("BackupAndRestore: resuming from {} at epoch {}, batch {}", backup_dir_,
                               r.epoch + 1, r.batches + 1)
                 : fmt::format("BackupAndRestore: resuming from {} at epoch {}", backup_dir_, r.epoch + 1));
}

}  // namespace systolic::callbacks
