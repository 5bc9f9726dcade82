#!/usr/bin/env python3
"""Nested models of several outputs, called more than once, written by Keras 3 (fixtures for tests/test_transfer.cc),
and the check that tf.keras and Keras 3 load the nested models systolic writes.

    python tests/reference/nested_models.py write                 # writes tests/fixtures/nested/
    python tests/reference/nested_models.py check --build build   # loads files systolic wrote (not a CI test)

(any Python with keras 3, tensorflow-cpu and tf_keras; last run with keras 3.15.1, tensorflow-cpu 2.21.0,
tf_keras 2.21.0)

`write` builds `multi` in Keras 3 (6x6x2 inputs, deterministic weights):
  base  = Functional(Input -> Conv2D(3, 3) -> [GlobalAveragePooling2D -> Dense(4), Flatten -> Dense(2)]), two outputs
  head  = Sequential([Input((4,)), Dense(4, relu)]), called twice
  outer = Input -> base(x, training=False) -> (a, b); head(a), head(Dense(4)(b)) -> Concatenate -> Dense(3)
and saves multi.keras, multi.keras3.h5 (model.save, legacy HDF5), multi.keras3.json (to_json), multi.inputs.bin,
multi.predictions.bin (float32, little endian) and manifest.json.

`check` runs build/tests/keras_export --nested, which loads multi.keras and tests/fixtures/transfer/nested.keras3.h5
(a Functional holding a Sequential, frozen, called with training=False) into systolic and writes, for each,
<name>.systolic.keras3.h5 (save, the default: for Keras 3), <name>.systolic.tfkeras.h5 (save with
KerasTarget::tf_keras), <name>.systolic.tfkeras.json (to_json for tf.keras), <name>.systolic.keras,
<name>.systolic.weights.legacy.h5 (save_weights) and <name>.systolic.predictions.bin. Then Keras 3 loads the
.keras3.h5 and the .keras, tf.keras (tf_keras) loads the .tfkeras.h5 and builds the .tfkeras.json (weights from the
.tfkeras.h5, then from the save_weights file), Keras 3 reads the save_weights file too, and each predicts systolic's
values
(max |difference| printed, must be <= 1e-5). It also reports what each Keras does with the other's .h5 (in a child
process with a time limit): neither loads it, as the node numbering of nested calls differs (include/systolic/
model.h).
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
OUT = os.path.join(HERE, "..", "fixtures", "nested")
TRANSFER = os.path.join(HERE, "..", "fixtures", "transfer")


def multi(K):
    L = K.layers
    bi = K.Input((6, 6, 2))
    h = L.Conv2D(3, 3, activation="relu")(bi)
    a = L.Dense(4)(L.GlobalAveragePooling2D()(h))
    b = L.Dense(2)(L.Flatten()(h))
    base = K.Model(bi, [a, b], name="base")
    head = K.Sequential([K.Input((4,)), L.Dense(4, activation="relu")], name="head")
    i = K.Input((6, 6, 2))
    a, b = base(i, training=False)
    y = L.Concatenate()([head(a), head(L.Dense(4)(b))])
    return K.Model(i, L.Dense(3)(y), name="outer")


def fill(model, seed=0):
    for li, layer in enumerate(model.layers):
        if getattr(layer, "layers", None):
            fill(layer, seed + 10 * (li + 1))
            continue
        new = []
        for wi, w in enumerate(layer.get_weights()):
            v = np.sin(np.arange(w.size, dtype=np.float64) * 0.37 + (seed + li) * 1.3 + wi * 0.7) * 0.5
            new.append(v.reshape(w.shape).astype(np.float32))
        if new:
            layer.set_weights(new)


def write(_args):
    import keras

    os.makedirs(OUT, exist_ok=True)
    model = multi(keras)
    fill(model)
    x = np.random.default_rng(3).uniform(-1, 1, (4, 6, 6, 2)).astype("float32")
    y = model.predict(x, verbose=0).astype("float32")
    x.tofile(os.path.join(OUT, "multi.inputs.bin"))
    y.tofile(os.path.join(OUT, "multi.predictions.bin"))
    model.save(os.path.join(OUT, "multi.keras"))
    model.save(os.path.join(OUT, "multi.keras3.h5"))
    with open(os.path.join(OUT, "multi.keras3.json"), "w") as f:
        f.write(model.to_json())
    manifest = {"keras_version": keras.__version__, "input": list(x.shape), "output": list(y.shape),
                "trainable_params": int(sum(np.prod(w.shape) for w in model.trainable_weights))}
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    print("multi:", manifest, "|y| max", float(np.abs(y).max()))


def _keras3_with_legacy_weights(keras, base):
    m = keras.models.load_model(base + "keras", compile=False)
    for w in m.weights:  # forget the .keras's values: they must come from the legacy weights file
        w.assign(np.zeros(w.shape, w.dtype))
    m.load_weights(base + "weights.legacy.h5")
    return m


def check(args):
    import keras
    import tf_keras

    exe = os.path.join(args.build, "tests", "keras_export")
    tmp = tempfile.mkdtemp(prefix="systolic-nested-")
    subprocess.run([exe, "--nested", os.path.normpath(os.path.join(HERE, "..", "fixtures")), tmp], check=True)
    ok = True
    cases = (("multi", os.path.join(OUT, "multi.inputs.bin"), (6, 6, 2)),
             ("nested", os.path.join(TRANSFER, "inputs.bin"), (8, 8, 3)))
    for name, inputs, shape in cases:
        base = os.path.join(tmp, name + ".systolic.")
        x = np.fromfile(inputs, "float32").reshape((-1,) + shape)
        want = np.fromfile(base + "predictions.bin", "float32").reshape(len(x), -1)
        runs = [("Keras 3", "load_model(.keras3.h5)", lambda: keras.models.load_model(base + "keras3.h5", compile=False)),
                ("Keras 3", "load_model(.keras)", lambda: keras.models.load_model(base + "keras", compile=False)),
                ("tf.keras", "load_model(.tfkeras.h5)",
                 lambda: tf_keras.models.load_model(base + "tfkeras.h5", compile=False))]

        def from_json():
            with open(base + "tfkeras.json") as f:
                m = tf_keras.models.model_from_json(f.read())
            m.load_weights(base + "tfkeras.h5")
            return m
        runs.append(("tf.keras", "model_from_json(.tfkeras.json) + load_weights(.tfkeras.h5)", from_json))

        def tf_keras_with_legacy_weights():
            with open(base + "tfkeras.json") as f:
                m = tf_keras.models.model_from_json(f.read())
            m.load_weights(base + "weights.legacy.h5")
            return m
        runs.append(("tf.keras", "model_from_json(.tfkeras.json) + load_weights(save_weights .h5)",
                     tf_keras_with_legacy_weights))
        runs.append(("Keras 3", "the .keras's model, zeroed, + load_weights(save_weights .h5)",
                     lambda: _keras3_with_legacy_weights(keras, base)))
        for who, what, load in runs:
            m = load()
            diff = float(np.abs(m.predict(x, verbose=0) - want).max())
            good = diff <= 1e-5
            ok &= good
            print(f"{name}: {who} {what}: max |keras - systolic| = {diff:.3g} {'OK' if good else 'FAIL'}")
        # The other Keras's file, in a child process (tf.keras's loader can loop forever on a config it cannot
        # resolve).
        for who, f in (("keras", "tfkeras.h5"), ("tf_keras", "keras3.h5")):
            try:
                r = subprocess.run([sys.executable, __file__, "try-load", who, base + f], capture_output=True,
                                   text=True, timeout=120)
                print(f"{name}: {who} on .{f}: {r.stdout.strip().splitlines()[-1] if r.stdout.strip() else r.returncode}")
            except subprocess.TimeoutExpired:
                print(f"{name}: {who} on .{f}: still loading after 120 s (stopped)")
    print("OK" if ok else "FAILED")
    sys.exit(0 if ok else 1)


def try_load(args):
    import importlib

    k = importlib.import_module(args.keras)
    try:
        k.models.load_model(args.path, compile=False)
        print("loads")
    except Exception as e:  # noqa: BLE001 (reporting what this Keras does)
        print(f"cannot load: {type(e).__name__}: {str(e).splitlines()[0][:100]}")


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("write")
    c = sub.add_parser("check")
    c.add_argument("--build", default="build")
    t = sub.add_parser("try-load")
    t.add_argument("keras", choices=["keras", "tf_keras"])
    t.add_argument("path")
    a = p.parse_args()
    {"write": write, "check": check, "try-load": try_load}[a.cmd](a)


if __name__ == "__main__":
    main()
