#!/usr/bin/env python3
"""Writes tests/fixtures/losses/keras_losses.json: Keras 3's elementwise, categorical and row losses (values, gradients, configs), computed
by real Keras, for tests/test_losses.cc.

    python3 tests/reference/losses.py [--out DIR]

Needs keras (3.x) and tensorflow-cpu from pip: run it with the python3 of a virtual environment that has them
(outside the repository).

Each case is a keras.losses class with arguments, called with its default reduction (sum_over_batch_size) on
float64 inputs: `value` is the loss, `grad` d(value)/d(input) by tf.GradientTape, where the input is
- `pred`, the predictions (input "pred"), or
- `logits`, passed through keras.activations.sigmoid first (input "sigmoid": what a model whose last layer ends
  in a sigmoid hands the loss; Keras's TensorFlow backend then computes its crossentropy from the logits), or
  through keras.activations.softmax (input "softmax", the categorical crossentropies), or straight to a loss with
  from_logits=True (input "logits").
`config` is the loss's get_config() and `serialized` keras.losses.serialize(loss). Sparse labels (one per row) have
a `y_shape` of their own; a case with `sample_weight` passes them to the loss.
"""
import argparse
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np
import tensorflow as tf
import keras

rng = np.random.default_rng(20261127)


def arr(shape, lo, hi):
    return rng.uniform(lo, hi, size=shape)


def binary(shape):
    return rng.integers(0, 2, size=shape).astype(np.float64)


def case(cls, kwargs, inp, x, y, sample_weight=None):
    loss = getattr(keras.losses, cls)(**kwargs)
    xt = tf.constant(x)
    yt = tf.constant(y)
    with tf.GradientTape() as tape:
        tape.watch(xt)
        p = keras.activations.sigmoid(xt) if inp == "sigmoid" else keras.activations.softmax(xt) if inp == "softmax" else xt
        v = loss(yt, p, sample_weight=sample_weight)
    g = tape.gradient(v, xt)
    extra = {}
    if y.shape != x.shape:
        extra["y_shape"] = list(y.shape)  # sparse labels, one per sample
    if sample_weight is not None:
        extra["sample_weight"] = [float(a) for a in np.reshape(sample_weight, -1)]
        if np.ndim(sample_weight) > 1:
            extra["sample_weight_shape"] = list(np.shape(sample_weight))
    return extra | {
        "class_name": cls,
        "kwargs": kwargs,
        "input": inp,
        "shape": list(x.shape),
        "x": [float(a) for a in x.reshape(-1)],
        "y": [float(a) for a in y.reshape(-1)],
        "value": float(v),
        "grad": [float(a) for a in np.array(g).reshape(-1)],
        "config": loss.get_config(),
        "serialized": keras.losses.serialize(loss),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "fixtures", "losses"))
    args = ap.parse_args()
    keras.backend.set_floatx("float64")
    cases = []
    for shape in [(5, 3), (2, 3, 2)]:
        reals = arr(shape, -2, 2)
        targets = arr(shape, -2, 2)
        positive = arr(shape, 0.05, 3)
        positive_t = arr(shape, 0.0, 3)
        probs = arr(shape, 0.02, 0.98)
        soft = arr(shape, 0, 1)
        labels = binary(shape)
        logits = arr(shape, -4, 4)
        for cls, kw in [("MeanSquaredError", {}), ("MeanAbsoluteError", {}), ("Huber", {}), ("Huber", {"delta": 0.5}),
                        ("LogCosh", {})]:
            cases.append(case(cls, kw, "pred", reals, targets))
        targets_with_zero = targets.copy()
        targets_with_zero.reshape(-1)[0] = 0.0
        cases.append(case("MeanAbsolutePercentageError", {}, "pred", reals, targets_with_zero))
        positive_t_zero = positive_t.copy()
        positive_t_zero.reshape(-1)[1] = -0.5  # clipped to epsilon
        cases.append(case("MeanSquaredLogarithmicError", {}, "pred", positive, positive_t_zero))
        cases.append(case("Poisson", {}, "pred", positive, positive_t))
        for y in (labels, labels * 2 - 1, soft * 2 - 1):  # 0/1 (converted to -1/1), -1/1, other values (kept)
            cases.append(case("Hinge", {}, "pred", reals, y))
            cases.append(case("SquaredHinge", {}, "pred", reals, y))
        cases.append(case("KLDivergence", {}, "pred", probs, soft))
        for kw in [{}, {"label_smoothing": 0.2}]:
            for y in (labels, soft):
                cases.append(case("BinaryCrossentropy", kw, "pred", probs, y))
                cases.append(case("BinaryCrossentropy", kw, "sigmoid", logits, y))
                cases.append(case("BinaryCrossentropy", dict(kw, from_logits=True), "logits", logits, y))
        for kw in [{}, {"gamma": 1.5, "alpha": 0.3, "apply_class_balancing": True}, {"label_smoothing": 0.1}]:
            for y in (labels, soft):
                cases.append(case("BinaryFocalCrossentropy", kw, "pred", probs, y))
                cases.append(case("BinaryFocalCrossentropy", kw, "sigmoid", logits, y))
                cases.append(case("BinaryFocalCrossentropy", dict(kw, from_logits=True), "logits", logits, y))
    # Categorical crossentropy over the last axis of (5, 3): from the logits behind a softmax output (what a model
    # ending in softmax hands the loss; input "softmax") and with from_logits, one-hot and soft targets.
    logits = arr((5, 3), -3, 3)
    one_hot = np.eye(3)[rng.integers(0, 3, size=5)]
    soft = rng.dirichlet(np.ones(3), size=5)
    for kw in [{}, {"label_smoothing": 0.1}]:
        for y in (one_hot, soft):
            cases.append(case("CategoricalCrossentropy", kw, "softmax", logits, y))
            cases.append(case("CategoricalCrossentropy", dict(kw, from_logits=True), "logits", logits, y))
    # The row losses over the last axis: CosineSimilarity (a row of zeros among the predictions: Keras's normalisation
    # then caps its factor at 1/epsilon), CategoricalHinge (one-hot and soft targets, tied maxima of (1 - t) p),
    # CategoricalFocalCrossentropy (probabilities whose rows do not sum to 1, a softmax output, from_logits). The
    # metrics of the same name (keras.metrics.CosineSimilarity, CategoricalHinge) record their result on the case.
    for shape in [(5, 4), (2, 3, 4)]:
        reals = arr(shape, -2, 2)
        targets = arr(shape, -2, 2)
        zero_row = reals.copy()
        zero_row.reshape(-1, shape[-1])[1] = 0.0
        one_hot = np.eye(shape[-1])[rng.integers(0, shape[-1], size=shape[:-1])]
        soft = rng.dirichlet(np.ones(shape[-1]), size=shape[:-1])
        ties = np.round(arr(shape, -2, 2))
        probs = arr(shape, 0.02, 0.98)
        logits = arr(shape, -3, 3)
        cases.append(case("CosineSimilarity", {}, "pred", reals, targets))
        cases.append(case("CosineSimilarity", {}, "pred", zero_row, one_hot))
        for x, y in ((reals, one_hot), (reals, soft), (ties, one_hot)):
            cases.append(case("CategoricalHinge", {}, "pred", x, y))
        for kw in [{}, {"alpha": 0.5, "gamma": 1.0, "label_smoothing": 0.1}, {"gamma": 0.0}]:
            for y in (one_hot, soft):
                cases.append(case("CategoricalFocalCrossentropy", kw, "pred", probs, y))
                cases.append(case("CategoricalFocalCrossentropy", kw, "softmax", logits, y))
                cases.append(case("CategoricalFocalCrossentropy", dict(kw, from_logits=True), "logits", logits, y))
    # Crossentropy from probabilities whose rows do not sum to 1: Keras normalises the categorical one's rows before
    # its clip and the sparse one's after it (row 1 is clipped after normalising, at both ends; row 2 below). Then
    # SparseCategoricalCrossentropy's ignore_class: from probabilities, from a softmax output (Keras's masked
    # predictions lose their logits: row 3 saturates the softmax, so the clip shows), from logits, with sample
    # weights, and a batch whose labels are all ignored. A random stream of its own: the cases above stay as they were.
    r2 = np.random.default_rng(20261128)
    probs = r2.uniform(0.02, 0.98, size=(6, 4))
    probs[1] = [1e-9, 0.5, 1e-9, 2e-9]
    probs[2, 0] = 1e-9
    one_hot = np.eye(4)[r2.integers(0, 4, size=6)]
    soft = r2.dirichlet(np.ones(4), size=6)
    for kw in [{}, {"label_smoothing": 0.1}]:
        for y in (one_hot, soft):
            cases.append(case("CategoricalCrossentropy", kw, "pred", probs, y))
    sparse = r2.integers(0, 4, size=6).astype(np.float64)
    sparse[1], sparse[2] = 1, 0
    cases.append(case("SparseCategoricalCrossentropy", {}, "pred", probs, sparse))
    logits = r2.uniform(-3, 3, size=(6, 4))
    logits[3] = [25.0, -5.0, 0.0, 1.0]
    weights = r2.uniform(0, 2, size=6)
    for ignore in (-1, 2):
        y = sparse.copy()
        y[[0, 4]] = ignore
        kw = {"ignore_class": ignore}
        cases.append(case("SparseCategoricalCrossentropy", kw, "pred", probs, y))
        cases.append(case("SparseCategoricalCrossentropy", kw, "softmax", logits, y))
        cases.append(case("SparseCategoricalCrossentropy", dict(kw, from_logits=True), "logits", logits, y))
        cases.append(case("SparseCategoricalCrossentropy", kw, "softmax", logits, y, sample_weight=weights))
    cases.append(case("SparseCategoricalCrossentropy", {"ignore_class": 1}, "softmax", logits, np.ones(6)))
    # Crossentropies over sequences: predictions (3, 4, 5) are 4 rows per sample, which Keras's sum_over_batch_size
    # means over with the samples. CategoricalCrossentropy of one-hot targets (from a softmax output, from_logits,
    # from probabilities with sample weights; with label smoothing), SparseCategoricalCrossentropy of labels (3, 4)
    # (from a softmax output, from logits with sample weights, from probabilities, ignore_class). Sample weights of
    # such a loss are (3, 1), one per sample, or (3, 4), one per row (Keras refuses (3,)). A random stream of its own.
    r3 = np.random.default_rng(20261129)
    logits = r3.uniform(-3, 3, size=(3, 4, 5))
    probs = r3.uniform(0.02, 0.98, size=(3, 4, 5))
    sparse = r3.integers(0, 5, size=(3, 4)).astype(np.float64)
    one_hot = np.eye(5)[sparse.astype(int)]
    weights = r3.uniform(0, 2, size=(3, 1))
    row_weights = r3.uniform(0, 2, size=(3, 4))
    for kw in [{}, {"label_smoothing": 0.1}]:
        cases.append(case("CategoricalCrossentropy", kw, "softmax", logits, one_hot))
        cases.append(case("CategoricalCrossentropy", dict(kw, from_logits=True), "logits", logits, one_hot))
        cases.append(case("CategoricalCrossentropy", kw, "pred", probs, one_hot, sample_weight=weights))
    cases.append(case("SparseCategoricalCrossentropy", {}, "softmax", logits, sparse))
    cases.append(case("SparseCategoricalCrossentropy", {"from_logits": True}, "logits", logits, sparse,
                      sample_weight=weights))
    cases.append(case("SparseCategoricalCrossentropy", {}, "pred", probs, sparse, sample_weight=row_weights))
    cases.append(case("SparseCategoricalCrossentropy", {"ignore_class": 2}, "softmax", logits, sparse,
                      sample_weight=weights))
    cases.append(case("SparseCategoricalCrossentropy", {"ignore_class": 2}, "softmax", logits, sparse,
                      sample_weight=row_weights))
    cases.append(case("CategoricalCrossentropy", {}, "softmax", logits, one_hot, sample_weight=row_weights))
    for c in cases:
        if c["class_name"] in ("CosineSimilarity", "CategoricalHinge"):
            m = getattr(keras.metrics, c["class_name"])()
            shape = c["shape"]
            m.update_state(np.array(c["y"]).reshape(shape), np.array(c["x"]).reshape(shape))
            c["metric"] = float(m.result())
    out = {
        "generator": f"keras {keras.__version__}, tensorflow {tf.__version__}",
        "cases": cases,
    }
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "keras_losses.json")
    with open(path + ".tmp", "w") as f:
        json.dump(out, f, indent=None, separators=(",", ":"))
        f.write("\n")
    os.replace(path + ".tmp", path)
    print(f"{path}: {len(cases)} cases")


if __name__ == "__main__":
    main()
