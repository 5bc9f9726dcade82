#!/usr/bin/env python3
"""Writes tests/fixtures/weight_decay/: Keras 3's weight decay (AdamW, and the weight_decay argument every optimizer
takes) in real fits, for tests/test_optimizers_weight_decay.cc.

    python3 tests/reference/weight_decay.py [--out DIR]

Needs keras (3.x) and tensorflow-cpu from pip (run it with the python3 of a virtual environment that has them).

model.keras: a small Dense model (3 -> 4 relu -> 2 softmax) with seeded weights, saved before compile.
weight_decay.json: x (12, 3), y (12,) and, for each optimizer, keras.optimizers.serialize(optimizer) and the
weights (model.get_weights(), flattened) after fit(x, y, batch_size=4, epochs=2, shuffle=False) with
sparse_categorical_crossentropy, starting from model.keras each time.
"""
import argparse
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np
import keras


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "fixtures", "weight_decay"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    keras.utils.set_random_seed(3)
    i = keras.Input((3,))
    h = keras.layers.Dense(4, activation="relu")(i)
    o = keras.layers.Dense(2, activation="softmax")(h)
    keras.Model(i, o).save(os.path.join(args.out, "model.keras"))
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, (12, 3)).astype("float32")
    y = rng.integers(0, 2, (12,)).astype("int32")
    optimizers = [
        keras.optimizers.AdamW(learning_rate=0.01),
        keras.optimizers.AdamW(learning_rate=0.01, weight_decay=0.1, beta_1=0.8),
        keras.optimizers.Adam(learning_rate=0.01, weight_decay=0.05),
        keras.optimizers.SGD(learning_rate=0.1, momentum=0.9, weight_decay=0.05),
        keras.optimizers.RMSprop(learning_rate=0.01, weight_decay=0.02),
    ]
    cases = []
    for opt in optimizers:
        model = keras.models.load_model(os.path.join(args.out, "model.keras"))
        model.compile(optimizer=opt, loss="sparse_categorical_crossentropy")
        serialized = keras.optimizers.serialize(opt)
        model.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0)
        cases.append({
            "serialized": serialized,
            "weights": [float(v) for w in model.get_weights() for v in np.asarray(w).reshape(-1)],
        })
    out = {
        "generator": f"keras {keras.__version__}",
        "x": [float(v) for v in x.reshape(-1)],
        "y": [int(v) for v in y],
        "cases": cases,
    }
    path = os.path.join(args.out, "weight_decay.json")
    with open(path + ".tmp", "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    os.replace(path + ".tmp", path)
    print(f"{path}: {len(cases)} cases")


if __name__ == "__main__":
    main()
