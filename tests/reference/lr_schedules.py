#!/usr/bin/env python3
"""Keras 3's learning-rate schedules (keras.optimizers.schedules), for tests/test_schedules.cc.

    /work/venv/bin/python tests/reference/lr_schedules.py     # writes tests/fixtures/lr_schedules/

schedules.json: for each case, the serialized schedule (keras.saving.serialize_keras_object), its get_config()
and its float32 values at a list of steps. adam_cosine.keras: a small Dense model compiled with
Adam(CosineDecay(...)) and trained 3 steps by Keras, with adam_cosine.json: the optimizer's iterations and
learning rate after them, the inputs, labels and the predictions after one more train_on_batch (so a loader must
carry on with the schedule's rate at step 3).
"""
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "fixtures", "lr_schedules")
STEPS = [0, 1, 2, 5, 9, 10, 11, 25, 50, 99, 100, 101, 150, 250, 1000]


def main():
    import keras as K

    S = K.optimizers.schedules
    cases = {
        "exponential": S.ExponentialDecay(0.1, 10, 0.5),
        "exponential_staircase": S.ExponentialDecay(0.1, 10, 0.5, staircase=True),
        "piecewise": S.PiecewiseConstantDecay([10, 100], [0.1, 0.01, 0.001]),
        "polynomial": S.PolynomialDecay(0.1, 100),
        "polynomial_cycle": S.PolynomialDecay(0.1, 100, end_learning_rate=0.01, power=2.0, cycle=True),
        "inverse_time": S.InverseTimeDecay(0.1, 10, 0.5),
        "inverse_time_staircase": S.InverseTimeDecay(0.1, 10, 0.5, staircase=True),
        "cosine": S.CosineDecay(0.1, 100),
        "cosine_alpha": S.CosineDecay(0.1, 100, alpha=0.1),
        "cosine_warmup": S.CosineDecay(0.0, 100, alpha=0.05, warmup_target=0.1, warmup_steps=10),
        "cosine_restarts": S.CosineDecayRestarts(0.1, 10),
        "cosine_restarts_flat": S.CosineDecayRestarts(0.1, 10, t_mul=1.0, m_mul=0.5, alpha=0.1),
    }
    out = {"keras": K.__version__, "steps": STEPS, "cases": {}}
    for name, s in cases.items():
        out["cases"][name] = {
            "serialized": K.saving.serialize_keras_object(s),
            "config": s.get_config(),
            "values": [float(np.asarray(s(step))) for step in STEPS],
        }
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "schedules.json"), "w") as f:
        json.dump(out, f, indent=1)

    K.utils.set_random_seed(1)
    rng = np.random.default_rng(2)
    x = rng.uniform(-1, 1, (8, 4)).astype("float32")
    y = rng.integers(0, 3, (8,)).astype("int32")
    m = K.Sequential([K.Input((4,)), K.layers.Dense(5, activation="relu"), K.layers.Dense(3, activation="softmax")])
    m.compile(optimizer=K.optimizers.Adam(S.CosineDecay(0.05, 10, alpha=0.1)), loss="sparse_categorical_crossentropy")
    for _ in range(3):
        m.train_on_batch(x, y)
    m.save(os.path.join(OUT, "adam_cosine.keras"))
    iterations = int(m.optimizer.iterations.numpy())
    lr = float(np.asarray(m.optimizer.learning_rate))
    m.train_on_batch(x, y)
    with open(os.path.join(OUT, "adam_cosine.json"), "w") as f:
        json.dump({"iterations": iterations, "learning_rate": lr, "x": x.tolist(), "y": y.tolist(),
                   "after_step": np.asarray(m.predict(x, verbose=0)).tolist()}, f, indent=1)
    print(json.dumps({k: v["values"][:6] for k, v in out["cases"].items()}))


if __name__ == "__main__":
    main()
