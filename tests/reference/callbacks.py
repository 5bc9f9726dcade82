"""Keras 3's callbacks on scripted logs: when EarlyStopping stops, when ReduceLROnPlateau changes the rate,
when ModelCheckpoint saves (and to which formatted path), what CSVLogger writes.

Each scenario feeds one callback a fixed sequence of epoch logs through on_epoch_end (as fit does, stopping
after the epoch where model.stop_training is set) with a small compiled model, and records Keras's decisions.
tests/test_keras_callbacks.cc replays the same sequences through systolic's callbacks and must agree.

Then real fit / evaluate / predict calls on a tiny model with fixed weights and data (both in the fixture), with
a callback that records every hook in order with its index and logs ("HookOrder" cases: fit's validation
runs the on_test_* hooks, evaluate and predict take callbacks, stop_evaluating / stop_predicting), and the
logs' learning_rate ("LearningRateLogs" cases: which callbacks add it, what History, CSVLogger and later
callbacks see). tests/test_callback_hooks.cc runs the same calls in systolic.

    VENV/bin/python tests/reference/callbacks.py   # writes tests/fixtures/callbacks/keras_callbacks.json
"""

import json
import os
import sys
import tempfile

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import keras  # noqa: E402
import numpy as np  # noqa: E402

OUT = os.path.join(os.path.dirname(__file__), "..", "fixtures", "callbacks", "keras_callbacks.json")

# Validation-loss-like sequences: improving, plateaus, noise, small improvements below min_delta.
SEQS = {
    "plateau": [1.0, 0.8, 0.7, 0.7, 0.71, 0.69, 0.7, 0.72, 0.73, 0.74, 0.75, 0.76],
    "noisy": [0.9, 0.95, 0.85, 0.86, 0.87, 0.84, 0.84, 0.9, 0.83, 0.99, 0.98, 0.97, 0.96, 0.95],
    "tiny": [1.0, 0.99995, 0.9999, 0.99985, 0.9, 0.89999, 0.89998, 0.89997, 0.89996, 0.89995],
    "rising_acc": [0.5, 0.6, 0.6, 0.65, 0.64, 0.66, 0.66, 0.66, 0.67, 0.5, 0.5, 0.5],
}


def model(lr=0.1):
    m = keras.Sequential([keras.Input((2,)), keras.layers.Dense(2, activation="softmax")])
    m.compile(keras.optimizers.SGD(learning_rate=lr), "sparse_categorical_crossentropy", metrics=["accuracy"])
    # Build the compiled metrics (Keras looks up a metric's direction there) as a fit would.
    m.fit(np.array([[0.0, 1.0]]), np.array([0]), epochs=1, verbose=0)
    return m


def logs_for(seq_name, monitor, epoch):
    v = SEQS[seq_name][epoch]
    # Every scenario's logs hold loss, accuracy, val_loss, val_accuracy; the monitored one follows the sequence.
    logs = {"accuracy": 0.5, "loss": 1.5 - 0.01 * epoch, "val_accuracy": 0.5, "val_loss": 1.0}
    logs[monitor] = v
    return logs


def early_stopping(seq, **kw):
    m = model()
    cb = keras.callbacks.EarlyStopping(**kw)
    cb.set_model(m)
    m.stop_training = False
    cb.on_train_begin()
    monitor = kw.get("monitor", "val_loss")
    waits = []
    stopped_at = None
    for epoch in range(len(SEQS[seq])):
        cb.on_epoch_end(epoch, logs_for(seq, monitor, epoch))
        waits.append(cb.wait)
        if m.stop_training:
            stopped_at = epoch
            break
    cb.on_train_end()
    return {"kind": "EarlyStopping", "seq": seq, "options": kw, "waits": waits, "stopped_at": stopped_at,
            "stopped_epoch": cb.stopped_epoch, "best_epoch": cb.best_epoch,
            "best": None if cb.best is None else float(cb.best)}


def reduce_lr(seq, **kw):
    m = model(lr=0.1)
    cb = keras.callbacks.ReduceLROnPlateau(**kw)
    cb.set_model(m)
    cb.on_train_begin()
    monitor = kw.get("monitor", "val_loss")
    lrs = []
    for epoch in range(len(SEQS[seq])):
        cb.on_epoch_end(epoch, logs_for(seq, monitor, epoch))
        lrs.append(float(keras.ops.convert_to_numpy(m.optimizer.learning_rate)))
    return {"kind": "ReduceLROnPlateau", "seq": seq, "options": kw, "learning_rates": lrs}


def checkpoint(seq, filepath, **kw):
    m = model()
    saved = []
    m.save = lambda path, overwrite=True: saved.append(os.path.basename(path))
    m.save_weights = lambda path, overwrite=True: saved.append(os.path.basename(path))
    with tempfile.TemporaryDirectory() as d:
        cb = keras.callbacks.ModelCheckpoint(os.path.join(d, filepath), **kw)
        cb.set_model(m)
        cb.on_train_begin()
        monitor = kw.get("monitor", "val_loss")
        saves = []
        for epoch in range(len(SEQS[seq])):
            before = len(saved)
            cb.on_epoch_begin(epoch)
            cb.on_epoch_end(epoch, logs_for(seq, monitor, epoch))
            saves.append(saved[before] if len(saved) > before else None)
    return {"kind": "ModelCheckpoint", "seq": seq, "filepath": filepath, "options": kw, "saves": saves}


def checkpoint_batches(save_freq, epochs, steps):
    m = model()
    saved = []
    m.save = lambda path, overwrite=True: saved.append(os.path.basename(path))
    with tempfile.TemporaryDirectory() as d:
        cb = keras.callbacks.ModelCheckpoint(os.path.join(d, "b-{epoch}-{batch}-{loss:.3f}.h5"), save_freq=save_freq)
        cb.set_model(m)
        cb.on_train_begin()
        for epoch in range(epochs):
            cb.on_epoch_begin(epoch)
            for batch in range(steps):
                cb.on_train_batch_end(batch, {"loss": 1.0 / (1 + epoch * steps + batch)})
            cb.on_epoch_end(epoch, {"loss": 0.5})
    return {"kind": "ModelCheckpointBatches", "save_freq": save_freq, "epochs": epochs, "steps": steps,
            "saves": saved}


def csv_logger(append, rows, separator=","):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "log.csv")
        if append:
            with open(path, "w") as f:
                f.write("previous\n")
        cb = keras.callbacks.CSVLogger(path, separator=separator, append=append)
        cb.on_train_begin()
        for epoch, logs in enumerate(rows):
            cb.on_epoch_end(epoch, logs)
        cb.on_train_end()
        with open(path, "rb") as f:
            content = f.read().decode()
    return {"kind": "CSVLogger", "append": append, "separator": separator, "rows": rows, "content": content}


def lr_scheduler():
    m = model(lr=0.1)
    cb = keras.callbacks.LearningRateScheduler(lambda epoch, lr: lr if epoch < 3 else lr * 0.5)
    cb.set_model(m)
    lrs = []
    for epoch in range(6):
        cb.on_epoch_begin(epoch)
        lrs.append(float(keras.ops.convert_to_numpy(m.optimizer.learning_rate)))
    return {"kind": "LearningRateScheduler", "rule": "epoch < 3 ? lr : lr * 0.5", "learning_rates": lrs}


def terminate_on_nan():
    m = model()
    cb = keras.callbacks.TerminateOnNaN()
    cb.set_model(m)
    losses = [1.0, 0.5, float("inf"), 0.3]
    stopped_at = None
    for batch, loss in enumerate(losses):
        cb.on_train_batch_end(batch, {"loss": loss})
        if m.stop_training:
            stopped_at = batch
            break
    return {"kind": "TerminateOnNaN", "losses": ["inf" if l == float("inf") else l for l in losses],
            "stopped_at": stopped_at}


# ---- real fit / evaluate / predict with a recording callback ----

TINY_KERNEL = [[0.3, -0.2], [-0.5, 0.4], [0.1, 0.25]]
TINY_BIAS = [0.1, -0.1]


def tiny_data(n):
    i = np.arange(n, dtype=np.float64)
    x = np.stack([np.sin(i), np.cos(1.3 * i), (i % 3) - 1.0], axis=1).astype(np.float32)
    y = ((i * 7) % 2).astype(np.int64)
    return x, y


def tiny_model(lr=0.1):
    keras.backend.clear_session()  # the default names: sequential, dense
    m = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, activation="softmax")])
    m.layers[0].set_weights([np.array(TINY_KERNEL, np.float32), np.array(TINY_BIAS, np.float32)])
    m.compile(keras.optimizers.SGD(learning_rate=lr), "sparse_categorical_crossentropy", metrics=["accuracy"])
    return m


def pythonify(logs):
    out = {}
    for k, v in (logs or {}).items():
        out[k] = np.asarray(v).tolist() if k == "outputs" else float(v)
    return out


class Recorder(keras.callbacks.Callback):
    """Every hook, in order: {"hook", "index" (epoch or batch), "logs", "params" (at the begin hooks)}."""

    def __init__(self, stop_evaluating_at=None, stop_predicting_at=None):
        super().__init__()
        self.events = []
        self.stop_evaluating_at = stop_evaluating_at
        self.stop_predicting_at = stop_predicting_at

    def _log(self, hook, index, logs, params=False):
        e = {"hook": hook}
        if index is not None:
            e["index"] = int(index)
        e["logs"] = pythonify(logs)
        if params:
            e["params"] = {k: v for k, v in self.params.items()}
        self.events.append(e)

    def on_train_begin(self, logs=None):
        self._log("train_begin", None, logs, params=True)

    def on_train_end(self, logs=None):
        self._log("train_end", None, logs)

    def on_epoch_begin(self, epoch, logs=None):
        self._log("epoch_begin", epoch, logs)

    def on_epoch_end(self, epoch, logs=None):
        self._log("epoch_end", epoch, logs)

    def on_train_batch_begin(self, batch, logs=None):
        self._log("train_batch_begin", batch, logs)

    def on_train_batch_end(self, batch, logs=None):
        self._log("train_batch_end", batch, logs)

    def on_test_begin(self, logs=None):
        self._log("test_begin", None, logs, params=True)

    def on_test_end(self, logs=None):
        self._log("test_end", None, logs)

    def on_test_batch_begin(self, batch, logs=None):
        self._log("test_batch_begin", batch, logs)

    def on_test_batch_end(self, batch, logs=None):
        self._log("test_batch_end", batch, logs)
        if self.stop_evaluating_at == batch:
            self.model.stop_evaluating = True

    def on_predict_begin(self, logs=None):
        self._log("predict_begin", None, logs, params=True)

    def on_predict_end(self, logs=None):
        self._log("predict_end", None, logs)

    def on_predict_batch_begin(self, batch, logs=None):
        self._log("predict_batch_begin", batch, logs)

    def on_predict_batch_end(self, batch, logs=None):
        self._log("predict_batch_end", batch, logs)
        if self.stop_predicting_at == batch:
            self.model.stop_predicting = True


def hook_order(call, n, batch_size, **kw):
    m = tiny_model()
    x, y = tiny_data(n)
    rec = Recorder(kw.pop("stop_evaluating_at", None), kw.pop("stop_predicting_at", None))
    if call == "fit":
        fit_kw = dict(kw)
        if "validation_n" in fit_kw:  # validation_data: the first validation_n samples of tiny_data
            fit_kw["validation_data"] = tiny_data(fit_kw.pop("validation_n"))
        result = m.fit(x, y, batch_size=batch_size, verbose=0, shuffle=False, callbacks=[rec], **fit_kw).history
    elif call == "evaluate":
        result = m.evaluate(x, y, batch_size=batch_size, verbose=0, callbacks=[rec], return_dict=True)
    else:
        result = np.asarray(m.predict(x, batch_size=batch_size, verbose=0, callbacks=[rec])).tolist()
    return {"kind": "HookOrder", "call": call, "n": n, "batch_size": batch_size, "options": kw,
            "stop_evaluating_at": rec.stop_evaluating_at, "stop_predicting_at": rec.stop_predicting_at,
            "events": rec.events, "result": result}


def learning_rate_logs(name, make_callbacks, n=12, epochs=3, **kw):
    """Which logs get learning_rate: History, CSVLogger files (before and after the callback that adds it) and a
    recorder's epoch_end logs, in the order the callbacks are given."""
    m = tiny_model()
    x, y = tiny_data(n)
    with tempfile.TemporaryDirectory() as d:
        rec = Recorder()
        cbs = make_callbacks(d, rec)
        history = m.fit(x, y, batch_size=4, epochs=epochs, verbose=0, shuffle=False, callbacks=cbs, **kw)
        csv = {}
        for f in sorted(os.listdir(d)):
            if f.endswith(".csv"):
                with open(os.path.join(d, f), "rb") as fh:
                    lines = fh.read().decode().split("\r\n")
                header = lines[0].split(",")
                rows = [dict(zip(header, l.split(","))) for l in lines[1:] if l]
                csv[f] = {"header": header,
                          "learning_rate": [r["learning_rate"] for r in rows] if "learning_rate" in header else None}
    return {"kind": "LearningRateLogs", "name": name, "n": n, "epochs": epochs, "options": kw,
            "history_keys": list(history.history.keys()),
            "history_learning_rate": history.history.get("learning_rate"),
            "epoch_end_keys": [sorted(e["logs"].keys()) for e in rec.events if e["hook"] == "epoch_end"],
            "train_end_keys": sorted(rec.events[-1]["logs"].keys()),
            "csv": csv}


def tensorboard_tags(update_freq, write_steps_per_second=False):
    """The tags and steps (and scalar values, except histograms' and timings') Keras's TensorBoard writes in a fit
    with validation followed by an evaluate given the same callback."""
    from tensorboard.backend.event_processing import event_accumulator
    from tensorboard.util import tensor_util

    m = tiny_model()
    x, y = tiny_data(12)
    out = {}
    with tempfile.TemporaryDirectory() as d:
        cb = keras.callbacks.TensorBoard(d, update_freq=update_freq, histogram_freq=1, write_graph=False,
                                         write_steps_per_second=write_steps_per_second)
        m.fit(x, y, batch_size=4, epochs=2, verbose=0, shuffle=False, validation_split=0.25, callbacks=[cb])
        m.evaluate(x, y, batch_size=4, verbose=0, callbacks=[cb])
        for run in sorted(os.listdir(d)):
            acc = event_accumulator.EventAccumulator(os.path.join(d, run), size_guidance={"tensors": 0})
            acc.Reload()
            tags = {}
            for tag in acc.Tags()["tensors"]:
                events = acc.Tensors(tag)
                if tag.endswith("/histogram") or tag.endswith("steps_per_second"):
                    tags[tag] = [[e.step, None] for e in events]
                else:
                    tags[tag] = [[e.step, float(tensor_util.make_ndarray(e.tensor_proto))] for e in events]
            out[run] = tags
    return {"kind": "TensorBoardTags", "update_freq": update_freq, "write_steps_per_second": write_steps_per_second,
            "runs": out}


def main():
    cases = []
    for seq in ["plateau", "noisy", "tiny"]:
        cases.append(early_stopping(seq))
        cases.append(early_stopping(seq, patience=2))
        cases.append(early_stopping(seq, patience=3, min_delta=0.01))
        cases.append(early_stopping(seq, patience=2, baseline=0.75))
        cases.append(early_stopping(seq, patience=2, start_from_epoch=4))
        cases.append(early_stopping(seq, patience=1, mode="max"))
        cases.append(early_stopping(seq, patience=2, restore_best_weights=True))
        cases.append(reduce_lr(seq))
        cases.append(reduce_lr(seq, patience=2))
        cases.append(reduce_lr(seq, patience=1, factor=0.5, cooldown=2))
        cases.append(reduce_lr(seq, patience=2, factor=0.2, min_lr=0.005, min_delta=0.01))
        cases.append(checkpoint(seq, "ckpt-{epoch:02d}-{val_loss:.2f}.h5"))
        cases.append(checkpoint(seq, "best.h5", save_best_only=True))
        cases.append(checkpoint(seq, "best-{epoch}.weights.h5", save_best_only=True, save_weights_only=True,
                                initial_value_threshold=0.85))
        cases.append(checkpoint(seq, "m-{epoch:03d}-{loss:.4f}.h5", save_best_only=True, mode="max"))
    seq = "rising_acc"
    cases.append(early_stopping(seq, monitor="val_accuracy", patience=2))
    cases.append(early_stopping(seq, monitor="accuracy", patience=3, min_delta=0.005))
    cases.append(reduce_lr(seq, monitor="val_accuracy", patience=2, factor=0.5))
    cases.append(checkpoint(seq, "acc-{epoch:02d}-{val_accuracy:.3f}.h5", monitor="val_accuracy",
                            save_best_only=True))
    cases.append(checkpoint_batches(3, 3, 4))
    cases.append(checkpoint_batches(5, 2, 4))
    rows = [{"loss": 0.6931471824645996, "accuracy": 0.5, "val_loss": 0.7, "val_accuracy": 0.25},
            {"loss": 0.25, "accuracy": 1.0, "val_loss": 1e-05, "val_accuracy": 0.125}]
    cases.append(csv_logger(False, rows))
    cases.append(csv_logger(True, rows, separator=";"))
    cases.append(csv_logger(False, [{"loss": 0.5, "accuracy": 0.75}, {"loss": 0.25, "accuracy": 1.0}]))
    cases.append(lr_scheduler())
    cases.append(terminate_on_nan())

    # fit with validation: 14 samples, validation_split 0.3 -> Keras trains on floor(14 * 0.7) = 9 (3 batches of
    # 3) and validates on 5 (batches of 3 and 2).
    cases.append(hook_order("fit", 14, 3, epochs=2, validation_split=0.3))
    cases.append(hook_order("fit", 10, 4, epochs=2, validation_n=5, initial_epoch=1))
    # validation every second epoch, in batches of 2: the on_test_* hooks and val_ logs only in epochs 2 and 4.
    cases.append(hook_order("fit", 10, 4, epochs=4, validation_split=0.2, validation_freq=2,
                            validation_batch_size=1))
    cases.append(hook_order("evaluate", 7, 3))
    cases.append(hook_order("evaluate", 7, 3, stop_evaluating_at=1))
    cases.append(hook_order("predict", 5, 2))
    cases.append(hook_order("predict", 5, 2, stop_predicting_at=0))

    def reduce(d, rec):
        cb = keras.callbacks.ReduceLROnPlateau(monitor="loss", patience=1, factor=0.5, min_delta=10.0)
        a = keras.callbacks.CSVLogger(os.path.join(d, "a_before.csv"))
        b = keras.callbacks.CSVLogger(os.path.join(d, "b_after.csv"))
        return [a, cb, b, rec]

    cases.append(learning_rate_logs("ReduceLROnPlateau between two CSVLoggers", reduce, epochs=4))
    cases.append(learning_rate_logs("ReduceLROnPlateau with validation", reduce, epochs=3,
                                    validation_split=0.25))
    cases.append(learning_rate_logs(
        "LearningRateScheduler", lambda d, rec: [
            keras.callbacks.LearningRateScheduler(lambda e, lr: lr * 0.5 if e > 0 else lr),
            keras.callbacks.CSVLogger(os.path.join(d, "log.csv")), rec]))
    cases.append(tensorboard_tags("epoch"))
    cases.append(tensorboard_tags(1))
    cases.append(tensorboard_tags(1, write_steps_per_second=True))
    cases.append(learning_rate_logs(
        "TensorBoard", lambda d, rec: [keras.callbacks.TensorBoard(os.path.join(d, "tb")),
                                      keras.callbacks.CSVLogger(os.path.join(d, "log.csv")), rec]))
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        x, y = tiny_data(14)
        tiny = {"kernel": TINY_KERNEL, "bias": TINY_BIAS, "x": x.tolist(), "y": y.tolist()}
        json.dump({"keras_version": keras.__version__, "sequences": SEQS, "tiny": tiny, "cases": cases}, f,
                  indent=1)
        f.write("\n")
    print(f"wrote {len(cases)} cases to {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
