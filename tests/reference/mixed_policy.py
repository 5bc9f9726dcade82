#!/usr/bin/env python3
"""Keras 3 models under the mixed_bfloat16 policy with a float32 last layer (Keras's mixed-precision guide:
`Activation("softmax", dtype="float32")`), for tests/test_mixed_precision.cc.

    /work/venv/bin/python tests/reference/mixed_policy.py     # writes tests/fixtures/mixed_policy/

Writes mixed.keras and mixed.h5 (the same model: Conv2D, BatchNormalization, ReLU, pooling, Dense under
mixed_bfloat16, then a float32 softmax), mixed.inputs.bin and mixed.predictions.bin (float32, little endian:
Keras's predict on the CPU, which computes the mixed layers in bfloat16), and manifest.json (shapes, each layer's
policy as Keras reports it, versions).
"""
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "fixtures", "mixed_policy")


def main():
    import keras as K

    K.utils.set_random_seed(3)
    K.mixed_precision.set_global_policy("mixed_bfloat16")
    L = K.layers
    i = K.Input((8, 8, 3))
    x = L.Conv2D(6, 3, padding="same")(i)
    x = L.BatchNormalization()(x)
    x = L.ReLU()(x)
    x = L.MaxPooling2D()(x)
    x = L.Flatten()(x)
    x = L.Dense(16, activation="relu")(x)
    x = L.Dense(5)(x)
    out = L.Activation("softmax", dtype="float32", name="predictions")(x)
    m = K.Model(i, out, name="mixed")
    m.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    # Batch-norm statistics other than the initial ones, so inference mode matters.
    bn = m.layers[2]
    rng = np.random.default_rng(4)
    bn.moving_mean.assign(rng.uniform(-0.2, 0.2, 6).astype("float32"))
    bn.moving_variance.assign(rng.uniform(0.5, 1.5, 6).astype("float32"))
    x_in = rng.uniform(0, 1, (4, 8, 8, 3)).astype("float32")
    pred = np.asarray(m.predict(x_in, verbose=0))
    assert pred.dtype == np.float32
    os.makedirs(OUT, exist_ok=True)
    m.save(os.path.join(OUT, "mixed.keras"))
    m.save(os.path.join(OUT, "mixed.h5"))
    x_in.astype("<f4").tofile(os.path.join(OUT, "mixed.inputs.bin"))
    pred.astype("<f4").tofile(os.path.join(OUT, "mixed.predictions.bin"))
    manifest = {
        "keras": K.__version__,
        "input_shape": list(x_in.shape),
        "output_shape": list(pred.shape),
        "policies": {l.name: l.dtype_policy.name for l in m.layers},
        "output_dtype": str(m.outputs[0].dtype),
    }
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    print(json.dumps(manifest))


if __name__ == "__main__":
    main()
