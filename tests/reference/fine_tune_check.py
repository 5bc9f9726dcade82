#!/usr/bin/env python3
"""Checks a classifier saved by systolic as a full-model .h5 against real Keras 3.

    /work/venv/bin/python tests/reference/fine_tune_check.py MODEL.h5 IMAGE.png... \
        [--systolic PATH/systolic_cli] [--rescale F] [--tolerance T]

Loads MODEL.h5 with keras.models.load_model (Keras 3, legacy HDF5), decodes each image as systolic does (RGB,
resized bilinearly to the model's input size when it differs, float pixels * rescale), predicts, runs
`systolic predict --model MODEL.h5 --json [--rescale F] IMAGE...` and compares the output vectors (the model's
raw outputs: logits or probabilities) and the arg-max classes. Prints one line per image and a
summary; exits 1 when the largest difference exceeds the tolerance (default 1e-4) or a class differs.
Writes nothing.
"""
import argparse
import json
import os
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("images", nargs="+")
    ap.add_argument("--systolic", default="systolic")
    ap.add_argument("--rescale", type=float, default=1.0)
    ap.add_argument("--tolerance", type=float, default=1e-4)
    a = ap.parse_args()

    import keras
    import tensorflow as tf
    from PIL import Image

    model = keras.models.load_model(a.model, compile=False)
    h, w, c = model.input_shape[1:]
    batch = []
    for path in a.images:
        img = np.asarray(Image.open(path).convert("RGB" if c == 3 else "L"), dtype=np.float32)
        if img.ndim == 2:
            img = img[..., None]
        if img.shape[:2] != (h, w):
            img = tf.image.resize(img, (h, w), method="bilinear", antialias=False).numpy()
            img = np.clip(np.round(img), 0, 255)
        batch.append(img * a.rescale)
    want = model.predict(np.stack(batch), verbose=0)

    cmd = [a.systolic, "predict", "--model", a.model, "--json", "--rescale", repr(a.rescale)] + a.images
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    got = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    if len(got) != len(a.images):
        sys.exit(f"systolic predict printed {len(got)} lines for {len(a.images)} images")

    worst, mismatched = 0.0, 0
    for path, k, g in zip(a.images, want, got):
        s = np.asarray(g["probabilities"], dtype=np.float64)
        d = float(np.max(np.abs(s - k)))
        worst = max(worst, d)
        same = int(np.argmax(k)) == g["class_index"]
        mismatched += not same
        print(f"{os.path.basename(path)}: keras class {int(np.argmax(k))}, systolic class {g['class_index']}, "
              f"max |diff| {d:.3g}")
    ok = worst <= a.tolerance and mismatched == 0
    print(f"keras {keras.__version__}: {len(a.images)} images, max |keras - systolic| = {worst:.3g} "
          f"(tolerance {a.tolerance:g}), class mismatches {mismatched}: {'OK' if ok else 'FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
