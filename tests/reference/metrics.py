#!/usr/bin/env python3
"""Writes tests/fixtures/metrics/top_k.json: Keras 3's top-k accuracies on predictions with ties, for
tests/test_metrics.cc.

    python3 tests/reference/metrics.py [--out DIR]

Needs keras (3.x) and tensorflow-cpu from pip (run it with the python3 of a virtual environment that has them).

Predictions (12, 8) of whole numbers 0..3 (many ties, where tf.math.in_top_k counts every tied class at the k-th
place as in) and of uniform draws, integer labels and their one-hot form; Keras's result of
SparseTopKCategoricalAccuracy() and TopKCategoricalAccuracy() (k = 5) after update_state on the first 7 rows
then the other 5 (the metric accumulates across batches).
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
            m = getattr(keras.metrics, cls)()
            m.update_state(y[:7], pred[:7])
            m.update_state(y[7:], pred[7:])
            results[cls] = float(m.result())
        cases.append({"kind": kind, "pred": pred.reshape(-1).tolist(), "labels": labels.tolist(),
                      "results": results})
    path = os.path.join(args.out, "top_k.json")
    with open(path + ".tmp", "w") as f:
        json.dump({"generator": f"keras {keras.__version__}", "cases": cases}, f, indent=1)
        f.write("\n")
    os.replace(path + ".tmp", path)
    print(f"{path}: {len(cases)} cases")


if __name__ == "__main__":
    main()
