#!/usr/bin/env python3
"""Keras 3 (TensorFlow backend) CPU baseline for the systolic "seed CNN" benchmark.

The seed notebook's network, as systolic's models::seed_cnn builds it:
  BN -> Conv(32,3x3,same,relu) -> Conv(32,3x3,same,relu) -> MaxPool 2x2 -> Dropout(0.25) -> BN
  -> Conv(64,3x3,same,relu) -> Conv(64,3x3,valid,relu) -> MaxPool 2x2 -> Dropout(0.25) -> Flatten
  -> Dense(512,relu) -> Dropout(0.5) -> Dense(10, softmax)
Adam(1e-3, epsilon 1e-7), sparse categorical crossentropy, accuracy; every layer under --policy (float32 or
mixed_bfloat16: keras.mixed_precision.set_global_policy, as systolic's --policy sets it).
Input: random float32 data with uint8 values (0..255), random labels.

Runs one untimed epoch of 2 steps (tracing, compilation), then times an epoch of --steps training steps with
`fit` (what a Keras user runs) and reports training images/s; then single-image predict latency
(`predict_on_batch` on one image, median of 50 calls after 5 warm-ups). Prints one JSON line.

    python bench/keras_seed_cnn.py --batch-size 128 --steps 10 --policy mixed_bfloat16
"""
import argparse
import json
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")


def main():
    ap = argparse.ArgumentParser(description="Keras 3 CPU seed-CNN benchmark")
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--policy", choices=["float32", "mixed_bfloat16"], default="float32")
    ap.add_argument("--input-shape", default="32,32,3", help="H,W,C")
    args = ap.parse_args()

    import numpy as np
    import keras as K
    import tensorflow as tf

    h, w, c = (int(v) for v in args.input_shape.split(","))
    K.utils.set_random_seed(0)
    K.mixed_precision.set_global_policy(args.policy)
    L = K.layers
    i = K.Input((h, w, c))
    x = L.BatchNormalization()(i)
    x = L.Conv2D(32, 3, padding="same", activation="relu")(x)
    x = L.Conv2D(32, 3, padding="same", activation="relu")(x)
    x = L.MaxPooling2D()(x)
    x = L.Dropout(0.25)(x)
    x = L.BatchNormalization()(x)
    x = L.Conv2D(64, 3, padding="same", activation="relu")(x)
    x = L.Conv2D(64, 3, activation="relu")(x)
    x = L.MaxPooling2D()(x)
    x = L.Dropout(0.25)(x)
    x = L.Flatten()(x)
    x = L.Dense(512, activation="relu")(x)
    x = L.Dropout(0.5)(x)
    out = L.Dense(10, activation="softmax")(x)
    model = K.Model(i, out)
    model.compile(optimizer=K.optimizers.Adam(1e-3, epsilon=1e-7), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])

    b = args.batch_size
    rng = np.random.default_rng(0)
    data = rng.integers(0, 256, (b * args.steps, h, w, c)).astype("float32")
    labels = rng.integers(0, 10, (b * args.steps,)).astype("int32")
    model.fit(data[: 2 * b], labels[: 2 * b], batch_size=b, epochs=1, verbose=0, shuffle=False)
    t0 = time.perf_counter()
    model.fit(data, labels, batch_size=b, epochs=1, verbose=0, shuffle=False)
    train_s = time.perf_counter() - t0
    ips = b * args.steps / train_s

    x1 = data[:1]
    times = []
    for k in range(55):
        t = time.perf_counter()
        model.predict_on_batch(x1)
        dt = time.perf_counter() - t
        if k >= 5:
            times.append(dt)
    print(json.dumps({
        "model": "seed-cnn", "framework": "keras", "keras_version": K.__version__, "tensorflow_version": tf.__version__,
        "device": "cpu", "policy": args.policy, "threads": len(os.sched_getaffinity(0)), "batch_size": b,
        "train_images_per_sec": round(ips, 2), "predict_ms": round(statistics.median(times) * 1e3, 4),
    }))


if __name__ == "__main__":
    main()
