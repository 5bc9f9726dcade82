"""Keras 3's BackupAndRestore, as test_backup_and_restore.cc checks systolic's against it.

Writes tests/fixtures/backup_and_restore/:
  keras_saves.json   for save_freq "epoch", 3 and 5, fit of 3 epochs of 14 samples in batches of 4 (4 batches
                     per epoch, the last one partial): after every batch and every epoch, the content of
                     training_metadata.json (null while there is none); and whether the backup folder is left
                     after training with delete_checkpoint True and False.
  keras_backup/      a backup Keras wrote mid-training (save_freq "epoch", fit stopped by an exception in the
                     third epoch): latest.weights.h5 (the layers and the Adam variables) and
                     training_metadata.json; keras_backup.json holds the model's JSON and its weights and
                     optimizer iterations at that backup, which a restore must bring back.
  keras_double_checkpoint.json  double_checkpoint=True (delete_checkpoint False, save_freq "epoch"): the files in
                     the backup folder and both metadata files after every epoch; then, with latest.weights.h5
                     damaged, the epoch and step a new fit with the same callback resumes at (from the previous
                     backup, which Keras copies back).

Run with a venv holding keras 3.15 and tensorflow-cpu; `--only double_checkpoint` writes the last file alone.
"""

import json
import os
import shutil
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import keras  # noqa: E402
import numpy as np  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "backup_and_restore")


def model():
    keras.utils.set_random_seed(7)
    m = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="relu"), keras.layers.Dense(2)])
    m.compile(optimizer=keras.optimizers.Adam(0.01),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return m


def data():
    rng = np.random.default_rng(1)
    return rng.normal(size=(14, 3)).astype("float32"), rng.integers(0, 2, size=(14,)).astype("int32")


class Record(keras.callbacks.Callback):
    """Reads training_metadata.json after the BackupAndRestore callback ran (it comes first)."""

    def __init__(self, path):
        super().__init__()
        self.path, self.events = path, []

    def read(self):
        if not os.path.exists(self.path):
            return None
        with open(self.path) as f:
            return json.load(f)

    def on_train_batch_end(self, batch, logs=None):
        self.events.append({"epoch": self.epoch, "batch": batch, "metadata": self.read()})

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        self.events.append({"epoch": epoch, "end_of_epoch": True, "metadata": self.read()})


def saves(save_freq, delete_checkpoint=True):
    x, y = data()
    d = tempfile.mkdtemp()
    backup = os.path.join(d, "backup")
    m = model()
    rec = Record(os.path.join(backup, "training_metadata.json"))
    cb = keras.callbacks.BackupAndRestore(backup, save_freq=save_freq, delete_checkpoint=delete_checkpoint)
    m.fit(x, y, batch_size=4, epochs=3, shuffle=False, verbose=0, callbacks=[cb, rec])
    left = os.path.exists(backup)
    shutil.rmtree(d)
    return {"save_freq": save_freq, "events": rec.events, "backup_left": left}


class Crash(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        if self.epoch == 2 and batch == 1:
            raise RuntimeError("interrupted")

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch


def keras_backup():
    x, y = data()
    backup = os.path.join(OUT, "keras_backup")
    shutil.rmtree(backup, ignore_errors=True)
    m = model()
    try:
        m.fit(x, y, batch_size=4, epochs=3, shuffle=False, verbose=0,
              callbacks=[keras.callbacks.BackupAndRestore(backup), Crash()])
    except RuntimeError:
        pass
    # What the backup holds: the weights and optimizer state at the end of epoch 2 (index 1).
    restored = model()
    restored.optimizer.build(restored.trainable_variables)
    restored.load_weights(os.path.join(backup, "latest.weights.h5"))
    with open(os.path.join(backup, "training_metadata.json")) as f:
        metadata = json.load(f)
    return {
        "model_json": json.loads(restored.to_json()),
        "weights": [w.numpy().astype("float64").ravel().tolist() for w in restored.weights],
        "iterations": int(restored.optimizer.iterations.numpy()),
        "metadata": metadata,
    }


class Listing(keras.callbacks.Callback):
    """After BackupAndRestore's on_epoch_end: the backup folder's files and both metadata files."""

    def __init__(self, backup):
        super().__init__()
        self.backup, self.events = backup, []

    def on_epoch_end(self, epoch, logs=None):
        def read(name):
            path = os.path.join(self.backup, name)
            return json.load(open(path)) if os.path.exists(path) else None

        self.events.append({"epoch": epoch, "files": sorted(os.listdir(self.backup)),
                            "metadata": read("training_metadata.json"),
                            "previous_metadata": read("training_metadata.json.bkp")})


class FirstEpoch(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.epoch, self.iterations = None, None

    def on_epoch_begin(self, epoch, logs=None):
        if self.epoch is None:
            self.epoch, self.iterations = epoch, int(self.model.optimizer.iterations.numpy())


def double_checkpoint():
    x, y = data()
    d = tempfile.mkdtemp()
    backup = os.path.join(d, "backup")
    m = model()
    listing = Listing(backup)
    cb = keras.callbacks.BackupAndRestore(backup, double_checkpoint=True, delete_checkpoint=False)
    m.fit(x, y, batch_size=4, epochs=3, shuffle=False, verbose=0, callbacks=[cb, listing])
    with open(os.path.join(backup, "latest.weights.h5"), "wb") as f:
        f.write(b"damaged: not an HDF5 file")
    first = FirstEpoch()
    again = model()
    again.fit(x, y, batch_size=4, epochs=4, shuffle=False, verbose=0,
              callbacks=[keras.callbacks.BackupAndRestore(backup, double_checkpoint=True), first])
    shutil.rmtree(d)
    return {"keras_version": keras.__version__, "events": listing.events,
            "resumed_epoch": first.epoch, "resumed_iterations": first.iterations}


def main():
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "keras_double_checkpoint.json"), "w") as f:
        json.dump(double_checkpoint(), f, indent=1)
    if sys.argv[1:] == ["--only", "double_checkpoint"]:
        return
    runs = [saves("epoch"), saves(3), saves(5), saves(3, delete_checkpoint=False)]
    runs[-1]["delete_checkpoint"] = False
    with open(os.path.join(OUT, "keras_saves.json"), "w") as f:
        json.dump({"keras_version": keras.__version__, "runs": runs}, f, indent=1)
    with open(os.path.join(OUT, "keras_backup.json"), "w") as f:
        json.dump(keras_backup(), f, indent=1)
    print("wrote", OUT, file=sys.stderr)


if __name__ == "__main__":
    main()
