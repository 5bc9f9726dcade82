"""Reads TensorBoard event files with TensorBoard's own reader (pip `tensorboard`'s EventAccumulator) and prints
every scalar and histogram tag with its steps and values, as JSON; exits non-zero when a file fails to read.

    /work/venv/bin/python tests/reference/tensorboard_read.py LOGDIR        # LOGDIR/train, LOGDIR/validation
    /work/venv/bin/python tests/reference/tensorboard_read.py --keras-fixture

Used to check that `systolic train --tensorboard LOGDIR` writes files TensorBoard reads (docs/cli.md); with
--fixture it writes what it read, next to which the event files themselves are committed
With --keras-fixture it runs a 2-epoch Keras 3 fit with keras.callbacks.TensorBoard(histogram_freq=1) and
copies its train event file to tests/fixtures/callbacks/keras_train.tfevents, with what TensorBoard reads from
it in keras_train.json, for tests/test_keras_callbacks.cc (which checks its reader and CRCs on a real file).
"""

import json
import os
import sys

from tensorboard.backend.event_processing import event_accumulator
from tensorboard.util import tensor_util


def read(run_dir):
    acc = event_accumulator.EventAccumulator(run_dir, size_guidance={"scalars": 0, "histograms": 0, "tensors": 0})
    acc.Reload()
    tags = acc.Tags()
    out = {"scalars": {}, "histograms": {}, "tensors": {}}
    for tag in tags["scalars"]:
        out["scalars"][tag] = [[e.step, e.value] for e in acc.Scalars(tag)]
    for tag in tags["histograms"]:
        out["histograms"][tag] = [[e.step, e.histogram_value.num] for e in acc.Histograms(tag)]
    # TensorFlow 2's summaries (what Keras 3 writes): scalars as 0-d tensors, histograms as [k, 3] tensors.
    for tag in tags["tensors"]:
        out["tensors"][tag] = [[e.step, tensor_util.make_ndarray(e.tensor_proto).tolist()] for e in acc.Tensors(tag)]
    return out


def keras_fixture():
    import glob
    import shutil
    import tempfile

    import keras
    import numpy as np

    out = os.path.join(os.path.dirname(__file__), "..", "fixtures", "callbacks")
    keras.utils.set_random_seed(1)
    m = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, activation="softmax", name="dense")])
    m.compile("sgd", "sparse_categorical_crossentropy", metrics=["accuracy"])
    x = np.random.rand(16, 3).astype("float32")
    y = (x[:, 0] > 0.5).astype("int32")
    with tempfile.TemporaryDirectory() as d:
        cb = keras.callbacks.TensorBoard(d, histogram_freq=1, write_graph=False)
        m.fit(x, y, epochs=2, batch_size=8, validation_split=0.25, callbacks=[cb], verbose=0)
        (path,) = glob.glob(os.path.join(d, "train", "events.out.tfevents.*"))
        shutil.copy(path, os.path.join(out, "keras_train.tfevents"))
        with open(os.path.join(out, "keras_train.json"), "w") as f:
            json.dump(read(os.path.join(d, "train")), f, indent=1, sort_keys=True)
            f.write("\n")


def main():
    if sys.argv[1] == "--keras-fixture":
        return keras_fixture()
    logdir = sys.argv[1]
    result = {}
    for run in ("train", "validation"):
        d = os.path.join(logdir, run)
        if os.path.isdir(d):
            result[run] = read(d)
    if not result or not result.get("train", {}).get("scalars"):
        sys.exit(f"no scalars read from {logdir}/train")
    print(json.dumps(result, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
