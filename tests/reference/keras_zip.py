#!/usr/bin/env python3
"""Keras 3 `.keras` fixtures for systolic's tests (tests/test_keras_files.cc), and the check that Keras reads the
.keras and full-model files systolic writes.

    /work/venv/bin/python tests/reference/keras_zip.py write              # writes tests/fixtures/keras_zip/
    /work/venv/bin/python tests/reference/keras_zip.py check --build build  # loads files systolic wrote

`write` saves with Keras 3 (model.save("x.keras")), deterministic weights and inputs:
  * seed.keras:   the seed CNN on 8x8x3 inputs (BatchNormalization, Dropout, ...), compiled with Adam, not trained;
  * nested.keras: a functional model holding a Sequential model;
  * adam.keras:   a small Sequential CNN with BatchNormalization compiled with Adam(0.01) and trained 2 steps, so
                  model.weights.h5 holds the optimizer's variables;
  with <name>.inputs.bin and <name>.predictions.bin (float32, little endian), adam.labels.bin, and
  adam.after_step.predictions.bin: the predictions after one more train_on_batch on the same batch (which a
  loader must match, so the optimizer state must be restored exactly). manifest.json lists shapes and versions.

`check` runs tests/keras_export (built with the tests) to write systolic's files, then: Keras 3 loads each
<model>.systolic.keras and predicts (max |difference| printed, must be <= 1e-5); tf_keras and Keras 3 load each
<model>.systolic.full.h5 and `evaluate` it on the training batch: the accuracy must equal the true one,
computed from the predictions; Keras 3 load_weights reads <model>.systolic.weights.h5 written by --save's path.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from keras_files import FIXTURES as KERAS_FIXTURES, deterministic_weights, inputs_for, seed_cnn, zoo  # noqa: E402

FIXTURES = os.path.join(HERE, "..", "fixtures", "keras_zip")


def nested(K):
    L = K.layers
    inner = K.Sequential([K.Input((6, 6, 1)), L.Conv2D(3, 3, activation="relu"), L.Flatten()], name="inner")
    i = K.Input((6, 6, 1))
    return K.Model(i, L.Dense(2, activation="softmax")(inner(i)), name="outer")


def adam_model(K):
    L = K.layers
    return K.Sequential([K.Input((6, 6, 2)), L.Conv2D(4, 3), L.BatchNormalization(), L.ReLU(), L.Flatten(),
                         L.Dense(3, activation="softmax")], name="adam_cnn")


def write(_args):
    import keras as K

    os.makedirs(FIXTURES, exist_ok=True)
    out = lambda name: os.path.join(FIXTURES, name)  # noqa: E731
    manifest = {"keras3": K.__version__, "models": {}}
    for name, build, shape in (("seed", seed_cnn, (8, 8, 3)), ("nested", nested, (6, 6, 1)),
                               ("adam", adam_model, (6, 6, 2))):
        model = build(K)
        deterministic_weights(model, 7)
        if name == "nested":
            deterministic_weights(model.layers[1], 8)
        x = inputs_for(shape, 3)
        x.tofile(out(f"{name}.inputs.bin"))
        entry = {"input_shape": [len(x)] + list(shape)}
        if name == "seed":
            model.compile(K.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
        if name == "adam":
            y = np.array([0, 1, 2, 1], dtype="int64")
            y.astype("float32").tofile(out("adam.labels.bin"))
            model.compile(K.optimizers.Adam(0.01), loss="sparse_categorical_crossentropy", metrics=["accuracy"])
            for _ in range(2):
                model.train_on_batch(x, y)
            entry["iterations"] = int(model.optimizer.iterations.numpy())
        model.save(out(f"{name}.keras"))
        model.predict(x, verbose=0).astype("float32").tofile(out(f"{name}.predictions.bin"))
        if name == "adam":
            entry["step_loss"] = float(model.train_on_batch(x, y)[0])
            model.predict(x, verbose=0).astype("float32").tofile(out("adam.after_step.predictions.bin"))
        manifest["models"][name] = entry
    with open(out("manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    print("wrote", FIXTURES)


def check(args):
    import keras as K
    import tf_keras as K2

    exe = os.path.join(args.build, "tests", "keras_export")
    tmp = tempfile.mkdtemp(prefix="systolic-keras-zip-")
    subprocess.run([exe, KERAS_FIXTURES, tmp], check=True)
    worst = 0.0
    ok = True
    for name, build, shape in (("seed", seed_cnn, (8, 8, 3)), ("zoo", zoo, (9, 9, 2))):
        base = os.path.join(tmp, f"{name}.systolic.")
        x = np.fromfile(os.path.join(KERAS_FIXTURES, f"{name}.inputs.bin"), "float32").reshape((-1,) + shape)
        y = np.array([0, 1, 2, 3])
        want = np.fromfile(base + "full.predictions.bin", "float32").reshape(len(x), -1)
        m = K.models.load_model(base + "keras")
        diff = float(np.abs(m.predict(x, verbose=0) - want).max())
        worst = max(worst, diff)
        print(f"{name}: Keras 3 load_model(.keras) predicts systolic's values, max |diff| {diff:.3g}; "
              f"optimizer iterations {int(m.optimizer.iterations.numpy())}")
        ok &= diff <= 1e-5
        true_acc = float(np.mean(np.argmax(want, axis=1) == y))
        for label, k in (("tf_keras", K2), ("Keras 3", K)):
            mm = k.models.load_model(base + "full.h5")
            res = mm.evaluate(x, y, verbose=0, return_dict=True)
            acc = res.get("accuracy")
            print(f"{name}: {label} evaluate on systolic's full .h5: {res} (true accuracy {true_acc})")
            ok &= acc is not None and abs(acc - true_acc) < 1e-6
        w = build(K)
        w.load_weights(base + "save.weights.h5")
        diff = float(np.abs(w.predict(x, verbose=0) - want).max())  # saved after the 3 steps, as full.h5
        print(f"{name}: Keras 3 load_weights(--save-style .weights.h5) max |diff| {diff:.3g}")
        ok &= diff <= 1e-5
    print(f"worst .keras prediction difference: {worst:.3g}")
    print("OK" if ok else "FAILED")
    sys.exit(0 if ok else 1)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("write")
    c = sub.add_parser("check")
    c.add_argument("--build", default="build")
    a = p.parse_args()
    {"write": write, "check": check}[a.cmd](a)


if __name__ == "__main__":
    main()
