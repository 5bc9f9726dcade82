#!/usr/bin/env python3
"""Keras file fixtures for systolic's tests, written by real Keras (tf.keras 2.x via tf_keras, and Keras 3).

    python3 -m venv /tmp/kenv && /tmp/kenv/bin/pip install tensorflow-cpu tf-keras h5py
    /tmp/kenv/bin/python tests/reference/keras_files.py write              # writes tests/fixtures/keras/
    /tmp/kenv/bin/python tests/reference/keras_files.py check --build build  # loads files systolic wrote

`write` builds two models in both Keras versions with deterministic weights, and saves:
  * seed:  the seed CNN (Input, BatchNormalization, Conv2D same/valid relu, MaxPooling2D, Dropout, Flatten,
           Dense relu/softmax) on 8x8x3 inputs (small files; the same layers as the 32x32x3 seed), and
  * zoo:   a functional model that uses every other layer systolic has (ZeroPadding2D, AveragePooling2D, ReLU,
           Add, Concatenate, Rescaling, GlobalAveragePooling2D, Activation, Softmax, BatchNormalization).
  Files: <model>.tfkeras.json / .keras3.json (model.to_json()), <model>.tfkeras.h5 (legacy save_weights),
  <model>.keras3.weights.h5 (Keras 3 save_weights), <model>.tfkeras.full.h5 and .keras3.full.h5 (model.save after
  3 training steps, so the optimizer has state), inputs.bin / <model>.predictions.bin (float32, little endian),
  seed32.tfkeras.json / seed32.keras3.json (the seed CNN at 32x32x3, JSON only) and seq.*.json (a Sequential
  model), and manifest.json (shapes, versions, the optimizer iteration counts).

`check` runs the systolic program tests/keras_export (built with the tests) to write systolic's own files for
the same models, loads each into both Keras versions, and compares Keras's predictions with systolic's.
"""
import argparse
import json
import os
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "fixtures", "keras")
N_INPUTS = 4


def seed_cnn(K, shape=(8, 8, 3)):
    L = K.layers
    i = K.Input(shape, name="Input")
    x = L.BatchNormalization()(i)
    x = L.Conv2D(32, (3, 3), padding="same", activation="relu")(x)
    x = L.Conv2D(32, (3, 3), padding="same", activation="relu")(x)
    x = L.MaxPooling2D((2, 2))(x)
    x = L.Dropout(0.25)(x)
    x = L.BatchNormalization()(x)
    x = L.Conv2D(64, (3, 3), padding="same", activation="relu")(x)
    x = L.Conv2D(64, (3, 3), activation="relu")(x)
    x = L.MaxPooling2D((2, 2))(x)
    x = L.Dropout(0.25)(x)
    x = L.Flatten()(x)
    x = L.Dense(512, activation="relu")(x)
    x = L.Dropout(0.5)(x)
    o = L.Dense(10, activation="softmax")(x)
    return K.Model(i, o)


def zoo(K):
    L = K.layers
    i = K.Input((9, 9, 2), name="image")
    x = L.Rescaling(0.5, offset=0.1)(i)
    x = L.ZeroPadding2D(((1, 0), (2, 1)))(x)
    a = L.Conv2D(4, (3, 3), strides=(2, 2), padding="same", activation="tanh")(x)
    b = L.Conv2D(4, (1, 1), use_bias=False, kernel_initializer="he_normal")(x)
    b = L.AveragePooling2D((2, 2), padding="same")(b)
    b = L.ReLU()(b)
    s = L.Add()([a, b])
    c = L.Concatenate()([s, a])
    c = L.BatchNormalization(center=False)(c)
    c = L.Activation("sigmoid")(c)
    c = L.MaxPooling2D((3, 3), strides=(1, 1), padding="same")(c)
    g = L.GlobalAveragePooling2D()(c)
    d = L.Dense(5)(g)
    o = L.Softmax()(d)
    return K.Model(i, o, name="zoo")


def sequential(K):
    L = K.layers
    return K.Sequential([K.Input((6, 6, 1)), L.Conv2D(3, 3, activation="relu"), L.Flatten(), L.Dense(2)],
                        name="seq")


def deterministic_weights(model, seed):
    rng = np.random.default_rng(seed)
    for layer in model.layers:
        ws = layer.get_weights()
        if not ws:
            continue
        new = []
        for w, v in zip(layer.weights, ws):
            name = w.name.split("/")[-1].split(":")[0]
            if "moving_variance" in name:
                new.append(rng.uniform(0.5, 1.5, v.shape).astype("float32"))
            elif "gamma" in name:
                new.append(rng.uniform(0.8, 1.2, v.shape).astype("float32"))
            elif v.ndim >= 2:  # kernels: variance 1/fan_in keeps activations (and the softmax) away from saturation
                fan_in = int(np.prod(v.shape[:-1]))
                new.append((rng.standard_normal(v.shape) / np.sqrt(fan_in)).astype("float32"))
            else:
                new.append((rng.standard_normal(v.shape) * 0.1).astype("float32"))
        layer.set_weights(new)


def inputs_for(shape, seed):
    return np.random.default_rng(seed).uniform(0, 1, (N_INPUTS,) + shape).astype("float32")


def write(args):
    import keras as k3
    import tf_keras as k2

    os.makedirs(FIXTURES, exist_ok=True)
    out = lambda name: os.path.join(FIXTURES, name)  # noqa: E731
    manifest = {"tf_keras": k2.__version__, "keras3": k3.__version__, "models": {}}
    for name, build, shape in (("seed", seed_cnn, (8, 8, 3)), ("zoo", zoo, (9, 9, 2))):
        x = inputs_for(shape, 1)
        x.tofile(out(f"{name}.inputs.bin"))
        preds = {}
        iters = {}
        for tag, K in (("tfkeras", k2), ("keras3", k3)):
            K.utils.set_random_seed(0)
            m = build(K)
            deterministic_weights(m, 7)
            with open(out(f"{name}.{tag}.json"), "w") as f:
                f.write(m.to_json())
            p = m.predict(x, verbose=0)
            preds[tag] = p
            if tag == "tfkeras":
                m.save_weights(out(f"{name}.tfkeras.h5"))
            else:
                m.save_weights(out(f"{name}.keras3.weights.h5"))
            # A full model after 3 Adam steps (dropout active), so the file holds optimizer state.
            m.compile(optimizer=K.optimizers.Adam(0.001), loss="sparse_categorical_crossentropy",
                      metrics=["accuracy"])
            y = np.arange(N_INPUTS) % int(m.output_shape[-1])
            for _ in range(3):
                m.train_on_batch(x, y)
            m.save(out(f"{name}.{tag}.full.h5"))
            pt = m.predict(x, verbose=0)
            pt.astype("<f4").tofile(out(f"{name}.{tag}.full.predictions.bin"))
            iters[tag] = int(m.optimizer.iterations.numpy())
        assert np.allclose(preds["tfkeras"], preds["keras3"], atol=1e-5), "tf.keras and Keras 3 disagree"
        preds["keras3"].astype("<f4").tofile(out(f"{name}.predictions.bin"))
        manifest["models"][name] = {"input_shape": list(shape), "outputs": int(preds["keras3"].shape[-1]),
                                    "inputs": N_INPUTS, "optimizer_iterations": iters}
    for tag, K in (("tfkeras", k2), ("keras3", k3)):
        with open(out(f"seed32.{tag}.json"), "w") as f:
            f.write(seed_cnn(K, (32, 32, 3)).to_json())
        with open(out(f"seq.{tag}.json"), "w") as f:
            f.write(sequential(K).to_json())
    with open(out("manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    print("wrote", sorted(os.listdir(FIXTURES)))


def check(args):
    import keras as k3
    import tf_keras as k2

    tmp = args.tmp
    os.makedirs(tmp, exist_ok=True)
    exe = os.path.join(args.build, "tests", "keras_export")
    subprocess.run([exe, FIXTURES, tmp], check=True)
    worst = 0.0
    for name, shape in (("seed", (8, 8, 3)), ("zoo", (9, 9, 2))):
        x = np.fromfile(os.path.join(FIXTURES, f"{name}.inputs.bin"), "<f4").reshape((N_INPUTS,) + shape)
        want = np.fromfile(os.path.join(tmp, f"{name}.systolic.predictions.bin"), "<f4").reshape(N_INPUTS, -1)
        f = lambda s: os.path.join(tmp, f"{name}.systolic.{s}")  # noqa: E731
        results = []
        for tag, K in (("tf.keras " + k2.__version__, k2), ("Keras " + k3.__version__, k3)):
            m = K.models.model_from_json(open(f("json")).read())
            m.load_weights(f("h5"))
            results.append((tag, "model_from_json + load_weights(.h5)", m.predict(x, verbose=0)))
            if K is k3:
                m = K.models.model_from_json(open(f("json")).read())
                m.load_weights(f("weights.h5"))
                results.append((tag, "model_from_json + load_weights(.weights.h5)", m.predict(x, verbose=0)))
            m = K.models.load_model(f("full.h5"))
            full = np.fromfile(f("full.predictions.bin"), "<f4").reshape(N_INPUTS, -1)
            results.append((tag, "load_model(full .h5), after 3 training steps", m.predict(x, verbose=0) - full + want))
            it = int(m.optimizer.iterations.numpy())
            print(f"{name}: {tag}: load_model: optimizer {type(m.optimizer).__name__}, iterations {it}")
        for tag, how, p in results:
            err = float(np.abs(p - want).max())
            worst = max(worst, err)
            print(f"{name}: {tag}: {how}: max |keras - systolic| = {err:.3g}")
    print(f"worst difference {worst:.3g}")
    if worst > 1e-4:
        sys.exit("FAILED: Keras's predictions differ from systolic's by more than 1e-4")
    print("OK")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("write")
    c = sub.add_parser("check")
    c.add_argument("--build", default="build")
    c.add_argument("--tmp", default="/tmp/systolic-keras-check")
    a = p.parse_args()
    {"write": write, "check": check}[a.cmd](a)


if __name__ == "__main__":
    main()
