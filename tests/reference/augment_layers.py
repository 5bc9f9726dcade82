"""Reference values of Keras 3's augmentation and noise layers for tests/test_augment.cc.

Run with the Keras 3 interpreter (keras 3.15.1 on TensorFlow 2.21):

    /work/venv/bin/python tests/reference/augment_layers.py [--out DIR]

systolic's random draws cannot equal TensorFlow's, so the transforms are recorded for FIXED draws: for each layer
the script picks the values its get_random_transformation would draw (angles, shifts, zooms, flips, contrast
factors, crop corners), asks the layer itself for its transform matrix (the layer's own _get_*_matrix /
_compute_affine_matrix) and for its output (layer.transform_images(images, transformation, training=True)), and
records keras.ops.image.affine_transform on fixed projective transforms for every fill mode and interpolation.
It records tf.keras's smart_resize (systolic's RandomCrop at inference). It also writes a full model (model.save(".h5") and .keras) holding every layer, its predictions (the layers are the
identity at inference), and each layer's get_config().

Writes DIR/augment_layers.json (default tests/fixtures/augment_layers/) and DIR/augment_model.keras3.h5.
"""
import argparse
import json
import os

import numpy as np

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
import keras  # noqa: E402
from keras import layers  # noqa: E402

N, H, W, C = 3, 9, 7, 2


def images(seed=0, n=N, h=H, w=W, c=C):
    rng = np.random.RandomState(seed)
    return rng.randint(0, 256, size=(n, h, w, c)).astype("float32")


def flat(a):
    return np.asarray(a, dtype="float64").reshape(-1).tolist()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "fixtures", "augment_layers"))
    out_dir = ap.parse_args().out
    os.makedirs(out_dir, exist_ok=True)
    x = images()
    fx = {"keras_version": keras.__version__, "images": {"shape": [N, H, W, C], "values": flat(x)}}

    # keras.ops.image.affine_transform on fixed projective transforms.
    transforms = np.array(
        [
            [0.9, -0.3, 1.7, 0.25, 1.1, -2.3, 0.01, -0.02],
            [-1.0, 0.0, 6.0, 0.0, 1.0, 0.0, 0.0, 0.0],
            [1.3, 0.4, -4.2, -0.5, 0.8, 3.6, -0.015, 0.01],
        ],
        dtype="float32",
    )
    affine = []
    for fill in ["reflect", "wrap", "constant", "nearest"]:
        for interp in ["nearest", "bilinear"]:
            y = keras.ops.image.affine_transform(x, transforms, interpolation=interp, fill_mode=fill, fill_value=-3.0)
            affine.append({"fill_mode": fill, "interpolation": interp, "fill_value": -3.0, "output": flat(y)})
    fx["affine"] = {"transforms": flat(transforms), "cases": affine}

    cases = []
    shape = x.shape

    # RandomTranslation: pixels (width, height) per image.
    tr = np.array([[1.6, -2.2], [-3.0, 0.7], [0.0, 4.4]], dtype="float32")
    for fill in ["reflect", "wrap", "constant", "nearest"]:
        for interp in ["nearest", "bilinear"]:
            layer = layers.RandomTranslation(0.5, 0.5, fill_mode=fill, interpolation=interp, fill_value=-3.0)
            m = layer._get_translation_matrix(tr)
            y = layer.transform_images(x, {"translations": tr, "input_shape": shape}, training=True)
            cases.append({"layer": "RandomTranslation", "fill_mode": fill, "interpolation": interp,
                          "fill_value": -3.0, "dx": flat(tr[:, 0]), "dy": flat(tr[:, 1]),
                          "matrix": flat(m), "output": flat(y)})

    # RandomRotation: degrees per image (factor * 360 in the layer).
    angles = np.array([17.0, -63.5, 140.0], dtype="float32")
    for fill in ["reflect", "wrap", "constant", "nearest"]:
        for interp in ["nearest", "bilinear"]:
            layer = layers.RandomRotation(0.5, fill_mode=fill, interpolation=interp, fill_value=-3.0)
            z, o = np.zeros([N], "float32"), np.ones([N], "float32")
            m = layer._compute_affine_matrix(center_x=0.5, center_y=0.5, angle=angles, translate_x=z, translate_y=z,
                                             scale=o, shear_x=z, shear_y=z, height=H, width=W)
            y = layer.transform_images(x, {"rotation_matrix": m}, training=True)
            cases.append({"layer": "RandomRotation", "fill_mode": fill, "interpolation": interp,
                          "fill_value": -3.0, "angle": flat(angles), "matrix": flat(m), "output": flat(y)})

    # RandomZoom: zoom factors (1 + drawn factor) per image, width and height.
    hz = np.array([[0.7], [1.35], [1.0]], dtype="float32")
    wz = np.array([[1.2], [0.8], [0.55]], dtype="float32")
    for fill in ["reflect", "wrap", "constant", "nearest"]:
        for interp in ["nearest", "bilinear"]:
            layer = layers.RandomZoom(0.5, 0.5, fill_mode=fill, interpolation=interp, fill_value=-3.0)
            zooms = np.concatenate([wz, hz], axis=1)
            m = layer._get_zoom_matrix(zooms, H, W)
            y = layer.transform_images(x, {"height_zoom": hz, "width_zoom": wz, "input_shape": shape},
                                       training=True)
            cases.append({"layer": "RandomZoom", "fill_mode": fill, "interpolation": interp, "fill_value": -3.0,
                          "zx": flat(wz), "zy": flat(hz), "matrix": flat(m), "output": flat(y)})

    # RandomFlip: images 0 and 2 flipped.
    flips = np.array([True, False, True]).reshape(N, 1, 1, 1)
    for mode in ["horizontal", "vertical", "horizontal_and_vertical"]:
        layer = layers.RandomFlip(mode)
        y = layer.transform_images(x, {"flips": flips, "input_shape": shape}, training=True)
        cases.append({"layer": "RandomFlip", "mode": mode, "flip": [True, False, True], "output": flat(y)})
    fx["geometric"] = cases

    # RandomContrast: a factor per image; value_range clips.
    f = np.array([0.4, 1.0, 1.7], dtype="float32").reshape(N, 1, 1, 1)
    contrast = []
    for vr in [(0, 255), (30, 200)]:
        layer = layers.RandomContrast(0.5, value_range=vr)
        y = layer.transform_images(x, {"contrast_factor": f}, training=True)
        contrast.append({"value_range": list(vr), "factor": flat(f), "output": flat(y)})
    fx["contrast"] = contrast

    # RandomCrop: a window (training), and Keras's centred fallback when the input is not larger in both axes.
    crops = []
    layer = layers.RandomCrop(5, 4)
    y = layer.transform_images(x, (3, 2), training=True)
    crops.append({"height": 5, "width": 4, "input": [N, H, W, C], "h_start": 3, "w_start": 2, "output": flat(y)})
    for (h, w) in [(9, 5), (12, 10), (6, 7)]:
        layer = layers.RandomCrop(h, w)
        t = layer.get_random_transformation(x, training=True)
        y = layer.transform_images(x, t, training=True)
        crops.append({"height": h, "width": w, "input": [N, H, W, C], "h_start": int(t[0]), "w_start": int(t[1]),
                      "output": flat(y)})
    fx["crop"] = crops
    # RandomCrop at inference in systolic: tf.keras's smart_resize (downscaling cases: systolic samples the whole
    # image, so an upscaled window's edge would read one pixel beyond it where resize clamps).
    fx["smart_resize"] = [{"height": h, "width": w,
                           "output": flat(keras.preprocessing.image.smart_resize(x, (h, w)))}
                          for (h, w) in [(5, 4), (4, 6), (9, 3)]]

    # Every layer's get_config, and a model holding them all (identity at inference).
    keras.utils.set_random_seed(7)
    inp = keras.Input((H, W, C))
    seq = [
        layers.RandomFlip("horizontal", seed=11),
        layers.RandomTranslation((-0.2, 0.3), 0.1, fill_mode="constant", interpolation="nearest", seed=12,
                                 fill_value=1.5),
        layers.RandomRotation(0.1, fill_mode="wrap", seed=13),
        layers.RandomZoom((-0.3, 0.2), None, fill_mode="nearest"),
        layers.RandomContrast(0.25, value_range=(0, 1)),
        layers.RandomCrop(H, W, seed=14),
        layers.GaussianNoise(0.1, seed=15),
        layers.GaussianDropout(0.2),
    ]
    t = inp
    for l in seq:
        t = l(t)
    t = layers.Conv2D(3, 3, activation="relu")(t)
    t = layers.GlobalAveragePooling2D()(t)
    t = layers.Dense(4)(t)
    model = keras.Model(inp, t)
    fx["configs"] = [{"class_name": l.__class__.__name__, "config": json.loads(json.dumps(l.get_config()))}
                     for l in seq]
    x_in = images(seed=1)
    fx["model"] = {"file": "augment_model.keras3.h5", "inputs": flat(x_in),
                   "predictions": flat(model.predict(x_in, verbose=0))}
    model.save(os.path.join(out_dir, "augment_model.keras3.h5"))
    with open(os.path.join(out_dir, "augment_layers.json"), "w") as fh:
        json.dump(fx, fh)


if __name__ == "__main__":
    main()
