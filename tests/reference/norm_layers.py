"""Keras 3 fixtures for the norm area's layers (tests/test_norm_layers.cc).

Builds small functional models of LayerNormalization, UnitNormalization, Normalization (over trailing axes and,
in axes_norms, over others), LayerScale (ConvNeXt's),
Multiply, Subtract, Average, Maximum, Minimum, Reshape, Permute, RepeatVector, Rescaling with per-channel lists, Dense on rank-4 inputs, Dropout
with a noise_shape and SpatialDropout2D (identities at inference), with fixed pseudo-random weights, and writes
for each model NAME into tests/fixtures/norm_layers/:
  NAME.h5               model.save() in Keras 3 (legacy HDF5: model_config and model_weights)
  NAME.keras3.json      model.to_json() (each layer's config as Keras 3 writes it)
  NAME.inputs.bin       the input batch, raw little-endian float32
  NAME.predictions.bin  model.predict(inputs), raw little-endian float32
  NAME.keras            model.save() as .keras (axes_norms only: its weights in Keras 3's own layout)
  manifest.json         input and output shapes per model, versions, and TensorFlow's tie gradients of
                        maximum / minimum (checked here: ties go to the first argument)
and adapt.data.bin with adapt.<axis>.{mean,variance}.bin: Normalization.adapt() on that array for kept axes -1,
(1, 3) and None (manifest "adapt": shapes, and the count Keras keeps, with its dtype).

Run: python tests/reference/norm_layers.py   (keras 3.15.1, tensorflow-cpu 2.21; any venv with both)
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


def axes_norms():
    # LayerNormalization, UnitNormalization and Normalization over axes that are not the trailing ones (Keras 3's
    # weight shapes: input_shape[d] for d in sorted(axis), negative axes first), a list of axes with a gap, and
    # UnitNormalization of tiny values (Keras's ops.normalize caps 1/|x| at 1/epsilon = 1e12).
    x = keras.Input((3, 4, 6))
    h = layers.LayerNormalization(axis=1)(x)
    h = layers.LayerNormalization(axis=[1, 3], epsilon=1e-5)(h)
    h = layers.LayerNormalization(axis=[-1, 1], center=False)(h)       # gamma (6, 3), read as (3, 6)
    h = layers.LayerNormalization(axis=[2, -3], rms_scaling=True)(h)   # gamma (3, 4)
    h = layers.UnitNormalization(axis=[1, 2])(h)
    h = layers.Normalization(axis=1)(h)                                 # statistics per axis 1: (3,)
    h = layers.Normalization(axis=(1, 3), mean=[0.5, -0.5, 0.0, 1.0, 2.0, -1.0],
                             variance=[1.0, 4.0, 0.25, 2.0, 0.5, 3.0])(h)  # (6,) broadcast to (3, 6)
    h = layers.Normalization(axis=(1, 3), mean=[[0.1], [0.2], [-0.3]],
                             variance=[[2.0], [0.5], [1.5]], invert=True)(h)  # (3, 1) broadcast to (3, 6)
    h = layers.Normalization(axis=(2,), invert=True)(h)                 # statistics (4,)
    t = layers.Rescaling(1e-9)(h)
    t = layers.UnitNormalization(axis=2)(t)                             # 1/|x| about 1e9: above the old 1e6 cap
    u = layers.Rescaling(1e-14)(h)
    u = layers.UnitNormalization(axis=[1, 2, 3])(u)                     # 1/|x| capped at 1e12
    out = layers.Concatenate()([h, t, u])
    return keras.Model(x, out, name="axes_norms")


def adapt_fixture():
    # Normalization.adapt on an array (Keras's np.mean / np.var over every axis but the kept ones) for kept axes
    # -1, (1, 3) and None: the data and the statistics Keras computed.
    data = rng.uniform(-3, 5, (7, 3, 4, 5)).astype("float32")
    data.tofile(os.path.join(OUT, "adapt.data.bin"))
    out = {"data": list(data.shape), "cases": []}
    for axis in (-1, (1, 3), None):
        layer = layers.Normalization(axis=axis)
        layer.adapt(data)
        mean, variance, count = [np.asarray(w) for w in layer.weights]
        name = "adapt." + ("none" if axis is None else str(axis).replace(" ", "").replace(",", "_").strip("()"))
        mean.astype("float32").tofile(os.path.join(OUT, name + ".mean.bin"))
        variance.astype("float32").tofile(os.path.join(OUT, name + ".variance.bin"))
        out["cases"].append({"axis": axis if not isinstance(axis, tuple) else list(axis), "file": name,
                             "shape": list(mean.shape), "count": int(count), "count_dtype": str(count.dtype)})
    return out


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
    # Added later (keras 3.15.1): drawn after the models above, so their fixtures stay as they were.
    for build in (axes_norms,):
        keras.utils.clear_session()
        model = build()
        fill_weights(model)
        x = rng.uniform(-2, 2, (2,) + tuple(model.input.shape[1:])).astype("float32")
        y = model.predict(x, verbose=0).astype("float32")
        model.save(os.path.join(OUT, model.name + ".h5"))
        model.save(os.path.join(OUT, model.name + ".keras"))
        with open(os.path.join(OUT, model.name + ".keras3.json"), "w") as f:
            f.write(model.to_json())
        x.tofile(os.path.join(OUT, model.name + ".inputs.bin"))
        y.tofile(os.path.join(OUT, model.name + ".predictions.bin"))
        manifest["models"][model.name] = {"input": list(x.shape), "output": list(y.shape)}
        print(f"{model.name}: input {x.shape} output {y.shape}, |y| max {np.abs(y).max():.4f}")
    manifest["adapt"] = adapt_fixture()
    manifest["ties"] = tie_gradients()
    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    print("wrote", os.path.normpath(OUT))


if __name__ == "__main__":
    sys.exit(main())
