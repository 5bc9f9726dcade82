#!/usr/bin/env python3
"""Writes tests/fixtures/metrics/top_k.json: Keras 3's top-k accuracies on predictions with ties, and
tests/fixtures/metrics/confusion.json: its AUC, Precision and Recall, tests/fixtures/metrics/r2.json: its R2Score,
and tests/fixtures/metrics/f_score.json: its F1Score and FBetaScore, for tests/test_metrics.cc.

    python3 tests/reference/metrics.py [--out DIR]

Needs keras (3.x) and tensorflow-cpu from pip (run it with the python3 of a virtual environment that has them).

Predictions (12, 8) of whole numbers 0..3 (many ties, where tf.math.in_top_k counts every tied class at the k-th
place as in) and of uniform draws, integer labels and their one-hot form; Keras's result of
SparseTopKCategoricalAccuracy() and TopKCategoricalAccuracy() (k = 5) after update_state on the first 7 rows
then the other 5 (the metric accumulates across batches).

confusion.json: for each metric (its serialized config, as a .keras file holds it), predictions and 0/1 labels of
shape (23, 1) or (23, 3), and Keras's result after update_state on the first 10 rows then the other 13. r2.json:
the same for R2Score (uniform and variance-weighted over 3 columns, adjusted for regressors) on float targets.

f_score.json: three data sets (predictions and labels of shape (23, C), with their own random stream, so the files
above do not change): one-hot labels of 4 classes (the last never the label) and probabilities with tied maxima,
a row of zeros and values exactly at the thresholds; multi-label 0/1 labels of 3 classes (two predictions exactly
0.6); smoothed one-hot labels.
For each, F1Score and FBetaScore (beta 2.0, 0.5) for every average (None, micro, macro, weighted) and threshold
(None: the row's maxima, 0.5, 0.35, 0.6): the serialized config and Keras's result (a list per class for average
None) after update_state on the first 10 rows then the other 13; and compile_config: the metrics of a model
compiled with ["f1_score", F1Score(average="macro", threshold=0.5, name="f1_macro"),
FBetaScore(beta=2.0, average="weighted")] as model.get_compile_config() holds them.

rates.json (its own random stream): PrecisionAtRecall, RecallAtPrecision, SensitivityAtSpecificity and
SpecificityAtSensitivity (num_thresholds 200, 37, 11, 1, class_id, one beyond reach), Precision and Recall with top_k
(and class_id, a threshold) and AUC with multi_label (ROC, PR, label_weights), on predictions of shape (23, 1) and
(23, 3), some of 0.2, 0.5 and 0.8 only (tied top-k), as confusion.json's.

iou.json (its own random stream): IoU, MeanIoU, OneHotIoU, OneHotMeanIoU and BinaryIoU on integer labels, one-hot
labels and 0/1 labels, predictions of class ids (some out of range or fractional), probabilities (a tied maximum) and
probabilities at BinaryIoU's thresholds; with ignore_class, a class that never occurs, target_class_ids; each with
its serialized config, label shape and Keras's result after the two batches.

crossentropy.json (its own random stream): SparseCategoricalCrossentropy and CategoricalCrossentropy on
probabilities (a row with zeros, clipped) and with from_logits on logits, as iou.json's.

mean_sum.json (its own random stream): Keras's Mean and Sum after two update_state calls of values and sample weights
of several shapes (none, per sample, elementwise, expanded or squeezed by one axis, broadcast, scalars).

thresholds.json (its own random stream): AUC with thresholds of its own (unsorted, evenly spaced, PR, majoring, from
logits, multi_label), Precision and Recall with lists of thresholds (unsorted, evenly spaced with 0 and 1, a list of
one, a repeated threshold, class_id, top_k), some predictions exactly at a threshold; some of them, and R2Score (one
column, three variance-weighted, adjusted), with sample weights (a weight per sample in [0, 2], one 0) as
weighted_metrics pass them. The result is a list for a metric of several thresholds.

ignore_class.json: a model (Dense(4, softmax) of an identity kernel on one-hot inputs) compiled with
SparseCategoricalCrossentropy(ignore_class=-1) and the accuracy and top-k metrics, evaluated on labels some of which
are -1: the loss skips them, the metrics count them as misses.
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
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "fixtures", "metrics"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(6)
    cases = []
    for kind in ("ties", "uniform"):
        pred = (rng.integers(0, 4, size=(12, 8)) if kind == "ties" else rng.uniform(size=(12, 8))).astype(np.float32)
        labels = rng.integers(0, 8, size=(12,))
        one_hot = np.eye(8, dtype=np.float32)[labels]
        results = {}
        for cls, y in (("SparseTopKCategoricalAccuracy", labels), ("TopKCategoricalAccuracy", one_hot)):
            for k in (5, 3):
                m = getattr(keras.metrics, cls)(k=k)
                m.update_state(y[:7], pred[:7])
                m.update_state(y[7:], pred[7:])
                results[cls if k == 5 else f"{cls} k={k}"] = float(m.result())
        cases.append({"kind": kind, "pred": pred.reshape(-1).tolist(), "labels": labels.tolist(),
                      "results": results})
    write(os.path.join(args.out, "top_k.json"), cases)
    write(os.path.join(args.out, "confusion.json"), confusion_cases(rng))
    write(os.path.join(args.out, "r2.json"), r2_cases(rng))
    write(os.path.join(args.out, "f_score.json"), f_score_cases(np.random.default_rng(7)),
          compile_config=f_score_compile_config())
    write(os.path.join(args.out, "rates.json"), rate_cases(np.random.default_rng(8)))
    write(os.path.join(args.out, "iou.json"), iou_cases(np.random.default_rng(9)))
    write(os.path.join(args.out, "crossentropy.json"), crossentropy_cases(np.random.default_rng(10)))
    write(os.path.join(args.out, "mean_sum.json"), mean_sum_cases(np.random.default_rng(11)))
    write(os.path.join(args.out, "thresholds.json"), threshold_cases(np.random.default_rng(12)))
    write(os.path.join(args.out, "ignore_class.json"), ignore_class_cases())


def r2_cases(rng):
    M = keras.metrics
    cases = []
    for columns, metrics in ((1, [M.R2Score(), M.R2Score(num_regressors=3)]),
                             (3, [M.R2Score(), M.R2Score(class_aggregation="variance_weighted_average"),
                                  M.R2Score(num_regressors=2, name="adjusted")])):
        target = (rng.normal(size=(23, columns)) * np.array([1.0, 3.0, 0.5])[:columns] + 2.0).astype(np.float32)
        pred = (target + 0.6 * rng.normal(size=target.shape)).astype(np.float32)
        cases += [two_batch_case(m, target, pred) for m in metrics]
    return cases


def f_score_cases(rng):
    M = keras.metrics
    averages = (None, "micro", "macro", "weighted")
    rows = 23
    # One-hot labels of 4 classes (class 3 never the label, but predicted), probabilities on a grid of 0.05 (ties),
    # a row with two tied maxima, a row of zeros (no class is its maximum: Keras needs |p| > 1e-9), values exactly
    # 0.5 and 0.35 (not above those thresholds).
    classes = rng.integers(0, 3, size=rows)
    one_hot = np.eye(4, dtype=np.float32)[classes]
    logits = rng.normal(size=(rows, 4)) + 1.2 * np.eye(4)[classes]
    probabilities = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    probabilities = np.round(probabilities / 0.05) * 0.05
    probabilities[3] = [0.4, 0.4, 0.15, 0.05]
    probabilities[12] = [0.0, 0.0, 0.0, 0.0]
    probabilities[15] = [0.5, 0.35, 0.1, 0.05]
    probabilities[20] = [0.35, 0.15, 0.0, 0.5]
    one_hot_metrics = []
    for average in averages:
        for threshold in (None, 0.5, 0.35):
            one_hot_metrics.append(M.F1Score(average=average, threshold=threshold))
            one_hot_metrics.append(M.FBetaScore(average=average, beta=2.0, threshold=threshold))
    one_hot_metrics.append(M.FBetaScore(beta=0.5, name="f_half"))
    # Multi-label 0/1 labels of 3 classes and predictions that lean to them.
    multi = rng.integers(0, 2, size=(rows, 3)).astype(np.float32)
    leaning = np.clip(0.3 * multi + rng.uniform(0, 0.7, size=multi.shape), 0, 1)
    leaning[4, 1] = leaning[17, 2] = 0.6  # float32(0.6) > 0.6 in float64, not in Keras's float32
    multi_metrics = []
    for average in averages:
        multi_metrics.append(M.F1Score(average=average, threshold=0.5))
        multi_metrics.append(M.FBetaScore(average=average, beta=2.0, threshold=0.6))
    # Smoothed one-hot labels (Keras's sums take the labels' values as they are).
    smoothed = one_hot[:, :3] * 0.85 + 0.05
    smoothed_metrics = [M.F1Score(average=average) for average in averages]
    smoothed_metrics.append(M.FBetaScore(average="weighted", beta=2.0, threshold=0.35, name="weighted_f2"))
    cases = []
    for kind, labels, pred, metrics in (("one-hot", one_hot, probabilities, one_hot_metrics),
                                        ("multi-label", multi, leaning, multi_metrics),
                                        ("smoothed", smoothed, probabilities[:, :3], smoothed_metrics)):
        labels = np.asarray(labels, np.float32)
        pred = np.asarray(pred, np.float32)
        results = []
        for m in metrics:
            m.update_state(labels[:10], pred[:10])
            m.update_state(labels[10:], pred[10:])
            result = np.asarray(m.result(), np.float64)
            results.append({"config": keras.saving.serialize_keras_object(m),
                            "result": result.tolist() if result.ndim else float(result)})
        cases.append({"kind": kind, "shape": list(labels.shape), "pred": pred.reshape(-1).tolist(),
                      "labels": labels.reshape(-1).tolist(), "metrics": results})
    return cases


def f_score_compile_config():
    M = keras.metrics
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation="softmax")])
    model.compile("adam", "categorical_crossentropy",
                  metrics=["f1_score", M.F1Score(average="macro", threshold=0.5, name="f1_macro"),
                           M.FBetaScore(beta=2.0, average="weighted")])
    return model.get_compile_config()


def confusion_cases(rng):
    M = keras.metrics
    probabilities = [
        M.AUC(), M.AUC(curve="PR"), M.AUC(num_thresholds=7, summation_method="minoring"),
        M.AUC(num_thresholds=11, curve="PR", summation_method="majoring"), M.Precision(), M.Recall(),
        M.Precision(thresholds=0.3), M.Recall(thresholds=0.65, name="recall_at_65"),
        M.AUC(num_thresholds=2),  # the least Keras takes: thresholds -epsilon and 1 + epsilon
    ]
    cases = []
    for columns, metrics, logits in ((1, probabilities, False), (3, [M.AUC(), M.Precision(class_id=2),
                                                                     M.Recall(class_id=0, thresholds=0.4)], False),
                                     (1, [M.AUC(from_logits=True), M.AUC(curve="PR", from_logits=True)], True)):
        labels = rng.integers(0, 2, size=(23, columns)).astype(np.float32)
        # Predictions that lean to the labels; some exactly 0 or 1 (the end thresholds -epsilon and 1 + epsilon).
        pred = np.clip(0.35 * labels + rng.uniform(-0.1, 0.75, size=labels.shape), 0, 1).astype(np.float32)
        if logits:
            pred = rng.normal(size=labels.shape).astype(np.float32) + 1.5 * (labels - 0.5)
        cases += [two_batch_case(m, labels, pred) for m in metrics]
    return cases


def rate_cases(rng):
    M = keras.metrics
    one_column = [
        M.PrecisionAtRecall(0.8), M.PrecisionAtRecall(0.5, num_thresholds=11), M.RecallAtPrecision(0.7),
        M.RecallAtPrecision(0.999, name="recall_at_p999"),  # beyond reach: 0
        M.SensitivityAtSpecificity(0.6), M.SpecificityAtSensitivity(0.9, num_thresholds=1),
        M.SpecificityAtSensitivity(0.4, num_thresholds=37),
    ]
    three_columns = [
        M.PrecisionAtRecall(0.6, class_id=1), M.SensitivityAtSpecificity(0.5, class_id=2, num_thresholds=20),
        M.Precision(top_k=1), M.Precision(top_k=2), M.Recall(top_k=2), M.Precision(top_k=2, class_id=1),
        M.Recall(top_k=1, thresholds=0.3),
        M.AUC(multi_label=True), M.AUC(multi_label=True, curve="PR"),
        M.AUC(multi_label=True, label_weights=[0.2, 1.0, 0.5], num_thresholds=50, summation_method="minoring"),
    ]
    cases = []
    for columns, metrics, ties in ((1, one_column, False), (3, three_columns, False), (3, three_columns, True)):
        labels = rng.integers(0, 2, size=(23, columns)).astype(np.float32)
        # Predictions that lean to the labels, some exactly 0, 0.5 or 1; with ties, values of {0.2, 0.5, 0.8} only
        # (tied rows: tf.math.top_k takes the lower index first).
        pred = np.clip(0.35 * labels + rng.uniform(-0.1, 0.75, size=labels.shape), 0, 1).astype(np.float32)
        pred.reshape(-1)[3] = 0.5
        if ties:
            pred = rng.choice(np.array([0.2, 0.5, 0.8], dtype=np.float32), size=labels.shape)
        # A fresh state for each data set.
        cases += [two_batch_case(m.__class__.from_config(m.get_config()), labels, pred) for m in metrics]
    return cases


def two_batch_case(m, labels, pred, own_label_shape=False, weights=None):
    """The metric updated on rows 0-9, then the rest: its serialized config, the data and Keras's result (a list for
    a result of several values). With own_label_shape the labels' shape and whether they are integers (int32) are
    recorded too; with weights (one per sample) they are passed as sample_weight and recorded."""
    w = (None, None) if weights is None else (weights[:10], weights[10:])
    m.update_state(labels[:10], pred[:10], sample_weight=w[0])
    m.update_state(labels[10:], pred[10:], sample_weight=w[1])
    case = {"config": keras.saving.serialize_keras_object(m), "shape": list(pred.shape)}
    if own_label_shape:
        case.update({"label_shape": list(labels.shape), "integer_labels": bool(labels.dtype == np.int32)})
    case.update({"pred": pred.reshape(-1).tolist(), "labels": labels.reshape(-1).astype(float).tolist()})
    if weights is not None:
        case["weights"] = weights.tolist()
    result = np.asarray(m.result())
    case["result"] = float(result) if result.ndim == 0 else result.tolist()
    return case


def ignore_class_cases():
    x = np.eye(4, dtype=np.float32)[[0, 1, 2, 3, 0, 1]]
    y = np.array([0, 1, -1, 3, -1, 2])
    inp = keras.Input((4,))
    out = keras.layers.Dense(4, activation="softmax", kernel_initializer="identity", bias_initializer="zeros")(inp)
    m = keras.Model(inp, out)
    m.compile("sgd", keras.losses.SparseCategoricalCrossentropy(ignore_class=-1),
              metrics=["accuracy", "sparse_top_k_categorical_accuracy"])
    result = m.evaluate(x, y, return_dict=True, verbose=0)
    return [{"x": x.reshape(-1).tolist(), "y": y.tolist(), "evaluate": {k: float(v) for k, v in result.items()}}]


def threshold_cases(rng):
    M = keras.metrics
    rows = 23
    one_column = [
        M.AUC(thresholds=[0.3, 0.1, 0.75]), M.AUC(thresholds=[0.25, 0.5, 0.75]), M.AUC(thresholds=[0.2, 0.6], curve="PR"),
        M.AUC(thresholds=[0.4, 0.5, 0.9], summation_method="majoring"),
        M.Precision(thresholds=[0.3, 0.7, 0.5]), M.Precision(thresholds=[0.0, 0.5, 1.0]), M.Recall(thresholds=[0.4, 0.8]),
        M.Recall(thresholds=[0.6]), M.Precision(thresholds=[0.5, 0.5], name="repeated"),
    ]
    three_columns = [
        M.AUC(thresholds=[0.2, 0.45, 0.9], multi_label=True), M.Precision(thresholds=[0.2, 0.9], class_id=1),
        M.Recall(thresholds=[0.1, 0.6, 0.35], top_k=2), M.Precision(thresholds=[0.0, 0.25, 0.5, 0.75, 1.0], class_id=2),
    ]
    cases = []
    weights = rng.uniform(0, 2, size=rows).astype(np.float32)
    weights[4] = 0
    for columns, metrics in ((1, one_column), (3, three_columns)):
        labels = rng.integers(0, 2, size=(rows, columns)).astype(np.float32)
        pred = np.clip(0.35 * labels + rng.uniform(-0.1, 0.75, size=labels.shape), 0, 1).astype(np.float32)
        flat = pred.reshape(-1)
        flat[2], flat[5], flat[7], flat[11] = 0.3, 0.5, 0.75, 0.6  # exactly at thresholds
        for weighted in (False, True):
            cases += [two_batch_case(m.__class__.from_config(m.get_config()), labels, pred,
                                     weights=weights if weighted else None) for m in metrics]
    # From logits (predictions outside [0, 1]).
    labels = rng.integers(0, 2, size=(rows, 1)).astype(np.float32)
    logits = (2.0 * labels - 1.0 + rng.normal(size=labels.shape) * 1.5).astype(np.float32)
    cases.append(two_batch_case(M.AUC(thresholds=[0.3, 0.5, 0.7], from_logits=True), labels, logits))
    # R2Score with sample weights.
    for columns, metrics in ((1, [M.R2Score(), M.R2Score(num_regressors=3)]),
                             (3, [M.R2Score(class_aggregation="variance_weighted_average"),
                                  M.R2Score(num_regressors=2, name="adjusted")])):
        target = (rng.normal(size=(rows, columns)) * np.array([1.0, 3.0, 0.5])[:columns] + 2.0).astype(np.float32)
        pred = (target + 0.6 * rng.normal(size=target.shape)).astype(np.float32)
        cases += [two_batch_case(m, target, pred, weights=weights) for m in metrics]
    return cases


def iou_cases(rng):
    M = keras.metrics
    n = 23
    int_labels = rng.integers(0, 3, size=(n,)).astype(np.int32)
    one_hot = np.eye(3, dtype=np.float32)[int_labels]
    probs = rng.dirichlet(np.ones(3), size=n).astype(np.float32)
    probs[2] = [0.4, 0.4, 0.2]  # tied maxima: the first is the argmax
    class_ids = rng.integers(0, 3, size=(n,)).astype(np.float32)
    class_ids[:4] = [3.0, -1.0, 1.7, 2.999]  # out of range (counted nowhere), truncated
    binary_labels = rng.integers(0, 2, size=(n, 1)).astype(np.float32)
    binary_pred = rng.uniform(size=(n, 1)).astype(np.float32)
    binary_pred[:2, 0] = [0.3, 0.5]  # at the thresholds (>=: class 1)
    data = [
        # (metric, labels, predictions)
        (M.MeanIoU(num_classes=3), int_labels, class_ids),
        (M.MeanIoU(num_classes=3, sparse_y_pred=False), int_labels, probs),
        (M.IoU(num_classes=3, target_class_ids=[0, 2], sparse_y_pred=False, ignore_class=1), int_labels, probs),
        (M.IoU(num_classes=3, target_class_ids=[2], sparse_y_pred=False, name="iou_2"), int_labels, probs),
        (M.OneHotIoU(num_classes=3, target_class_ids=[1]), one_hot, probs),
        (M.OneHotMeanIoU(num_classes=3), one_hot, probs),
        (M.OneHotMeanIoU(num_classes=4), np.pad(one_hot, ((0, 0), (0, 1))), np.pad(probs, ((0, 0), (0, 1)))),
        (M.BinaryIoU(), binary_labels, binary_pred),
        (M.BinaryIoU(target_class_ids=[1], threshold=0.3), binary_labels, binary_pred),
    ]
    return [two_batch_case(m, y, p, own_label_shape=True) for m, y, p in data]


def crossentropy_cases(rng):
    M = keras.metrics
    n = 23
    labels = rng.integers(0, 4, size=(n,)).astype(np.int32)
    one_hot = np.eye(4, dtype=np.float32)[labels]
    logits = rng.normal(scale=2.0, size=(n, 4)).astype(np.float32)
    probs = (np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)).astype(np.float32)
    probs[3] = [0.0, 0.5, 0.5, 0.0]  # clipped to epsilon where the label is
    labels[3] = 0
    one_hot[3] = [1, 0, 0, 0]
    data = [
        (M.SparseCategoricalCrossentropy(), labels, probs),
        (M.CategoricalCrossentropy(), one_hot, probs),
        (M.SparseCategoricalCrossentropy(from_logits=True, name="scce_logits"), labels, logits),
        (M.CategoricalCrossentropy(from_logits=True), one_hot, logits),
    ]
    return [two_batch_case(m, y, p, own_label_shape=True) for m, y, p in data]


def mean_sum_cases(rng):
    def arr(*shape):
        return rng.normal(size=shape).astype(np.float32)

    def weights(*shape):
        return rng.uniform(0, 2, size=shape).astype(np.float32)

    # Each case: two updates of (values, sample_weight or None), Keras's Mean and Sum results after them.
    data = [
        ("no weights", [(arr(5), None), (arr(3), None)]),
        ("a weight per sample", [(arr(5), weights(5)), (arr(4), weights(4))]),
        ("per-sample weights of 2-D values", [(arr(4, 3), weights(4)), (arr(2, 3), weights(2))]),
        ("elementwise weights", [(arr(4, 3), weights(4, 3)), (arr(2, 3), weights(2, 3))]),
        ("3-D values, per-sample weights", [(arr(3, 2, 4), weights(3)), (arr(2, 2, 4), None)]),
        ("values (4, 1), weights (4,): expanded", [(arr(4, 1), weights(4)), (arr(4, 1), weights(4))]),
        ("values (4,), weights (4, 1): expanded", [(arr(4), weights(4, 1)), (arr(4), None)]),
        ("weights (4, 1) on values (4, 3): broadcast", [(arr(4, 3), weights(4, 1)), (arr(4, 3), weights(4, 1))]),
        ("a scalar, a scalar weight", [(np.float32(2.5), None), (arr(3), np.float32(0.5))]),
    ]
    cases = []
    for name, updates in data:
        mean, total = keras.metrics.Mean(), keras.metrics.Sum()
        for v, w in updates:
            mean.update_state(v, sample_weight=w)
            total.update_state(v, sample_weight=w)
        cases.append({"name": name, "updates": [{"values": np.asarray(v).reshape(-1).tolist(),
                                                  "shape": list(np.shape(v)),
                                                  **({} if w is None else {"weights": np.asarray(w).reshape(-1).tolist(),
                                                                           "weight_shape": list(np.shape(w))})}
                                                 for v, w in updates],
                      "mean": float(mean.result()), "sum": float(total.result())})
    return cases


def write(path, cases, **extra):
    with open(path + ".tmp", "w") as f:
        json.dump({"generator": f"keras {keras.__version__}", "cases": cases, **extra}, f, indent=1)
        f.write("\n")
    os.replace(path + ".tmp", path)
    print(f"{path}: {len(cases)} cases")


if __name__ == "__main__":
    main()
