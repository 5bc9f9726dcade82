#!/usr/bin/env python3
"""A headless base written by real Keras 3; tests/test_fine_tune.cc loads it and checks Keras's outputs.

    /work/venv/bin/python tests/reference/fine_tune_base.py      # writes tests/fixtures/fine_tune/

base.h5: keras.applications.MobileNetV2(alpha=0.35, include_top=False, weights=None, input_shape=(32, 32, 3))
cut after block_16_project_BN (the final 1x1 Conv_1 to 1280 channels is dropped so the file stays under 2 MB),
saved with model.save (legacy HDF5, no training config). Weights: Keras's initialisers under
keras.utils.set_random_seed(0); the BatchNormalization moving statistics are set to deterministic non-trivial
values (mean 0.05*sin, variance 1 + 0.5*|sin|) so a test that checks they stay untouched checks something.
inputs.bin: 4 images (float32, 0-255 pixels, (4, 32, 32, 3)), predictions.bin: Keras's base outputs for them
(float32 (4, 1, 1, 112)), manifest.json: shapes and parameter counts.
No ImageNet weights are downloaded (the machine has no network): the base is untrained.
"""
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "fixtures", "fine_tune")


def main():
    import keras

    keras.utils.set_random_seed(0)
    full = keras.applications.MobileNetV2(alpha=0.35, include_top=False, weights=None, input_shape=(32, 32, 3))
    base = keras.Model(full.input, full.get_layer("block_16_project_BN").output, name="mobilenetv2_base")
    k = 0
    for layer in base.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            g, b, m, v = layer.get_weights()
            t = np.arange(m.size, dtype=np.float64) * 0.37 + k * 1.3
            m = (0.05 * np.sin(t)).astype(np.float32)
            v = (1.0 + 0.5 * np.abs(np.sin(t + 0.5))).astype(np.float32)
            layer.set_weights([g, b, m, v])
            k += 1
    os.makedirs(OUT, exist_ok=True)
    base.save(os.path.join(OUT, "base.h5"))
    rng = np.random.default_rng(5)
    x = rng.integers(0, 256, size=(4, 32, 32, 3)).astype(np.float32)
    # MobileNetV2 expects [-1, 1]: the example puts Rescaling(1/127.5, offset=-1) in front of the base.
    y = base.predict(x / 127.5 - 1.0, verbose=0).astype(np.float32)
    x.astype("<f4").tofile(os.path.join(OUT, "inputs.bin"))
    y.astype("<f4").tofile(os.path.join(OUT, "predictions.bin"))
    trainable = int(sum(int(np.prod(w.shape)) for w in base.trainable_weights))
    manifest = {
        "keras_version": keras.__version__,
        "layers": len(base.layers),
        "output_shape": list(base.output.shape[1:]),
        "params": int(base.count_params()),
        "trainable_params": trainable,
        "non_trainable_params": int(base.count_params()) - trainable,
        "inputs_shape": list(x.shape),
        "predictions_shape": list(y.shape),
    }
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    print(json.dumps(manifest), os.path.getsize(os.path.join(OUT, "base.h5")), "bytes")


if __name__ == "__main__":
    main()
