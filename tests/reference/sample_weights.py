#!/usr/bin/env python3
"""Writes tests/fixtures/sample_weights/: Keras 3 fits with sample_weight and class_weight, for
tests/test_sample_weights.cc.

    python3 tests/reference/sample_weights.py [--out DIR]

Needs keras (3.x) and tensorflow-cpu from pip (run it with the python3 of a virtual environment that has them).

For each case NAME: NAME.keras (the compiled model before training) and NAME.npz (x, y, the sample weights w when
the case has them, and a test split xs, ys, ws), and in expected.json: the fit's arguments, Keras's History, the
weights after it (model.get_weights(), flattened) and evaluate(xs, ys, sample_weight=ws) after it.
  sparse_class_weight  softmax over 3 classes, sparse labels, class_weight {0: 1, 1: 3, 2: 0.25}, validation_split
                       0.25 (the validation loss is not weighted), SGD
  binary_sample_weight a sigmoid unit, 0/1 labels, sample weights in [0, 2] (some 0), validation_data with weights
                       of its own, Adam
  regression_sample_weight  two linear outputs, mse, sample weights split by validation_split 0.2, RMSprop
  onehot_class_weight  softmax over 4 classes, one-hot labels (class: the argmax), class_weight without class 3
  weighted_metrics_sparse  softmax over 3 classes, weighted_metrics (accuracy, given as a metric too: logged as
                       weighted_accuracy; the crossentropy; top-2 accuracy), sample weights, validation_data with
                       weights of its own, Adam
  weighted_metrics_binary  a sigmoid unit, class_weight, weighted_metrics (accuracy, mse also a metric, rmse, mae),
                       validation_split, SGD
  weighted_metrics_confusion  a sigmoid unit, sample weights, weighted AUC (also a metric: Keras names it auc_1),
                       PR AUC, Precision, Recall at 0.3, PrecisionAtRecall, BinaryIoU, F1Score; validation_split, Adam
  temporal_sample_weight  a GRU's sequences into a softmax over 2 classes at each of 6 steps, labels [N, 6], a
                       weight per step ([N, 6], Keras's temporal sample weights), weighted_metrics (accuracy, the
                       crossentropy), validation_split, Adam
Rerunning it rewrites every case: TensorFlow's last float32 bits vary between runs, so a new case is added by
keeping the others as they were (their .keras files and expected.json entries).
"""
import argparse
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np
import keras


def model(seed, inputs, hidden, outputs, activation):
    keras.utils.set_random_seed(seed)
    i = keras.Input((inputs,))
    h = keras.layers.Dense(hidden, activation="tanh")(i)
    o = keras.layers.Dense(outputs, activation=activation)(h)
    return keras.Model(i, o)


def cases(rng):
    out = []
    # 3 classes, sparse labels.
    x = rng.normal(size=(64, 5)).astype(np.float32)
    y = np.argmax(x[:, :3] + 0.3 * rng.normal(size=(64, 3)), axis=1).astype(np.float32)
    m = model(11, 5, 8, 3, "softmax")
    m.compile(optimizer=keras.optimizers.SGD(learning_rate=0.2), loss="sparse_categorical_crossentropy",
              metrics=["accuracy"])
    out.append(("sparse_class_weight", m, x, y, None, {"validation_split": 0.25,
                                                        "class_weight": {0: 1.0, 1: 3.0, 2: 0.25}}))
    # Binary, sample weights (some 0), validation data with weights of its own.
    x = rng.normal(size=(60, 4)).astype(np.float32)
    y = (x[:, 0] - x[:, 1] > 0).astype(np.float32)
    w = rng.uniform(0, 2, size=60).astype(np.float32)
    w[::7] = 0
    m = model(12, 4, 6, 1, "sigmoid")
    m.compile(optimizer=keras.optimizers.Adam(learning_rate=0.05), loss="binary_crossentropy",
              metrics=["accuracy", "mse"])
    out.append(("binary_sample_weight", m, x, y, w, {"validation_data": 16}))
    # Two linear outputs, mse, weights split with the samples.
    x = rng.normal(size=(50, 3)).astype(np.float32)
    y = np.stack([x[:, 0] + x[:, 1], x[:, 2] * 2.0], axis=1).astype(np.float32)
    w = rng.uniform(0.2, 3, size=50).astype(np.float32)
    m = model(13, 3, 6, 2, None)
    m.compile(optimizer=keras.optimizers.RMSprop(learning_rate=0.01), loss="mse", metrics=["mae"])
    out.append(("regression_sample_weight", m, x, y, w, {"validation_split": 0.2}))
    # 4 classes, one-hot labels, class 3 not named.
    x = rng.normal(size=(48, 6)).astype(np.float32)
    c = np.argmax(x[:, :4], axis=1)
    y = np.eye(4, dtype=np.float32)[c]
    m = model(14, 6, 8, 4, "softmax")
    m.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1, momentum=0.9), loss="categorical_crossentropy",
              metrics=["categorical_accuracy"])
    out.append(("onehot_class_weight", m, x, y, None, {"class_weight": {0: 2.0, 1: 0.5, 2: 1.5}}))
    # weighted_metrics, drawn from a stream of their own (the cases above stay as they were): the sample weights
    # weigh them in fit, validation and evaluate; a name taken by a metric is logged as "weighted_<name>".
    r2 = np.random.default_rng(2711)
    x = r2.normal(size=(64, 5)).astype(np.float32)
    y = np.argmax(x[:, :3] + 0.5 * r2.normal(size=(64, 3)), axis=1).astype(np.float32)
    w = r2.uniform(0, 2, size=64).astype(np.float32)
    w[::9] = 0
    m = model(15, 5, 8, 3, "softmax")
    m.compile(optimizer=keras.optimizers.Adam(learning_rate=0.05), loss="sparse_categorical_crossentropy",
              metrics=["accuracy"], weighted_metrics=["accuracy", "sparse_categorical_crossentropy",
                                                      keras.metrics.SparseTopKCategoricalAccuracy(k=2)])
    out.append(("weighted_metrics_sparse", m, x, y, w, {"validation_data": 16}))
    x = r2.normal(size=(56, 4)).astype(np.float32)
    y = (x[:, 0] + 0.5 * x[:, 1] - x[:, 2] + 0.3 * r2.normal(size=56) > 0).astype(np.float32)
    m = model(16, 4, 6, 1, "sigmoid")
    m.compile(optimizer=keras.optimizers.SGD(learning_rate=0.3), loss="binary_crossentropy",
              metrics=["mse"], weighted_metrics=["accuracy", "mse", "root_mean_squared_error", "mae"])
    out.append(("weighted_metrics_binary", m, x, y, None, {"class_weight": {0: 0.5, 1: 2.0},
                                                           "validation_split": 0.25}))
    # The confusion-count metrics weighted (a stream of its own again).
    r3 = np.random.default_rng(2712)
    x = r3.normal(size=(64, 4)).astype(np.float32)
    y = (x[:, 0] - x[:, 1] + 1.5 * r3.normal(size=64) > 0).astype(np.float32)[:, None]  # (N, 1): F1Score
    w = r3.uniform(0, 2, size=64).astype(np.float32)
    w[::6] = 0
    m = model(17, 4, 6, 1, "sigmoid")
    m.compile(optimizer=keras.optimizers.Adam(learning_rate=0.05), loss="binary_crossentropy",
              metrics=["accuracy", keras.metrics.AUC()],
              weighted_metrics=[keras.metrics.AUC(), keras.metrics.AUC(curve="PR", name="pr_auc"),
                                keras.metrics.Precision(), keras.metrics.Recall(thresholds=0.3),
                                keras.metrics.PrecisionAtRecall(0.5, num_thresholds=50),
                                keras.metrics.BinaryIoU(), keras.metrics.F1Score(threshold=0.5, average="micro")])
    out.append(("weighted_metrics_confusion", m, x, y, w, {"validation_split": 0.25}))
    # Temporal sample weights (a stream of its own again): per-step labels of a GRU's sequences, a weight per step
    # ([N, 6]; Keras refuses [N] for such an output), weighted_metrics, validation_split, Adam.
    r4 = np.random.default_rng(2713)
    x = r4.normal(size=(64, 6, 2)).astype(np.float32)
    y = (np.cumsum(x[:, :, 0], axis=1) > 0).astype(np.float32)
    w = r4.uniform(0, 2, size=(64, 6)).astype(np.float32)
    w[::5, 3:] = 0
    keras.utils.set_random_seed(18)
    i = keras.Input((6, 2))
    h = keras.layers.GRU(5, return_sequences=True)(i)
    m = keras.Model(i, keras.layers.Dense(2, activation="softmax")(h))
    m.compile(optimizer=keras.optimizers.Adam(learning_rate=0.05), loss="sparse_categorical_crossentropy",
              metrics=["accuracy"], weighted_metrics=["accuracy", "sparse_categorical_crossentropy"])
    out.append(("temporal_sample_weight", m, x, y, w, {"validation_split": 0.25, "temporal": 6}))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "fixtures", "sample_weights"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(27)
    expected = {"generator": f"keras {keras.__version__}"}
    for name, m, x, y, w, fit in cases(rng):
        m.save(os.path.join(args.out, name + ".keras"))
        n_test = 16
        xs, ys = x[-n_test:], y[-n_test:]
        ws = rng.uniform(0, 2, size=(n_test, fit["temporal"]) if "temporal" in fit else n_test).astype(np.float32)
        x, y = x[:-n_test], y[:-n_test]
        if w is not None:
            w = w[:-n_test]
        kwargs = {"batch_size": 8, "epochs": 2, "shuffle": False, "verbose": 0}
        record = {"batch_size": 8, "epochs": 2}
        arrays = {"x": x, "y": y, "xs": xs, "ys": ys, "ws": ws}
        if w is not None:
            kwargs["sample_weight"] = w
            arrays["w"] = w
        if "class_weight" in fit:
            kwargs["class_weight"] = fit["class_weight"]
            record["class_weight"] = {str(k): v for k, v in fit["class_weight"].items()}
        if "validation_split" in fit:
            kwargs["validation_split"] = fit["validation_split"]
            record["validation_split"] = fit["validation_split"]
        if "validation_data" in fit:
            k = fit["validation_data"]
            xv, yv = x[-k:], y[-k:]
            wv = rng.uniform(0, 2, size=k).astype(np.float32)
            x, y, w = x[:-k], y[:-k], w[:-k]
            kwargs.update(sample_weight=w)
            kwargs["validation_data"] = (xv, yv, wv)
            arrays.update(x=x, y=y, w=w, xv=xv, yv=yv, wv=wv)
        history = m.fit(x, y, **kwargs).history
        np.savez(os.path.join(args.out, name + ".npz"), **arrays)
        after = m.evaluate(xs, ys, sample_weight=ws, batch_size=8, return_dict=True, verbose=0)
        unweighted = m.evaluate(xs, ys, batch_size=8, return_dict=True, verbose=0)
        expected[name] = {
            "fit": record,
            "history": {k: [float(v) for v in vs] for k, vs in history.items()},
            "weights_after_fit": [float(v) for a in m.get_weights() for v in np.asarray(a).reshape(-1)],
            "evaluate_weighted": {k: float(v) for k, v in after.items()},
            "evaluate": {k: float(v) for k, v in unweighted.items()},
        }
    path = os.path.join(args.out, "expected.json")
    with open(path + ".tmp", "w") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")
    os.replace(path + ".tmp", path)
    print(f"{path}: {len(expected) - 1} cases")


if __name__ == "__main__":
    main()
