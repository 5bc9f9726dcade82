// Keras's keras.callbacks.BackupAndRestore(backup_dir, save_freq="epoch", double_checkpoint=False,
// delete_checkpoint=True): fit backs up its training state into backup_dir, and a fit started again with the
// same backup_dir (after a crash, a kill -9, a pre-empted machine) resumes from the last backup instead of from
// the start.
//
//   model.fit(x, y, {.epochs = 50, .callbacks = {std::make_shared<callbacks::BackupAndRestore>("backup")}});
//
// As in Keras 3: backup_dir/latest.weights.h5 (Keras 3's .weights.h5 layout: the layers' weights and the
// optimizer's variables) and backup_dir/training_metadata.json ({"epoch": E, "batch": B}: the epoch to resume,
// and with save_freq N the last batch done in it); a backup at the end of every epoch (save_freq 0, Keras's
// "epoch") or every save_freq batches; backup_dir removed when training ends (delete_checkpoint). A backup
// written by Keras resumes at its epoch, as Keras does.
//
// Beyond Keras, the resume is exact: fit resumes in the backed-up batch of the backed-up epoch (not at its
// start), with the same shuffled order and augmentation (they are keyed by the fit's seed and the epoch), the
// same dropout masks (keyed by the optimizer's step), the optimizer's slots, step and learning rate, and the
// epoch's loss and metric sums so far: it ends with the weights of a run that was never interrupted. What that
// takes is stored with the weights, as the attribute "systolic_training_state" (JSON) of latest.weights.h5,
// one file written atomically (temporary file, fsync, rename): a kill at any moment leaves the previous backup
// whole. Under replicas every worker makes the same calls; the chief writes and reads, and every replica
// takes what it read.
#pragma once

#include <systolic/callbacks.h>

#include <cstdint>
#include <string>

namespace systolic::callbacks {

struct BackupAndRestoreOptions {
  std::int64_t save_freq = 0;  // batches between backups; 0: Keras's "epoch" (at the end of every epoch)
  // Keras's double_checkpoint: each backup first copies the one it replaces to latest.weights.h5.bkp and
  // training_metadata.json.bkp, and a backup that cannot be read (a damaged file) is replaced by that previous
  // one before resuming (Keras's fallback on an error reading it).
  bool double_checkpoint = false;
  bool delete_checkpoint = true;
};

class BackupAndRestore : public Callback {
 public:
  // Error for an empty backup_dir or a negative save_freq.
  explicit BackupAndRestore(std::string backup_dir, const BackupAndRestoreOptions& options = {});
  // Keras's save_freq argument as text: "epoch" -> 0, a positive integer -> itself; Error otherwise.
  static std::int64_t parse_save_freq(const std::string& text);

  void on_train_begin(Logs& logs) override;
  void on_epoch_end(int epoch, Logs& logs) override;
  void on_train_batch_end(std::int64_t batch, Logs& logs) override;
  void on_train_end(Logs& logs) override;

  const std::string& weights_path() const { return weights_path_; }

 private:
  void save();
  void restore();
  void remove_leftovers() const;

  std::string backup_dir_, weights_path_, metadata_path_;
  BackupAndRestoreOptions options_;
  std::int64_t batches_since_save_ = 0, last_batch_seen_ = 0;
};

}  // namespace systolic::callbacks
