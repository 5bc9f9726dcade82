"""Keras 3's regularizers, constraints and a regularized training step, for tests/test_regularizers.cc.

Run with the Keras 3 virtual environment:  /work/venv/bin/python tests/reference/regularizers.py
Writes tests/fixtures/regularizers/:
  regularizers.json  x (6, 4) and, per regularizer config, Keras's penalty and its gradient (float32);
                     w (3, 3, 2, 4) and d (5, 3) and, per constraint config, the constrained weight;
                     the fit step: a tiny Dense model with fixed weights (every regularizer and constraint kind),
                     its config, the batch, Keras's fit loss (one step, SGD), the weights after it, the loss
                     evaluate reports before and after, and two steps (batch_size 4 over 6 samples) for the
                     epoch's weighted mean.
  model.h5           the same model saved by Keras 3 (model.save), with a seeded initializer.
"""
import json
import os

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "regularizers")
os.makedirs(OUT, exist_ok=True)
rng = np.random.default_rng(7)
out = {"keras_version": keras.__version__}

# ---- regularizer values and gradients
x = rng.uniform(-1, 1, (6, 4)).astype(np.float32)
x[0, 0] = 0.0
out["x"] = x.tolist()
regs = [
    keras.regularizers.L1(0.01),
    keras.regularizers.L2(0.02),
    keras.regularizers.L1L2(l1=0.003, l2=0.04),
    keras.regularizers.OrthogonalRegularizer(factor=0.05, mode="rows"),
    keras.regularizers.OrthogonalRegularizer(factor=0.07, mode="columns"),
]
out["regularizers"] = []
for r in regs:
    v = tf.Variable(x)
    with tf.GradientTape() as tape:
        p = r(v)
    g = tape.gradient(p, v)
    out["regularizers"].append(
        {"config": keras.regularizers.serialize(r), "penalty": float(p), "grad": g.numpy().tolist()})

# ---- constraints
w4 = rng.uniform(-1, 1, (3, 3, 2, 4)).astype(np.float32)
d2 = rng.uniform(-1.5, 1.5, (5, 3)).astype(np.float32)
out["w4"] = w4.tolist()
out["d2"] = d2.tolist()
cons = [
    ("d2", keras.constraints.MaxNorm(max_value=1.2, axis=0)),
    ("d2", keras.constraints.MaxNorm(max_value=1.0, axis=1)),
    ("w4", keras.constraints.MaxNorm(max_value=2.0, axis=[0, 1, 2])),
    ("d2", keras.constraints.NonNeg()),
    ("d2", keras.constraints.UnitNorm(axis=0)),
    ("w4", keras.constraints.UnitNorm(axis=[0, 1, 2])),
    ("d2", keras.constraints.MinMaxNorm(min_value=1.5, max_value=2.0, rate=0.5, axis=0)),
    ("w4", keras.constraints.MinMaxNorm(min_value=0.5, max_value=1.0, rate=1.0, axis=[0, 1, 2])),
]
out["constraints"] = []
for which, c in cons:
    src = d2 if which == "d2" else w4
    out["constraints"].append(
        {"config": keras.constraints.serialize(c), "input": which, "output": np.asarray(c(src)).tolist()})


# ---- a regularized training step
def build():
    inp = keras.Input((4,), name="input")
    h = keras.layers.Dense(
        5, activation="tanh", name="hidden",
        kernel_initializer=keras.initializers.GlorotUniform(seed=42),
        kernel_regularizer=keras.regularizers.L2(0.01),
        bias_regularizer=keras.regularizers.L1(0.02),
        activity_regularizer=keras.regularizers.L1L2(l1=0.001, l2=0.002),
        kernel_constraint=keras.constraints.MaxNorm(0.8),
        bias_constraint=keras.constraints.NonNeg())(inp)
    h = keras.layers.ActivityRegularization(l1=0.003, l2=0.004, name="act_reg")(h)
    o = keras.layers.Dense(
        3, activation="softmax", name="out",
        kernel_regularizer=keras.regularizers.OrthogonalRegularizer(factor=0.05, mode="columns"),
        bias_regularizer=keras.regularizers.L1L2(l1=0.01, l2=0.03),
        kernel_constraint=keras.constraints.MinMaxNorm(min_value=0.2, max_value=0.9, rate=0.7, axis=0))(h)
    return keras.Model(inp, o, name="regularized")


model = build()
weights = [rng.uniform(-0.8, 0.8, w.shape).astype(np.float32) for w in model.get_weights()]
model.set_weights(weights)
xb = rng.uniform(-1, 1, (6, 4)).astype(np.float32)
yb = np.array([0, 2, 1, 1, 0, 2], dtype=np.int32)
fit = {"config": json.loads(model.to_json()), "weights": [w.tolist() for w in weights], "x": xb.tolist(),
       "y": yb.tolist(), "lr": 0.1}
model.compile(optimizer=keras.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy")
fit["evaluate_before"] = float(model.evaluate(xb, yb, batch_size=6, verbose=0))
h = model.fit(xb, yb, batch_size=6, epochs=1, shuffle=False, verbose=0)
fit["fit_loss"] = h.history["loss"][0]
fit["weights_after"] = [w.tolist() for w in model.get_weights()]
fit["evaluate_after"] = float(model.evaluate(xb, yb, batch_size=6, verbose=0))
model.save(os.path.join(OUT, "model.h5"))
# Two steps (4 + 2 samples): the epoch's loss is the batch-size-weighted mean of each step's (loss + penalties).
model2 = build()
model2.set_weights(weights)
model2.compile(optimizer=keras.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy")
h2 = model2.fit(xb, yb, batch_size=4, epochs=1, shuffle=False, verbose=0)
fit["fit_loss_batch4"] = h2.history["loss"][0]
fit["weights_after_batch4"] = [w.tolist() for w in model2.get_weights()]
out["fit"] = fit

with open(os.path.join(OUT, "regularizers.json"), "w") as f:
    json.dump(out, f, indent=1)
print("wrote", OUT)
