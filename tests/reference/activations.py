#!/usr/bin/env python3
"""Writes tests/fixtures/activations/activations.json: Keras's activations, their gradients and the configs of
its activation layers, computed by real Keras, for tests/test_activations.cc.

    python3 tests/reference/activations.py [--out DIR]

Needs keras (3.x), tensorflow-cpu and tf_keras from pip: run it with the python3 of a virtual environment that
has them (outside the repository).

What it records:
- `inputs`: float64 values (around every kink: 0, +-0.5, +-1, +-3, 6 and just beside them, and spread over
  [-6, 7]);
- `activations`: for each name that keras.activations.get() knows and systolic runs (plus parametrised calls
  of keras.activations.relu, leaky_relu, elu, gelu(approximate=True)), y = f(x) and dy/dx (tf.GradientTape of
  sum(f(x))), computed in float64 by Keras 3 over TensorFlow; softmax and log_softmax over rows of 4;
- `layers`: model.to_json() of a Sequential model with ReLU(max_value=6), ReLU(2.5, 0.1, 0.3), LeakyReLU(0.1),
  ELU(0.5), Activation("gelu"), Activation("swish") and Softmax, from tf.keras (tf_keras) and from Keras 3, and
  the model's float32 output on `layer_inputs` (the same for both: the layers have no weights).
"""
import argparse
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np
import tensorflow as tf
import keras
import tf_keras

NAMES = [
    "linear", "relu", "relu6", "leaky_relu", "sigmoid", "tanh", "softmax", "log_softmax", "elu", "selu", "celu",
    "gelu", "silu", "swish", "mish", "softplus", "softsign", "exponential", "hard_sigmoid", "hard_silu",
    "hard_swish", "hard_tanh", "log_sigmoid", "tanh_shrink", "soft_shrink", "hard_shrink", "squareplus",
    "sparse_plus", "sparse_sigmoid",
]


def inputs():
    kinks = [0.0, 0.5, -0.5, 1.0, -1.0, 3.0, -3.0, 6.0, 2.5, 0.3]
    near = []
    for k in kinks:
        near += [k - 1e-3, k + 1e-3]
    spread = list(np.linspace(-6.0, 7.0, 27))
    values = near + spread
    while len(values) % 4:
        values.append(0.25 * len(values) - 9.0)
    return [float(v) for v in values]


def value_and_grad(fn, x, rows):
    t = tf.constant(np.array(x, dtype=np.float64).reshape(rows))
    with tf.GradientTape() as tape:
        tape.watch(t)
        y = fn(t)
        s = tf.reduce_sum(y * tf.constant(np.linspace(0.5, 1.5, t.shape.num_elements()).reshape(rows)))
    g = tape.gradient(s, t)
    return [float(v) for v in np.array(y).reshape(-1)], [float(v) for v in np.array(g).reshape(-1)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "fixtures", "activations"))
    args = ap.parse_args()
    x = inputs()
    rows = (len(x) // 4, 4)
    out = {
        "generator": f"keras {keras.__version__}, tensorflow {tf.__version__}, tf_keras {tf_keras.__version__}",
        "inputs": x,
        "rows": list(rows),
        "grad_weights": "dL/dx of L = sum(f(x) * w), w = linspace(0.5, 1.5, n) in the inputs' order",
        "activations": [],
    }
    for name in NAMES:
        fn = keras.activations.get(name)
        y, g = value_and_grad(fn, x, rows)
        out["activations"].append({"name": name, "params": {}, "y": y, "dx": g})
    calls = [
        ("relu", {"max_value": 6.0}),
        ("relu", {"max_value": 2.5, "negative_slope": 0.1, "threshold": 0.3}),
        ("relu", {"negative_slope": 0.2}),
        ("relu", {"threshold": 0.5}),
        ("leaky_relu", {"negative_slope": 0.01}),
        ("elu", {"alpha": 0.5}),
        ("gelu", {"approximate": True}),
    ]
    for name, params in calls:
        fn = getattr(keras.activations, name)
        y, g = value_and_grad(lambda t: fn(t, **params), x, rows)
        out["activations"].append({"name": name, "params": params, "y": y, "dx": g})

    # Layers: to_json from both Keras lines, and the output on layer_inputs.
    layer_x = np.array(x[:32], dtype=np.float32).reshape(8, 4)

    def build(k):
        L = k.layers
        return k.Sequential([
            k.Input(shape=(4,)),
            L.ReLU(max_value=6.0),
            L.ReLU(max_value=2.5, negative_slope=0.1, threshold=0.3),
            L.LeakyReLU(0.1) if k is keras else L.LeakyReLU(alpha=0.1),
            L.ELU(alpha=0.5),
            L.Activation("gelu"),
            L.Activation("swish"),
            L.Softmax(),
        ])

    layers = {"layer_inputs": [float(v) for v in layer_x.reshape(-1)]}
    for tag, k in (("keras3", keras), ("tfkeras", tf_keras)):
        m = build(k)
        layers[tag] = {"json": json.loads(m.to_json()),
                       "outputs": [float(v) for v in np.array(m(layer_x)).reshape(-1)]}
    out["layers"] = layers

    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "activations.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(f"wrote {path}: {len(out['activations'])} activations on {len(x)} inputs ({out['generator']})")


if __name__ == "__main__":
    main()
