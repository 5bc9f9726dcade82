#!/usr/bin/env python3
"""Fixtures for the keras.applications families (tests/test_applications.cc).

    /work/venv/bin/python tests/reference/applications.py            # writes tests/fixtures/applications/
    /work/venv/bin/python tests/reference/applications.py --h5 DIR   # also DIR/<family>.h5 and input PNGs

Each family is built by Keras 3 (`weights=None`, 96x96x3 input, 10 classes, `classifier_activation=None`, so
the outputs are logits). Its weights are then overwritten with values the C++ test recomputes from a formula,
so the fixture holds no weights (the largest families have tens of millions):

    u(stream, i) = (splitmix64(stream * 2^40 + i) >> 11) * 2^-53          # [0, 1)
    value[i]     = float32(offset + scale * (2 u(stream, i) - 1))          # computed in float64, rounded once

with `stream`, `offset` and `scale` stored per weight (by layer name and weight name). Kernels get He-uniform
scales (sqrt(6 / fan_in)), biases and betas +-0.1, gammas 1 +- 0.2, and the batch-norm statistics are randomised
(moving_mean +-0.1, moving_variance 1 +- 0.5), so inference batch norm is not the identity. The two input images
are integer pixels in [0, 255]: pixel[i] = floor(256 u(0, i)) for the flattened (2, 96, 96, 3) batch (image k is
the k-th block), so a PNG holds them exactly. The fixture stores Keras's two output rows.

One JSON file per family: {"family", "keras_version", "tensorflow_version", "input_shape", "config" (the model's
to_json(), parsed), "weights": [{"layer", "index" (in the layer's weights), "name", "shape", "stream", "offset", "scale"}], "outputs"}.
With --h5, the same model is also saved as DIR/<family>.h5 (Keras 3 full-model HDF5) with DIR/<family>-<k>.png
and DIR/<family>.expected.json, for checking `systolic predict` from files as a user would.
"""
import argparse
import json
import math
import os
import sys

os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

SIZE = 96
FAMILIES = [
    "ResNet50", "ResNet50V2", "MobileNetV2", "MobileNetV3Small", "EfficientNetB0", "EfficientNetV2B0",
    "DenseNet121", "VGG16", "Xception", "InceptionV3", "NASNetMobile", "ConvNeXtTiny",
]

M64 = (1 << 64) - 1


def uniform01(stream, n):
    x = (np.uint64(stream) << np.uint64(40)) + np.arange(n, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) * (2.0 ** -53)


def splitmix64_scalar(x):  # the same formula in plain Python integers, to check the vectorised one
    z = (x + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def values(stream, shape, offset, scale):
    n = int(np.prod(shape)) if len(shape) else 1
    u = uniform01(stream, n)
    return (offset + scale * (2.0 * u - 1.0)).astype(np.float32).reshape(shape)


def rule(layer_class, name, shape):
    """(offset, scale) for a weight, or None to leave it as Keras made it."""
    if name in ("kernel", "pointwise_kernel"):
        fan_in = int(np.prod(shape[:-1]))
        return 0.0, math.sqrt(6.0 / fan_in)
    if name == "depthwise_kernel":
        return 0.0, math.sqrt(6.0 / (shape[0] * shape[1]))
    if name in ("bias", "beta"):
        return 0.0, 0.1
    if name == "gamma":
        return 1.0, 0.2
    if name == "moving_mean":
        return 0.0, 0.1
    if name == "moving_variance":
        return 1.0, 0.5
    if layer_class == "Normalization" and name == "mean":
        return 0.5, 0.1
    if layer_class == "Normalization" and name == "variance":
        return 0.1, 0.05
    if layer_class == "Normalization" and name == "count":
        return None
    if layer_class == "LayerScale":  # ConvNeXt's, whose one weight Keras names "variable"
        return 1.0, 0.2
    raise SystemExit(f"no rule for weight {name} {shape} of a {layer_class}")


def all_layers(model):
    for layer in model.layers:
        yield layer
        if isinstance(layer, keras.Model):
            yield from all_layers(layer)


def build(family):
    keras.utils.set_random_seed(1)
    fn = getattr(keras.applications, family)
    return fn(weights=None, input_shape=(SIZE, SIZE, 3), classes=10, classifier_activation=None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "fixtures", "applications"))
    ap.add_argument("--h5", help="also save each model as DIR/<family>.h5 with its input PNGs")
    ap.add_argument("--only", nargs="*", help="families to build (default: all)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.h5:
        os.makedirs(args.h5, exist_ok=True)

    for i in (0, 1, 12345, (7 << 40) + 3):
        assert int((np.uint64(splitmix64_scalar(i)) >> np.uint64(11))) == splitmix64_scalar(i) >> 11
        assert uniform01(i >> 40, (i & ((1 << 40) - 1)) + 1)[-1] == (splitmix64_scalar(i) >> 11) * 2.0 ** -53

    pixels = np.floor(256.0 * uniform01(0, 2 * SIZE * SIZE * 3)).reshape(2, SIZE, SIZE, 3).astype(np.float32)
    assert pixels.min() >= 0 and pixels.max() <= 255

    for family in args.only or FAMILIES:
        model = build(family)
        entries = []
        stream = 1
        seen = set()
        for layer in all_layers(model):
            if isinstance(layer, keras.Model):
                continue
            for index, w in enumerate(layer.weights):
                name = w.path.split("/")[-1]
                key = (layer.name, name)
                assert key not in seen, key
                seen.add(key)
                shape = tuple(int(d) for d in w.shape)
                r = rule(type(layer).__name__, name, shape)
                if r is None:
                    continue
                offset, scale = r
                w.assign(values(stream, shape, offset, scale))
                entries.append({"layer": layer.name, "index": index, "name": name, "shape": list(shape), "stream": stream,
                                "offset": offset, "scale": scale})
                stream += 1
        out = model.predict(pixels, verbose=0)
        assert np.all(np.isfinite(out)), family
        record = {
            "family": family,
            "keras_version": keras.__version__,
            "tensorflow_version": tf.__version__,
            "input_shape": [SIZE, SIZE, 3],
            "config": json.loads(model.to_json()),
            "weights": entries,
            "outputs": [[float(v) for v in row] for row in out],
        }
        path = os.path.join(args.out, family + ".json")
        with open(path + ".tmp", "w") as f:
            json.dump(record, f, separators=(",", ":"))
        os.replace(path + ".tmp", path)
        print(f"{family}: {model.count_params():,} params, {len(entries)} weights set, max |output| "
              f"{np.abs(out).max():.4g}, {os.path.getsize(path):,} bytes", flush=True)
        if args.h5:
            from PIL import Image
            model.save(os.path.join(args.h5, family + ".h5"))
            for k in range(2):
                Image.fromarray(pixels[k].astype(np.uint8)).save(os.path.join(args.h5, f"{family}-{k}.png"))
            with open(os.path.join(args.h5, family + ".expected.json"), "w") as f:
                json.dump(record["outputs"], f)
        keras.backend.clear_session()
    return 0


if __name__ == "__main__":
    sys.exit(main())
