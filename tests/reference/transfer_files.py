#!/usr/bin/env python3
"""Keras files with frozen layers and nested models, written by real Keras, for systolic's transfer-learning tests.

    /work/venv/bin/python tests/reference/transfer_files.py      # writes tests/fixtures/transfer/

Models (8x8x3 inputs, deterministic weights, 3 classes):
  * frozen: Input, Conv2D(trainable=False), BatchNormalization(trainable=False), ReLU, Conv2D, MaxPooling2D,
            GlobalAveragePooling2D, Dense. Compiled with Adam and trained 3 steps, so the optimizer has state for
            the trainable weights only (Keras gives frozen weights no slots).
  * nested: base = Functional(Input, Conv2D, BatchNormalization, Activation relu, stem = Sequential(Conv2D 1x1,
            BatchNormalization)), frozen (base.trainable = False); outer = Input -> base(x, training=False) ->
            GlobalAveragePooling2D -> Dense(3). Trained 3 steps.
Files per model: <m>.keras3.json (to_json), <m>.keras3.h5 (model.save, legacy HDF5), <m>.keras3.weights.h5
(save_weights), <m>.tfkeras.json / <m>.tfkeras.h5 (the same model in tf.keras 2.x, model.save),
<m>.predictions.bin (Keras 3's predictions for inputs.bin, float32 little endian), and manifest.json (shapes,
trainable / non-trainable parameter counts, optimizer iterations, the number of optimizer variables).
"""
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "fixtures", "transfer")
N = 4


def frozen(K):
    L = K.layers
    i = K.Input((8, 8, 3))
    x = L.Conv2D(4, 3, padding="same", trainable=False)(i)
    x = L.BatchNormalization(trainable=False)(x)
    x = L.ReLU()(x)
    x = L.Conv2D(5, 3, activation="relu")(x)
    x = L.MaxPooling2D()(x)
    x = L.GlobalAveragePooling2D()(x)
    o = L.Dense(3, activation="softmax")(x)
    return K.Model(i, o)


def nested(K):
    L = K.layers
    bi = K.Input((8, 8, 3))
    x = L.Conv2D(4, 3, padding="same")(bi)
    x = L.BatchNormalization()(x)
    x = L.Activation("relu")(x)
    stem = K.Sequential([K.Input((8, 8, 4)), L.Conv2D(4, 1), L.BatchNormalization()], name="stem")
    x = stem(x)
    base = K.Model(bi, x, name="base")
    base.trainable = False
    i = K.Input((8, 8, 3))
    y = base(i, training=False)
    y = L.GlobalAveragePooling2D()(y)
    o = L.Dense(3, activation="softmax")(y)
    return K.Model(i, o)


def fill(model):
    # Deterministic weights (moving variances kept positive).
    for li, layer in enumerate(model.layers):
        sub = getattr(layer, "layers", None)
        if sub:
            fill(layer)
            continue
        ws = layer.get_weights()
        new = []
        for wi, w in enumerate(ws):
            v = np.sin(np.arange(w.size, dtype=np.float64) * 0.37 + li * 1.3 + wi * 0.7).reshape(w.shape) * 0.5
            if "moving_variance" in layer.weights[wi].name:
                v = np.abs(v) + 0.5
            new.append(v.astype(np.float32))
        layer.set_weights(new)


def count(ws):
    return int(sum(int(np.prod(w.shape)) for w in ws))


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(7)
    x = rng.random((N, 8, 8, 3), dtype=np.float32)
    y = np.array([0, 1, 2, 1])
    x.astype("<f4").tofile(os.path.join(OUT, "inputs.bin"))
    manifest = {"inputs": [N, 8, 8, 3], "labels": y.tolist()}
    import keras
    import tf_keras

    for name, make in (("frozen", frozen), ("nested", nested)):
        entry = {}
        for tag, K in (("keras3", keras), ("tfkeras", tf_keras)):
            K.utils.set_random_seed(1)
            m = make(K)
            fill(m)
            m.compile(K.optimizers.Adam(1e-2), "sparse_categorical_crossentropy", metrics=["accuracy"])
            before = m.predict(x, verbose=0)
            for _ in range(3):
                m.train_on_batch(x, y)
            p = m.predict(x, verbose=0)
            with open(os.path.join(OUT, f"{name}.{tag}.json"), "w") as f:
                f.write(json.dumps(json.loads(m.to_json()), indent=1))
            m.save(os.path.join(OUT, f"{name}.{tag}.h5"))
            if tag == "keras3":
                m.save_weights(os.path.join(OUT, f"{name}.keras3.weights.h5"))
                p.astype("<f4").tofile(os.path.join(OUT, f"{name}.predictions.bin"))
                entry.update(
                    trainable_params=count(m.trainable_weights),
                    non_trainable_params=count(m.non_trainable_weights),
                    optimizer_variables=len(m.optimizer.variables),
                    iterations=int(m.optimizer.iterations.numpy()),
                    outputs=list(p.shape),
                    weight_paths=[w.path for w in m.weights],
                    predictions_before_training=float(np.abs(before - p).max()),
                )
            else:
                entry["tfkeras_max_abs_diff_to_keras3"] = float(np.abs(p - np.fromfile(
                    os.path.join(OUT, f"{name}.predictions.bin"), "<f4").reshape(p.shape)).max())
        manifest[name] = entry
        print(name, entry)
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)


if __name__ == "__main__":
    main()
