#!/usr/bin/env python3
"""Writes tests/fixtures/optimizers/trajectories.json: Keras 3's optimizers stepped in float64, for
tests/test_optimizers.cc.

    python3 tests/reference/optimizers.py [--out DIR]

Needs keras (3.x) and tensorflow-cpu from pip (run it with the python3 of a virtual environment that has them).

Two float64 variables, k (3, 2) and b (4,), drawn once; ten steps of drawn gradients (some elements 0, and every
gradient of step 5 0), the same for every case. For each case: keras.optimizers.serialize(optimizer), the
variables after each apply_gradients (flattened, k then b), and the optimizer's variables after the ten steps by
their Keras paths ("adam/k_momentum"), flattened, and in their order (variable_list: path, shape, values; Adafactor
names two variables alike).
"""
import argparse
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np
import keras

STEPS = 10


def cases():
    O = keras.optimizers
    S = keras.optimizers.schedules
    return [
        O.SGD(learning_rate=0.1),
        O.SGD(learning_rate=0.1, momentum=0.9, nesterov=True),
        O.RMSprop(learning_rate=0.01, momentum=0.5),
        O.Adam(learning_rate=0.01),
        O.Adam(learning_rate=0.01, amsgrad=True),
        O.AdamW(learning_rate=0.01, amsgrad=True),
        O.Adamax(learning_rate=0.02),
        O.Adamax(learning_rate=S.ExponentialDecay(0.02, decay_steps=3, decay_rate=0.5)),
        O.Nadam(learning_rate=0.01),
        O.Nadam(learning_rate=0.01, beta_1=0.8, beta_2=0.99, epsilon=1e-5),
        O.Adagrad(learning_rate=0.1),
        O.Adagrad(learning_rate=0.1, initial_accumulator_value=0.5, epsilon=1e-3),
        O.Adadelta(learning_rate=1.0),
        O.Adadelta(learning_rate=0.5, rho=0.9, epsilon=1e-4),
        O.Lion(learning_rate=0.01),
        O.Lion(learning_rate=0.01, beta_1=0.95, beta_2=0.98, weight_decay=0.1),
        O.Ftrl(learning_rate=0.1),
        O.Ftrl(learning_rate=0.1, learning_rate_power=-0.7, initial_accumulator_value=0.2,
               l1_regularization_strength=0.01, l2_regularization_strength=0.02,
               l2_shrinkage_regularization_strength=0.03, beta=0.5),
        O.Ftrl(learning_rate=0.05, learning_rate_power=0.0, l1_regularization_strength=0.3),
        # Gradient clipping (any optimizer's): each variable's norm, the global norm, each value.
        O.SGD(learning_rate=0.1, clipnorm=0.5),
        O.Adam(learning_rate=0.01, global_clipnorm=0.3),
        O.RMSprop(learning_rate=0.01, clipvalue=0.2),
        O.Lion(learning_rate=0.01, clipnorm=0.4),
        # The weights' moving average (any optimizer's use_ema), and the weights overwritten by it every 3 updates.
        O.Adam(learning_rate=0.01, use_ema=True, ema_momentum=0.9),
        O.SGD(learning_rate=0.1, momentum=0.5, use_ema=True, ema_momentum=0.8, ema_overwrite_frequency=3),
        # Lamb: each variable's trust ratio (k's and b's norms differ).
        O.Lamb(learning_rate=0.01),
        O.Lamb(learning_rate=0.02, beta_1=0.8, beta_2=0.99, epsilon=1e-5, weight_decay=0.05),
        # loss_scale_factor: apply_gradients divides the (given) gradients by it, before clipping.
        O.SGD(learning_rate=0.1, momentum=0.9, loss_scale_factor=4.0),
        O.SGD(learning_rate=0.1, loss_scale_factor=0.5, clipnorm=0.3),
        # gradient_accumulation_steps: an update every n steps with the mean of their gradients (clipped, after the
        # weight decay); the bias corrections count updates, a schedule steps; the moving average follows every step.
        # Ten steps: some cases end with gradients accumulated.
        O.SGD(learning_rate=0.1, momentum=0.9, gradient_accumulation_steps=2),
        O.Adam(learning_rate=0.01, gradient_accumulation_steps=3, use_ema=True, ema_momentum=0.9),
        O.Adamax(learning_rate=S.ExponentialDecay(0.02, decay_steps=3, decay_rate=0.5), gradient_accumulation_steps=2,
                 clipnorm=0.3),
        O.Nadam(learning_rate=0.01, gradient_accumulation_steps=2),
        O.AdamW(learning_rate=0.01, weight_decay=0.1, gradient_accumulation_steps=4),
        O.RMSprop(learning_rate=0.01, momentum=0.5, gradient_accumulation_steps=3),
        O.Lamb(learning_rate=0.01, gradient_accumulation_steps=2),
        O.SGD(learning_rate=0.1, momentum=0.5, use_ema=True, ema_momentum=0.8, ema_overwrite_frequency=2,
              gradient_accumulation_steps=2, loss_scale_factor=4.0),
        # Adafactor: k's second moment factored (r (3,), c (2,)), b's not (r and c scalars); a rate above
        # 1 / sqrt(t) (rho is the smaller); the update clipped by its RMS; a schedule, weight decay, accumulation.
        O.Adafactor(learning_rate=0.01),
        O.Adafactor(learning_rate=0.5, beta_2_decay=-0.5, epsilon_1=1e-6, epsilon_2=1e-2, clip_threshold=0.5,
                    relative_step=False),
        O.Adafactor(learning_rate=S.ExponentialDecay(0.05, decay_steps=3, decay_rate=0.5), weight_decay=0.1,
                    gradient_accumulation_steps=2),
        # Muon: k (a matrix, taller than wide: orthogonalised transposed) by Newton-Schulz, b by AdamW; options; k
        # excluded by a regular expression of its path (AdamW for both), with gradient accumulation.
        O.Muon(learning_rate=0.01),
        O.Muon(learning_rate=0.02, adam_lr_ratio=0.5, momentum=0.9, nesterov=False, ns_steps=3, rms_rate=None,
               weight_decay=0.1, adam_weight_decay=0.05, muon_a=3.0, muon_b=-3.2, muon_c=1.2),
        O.Muon(learning_rate=0.01, exclude_layers=["^k$"], gradient_accumulation_steps=2),
    ]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "fixtures", "optimizers"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    keras.config.set_floatx("float64")
    rng = np.random.default_rng(11)
    k0 = rng.uniform(-1, 1, (3, 2))
    b0 = rng.uniform(-1, 1, (4,))
    grads = []
    for step in range(STEPS):
        gk, gb = rng.normal(0, 0.5, (3, 2)), rng.normal(0, 0.5, (4,))
        gk[1, 0] = 0.0
        if step == 4:
            gk[:], gb[:] = 0.0, 0.0
        grads.append((gk, gb))
    out_cases = []
    for opt in cases():
        serialized = keras.optimizers.serialize(opt)
        k = keras.Variable(k0.copy(), dtype="float64", name="k")
        b = keras.Variable(b0.copy(), dtype="float64", name="b")
        steps = []
        for gk, gb in grads:
            opt.apply_gradients([(gk, k), (gb, b)])
            steps.append([float(v) for v in np.concatenate([np.asarray(k).reshape(-1), np.asarray(b).reshape(-1)])])
        variables, variable_list = {}, []
        for v in opt.variables:
            values = [float(x) for x in np.asarray(v).reshape(-1)]
            variables[v.path] = values
            variable_list.append({"path": v.path, "shape": list(v.shape), "values": values})
        out_cases.append({"serialized": serialized, "steps": steps, "variables": variables,
                          "variable_list": variable_list})
    out = {
        "generator": f"keras {keras.__version__}",
        "k": [float(v) for v in k0.reshape(-1)],
        "b": [float(v) for v in b0.reshape(-1)],
        "grads": [[float(v) for v in np.concatenate([gk.reshape(-1), gb.reshape(-1)])] for gk, gb in grads],
        "cases": out_cases,
    }
    path = os.path.join(args.out, "trajectories.json")
    with open(path + ".tmp", "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    os.replace(path + ".tmp", path)
    print(f"{path}: {len(out_cases)} cases")


if __name__ == "__main__":
    main()
