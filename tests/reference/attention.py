#!/usr/bin/env python3
"""Writes tests/fixtures/attention/: Keras 3 models of MultiHeadAttention for tests/test_attention.cc.

    keras_io_series.keras  keras-io's "Timeseries classification with a Transformer" model as the example builds it
                           (4 encoder blocks: MultiHeadAttention with head_size 256, 4 heads and dropout 0.25,
                           Dropout, LayerNormalization(epsilon=1e-6), the residual add, Conv1D(4, 1, relu), Dropout,
                           Conv1D(1, 1), LayerNormalization, the residual add; GlobalAveragePooling1D channels_first,
                           Dense(128, relu), Dropout(0.4), Dense(2, softmax); Adam(1e-4), sparse categorical
                           crossentropy and accuracy), trained by Keras for 10 epochs (batch 32) on the real
                           ItalyPowerDemand series of tests/fixtures/series/italy_power.npz, saved with its optimizer
                           state.
    call_forms.keras       MultiHeadAttention called as Keras lets a user call it: cross-attention with a key of
                           its own and an attention_mask input, a sliding window with a causal mask, and inputs of
                           rank 4 (attention over both middle axes), untrained (seeded).
    call_forms.npz         its inputs (query, value, key, attention_mask, image).
    grouped.keras          GroupedQueryAttention (keras.layers.GroupQueryAttention) as a user calls it: cross-
                           attention (the value's features as many as the query's, as Keras requires) of 4 query heads over 2 key/value heads with a key of its own and an
                           attention_mask input, multi-query attention (1 key/value head) with a sliding window, a
                           causal mask and no bias, untrained (seeded).
    grouped.npz            its inputs (query, value, key, attention_mask).
    luong.keras            Attention (Luong's dot-product attention) as a user calls it: with a key of its own;
                           use_scale (its scale set to 0.7) and a causal mask; over Embedding(mask_zero=True)
                           outputs whose padding masks hide keys and zero the output's padded query rows; untrained.
    luong.npz              its inputs (query, value, key, ids).
    scores.keras           return_attention_scores=True, the scores as the model's outputs beside the results:
                           MultiHeadAttention over Embedding(mask_zero=True) outputs (padded keys, a padded query
                           row) with an attention_mask input that leaves one query row no key, GroupedQueryAttention
                           with a causal mask, MultiHeadAttention over inputs of rank 4, Attention (use_scale,
                           over the masked embeddings), and MultiHeadAttention over the last middle axis of inputs
                           of rank 4 (attention_axes=(2,)); untrained (seeded).
    scores.npz             its inputs (ids, attention_mask, query, image).
    einsum.keras           EinsumDense in the equations Keras's attention layers use and the others Keras lets a user
                           write: "abc,cde->abde" (bias over the new axes, relu), "abcd,cde->abe", "...b,bc->...c",
                           "ab...,bc->ac..." (a bias with a 1 for the "..." axis), "abc,dc->adb" (the kernel and
                           the output moved, a bias over a new and a kept axis) and "abc,bd->acd" (the input moved);
                           untrained (seeded), biases drawn.
    einsum.npz             its input (x).
    gate.keras             use_gate: MultiHeadAttention (with a key of its own) and GroupedQueryAttention (causal),
                           untrained (seeded), biases drawn.
    gate.npz               its inputs (query, value, key).
    additive.keras         AdditiveAttention (Bahdanau's; use_scale, its glorot-drawn scale, with a key of its own;
                           without scale, causal) and Attention(score_mode="concat") (with a key of its own; with
                           use_scale and causal over Embedding(mask_zero=True) outputs whose padding masks hide keys
                           and zero padded query rows), AdditiveAttention's scores over the masked embeddings as a
                           second output; the scalar weights set away from 1; untrained (seeded).
    additive.npz           its inputs (query, value, key, ids).
    axes.keras             MultiHeadAttention over attention_axes that are not the last middle axes: (1,) over an
                           image (each column attends along the rows, the scores an output), (1, 3) over inputs of
                           rank 5 with a value of other attended sizes, and (-3,) (negative), untrained (seeded).
    axes.npz               its inputs (image, volume, other).

expected.json: Keras's predict of the first 32 test series and evaluate(batch_size=32) over the whole test split of
the first; predict of the others on their inputs.

    python3 tests/reference/attention.py [--out DIR] [--only grouped|luong|scores|einsum|gate|additive|axes]
    python3 tests/reference/attention.py --check MODEL.keras   # Keras evaluates a model systolic trained on

Needs keras (3.x) and tensorflow-cpu from pip.
"""
import argparse
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np
import keras

from keras_training import encoder  # keras-io's transformer_encoder, as written there

HERE = os.path.dirname(os.path.abspath(__file__))
SERIES = os.path.join(HERE, "..", "fixtures", "series", "italy_power.npz")


def keras_io_model(input_shape, n_classes):
    """keras-io's build_model with the example's settings."""
    inputs = keras.Input(shape=input_shape)
    x = inputs
    for _ in range(4):
        x = encoder(x, head_size=256, num_heads=4, ff_dim=4, dropout=0.25)
    x = keras.layers.GlobalAveragePooling1D(data_format="channels_first")(x)
    for dim in [128]:
        x = keras.layers.Dense(dim, activation="relu")(x)
        x = keras.layers.Dropout(0.4)(x)
    outputs = keras.layers.Dense(n_classes, activation="softmax")(x)
    model = keras.Model(inputs, outputs)
    model.compile(loss="sparse_categorical_crossentropy", optimizer=keras.optimizers.Adam(learning_rate=1e-4),
                  metrics=["sparse_categorical_accuracy"])
    return model


def call_forms():
    keras.utils.set_random_seed(31)
    q = keras.Input((5, 4), name="query")
    v = keras.Input((6, 3), name="value")
    k = keras.Input((6, 2), name="key")
    m = keras.Input((5, 6), name="attention_mask")
    img = keras.Input((3, 4, 2), name="image")
    a = keras.layers.MultiHeadAttention(num_heads=2, key_dim=3, value_dim=2)(q, v, k, attention_mask=m)
    b = keras.layers.MultiHeadAttention(num_heads=2, key_dim=2, sliding_window=2)(a, a, use_causal_mask=True)
    c = keras.layers.MultiHeadAttention(num_heads=2, key_dim=3, output_shape=(2, 2))(img, img)
    out_a = keras.layers.Flatten()(b)
    out_c = keras.layers.Flatten()(c)
    model = keras.Model([q, v, k, m, img], keras.layers.Concatenate()([out_a, out_c]))
    rng = np.random.default_rng(32)
    inputs = {
        "query": rng.normal(size=(4, 5, 4)).astype(np.float32),
        "value": rng.normal(size=(4, 6, 3)).astype(np.float32),
        "key": rng.normal(size=(4, 6, 2)).astype(np.float32),
        "attention_mask": (rng.random(size=(4, 5, 6)) > 0.3).astype(np.float32),
        "image": rng.normal(size=(4, 3, 4, 2)).astype(np.float32),
    }
    inputs["attention_mask"][0, 2, :] = 0  # a query row that sees no key
    return model, inputs


def grouped():
    keras.utils.set_random_seed(33)
    q = keras.Input((5, 4), name="query")
    v = keras.Input((6, 4), name="value")
    k = keras.Input((6, 2), name="key")
    m = keras.Input((5, 6), name="attention_mask")
    a = keras.layers.GroupQueryAttention(head_dim=3, num_query_heads=4, num_key_value_heads=2)(
        q, v, k, attention_mask=m)
    b = keras.layers.GroupQueryAttention(head_dim=2, num_query_heads=3, num_key_value_heads=1, sliding_window=2,
                                         use_bias=False)(a, a, use_causal_mask=True)
    model = keras.Model([q, v, k, m], keras.layers.Flatten()(b))
    rng = np.random.default_rng(34)
    inputs = {
        "query": rng.normal(size=(4, 5, 4)).astype(np.float32),
        "value": rng.normal(size=(4, 6, 4)).astype(np.float32),
        "key": rng.normal(size=(4, 6, 2)).astype(np.float32),
        "attention_mask": (rng.random(size=(4, 5, 6)) > 0.3).astype(np.float32),
    }
    inputs["attention_mask"][1, 3, :] = 0  # a query row that sees no key
    return model, inputs


def luong():
    keras.utils.set_random_seed(35)
    q = keras.Input((5, 4), name="query")
    v = keras.Input((6, 3), name="value")
    k = keras.Input((6, 4), name="key")
    ids = keras.Input((6,), name="ids")
    a = keras.layers.Attention()([q, v, k])
    scaled = keras.layers.Attention(use_scale=True)
    b = scaled([q, k], use_causal_mask=True)
    e = keras.layers.Embedding(10, 4, mask_zero=True)(ids)
    c = keras.layers.Attention()([e, e])
    out = keras.layers.Concatenate()([keras.layers.Flatten()(a), keras.layers.Flatten()(b),
                                      keras.layers.Flatten()(c)])
    model = keras.Model([q, v, k, ids], out)
    scaled.scale.assign(0.7)
    rng = np.random.default_rng(36)
    inputs = {
        "query": rng.normal(size=(3, 5, 4)).astype(np.float32),
        "value": rng.normal(size=(3, 6, 3)).astype(np.float32),
        "key": rng.normal(size=(3, 6, 4)).astype(np.float32),
        "ids": np.array([[3, 1, 4, 1, 5, 9], [2, 6, 5, 0, 0, 0], [7, 0, 0, 0, 0, 0]], dtype=np.float32),
    }
    return model, inputs


def scores():
    keras.utils.set_random_seed(37)
    ids = keras.Input((6,), name="ids")
    m = keras.Input((6, 6), name="attention_mask")
    q = keras.Input((5, 4), name="query")
    img = keras.Input((3, 2, 4), name="image")
    e = keras.layers.Embedding(10, 4, mask_zero=True)(ids)
    a, a_scores = keras.layers.MultiHeadAttention(num_heads=2, key_dim=3)(
        e, e, attention_mask=m, return_attention_scores=True)
    g, g_scores = keras.layers.GroupQueryAttention(head_dim=2, num_query_heads=4, num_key_value_heads=2)(
        q, q, use_causal_mask=True, return_attention_scores=True)
    i, i_scores = keras.layers.MultiHeadAttention(num_heads=2, key_dim=2)(img, img, return_attention_scores=True)
    scaled = keras.layers.Attention(use_scale=True)
    d, d_scores = scaled([e, e], return_attention_scores=True)
    r, r_scores = keras.layers.MultiHeadAttention(num_heads=2, key_dim=3, attention_axes=(2,))(
        img, img, return_attention_scores=True)
    outputs = [a, a_scores, g, g_scores, i, i_scores, d, d_scores, r, r_scores]
    model = keras.Model([ids, m, q, img], outputs)
    scaled.scale.assign(0.8)
    rng = np.random.default_rng(38)
    inputs = {
        "ids": np.array([[3, 1, 4, 1, 5, 9], [2, 6, 5, 0, 0, 0], [7, 8, 0, 0, 0, 0]], dtype=np.float32),
        "attention_mask": (rng.random(size=(3, 6, 6)) > 0.3).astype(np.float32),
        "query": rng.normal(size=(3, 5, 4)).astype(np.float32),
        "image": rng.normal(size=(3, 3, 2, 4)).astype(np.float32),
    }
    inputs["attention_mask"][0, 2, :] = 0  # a query row that sees no key
    return model, inputs


def einsum():
    keras.utils.set_random_seed(39)
    x = keras.Input((5, 4), name="x")
    E = keras.layers.EinsumDense
    a = E("abc,cde->abde", output_shape=(None, 2, 3), bias_axes="de", activation="relu")(x)
    b = E("abcd,cde->abe", output_shape=(None, 4), bias_axes="e")(a)
    c = E("...b,bc->...c", output_shape=6)(x)
    d = E("ab...,bc->ac...", output_shape=3, bias_axes="c")(x)
    e = E("abc,dc->adb", output_shape=(2, 5), bias_axes="db")(x)
    f = E("abc,bd->acd", output_shape=(4, 2))(x)
    flat = [keras.layers.Flatten()(t) for t in (b, c, d, e, f)]
    model = keras.Model(x, keras.layers.Concatenate()(flat))
    rng = np.random.default_rng(40)
    for layer in model.layers:  # biases drawn, so that a misplaced one shows
        if isinstance(layer, keras.layers.EinsumDense) and layer.bias is not None:
            layer.bias.assign(rng.normal(size=layer.bias.shape).astype(np.float32))
    inputs = {"x": rng.normal(size=(3, 5, 4)).astype(np.float32)}
    return model, inputs


def gate():
    keras.utils.set_random_seed(41)
    q = keras.Input((5, 4), name="query")
    v = keras.Input((6, 3), name="value")
    k = keras.Input((6, 2), name="key")
    a = keras.layers.MultiHeadAttention(num_heads=2, key_dim=3, value_dim=2, use_gate=True)(q, v, k)
    b = keras.layers.GroupQueryAttention(head_dim=2, num_query_heads=4, num_key_value_heads=2, use_gate=True)(
        a, a, use_causal_mask=True)
    model = keras.Model([q, v, k], keras.layers.Flatten()(b))
    rng = np.random.default_rng(42)
    for w in model.weights:  # biases drawn, so that a misplaced one shows
        if w.path.endswith("bias"):
            w.assign(rng.normal(size=w.shape).astype(np.float32))
    inputs = {
        "query": rng.normal(size=(3, 5, 4)).astype(np.float32),
        "value": rng.normal(size=(3, 6, 3)).astype(np.float32),
        "key": rng.normal(size=(3, 6, 2)).astype(np.float32),
    }
    return model, inputs


def additive():
    keras.utils.set_random_seed(43)
    q = keras.Input((5, 4), name="query")
    v = keras.Input((6, 3), name="value")
    k = keras.Input((6, 4), name="key")
    ids = keras.Input((6,), name="ids")
    a = keras.layers.AdditiveAttention()([q, v, k])
    b = keras.layers.AdditiveAttention(use_scale=False)([q, k], use_causal_mask=True)
    e = keras.layers.Embedding(10, 4, mask_zero=True)(ids)
    c, c_scores = keras.layers.AdditiveAttention()([e, e], return_attention_scores=True)
    concat = keras.layers.Attention(score_mode="concat")
    d = concat([q, v, k])
    scaled = keras.layers.Attention(score_mode="concat", use_scale=True)
    f = scaled([e, e], use_causal_mask=True)
    flat = [keras.layers.Flatten()(t) for t in (a, b, c, d, f)]
    model = keras.Model([q, v, k, ids], [keras.layers.Concatenate()(flat), c_scores])
    concat.concat_score_weight.assign(0.8)
    scaled.scale.assign(0.6)
    scaled.concat_score_weight.assign(1.3)
    rng = np.random.default_rng(44)
    inputs = {
        "query": rng.normal(size=(3, 5, 4)).astype(np.float32),
        "value": rng.normal(size=(3, 6, 3)).astype(np.float32),
        "key": rng.normal(size=(3, 6, 4)).astype(np.float32),
        "ids": np.array([[3, 1, 4, 1, 5, 9], [2, 6, 5, 0, 0, 0], [7, 0, 0, 0, 0, 0]], dtype=np.float32),
    }
    return model, inputs


def axes():
    keras.utils.set_random_seed(45)
    img = keras.Input((4, 3, 2), name="image")
    vol = keras.Input((3, 2, 4, 2), name="volume")
    other = keras.Input((5, 2, 3, 3), name="other")
    a, a_scores = keras.layers.MultiHeadAttention(num_heads=2, key_dim=3, attention_axes=(1,))(
        img, img, return_attention_scores=True)
    b = keras.layers.MultiHeadAttention(num_heads=2, key_dim=2, attention_axes=(1, 3))(vol, other)
    c = keras.layers.MultiHeadAttention(num_heads=1, key_dim=2, value_dim=3, attention_axes=(-3,))(vol, vol)
    flat = [keras.layers.Flatten()(t) for t in (a, b, c)]
    model = keras.Model([img, vol, other], [keras.layers.Concatenate()(flat), a_scores])
    rng = np.random.default_rng(46)
    for w in model.weights:  # biases drawn, so that a misplaced one shows
        if w.path.endswith("bias"):
            w.assign(rng.normal(size=w.shape).astype(np.float32))
    inputs = {
        "image": rng.normal(size=(3, 4, 3, 2)).astype(np.float32),
        "volume": rng.normal(size=(3, 3, 2, 4, 2)).astype(np.float32),
        "other": rng.normal(size=(3, 5, 2, 3, 3)).astype(np.float32),
    }
    return model, inputs


def check(path):
    data = np.load(SERIES)
    model = keras.models.load_model(path)
    theirs = model.evaluate(data["x_test"], data["y_test"], batch_size=32, return_dict=True, verbose=0)
    print(f"{path}: Keras at step {int(model.optimizer.iterations.numpy())}: " +
          ", ".join(f"{k} {float(v):.6f}" for k, v in theirs.items()))


def write_series_and_call_forms(out, expected):
    """keras_io_series (trained) and call_forms, into `out` and `expected`."""
    data = np.load(SERIES)
    keras.utils.set_random_seed(30)
    model = keras_io_model(data["x_train"].shape[1:], 2)
    model.fit(data["x_train"], data["y_train"], batch_size=32, epochs=10, shuffle=False, verbose=0)
    model.save(os.path.join(out, "keras_io_series.keras"))
    expected["keras_io_series"] = {
        "predict": [float(v) for v in model.predict(data["x_test"][:32], verbose=0).reshape(-1)],
        "evaluate": {k: float(v) for k, v in model.evaluate(data["x_test"], data["y_test"], batch_size=32,
                                                           return_dict=True, verbose=0).items()},
        "iterations": int(model.optimizer.iterations.numpy()),
    }

    model, inputs = call_forms()
    model.save(os.path.join(out, "call_forms.keras"))
    np.savez(os.path.join(out, "call_forms.npz"), **inputs)
    expected["call_forms"] = {
        "predict": [float(v) for v in model.predict(inputs, verbose=0).reshape(-1)],
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(HERE, "..", "fixtures", "attention"))
    ap.add_argument("--check", metavar="MODEL")
    ap.add_argument("--only", choices=["grouped", "luong", "scores", "einsum", "gate", "additive", "axes"],
                    help="write this model alone, keeping the others' fixtures")
    args = ap.parse_args()
    if args.check:
        check(args.check)
        return
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "expected.json")
    expected = {"generator": f"keras {keras.__version__}"}
    if args.only:
        with open(path) as f:
            expected = json.load(f)
    else:
        write_series_and_call_forms(args.out, expected)

    for name, make in (("grouped", grouped), ("luong", luong), ("scores", scores), ("einsum", einsum),
                       ("gate", gate), ("additive", additive), ("axes", axes)):
        if args.only and args.only != name:
            continue
        model, inputs = make()
        model.save(os.path.join(args.out, name + ".keras"))
        np.savez(os.path.join(args.out, name + ".npz"), **inputs)
        predicted = model.predict(inputs, verbose=0)
        if isinstance(predicted, list):  # one flat list per output
            expected[name] = {"outputs": [[float(v) for v in p.reshape(-1)] for p in predicted]}
        else:
            expected[name] = {"predict": [float(v) for v in predicted.reshape(-1)]}
    with open(path + ".tmp", "w") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")
    os.replace(path + ".tmp", path)
    print(f"{path}: written")


if __name__ == "__main__":
    main()
