#!/usr/bin/env python3
"""examples/fine_tune's recipe in real Keras 3, to compare its figures with systolic's. Writes nothing.

    /work/venv/bin/python tests/reference/fine_tune_keras.py SEED [DRAW.bin]

The same steps, architecture and settings as examples/fine_tune.h: a CNN (Rescaling, Conv2D 16 and 32 with
max pooling, then two Conv2D(64, no bias) + BatchNormalization + ReLU) pretrained on Fashion-MNIST's classes 0-4
(2 epochs, batch 64, Adam 1e-3), its base saved as .keras and loaded back, frozen, a new head (Flatten,
Dropout 0.2, Dense 5 logits) trained on 3 images of each of classes 5-9 (200 epochs, batch 32, Adam 1e-3), the top
block (the last 6 layers) unfrozen and fine-tuned (200 epochs, Adam 1e-4), and the same model trained from scratch
on the same images (400 epochs, then on to 1,000). SEED seeds Keras (keras.utils.set_random_seed) and numpy's
draw of the 15 images; DRAW.bin instead gives the images systolic drew (15 x 784 uint8 pixels, then 15 int32
labels 0-4), so both train on the same 15. Reads Debian's dataset-fashion-mnist
(/usr/share/datasets/fashion-mnist). Prints one line of test accuracies on classes 5-9 (5000 images).
"""
import gzip
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np  # noqa: E402

DATA = "/usr/share/datasets/fashion-mnist"
TASK_A, TASK_B = [0, 1, 2, 3, 4], [5, 6, 7, 8, 9]
PER_CLASS = 3


def idx(name, offset):
    with gzip.open(os.path.join(DATA, name)) as f:
        return np.frombuffer(f.read(), np.uint8, offset=offset)


def main():
    import keras
    from keras import layers as L

    seed = int(sys.argv[1])
    x_train = idx("train-images-idx3-ubyte.gz", 16).reshape(-1, 28, 28, 1)
    y_train = idx("train-labels-idx1-ubyte.gz", 8)
    x_test = idx("t10k-images-idx3-ubyte.gz", 16).reshape(-1, 28, 28, 1)
    y_test = idx("t10k-labels-idx1-ubyte.gz", 8)
    keras.utils.set_random_seed(seed)

    def select(x, y, classes, per_class=0):
        rows = np.flatnonzero(np.isin(y, classes))
        if per_class:
            rows = np.random.default_rng(seed).permutation(rows)
            rows = np.concatenate([rows[y[rows] == c][:per_class] for c in classes])
        return x[rows].astype("float32"), np.searchsorted(classes, y[rows])

    def make_base():
        inputs = keras.Input((28, 28, 1))
        x = L.Rescaling(1 / 255)(inputs)
        x = L.MaxPooling2D()(L.Conv2D(16, 3, padding="same", activation="relu")(x))
        x = L.MaxPooling2D()(L.Conv2D(32, 3, padding="same", activation="relu")(x))
        for n in "34":
            x = L.Conv2D(64, 3, padding="same", use_bias=False, name="conv" + n)(x)
            x = L.Activation("relu", name="relu" + n)(L.BatchNormalization(name="bn" + n)(x))
        return keras.Model(inputs, x)

    def classifier_on(base, inference_mode):
        inputs = keras.Input((28, 28, 1))
        x = base(inputs, training=False) if inference_mode else base(inputs)
        return keras.Model(inputs, L.Dense(5)(L.Dropout(0.2)(L.Flatten()(x))))

    def compile(model, rate):
        model.compile(keras.optimizers.Adam(rate), keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["accuracy"])

    def accuracy(model, x, y):
        return model.evaluate(x, y, batch_size=250, verbose=0)[1]

    start = time.time()
    a_x, a_y = select(x_train, y_train, TASK_A)
    a_test_x, a_test_y = select(x_test, y_test, TASK_A)
    b_test_x, b_test_y = select(x_test, y_test, TASK_B)
    if len(sys.argv) > 2:
        raw = np.fromfile(sys.argv[2], np.uint8)
        n = len(TASK_B) * PER_CLASS
        b_x = raw[: n * 784].reshape(n, 28, 28, 1).astype("float32")
        b_y = raw[n * 784:].view(np.int32).astype("int64")
    else:
        b_x, b_y = select(x_train, y_train, TASK_B, PER_CLASS)

    base = make_base()
    pretrained = classifier_on(base, False)
    compile(pretrained, 1e-3)
    pretrained.fit(a_x, a_y, batch_size=64, epochs=2, verbose=0)
    f = {"pretrained": accuracy(pretrained, a_test_x, a_test_y)}
    path = f"/tmp/fine_tune_keras_base_{os.getpid()}.keras"
    base.save(path)
    loaded = keras.models.load_model(path)
    os.remove(path)
    loaded.trainable = False
    model = classifier_on(loaded, True)
    compile(model, 1e-3)
    f["untrained head"] = accuracy(model, b_test_x, b_test_y)
    model.fit(b_x, b_y, batch_size=32, epochs=200, verbose=0)
    f["frozen base"] = accuracy(model, b_test_x, b_test_y)
    loaded.trainable = True
    for layer in loaded.layers[:-6]:
        layer.trainable = False
    compile(model, 1e-4)
    model.fit(b_x, b_y, batch_size=32, epochs=200, verbose=0)
    f["fine-tuned"] = accuracy(model, b_test_x, b_test_y)

    scratch = classifier_on(make_base(), False)
    compile(scratch, 1e-3)
    scratch.fit(b_x, b_y, batch_size=32, epochs=400, verbose=0)
    f["scratch 400"] = accuracy(scratch, b_test_x, b_test_y)
    scratch.fit(b_x, b_y, batch_size=32, epochs=1000, initial_epoch=400, verbose=0)
    f["from scratch"] = accuracy(scratch, b_test_x, b_test_y)
    print(f"keras {keras.__version__} seed {seed} draw {sys.argv[2] if len(sys.argv) > 2 else 'numpy'}: "
          + ", ".join(f"{k} {v:.4f}" for k, v in f.items())
          + f"; fine-tuned minus from scratch {f['fine-tuned'] - f['from scratch']:+.4f} ({time.time() - start:.0f} s)")


if __name__ == "__main__":
    main()
