#!/usr/bin/env python3
"""Keras 3 (TensorFlow backend) CPU baseline for the sequence benchmarks of issue 28, and the maker of the .keras
files systolic runs the same models from (--save DIR).

Models (--model):
  bilstm_imdb   keras-io's bidirectional_lstm_imdb: ids (200,) -> Embedding(20000, 128) -> Bidirectional(LSTM(64,
                return_sequences)) -> Bidirectional(LSTM(64)) -> Dense(1, sigmoid); binary crossentropy
  gru_series    a GRU time-series classifier: (100, 6) -> GRU(64, return_sequences) -> GRU(64) -> Dense(4, softmax);
                sparse categorical crossentropy
  lstm_step     one step of an LSTM(64) on one feature, then a Dense(2, softmax): (1, 1) -> LSTM(64) -> Dense(2)
                (the batch-1 streaming latency)
  transformer_series  keras-io's time-series transformer encoder (issue 29) at (128 steps, 32 channels): 2 blocks of
                MultiHeadAttention (4 heads of 32, dropout 0.25), LayerNormalization, Conv1D(64, 1) and Conv1D(32, 1),
                residual adds; GlobalAveragePooling1D channels_first, Dense(64, relu), Dense(4, softmax)
Adam(1e-3). Input: random values as systolic's `benchmark` draws them (uint8 values: ids 0..255, series 0..255),
random labels.

Runs one untimed epoch of 2 steps (tracing), then times an epoch of --steps training steps with `fit` and reports
training samples/s; then single-sample predict latency (`predict_on_batch` on one sample, median of 50 calls after
5 warm-ups). Prints one JSON line.

    python bench/keras_sequence.py --model bilstm_imdb --batch-size 32 --steps 20
    python bench/keras_sequence.py --save DIR      # writes DIR/<model>.keras for each model, untrained
"""
import argparse
import json
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

MODELS = ("bilstm_imdb", "gru_series", "lstm_step", "transformer_series")


def encoder(K, x, head_size, num_heads, ff_dim, dropout):
    """keras-io's transformer_encoder."""
    L = K.layers
    h = L.MultiHeadAttention(key_dim=head_size, num_heads=num_heads, dropout=dropout)(x, x)
    h = L.Dropout(dropout)(h)
    h = L.LayerNormalization(epsilon=1e-6)(h)
    res = h + x
    h = L.Conv1D(filters=ff_dim, kernel_size=1, activation="relu")(res)
    h = L.Dropout(dropout)(h)
    h = L.Conv1D(filters=x.shape[-1], kernel_size=1)(h)
    h = L.LayerNormalization(epsilon=1e-6)(h)
    return h + res


def build(K, name):
    L = K.layers
    if name == "bilstm_imdb":
        i = K.Input((200,))
        x = L.Embedding(20000, 128)(i)
        x = L.Bidirectional(L.LSTM(64, return_sequences=True))(x)
        x = L.Bidirectional(L.LSTM(64))(x)
        o = L.Dense(1, activation="sigmoid")(x)
        loss, classes = "binary_crossentropy", 2
    elif name == "gru_series":
        i = K.Input((100, 6))
        x = L.GRU(64, return_sequences=True)(i)
        x = L.GRU(64)(x)
        o = L.Dense(4, activation="softmax")(x)
        loss, classes = "sparse_categorical_crossentropy", 4
    elif name == "transformer_series":
        i = K.Input((128, 32))
        x = i
        for _ in range(2):
            x = encoder(K, x, 32, 4, 64, 0.25)
        x = L.GlobalAveragePooling1D(data_format="channels_first")(x)
        x = L.Dense(64, activation="relu")(x)
        o = L.Dense(4, activation="softmax")(x)
        loss, classes = "sparse_categorical_crossentropy", 4
    else:
        i = K.Input((1, 1))
        o = L.Dense(2, activation="softmax")(L.LSTM(64)(i))
        loss, classes = "sparse_categorical_crossentropy", 2
    m = K.Model(i, o, name=name)
    m.compile(optimizer=K.optimizers.Adam(1e-3), loss=loss)
    return m, classes


def main():
    ap = argparse.ArgumentParser(description="Keras 3 CPU sequence benchmarks")
    ap.add_argument("--model", choices=MODELS, default="bilstm_imdb")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--save", metavar="DIR")
    args = ap.parse_args()

    import numpy as np
    import keras as K

    K.utils.set_random_seed(0)
    if args.save:
        os.makedirs(args.save, exist_ok=True)
        for name in MODELS:
            m, _ = build(K, name)
            m.save(os.path.join(args.save, name + ".keras"))
        return
    model, classes = build(K, args.model)
    n = args.batch_size * args.steps
    rng = np.random.default_rng(7)
    shape = model.inputs[0].shape[1:]
    x = rng.integers(0, 256, size=(n, *shape)).astype("float32")
    y = rng.integers(0, classes, size=n).astype("float32")
    model.fit(x[: 2 * args.batch_size], y[: 2 * args.batch_size], batch_size=args.batch_size, epochs=1, verbose=0)
    t0 = time.perf_counter()
    model.fit(x, y, batch_size=args.batch_size, epochs=1, verbose=0)
    train_s = time.perf_counter() - t0
    one = x[:1]
    ms = []
    for i in range(55):
        s = time.perf_counter()
        model.predict_on_batch(one)
        if i >= 5:
            ms.append((time.perf_counter() - s) * 1e3)
    print(json.dumps({"framework": "keras", "keras_version": K.__version__, "model": args.model,
                      "batch_size": args.batch_size, "train_samples_per_sec": n / train_s,
                      "predict_ms": statistics.median(ms)}))


if __name__ == "__main__":
    main()
