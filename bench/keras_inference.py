#!/usr/bin/env python3
"""Keras 3 (TensorFlow) inference speed of a keras.applications model at 224x224x3 (weights=None), or --save it.

    python bench/keras_inference.py --model ResNet50 --batch 32 --repeats 5      # one JSON line
    python bench/keras_inference.py --model ResNet50 --save /tmp/ResNet50.h5

Times `model(x, training=False)` (the call Keras's predict makes per batch, without the data-adapter overhead)
after one warm-up call; reports the median.
"""
import argparse
import json
import os
import time

os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--model", required=True)
ap.add_argument("--batch", type=int, default=1)
ap.add_argument("--repeats", type=int, default=10)
ap.add_argument("--save")
a = ap.parse_args()
model = getattr(keras.applications, a.model)(weights=None, input_shape=(224, 224, 3))
if a.save:
    model.save(a.save)
    raise SystemExit(0)
x = tf.constant(np.random.default_rng(1).uniform(0, 255, (a.batch, 224, 224, 3)).astype(np.float32))
fn = tf.function(lambda t: model(t, training=False), jit_compile=False)
fn(x).numpy()
ms = []
for _ in range(a.repeats):
    t0 = time.perf_counter()
    fn(x).numpy()
    ms.append((time.perf_counter() - t0) * 1000)
ms.sort()
med = float(np.median(ms))
print(json.dumps({"framework": f"keras {keras.__version__} / tensorflow {tf.__version__}", "model": a.model,
                  "batch": a.batch, "repeats": a.repeats, "ms_median": round(med, 2), "ms_min": round(ms[0], 2),
                  "images_per_sec": round(a.batch * 1000 / med, 1)}))
