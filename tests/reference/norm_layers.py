"""Keras 3 fixtures for the norm area's layers (tests/test_norm_layers.cc).

Builds small functional models of LayerNormalization, UnitNormalization, Normalization, LayerScale (ConvNeXt's),
Multiply, Subtract, Average, Maximum, Minimum, Reshape, Permute, RepeatVector, Rescaling with per-channel lists, Dense on rank-4 inputs, Dropout
with a noise_shape and SpatialDropout2D (identities at inference), with fixed pseudo-random weights, and writes
for each model NAME into tests/fixtures/norm_layers/:
  NAME.h5               model.save() in Keras 3 (legacy HDF5: model_config and model_weights)
  NAME.keras3.json      model.to_json() (each layer's config as Keras 3 writes it)
  NAME.inputs.bin       the input batch, raw little-endian float32
  NAME.predictions.bin  model.predict(inputs), raw little-endian float32
  manifest.json         input and output shapes per model, versions, and TensorFlow's tie gradients of
                        maximum / minimum (checked here: ties go to the first argument)

Run: /work/venv/bin/python tests/reference/norm_layers.py   (keras 3.15.1, tensorflow-cpu 2.21)
"""
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import keras  # noqa: E402
from keras import layers  # noqa: E402
from keras.src.applications.convnext import LayerScale  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "norm_layers")
rng = np.random.default_rng(1234)


def fill_weights(model):
    for layer in model.layers:
        values = []
        for w in layer.weights:
            shape = tuple(w.shape)
            if w.path.endswith("variance"):
                values.append(rng.uniform(0.2, 3.0, shape).astype("float32"))
            elif w.path.endswith("count"):
                values.append(np.array(10, dtype=w.dtype))
            elif w.path.endswith("gamma"):
                values.append(rng.uniform(0.5, 1.5, shape).astype("float32"))
            else:
                values.append(rng.uniform(-1, 1, shape).astype("float32"))
        if values:
            layer.set_weights(values)
            # Normalization computes with constants made from its weights by finalize_state (which Keras's
            # loaders call after loading, set_weights does not).
            if isinstance(layer, layers.Normalization):
                layer.finalize_state()


def layer_norms():
    x = keras.Input((3, 4, 6))
    h = layers.LayerNormalization(epsilon=1e-6)(x)
    h = layers.LayerNormalization(axis=[2, 3], center=False)(h)
    h = layers.Dense(5)(h)  # rank 4: applied to the last axis
    h = layers.LayerNormalization(axis=[-3, -2, -1], scale=False)(h)
    h = layers.UnitNormalization()(h)
    h = layers.Dense(4, activation="tanh")(h)
    h = layers.UnitNormalization(axis=[2, 3])(h)
    return keras.Model(x, h, name="layer_norms")


def normalizations():
    x = keras.Input((3, 4, 6))
    h = layers.Normalization(mean=[0.1, -0.2, 0.3, 0.0, 1.0, -1.0], variance=[1.0, 4.0, 0.25, 0.0, 2.0, 9.0])(x)
    h = layers.Normalization()(h)  # statistics as weights (mean, variance, count)
    h = layers.Normalization(axis=[2, 3])(h)
    h = layers.Normalization(axis=None, mean=0.5, variance=2.0, invert=True)(h)
    h = layers.Normalization(mean=[1.0] * 6, variance=[0.5] * 6, invert=True)(h)
    h = layers.Rescaling([0.5, 2.0, 1.0, -1.0, 0.25, 3.0], offset=0.1)(h)  # EfficientNet's per-channel scale
    return keras.Model(x, h, name="normalizations")


def merges():
    x = keras.Input((3, 4, 6))
    se = layers.GlobalAveragePooling2D()(x)               # (6,)
    r = layers.Reshape((1, 1, -1))(se)                    # (1, 1, 6)
    m = layers.Multiply()([x, r])                         # squeeze-excite broadcasting
    s = layers.Subtract()([m, x])
    a = layers.Average()([x, m, s])
    mx = layers.Maximum()([a, r, x])
    mn = layers.Minimum()([mx, se])                       # rank 1 against rank 3: axes inserted after the batch
    h = LayerScale(0.5, 6)(mn)
    h = layers.Dropout(0.5, noise_shape=(None, 1, 1, 1))(h)
    h = layers.SpatialDropout2D(0.3)(h)
    h = layers.Permute((3, 1, 2))(h)                      # (6, 3, 4)
    h = layers.Reshape((-1, 4))(h)                        # (18, 4)
    h = layers.Dense(3)(h)
    h = layers.Flatten()(h)
    rep = layers.RepeatVector(3)(se)                      # (3, 6)
    rep = layers.Flatten()(rep)
    out = layers.Concatenate()([h, rep])
    return keras.Model(x, out, name="merges")


def tie_gradients():
    a = tf.constant([1.0, 2.0, 3.0])
    b = tf.constant([1.0, 1.0, 4.0])
    result = {}
    for name, f in (("maximum", tf.maximum), ("minimum", tf.minimum)):
        with tf.GradientTape(persistent=True) as tape:
            tape.watch([a, b])
            y = f(a, b)
        da, db = tape.gradient(y, [a, b])
        result[name] = {"a": a.numpy().tolist(), "b": b.numpy().tolist(), "da": da.numpy().tolist(),
                        "db": db.numpy().tolist()}
    # Ties (index 0) go to the first argument.
    assert result["maximum"]["da"][0] == 1.0 and result["maximum"]["db"][0] == 0.0, result
    assert result["minimum"]["da"][0] == 1.0 and result["minimum"]["db"][0] == 0.0, result
    return result


def main():
    os.makedirs(OUT, exist_ok=True)
    manifest = {"keras_version": keras.__version__, "tensorflow_version": tf.__version__, "models": {}}
    for build in (layer_norms, normalizations, merges):
        keras.utils.clear_session()
        model = build()
        fill_weights(model)
        x = rng.uniform(-2, 2, (2,) + tuple(model.input.shape[1:])).astype("float32")
        y = model.predict(x, verbose=0).astype("float32")
        model.save(os.path.join(OUT, model.name + ".h5"))
        with open(os.path.join(OUT, model.name + ".keras3.json"), "w") as f:
            f.write(model.to_json())
        x.tofile(os.path.join(OUT, model.name + ".inputs.bin"))
        y.tofile(os.path.join(OUT, model.name + ".predictions.bin"))
        manifest["models"][model.name] = {"input": list(x.shape), "output": list(y.shape)}
        print(f"{model.name}: input {x.shape} output {y.shape}, |y| max {np.abs(y).max():.4f}")
    manifest["ties"] = tie_gradients()
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    print("wrote", os.path.normpath(OUT))


if __name__ == "__main__":
    sys.exit(main())
