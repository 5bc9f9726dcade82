#!/usr/bin/env python3
"""Keras 3 (TensorFlow backend) baseline for "how far does one epoch get": the seed notebook's CNN and settings
(Adam(1e-3), sparse categorical crossentropy, batch 1024 = 8 replicas x 128) trained one epoch on Debian's
Fashion-MNIST (/usr/share/datasets/fashion-mnist, package dataset-fashion-mnist), then evaluated on its test set.
Prints one JSON line: the training accuracy of the epoch and the test accuracy.

    python bench/keras_fashion_one_epoch.py --batch-size 1024 --seed 0

Set beside `scripts/demo --device xla:cpu --replicas 8 --epochs 1` (the same model, batch and data): the figure a
Keras user gets with the notebook's hyperparameters (bench/RESULTS.md).
"""
import argparse
import gzip
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

DATA = "/usr/share/datasets/fashion-mnist/"


def idx(name, offset):
    import numpy as np

    with gzip.open(DATA + name) as f:
        return np.frombuffer(f.read(), np.uint8, offset=offset)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    import keras as K

    x_train = idx("train-images-idx3-ubyte.gz", 16).reshape(-1, 28, 28, 1).astype("float32")
    y_train = idx("train-labels-idx1-ubyte.gz", 8).astype("int32")
    x_test = idx("t10k-images-idx3-ubyte.gz", 16).reshape(-1, 28, 28, 1).astype("float32")
    y_test = idx("t10k-labels-idx1-ubyte.gz", 8).astype("int32")
    K.utils.set_random_seed(args.seed)
    L = K.layers
    i = K.Input((28, 28, 1))
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
    model.compile(optimizer=K.optimizers.Adam(1e-3), loss="sparse_categorical_crossentropy",
                  metrics=["sparse_categorical_accuracy"])
    h = model.fit(x_train, y_train, batch_size=args.batch_size, epochs=1, verbose=0)
    _, test_acc = model.evaluate(x_test, y_test, verbose=0)
    print(json.dumps({"framework": "keras", "keras_version": K.__version__, "batch_size": args.batch_size,
                      "seed": args.seed, "train_accuracy": round(h.history["sparse_categorical_accuracy"][-1], 4),
                      "test_accuracy": round(test_acc, 4)}))


if __name__ == "__main__":
    main()
