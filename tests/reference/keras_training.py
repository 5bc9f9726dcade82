#!/ usr / bin / env python3
"""Writes tests/fixtures/keras_training/: Keras 3 models compiled with the training surface beyond the seed's
(binary crossentropy, Huber, AdamW-style decay, Nadam, Adamax, Lion, Adafactor, Muon, clipping, regression metrics, AUC,
Precision, Recall), a sequence model of the 1-D layers, a text model with an Embedding, a recurrent model
(Conv1D, LSTM, Bidirectional GRU, SimpleRNN), three models with masks (Embedding(mask_zero=True) into RNNs and into
GlobalAveragePooling1D, Masking), Conv1DTranspose with channels_first 1-D pools, GRUs without reset_after, and
RNNs' return_state and initial_state (with Bidirectional's merge_mode None), stateful RNNs, masks through the
merges (Add, Subtract, Average, Concatenate on either axis; Maximum and Minimum), Bidirectional of stateful layers,
and losses over sequences (per-step labels under a mask, per-step one-hot targets, a masked per-step regression),
and attention (keras-io's time-series transformer without dropout; Embedding(mask_zero) into causal self-attention
and cross-attention with its own key; a text transformer with token and position embeddings; GroupedQueryAttention
and multi-query attention under a padding mask; Luong's Attention with a trained scale; attention scores returned
into the classifier; Softmax over the steps and over two axes; EinsumDense; gated attention), trained by Keras
and saved with their optimizer state, for tests/test_keras_training.cc.

    python3 tests/reference/keras_training.py [--out DIR] [--only NAME]
    python3 tests/reference/keras_training.py --check FOLDER   # Keras reads systolic's saved models

Needs keras (3.x) and tensorflow-cpu from pip (run it with the python3 of a virtual environment that has them).

For each case NAME: NAME.npz (x_train, y_train, x_test, y_test, as numpy.savez writes them; y_train of the binary
case is int64, as numpy makes integer labels), NAME.keras (after fit(x_train, y_train, batch_size=16, epochs=2,
shuffle=False): the weights and the optimizer's state), and in expected.json: Keras's
evaluate(x_test, y_test, batch_size=16, return_dict=True) of that model, then the weights (model.get_weights(),
flattened) and evaluate after one more fit(x_train, y_train, batch_size=16, epochs=1, shuffle=False) from it.
"""
import argparse
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np
import keras


def binary(rng):
    x = rng.normal(size=(80, 6))
    y = (x[:, 0] + 0.5 * x[:, 1] - x[:, 2] > 0).astype(np.int64)
    keras.utils.set_random_seed(1)
    i = keras.Input((6,))
    h = keras.layers.Dense(8, activation="relu")(i)
    o = keras.layers.Dense(1, activation="sigmoid")(h)
    m = keras.Model(i, o)
    m.compile(optimizer=keras.optimizers.Nadam(learning_rate=0.01, weight_decay=0.01),
              loss=keras.losses.BinaryCrossentropy(label_smoothing=0.1),
              metrics=["accuracy", keras.metrics.AUC(), keras.metrics.AUC(curve="PR", name="pr_auc"),
                       keras.metrics.Precision(), keras.metrics.Recall(thresholds=0.4)])
    return m, x, y


def regression(rng):
    x = rng.normal(size=(80, 5))
    y = x @ np.array([0.5, -1.0, 2.0, 0.0, 1.5]) + 0.1 * rng.normal(size=80)
    keras.utils.set_random_seed(2)
    i = keras.Input((5,))
    h = keras.layers.Dense(16, activation="tanh")(i)
    o = keras.layers.Dense(1)(h)
    m = keras.Model(i, o)
    m.compile(optimizer=keras.optimizers.Adamax(learning_rate=0.02, clipnorm=1.0), loss="huber",
              metrics=["mae", keras.metrics.RootMeanSquaredError(), "mse"])
    return m, x, y


def columns(rng):
    x = rng.normal(size=(80, 4))
    y = np.stack([x[:, 0] * x[:, 1], np.abs(x[:, 2]), x[:, 3] - x[:, 0]], axis=1)
    keras.utils.set_random_seed(3)
    i = keras.Input((4,))
    h = keras.layers.Dense(12, activation="relu")(i)
    o = keras.layers.Dense(3)(h)
    m = keras.Model(i, o)
    m.compile(optimizer=keras.optimizers.Lion(learning_rate=0.003, global_clipnorm=0.5), loss="mse",
              metrics=["mae", keras.metrics.LogCoshError()])
    return m, x, y


def factored(rng):
    """Adafactor's factored second moments: a conv kernel (3, 3, 2, 4) and a dense kernel, the biases unfactored."""
    x = rng.normal(size=(80, 6, 6, 2))
    w = rng.normal(size=(2, 3))
    y = np.argmax(x.mean(axis=(1, 2)) @ w + 0.3 * x[:, 2, 3, :] @ w, axis=1).astype(np.int64)
    keras.utils.set_random_seed(4)
    i = keras.Input((6, 6, 2))
    h = keras.layers.Conv2D(4, 3, activation="relu")(i)
    h = keras.layers.Flatten()(h)
    o = keras.layers.Dense(3, activation="softmax")(h)
    m = keras.Model(i, o)
    m.compile(optimizer=keras.optimizers.Adafactor(learning_rate=0.05, weight_decay=0.01),
              loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return m, x, y


def orthogonal(rng):
    """Muon: the first dense kernel orthogonalised, the second excluded by its path (AdamW), the biases AdamW."""
    x = rng.normal(size=(80, 6))
    y = np.argmax(x[:, :3] + 0.5 * x[:, 3:], axis=1).astype(np.int64)
    keras.utils.set_random_seed(5)
    i = keras.Input((6,))
    h = keras.layers.Dense(16, activation="relu")(i)
    o = keras.layers.Dense(3, activation="softmax", name="head")(h)
    m = keras.Model(i, o)
    m.compile(optimizer=keras.optimizers.Muon(learning_rate=0.02, exclude_layers=["head"], adam_lr_ratio=0.5),
              loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return m, x, y


def sequence(rng):
    """The 1-D layers: a causal dilated Conv1D, MaxPooling1D, a strided Conv1D, GlobalAveragePooling1D, on series
    (24 steps, 2 channels) whose class is which of three bumps they carry, wherever it sits; Adam."""
    x = 0.3 * rng.normal(size=(80, 24, 2))
    y = rng.integers(0, 3, size=80).astype(np.int64)
    bumps = np.array([[1.0, 1.0, 1.0], [1.0, -1.0, 1.0], [-1.0, 0.0, 1.0]])
    for i in range(80):
        at = rng.integers(0, 21)
        x[i, at:at + 3, 0] += bumps[y[i]]
    keras.utils.set_random_seed(6)
    i = keras.Input((24, 2))
    h = keras.layers.Conv1D(6, 3, padding="causal", dilation_rate=2, activation="relu")(i)
    h = keras.layers.MaxPooling1D(2)(h)
    h = keras.layers.Conv1D(8, 3, strides=2, padding="same", activation="relu")(h)
    h = keras.layers.GlobalAveragePooling1D()(h)
    o = keras.layers.Dense(3, activation="softmax")(h)
    m = keras.Model(i, o)
    m.compile(optimizer=keras.optimizers.Adam(learning_rate=0.01), loss="sparse_categorical_crossentropy",
              metrics=["accuracy"])
    return m, x, y


def text(rng):
    """Embedding: sequences of 16 word ids (1..39, 0 pads the tail) whose class is whether words 1..9 outnumber
    words 10..18; Embedding(40, 8), a Conv1D, GlobalAveragePooling1D, a sigmoid; SGD with Nesterov momentum. The ids are
    int64, as Keras's datasets give them. (Not Adam: Keras on TensorFlow hands the optimizer an Embedding's gradient as
    IndexedSlices, whose square it takes per occurrence of an id, so that a word repeated in a batch gets the sum of
    its gradients' squares in Adam's second moment, not the square of their sum that systolic, like Keras on JAX,
    computes.)"""
    x = np.zeros((80, 16), dtype=np.int64)
    y = np.zeros(80, dtype=np.int64)
    for i in range(80):
        n = rng.integers(8, 17)
        x[i, :n] = rng.integers(1, 40, size=n)
        y[i] = int(np.sum((x[i] >= 1) & (x[i] <= 9)) > np.sum((x[i] >= 10) & (x[i] <= 18)))
    keras.utils.set_random_seed(7)
    i = keras.Input((16,))
    h = keras.layers.Embedding(40, 8)(i)
    h = keras.layers.Conv1D(8, 3, padding="same", activation="relu")(h)
    h = keras.layers.GlobalAveragePooling1D()(h)
    o = keras.layers.Dense(1, activation="sigmoid")(h)
    m = keras.Model(i, o)
    m.compile(optimizer=keras.optimizers.SGD(learning_rate=0.3, momentum=0.9, nesterov=True),
              loss="binary_crossentropy", metrics=["accuracy"])
    return m, x, y


def recurrent(rng):
    """The recurrent layers, as issue 28 asks: a Conv1D, an LSTM's sequences into a Bidirectional GRU, on series
    (12 steps, 3 channels) whose class is the channel that drifts upwards;
a SimpleRNN run backwards beside them on the same input; Adam with clipnorm."""
    x = 0.5 * rng.normal(size=(80, 12, 3))
    y = rng.integers(0, 3, size=80).astype(np.int64)
    for i in range(80):
        x[i, :, y[i]] += np.linspace(-1.0, 1.0, 12)
    keras.utils.set_random_seed(8)
    i = keras.Input((12, 3))
    h = keras.layers.Conv1D(8, 3, padding="same", activation="relu")(i)
    h = keras.layers.LSTM(8, return_sequences=True)(h)
    h = keras.layers.Bidirectional(keras.layers.GRU(6))(h)
    s = keras.layers.SimpleRNN(4, go_backwards=True)(i)
    o = keras.layers.Dense(3, activation="softmax")(keras.layers.Concatenate()([h, s]))
    m = keras.Model(i, o)
    m.compile(optimizer=keras.optimizers.Adam(learning_rate=0.01, clipnorm=1.0),
              loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return m, x, y


def padded_ids(rng, length, shortest, vocabulary):
    """80 rows of word ids 1..vocabulary-1, each of shortest..length ids padded with 0 at the end; class 1 when words
    1..9 outnumber words 10..18."""
    x = np.zeros((80, length), dtype=np.int64)
    y = np.zeros(80, dtype=np.int64)
    for i in range(80):
        n = rng.integers(shortest, length + 1)
        x[i, :n] = rng.integers(1, vocabulary, size=n)
        y[i] = int(np.sum((x[i] >= 1) & (x[i] <= 9)) > np.sum((x[i] >= 10) & (x[i] <= 18)))
    return x, y


def halved_series(rng):
    """Series of 12 steps (2 channels) whose class is the sign of the first channel's trend, cut into two halves of 6
    steps: 80 halves in batches of 16, the first halves of 8 series then their second halves."""
    series = 0.5 * rng.normal(size=(40, 12, 2))
    labels = rng.integers(0, 2, size=40).astype(np.int64)
    for i in range(40):
        series[i, :, 0] += (1.0 if labels[i] else -1.0) * np.linspace(-1.0, 1.0, 12)
    x = np.zeros((80, 6, 2))
    y = np.zeros(80, dtype=np.int64)
    for b in range(5):
        for i in range(8):
            j = b * 8 + i
            x[b * 16 + i], x[b * 16 + 8 + i] = series[j, :6], series[j, 6:]
            y[b * 16 + i] = y[b * 16 + 8 + i] = labels[j]
    return x, y


def masked_text(rng):
    """Keras's masks, as issue 28 asks: Embedding(mask_zero=True) over word ids padded with 0 at the end (and a few
    0s inside, which Keras masks too), a Bidirectional LSTM's sequences into a GRU, a sigmoid: class 1 when words 1..9
    outnumber words 10..18. SGD with momentum (Adam would differ by the Embedding's IndexedSlices: see text())."""
    x = np.zeros((80, 16), dtype=np.int64)
    y = np.zeros(80, dtype=np.int64)
    for i in range(80):
        n = rng.integers(4, 17)
        x[i, :n] = rng.integers(1, 40, size=n)
        if n > 6 and rng.random() < 0.2:
            x[i, rng.integers(1, n - 1)] = 0
        y[i] = int(np.sum((x[i] >= 1) & (x[i] <= 9)) > np.sum((x[i] >= 10) & (x[i] <= 18)))
    keras.utils.set_random_seed(9)
    i = keras.Input((16,))
    h = keras.layers.Embedding(40, 8, mask_zero=True)(i)
    h = keras.layers.Bidirectional(keras.layers.LSTM(6, return_sequences=True))(h)
    h = keras.layers.GRU(5)(h)
    o = keras.layers.Dense(1, activation="sigmoid")(h)
    m = keras.Model(i, o)
    m.compile(optimizer=keras.optimizers.SGD(learning_rate=0.2, momentum=0.9), loss="binary_crossentropy",
              metrics=["accuracy"])
    return m, x, y


def masked_series(rng):
    """Masking: series of 3 to 10 steps (3 channels) zero-padded to 10, whose class is the channel that drifts
    upwards; Masking, a Dense per step (which passes the mask on), an LSTM's sequences into an LSTM run backwards;
    Adam."""
    x = np.zeros((80, 10, 3))
    y = rng.integers(0, 3, size=80).astype(np.int64)
    for i in range(80):
        n = rng.integers(3, 11)
        x[i, :n] = 0.5 * rng.normal(size=(n, 3))
        x[i, :n, y[i]] += np.linspace(-1.0, 1.0, n)
    keras.utils.set_random_seed(10)
    i = keras.Input((10, 3))
    h = keras.layers.Masking(mask_value=0.0)(i)
    h = keras.layers.Dense(6, activation="tanh")(h)
    h = keras.layers.LSTM(6, return_sequences=True)(h)
    h = keras.layers.LSTM(5, go_backwards=True)(h)
    o = keras.layers.Dense(3, activation="softmax")(h)
    m = keras.Model(i, o)
    m.compile(optimizer=keras.optimizers.Adam(learning_rate=0.01), loss="sparse_categorical_crossentropy",
              metrics=["accuracy"])
    return m, x, y


def masked_average(rng):
    """GlobalAveragePooling1D over Embedding(mask_zero=True)'s vectors averages the unmasked steps alone: word ids
    padded with 0 at the end, class 1 when words 1..9 outnumber words 10..18; SGD with momentum."""
    x, y = padded_ids(rng, 12, 2, 30)
    keras.utils.set_random_seed(11)
    i = keras.Input((12,))
    h = keras.layers.Embedding(30, 6, mask_zero=True)(i)
    h = keras.layers.GlobalAveragePooling1D()(h)
    o = keras.layers.Dense(1, activation="sigmoid")(h)
    m = keras.Model(i, o)
    m.compile(optimizer=keras.optimizers.SGD(learning_rate=0.5, momentum=0.9), loss="binary_crossentropy",
              metrics=["accuracy"])
    return m, x, y


def masked_merges(rng):
    """Masks through the merges as Keras 3 combines them: word ids padded with 0 (Embedding(mask_zero=True): mask A)
    and the same ids as a series whose steps of id 5 Masking drops (mask B, passed on by a Dense). Concatenate on the
    last axis (A or B) into an LSTM; Concatenate along the steps (A then B) into a GRU; Add and Subtract (A or B)
    averaged (A or B) into GlobalAveragePooling1D; Concatenate of A's vectors with a Conv1D's (which has no mask:
    every step counts) into a SimpleRNN; Add of the same two (no mask, as an input has none) into
    GlobalAveragePooling1D; Multiply of A's and B's vectors (masked values read as 1s, zeros where neither counts;
    A or B) into a GRU, and of A's with the Conv1D's (A's masked values read as 1s; no mask) into
    GlobalAveragePooling1D. Class 1 when words 1..9 outnumber words 10..18; SGD with momentum (Adam would differ by the
    Embedding's IndexedSlices: see text())."""
    x, y = padded_ids(rng, 10, 3, 20)
    # The Concatenate layers are named: Keras 3.15 names the operations of their masks concatenate_N too, and a
    # model whose layer and operation names collide does not load back into Keras.
    keras.utils.set_random_seed(12)
    i = keras.Input((10,))
    a = keras.layers.Embedding(20, 6, mask_zero=True)(i)
    b = keras.layers.Masking(mask_value=5.0)(keras.layers.Reshape((10, 1))(i))
    b = keras.layers.Dense(6, activation="tanh")(b)
    h1 = keras.layers.LSTM(5)(keras.layers.Concatenate(name="join_features")([a, b]))
    h2 = keras.layers.GRU(4)(keras.layers.Concatenate(axis=1, name="join_steps")([a, b]))
    s = keras.layers.Add()([a, b])
    d = keras.layers.Subtract()([a, b])
    h3 = keras.layers.GlobalAveragePooling1D()(keras.layers.Average()([s, d]))
    c = keras.layers.Conv1D(6, 3, padding="same")(a)
    h4 = keras.layers.SimpleRNN(3)(keras.layers.Concatenate(name="join_conv")([a, c]))
    h5 = keras.layers.GlobalAveragePooling1D()(keras.layers.Add()([a, c]))
    h6 = keras.layers.GRU(3)(keras.layers.Multiply()([a, b]))
    h7 = keras.layers.GlobalAveragePooling1D()(keras.layers.Multiply()([a, c]))
    o = keras.layers.Dense(1, activation="sigmoid")(
        keras.layers.Concatenate(name="join_heads")([h1, h2, h3, h4, h5, h6, h7]))
    m = keras.Model(i, o)
    m.compile(optimizer=keras.optimizers.SGD(learning_rate=0.2, momentum=0.9), loss="binary_crossentropy",
              metrics=["accuracy"])
    return m, x, y


def transpose_series(rng):
    """Conv1DTranspose and the 1-D pools with data_format channels_first: series of 10 steps (3 channels) whose class
    is the channel with the largest trend; Conv1DTranspose doubles the steps, MaxPooling1D and
    GlobalAveragePooling1D read the (20, 4) result as 20 channels of 4 steps; Adam."""
    x = 0.5 * rng.normal(size=(80, 10, 3))
    y = rng.integers(0, 3, size=80).astype(np.int64)
    for i in range(80):
        x[i, :, y[i]] += np.linspace(-1.0, 1.0, 10)
    keras.utils.set_random_seed(12)
    i = keras.Input((10, 3))
    h = keras.layers.Conv1DTranspose(4, 3, strides=2, padding="same", activation="relu")(i)
    h = keras.layers.MaxPooling1D(2, data_format="channels_first")(h)
    h = keras.layers.GlobalAveragePooling1D(data_format="channels_first")(h)
    o = keras.layers.Dense(3, activation="softmax")(h)
    m = keras.Model(i, o)
    m.compile(optimizer=keras.optimizers.Adam(learning_rate=0.01), loss="sparse_categorical_crossentropy",
              metrics=["accuracy"])
    return m, x, y


def gru_reset_before(rng):
    """GRU(reset_after=False) (tf.keras 1.x's and Keras 2.0's GRU): series of 12 steps (2 channels) whose class is
    the sign of the first channel's trend, a GRU without reset_after into a softmax; RMSprop."""
    x = 0.5 * rng.normal(size=(80, 12, 2))
    y = rng.integers(0, 2, size=80).astype(np.int64)
    for i in range(80):
        x[i, :, 0] += (1.0 if y[i] else -1.0) * np.linspace(-1.0, 1.0, 12)
    keras.utils.set_random_seed(13)
    i = keras.Input((12, 2))
    h = keras.layers.GRU(6, reset_after=False, return_sequences=True)(i)
    h = keras.layers.GRU(4, reset_after=False, go_backwards=True)(h)
    o = keras.layers.Dense(2, activation="softmax")(h)
    m = keras.Model(i, o)
    m.compile(optimizer=keras.optimizers.RMSprop(learning_rate=0.01), loss="sparse_categorical_crossentropy",
              metrics=["accuracy"])
    return m, x, y


def states(rng):
    """return_state and initial_state, as keras-io's sequence-to-sequence models use them: series of 4 to 10 steps (3
    channels) zero-padded to 10, whose class is the channel that drifts upwards, under Masking. An LSTM gives its
    sequences and final states, from which a second LSTM starts;
a GRU run backwards gives its state(its output unused), from which a SimpleRNN starts; a Bidirectional GRU with merge_mode None gives both runs' sequences and
    states, its backward sequences (still masked) into a GRU, and a Bidirectional LSTM starts from the first LSTM's
    states twice over. RMSprop."""
    x = np.zeros((80, 10, 3))
    y = rng.integers(0, 3, size=80).astype(np.int64)
    for i in range(80):
        n = rng.integers(4, 11)
        x[i, :n] = 0.5 * rng.normal(size=(n, 3))
        x[i, :n, y[i]] += np.linspace(-1.0, 1.0, n)
    keras.utils.set_random_seed(14)
    i = keras.Input((10, 3))
    m = keras.layers.Masking(mask_value=0.0)(i)
    seq, h, c = keras.layers.LSTM(6, return_sequences=True, return_state=True)(m)
    a = keras.layers.LSTM(6)(seq, initial_state=[h, c])
    _, g = keras.layers.GRU(5, return_state=True, go_backwards=True)(m)
    b = keras.layers.SimpleRNN(5)(m, initial_state=[g])
    fw, bw, fh, bh = keras.layers.Bidirectional(keras.layers.GRU(4, return_sequences=True, return_state=True),
                                                merge_mode=None)(m)
    d = keras.layers.GRU(4)(bw)
    e = keras.layers.Bidirectional(keras.layers.LSTM(6))(m, initial_state=[h, c, h, c])
    o = keras.layers.Dense(3, activation="softmax")(keras.layers.Concatenate()([a, h, b, fh, bh, d, e]))
    model = keras.Model(i, o)
    model.compile(optimizer=keras.optimizers.RMSprop(learning_rate=0.01), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    return model, x, y


def stateful(rng):
    """stateful=True: series of 12 steps (2 channels) whose class is the sign of the first channel's trend, cut into
    two halves of 6 steps that follow each other from one batch of 16 to the next (sample i of batch 2k+1 continues
    sample i of batch 2k), read by an Input of batch_shape (16, 6, 2); a stateful LSTM's sequences into a stateful
    GRU carry their states from batch to batch (and across epochs, which Keras does not reset); Adam. The states are
    reset after saving (Keras keeps them out of files), so that evaluate starts from zeros here as after loading."""
    x, y = halved_series(rng)
    keras.utils.set_random_seed(15)
    i = keras.Input(batch_shape=(16, 6, 2))
    h = keras.layers.LSTM(6, stateful=True, return_sequences=True)(i)
    h = keras.layers.GRU(4, stateful=True)(h)
    o = keras.layers.Dense(2, activation="softmax")(h)
    m = keras.Model(i, o)
    m.compile(optimizer=keras.optimizers.Adam(learning_rate=0.01), loss="sparse_categorical_crossentropy",
              metrics=["accuracy"])
    return m, x, y


def stateful_bidirectional(rng):
    """Bidirectional of stateful layers: the stateful case's series and batches, read by a Bidirectional(LSTM) whose
    sequences go into a Bidirectional(GRU, merge_mode="sum"), each direction keeping its states from batch to batch
    (the backward run's too: it starts from where the last batch's backward run ended); RMSprop."""
    x, y = halved_series(rng)
    keras.utils.set_random_seed(16)
    i = keras.Input(batch_shape=(16, 6, 2))
    h = keras.layers.Bidirectional(keras.layers.LSTM(5, stateful=True, return_sequences=True))(i)
    h = keras.layers.Bidirectional(keras.layers.GRU(3, stateful=True), merge_mode="sum")(h)
    o = keras.layers.Dense(2, activation="softmax")(h)
    m = keras.Model(i, o)
    m.compile(optimizer=keras.optimizers.RMSprop(learning_rate=0.01), loss="sparse_categorical_crossentropy",
              metrics=["accuracy"])
    return m, x, y


def masked_extrema(rng):
    """Maximum and Minimum of masked inputs as Keras 3 merges them (_apply_merge_op_and_or_mask): the extremum of the
    values that count, the first input's where none does, the OR of the masks. Word ids padded with 0
    (Embedding(mask_zero=True): mask A), the ids as a series whose steps of id 5 Masking drops (mask B) and whose
    padding Masking drops (mask A again, other values). Maximum of A's and B's vectors into a GRU; Minimum of the same
    into GlobalAveragePooling1D; Maximum of A's vectors and a Conv1D's (no mask: its values where A's do not count;
    no mask on the output) into GlobalAveragePooling1D; Minimum of the two A-masked branches (the Embedding's values
    where neither counts) into a Conv1D, which reads every step, and GlobalMaxPooling1D. Class 1 when words 1..9
    outnumber words 10..18; SGD with momentum (Adam would differ by the Embedding's IndexedSlices: see text())."""
    x, y = padded_ids(rng, 10, 3, 20)
    keras.utils.set_random_seed(20)
    i = keras.Input((10,))
    a = keras.layers.Embedding(20, 6, mask_zero=True)(i)
    r = keras.layers.Reshape((10, 1))(i)
    b = keras.layers.Dense(6, activation="tanh")(keras.layers.Masking(mask_value=5.0)(r))
    z = keras.layers.Dense(6, activation="tanh")(keras.layers.Masking(mask_value=0.0)(r))
    h1 = keras.layers.GRU(4)(keras.layers.Maximum()([a, b]))
    h2 = keras.layers.GlobalAveragePooling1D()(keras.layers.Minimum()([a, b]))
    c = keras.layers.Conv1D(6, 3, padding="same")(a)
    h3 = keras.layers.GlobalAveragePooling1D()(keras.layers.Maximum()([a, c]))
    h4 = keras.layers.GlobalMaxPooling1D()(keras.layers.Conv1D(4, 2)(keras.layers.Minimum()([a, z])))
    o = keras.layers.Dense(1, activation="sigmoid")(
        keras.layers.Concatenate(name="join_heads")([h1, h2, h3, h4]))
    m = keras.Model(i, o)
    m.compile(optimizer=keras.optimizers.SGD(learning_rate=0.2, momentum=0.9), loss="binary_crossentropy",
              metrics=["accuracy"])
    return m, x, y


def tagger(rng):
    """Per-step labels under a mask, as a sequence tagger trains: word ids 1..29 padded with 0 at the end
    (Embedding(mask_zero=True)), an LSTM's sequences into a Bidirectional GRU's into a Dense softmax over 4 tags at
    every step; a word's tag is its id's remainder by 3, or 3 after a word of id 20 or more. Labels [N, 10], the
    padded steps' tag 0 (the mask leaves them out of the loss and the accuracy);
    SparseCategoricalCrossentropy, accuracy and a sparse top-2 accuracy; SGD with momentum (Adam would differ by the
    Embedding's IndexedSlices: see text())."""
    x, _ = padded_ids(rng, 10, 3, 30)
    y = np.where(np.roll(x, 1, axis=1) >= 20, 3, x % 3)
    y[:, 0] = x[:, 0] % 3
    y[x == 0] = 0
    keras.utils.set_random_seed(17)
    i = keras.Input((10,))
    h = keras.layers.Embedding(30, 8, mask_zero=True)(i)
    h = keras.layers.LSTM(8, return_sequences=True)(h)
    h = keras.layers.Bidirectional(keras.layers.GRU(5, return_sequences=True))(h)
    o = keras.layers.Dense(4, activation="softmax")(h)
    m = keras.Model(i, o)
    m.compile(optimizer=keras.optimizers.SGD(learning_rate=0.3, momentum=0.9), loss="sparse_categorical_crossentropy",
              metrics=["accuracy", keras.metrics.SparseTopKCategoricalAccuracy(k=2, name="top2")])
    return m, x, y.astype(np.int64)


def steps_onehot(rng):
    """Per-step one-hot targets without a mask: series of 8 steps (3 channels) whose every step's class is the
    channel largest there so far (a running argmax); a GRU's sequences into a Dense softmax over 3 classes;
    CategoricalCrossentropy with label smoothing, accuracy; Adam."""
    x = rng.normal(size=(80, 8, 3))
    y = np.eye(3)[np.argmax(np.maximum.accumulate(x, axis=1), axis=2)]
    keras.utils.set_random_seed(18)
    i = keras.Input((8, 3))
    h = keras.layers.GRU(6, return_sequences=True)(i)
    o = keras.layers.Dense(3, activation="softmax")(h)
    m = keras.Model(i, o)
    m.compile(optimizer=keras.optimizers.Adam(learning_rate=0.01),
              loss=keras.losses.CategoricalCrossentropy(label_smoothing=0.1), metrics=["accuracy"])
    return m, x, y


def masked_regression(rng):
    """Per-step regression under a mask: series of 3 to 10 steps (2 channels) zero-padded to 10, Masking, an LSTM's
    sequences into a Dense of one unit, the target at each step the running mean of the first channel (0 at the
    padded steps, which the mask leaves out); mean squared error, MAE and RMSE (which Keras does not mask); RMSprop."""
    x = np.zeros((80, 10, 2))
    y = np.zeros((80, 10, 1))
    for i in range(80):
        n = rng.integers(3, 11)
        x[i, :n] = rng.normal(size=(n, 2))
        y[i, :n, 0] = np.cumsum(x[i, :n, 0]) / np.arange(1, n + 1)
    keras.utils.set_random_seed(19)
    i = keras.Input((10, 2))
    h = keras.layers.Masking(mask_value=0.0)(i)
    h = keras.layers.LSTM(6, return_sequences=True)(h)
    o = keras.layers.Dense(1)(h)
    m = keras.Model(i, o)
    m.compile(optimizer=keras.optimizers.RMSprop(learning_rate=0.01), loss="mse",
              metrics=["mae", keras.metrics.RootMeanSquaredError()])
    return m, x, y


def encoder(x, head_size, num_heads, ff_dim, dropout=0.0):
    """keras-io's "Timeseries classification with a Transformer" encoder block, as written there."""
    h = keras.layers.MultiHeadAttention(key_dim=head_size, num_heads=num_heads, dropout=dropout)(x, x)
    h = keras.layers.Dropout(dropout)(h)
    h = keras.layers.LayerNormalization(epsilon=1e-6)(h)
    res = h + x
    h = keras.layers.Conv1D(filters=ff_dim, kernel_size=1, activation="relu")(res)
    h = keras.layers.Dropout(dropout)(h)
    h = keras.layers.Conv1D(filters=x.shape[-1], kernel_size=1)(h)
    h = keras.layers.LayerNormalization(epsilon=1e-6)(h)
    return h + res


def transformer_series(rng):
    """keras-io's time-series transformer at a small size (two encoder blocks of MultiHeadAttention with 2 heads of
    8, LayerNormalization, Conv1D with kernel 1; GlobalAveragePooling1D channels_first; no dropout, so that the
    training step is Keras's exactly) on series of 12 steps, 3 channels, whose class is the channel that drifts
    upwards; Adam."""
    x = 0.5 * rng.normal(size=(80, 12, 3))
    y = rng.integers(0, 3, size=80).astype(np.int64)
    for i in range(80):
        x[i, :, y[i]] += np.linspace(-1.0, 1.0, 12)
    keras.utils.set_random_seed(21)
    i = keras.Input((12, 3))
    h = encoder(i, 8, 2, 4)
    h = encoder(h, 8, 2, 4)
    h = keras.layers.GlobalAveragePooling1D(data_format="channels_first")(h)
    h = keras.layers.Dense(8, activation="relu")(h)
    o = keras.layers.Dense(3, activation="softmax")(h)
    m = keras.Model(i, o)
    m.compile(optimizer=keras.optimizers.Adam(learning_rate=0.01), loss="sparse_categorical_crossentropy",
              metrics=["sparse_categorical_accuracy"])
    return m, x, y


def masked_attention(rng):
    """Keras's masks into attention: word ids padded with 0 (padded_ids), Embedding(mask_zero=True) into a causal
    self-attention (the padded keys hidden, the output carrying the query's mask), a second MultiHeadAttention
    given a key of its own (the embeddings) and output_shape 5, GlobalAveragePooling1D over the unmasked steps;
    SGD with momentum."""
    x, y = padded_ids(rng, 10, 3, 20)
    keras.utils.set_random_seed(22)
    i = keras.Input((10,))
    e = keras.layers.Embedding(20, 6, mask_zero=True)(i)
    h = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4, value_dim=3)(e, e, use_causal_mask=True)
    h = keras.layers.MultiHeadAttention(num_heads=3, key_dim=2, output_shape=5)(h, h, e)
    h = keras.layers.GlobalAveragePooling1D()(h)
    o = keras.layers.Dense(1, activation="sigmoid")(h)
    m = keras.Model(i, o)
    m.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1, momentum=0.9), loss="binary_crossentropy",
              metrics=["accuracy"])
    return m, x, y


def text_transformer(rng):
    """A text transformer as a functional graph writes keras-io's: token embeddings (Embedding(mask_zero=True)) plus
    position embeddings computed eagerly (an Embedding over ops.arange of the length, which Keras writes as a
    constant array of the add), self-attention whose value and key are the token embeddings (their padding mask
    hides the padded words' keys), the residual add, LayerNormalization, a feed-forward Dense pair, GlobalAverage-
    Pooling1D, a sigmoid; SGD with momentum (Keras on TensorFlow gives Adam an Embedding's gradient as IndexedSlices,
    README's known difference). Word ids from padded_ids."""
    x, y = padded_ids(rng, 10, 3, 20)
    keras.utils.set_random_seed(23)
    i = keras.Input((10,))
    tok = keras.layers.Embedding(20, 8, mask_zero=True)(i)
    positions = keras.ops.arange(0, keras.ops.shape(i)[-1])
    h = tok + keras.layers.Embedding(10, 8)(positions)
    a = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4)(h, tok)
    h = keras.layers.LayerNormalization(epsilon=1e-6)(a + h)
    f = keras.layers.Dense(16, activation="relu")(h)
    f = keras.layers.Dense(8)(f)
    h = keras.layers.LayerNormalization(epsilon=1e-6)(f + h)
    h = keras.layers.GlobalAveragePooling1D()(h)
    o = keras.layers.Dense(1, activation="sigmoid")(h)
    m = keras.Model(i, o)
    m.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1, momentum=0.9), loss="binary_crossentropy",
              metrics=["accuracy"])
    return m, x, y


def grouped_attention(rng):
    """GroupedQueryAttention under Keras's masks: word ids padded with 0 (padded_ids) into Embedding(mask_zero=True),
    a causal self-attention of 4 query heads over 2 key/value heads (the padded keys hidden, the output carrying the
    query's mask), then a multi-query cross-attention (3 query heads, 1 key/value head) given a key of its own (the
    embeddings), GlobalAveragePooling1D over the unmasked steps; SGD with momentum."""
    x, y = padded_ids(rng, 10, 3, 20)
    keras.utils.set_random_seed(24)
    i = keras.Input((10,))
    e = keras.layers.Embedding(20, 6, mask_zero=True)(i)
    h = keras.layers.GroupQueryAttention(head_dim=4, num_query_heads=4, num_key_value_heads=2)(
        e, e, use_causal_mask=True)
    h = keras.layers.GroupQueryAttention(head_dim=3, num_query_heads=3, num_key_value_heads=1)(h, h, e)
    h = keras.layers.GlobalAveragePooling1D()(h)
    o = keras.layers.Dense(1, activation="sigmoid")(h)
    m = keras.Model(i, o)
    m.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1, momentum=0.9), loss="binary_crossentropy",
              metrics=["accuracy"])
    return m, x, y


def luong_attention(rng):
    """Luong's dot-product Attention under Keras's masks: word ids padded with 0 (padded_ids) into
    Embedding(mask_zero=True), a causal self-attention with a trained scale (use_scale), the padded keys hidden and the
    padded query rows zeroed, then GlobalAveragePooling1D over the unmasked steps; SGD with momentum."""
    x, y = padded_ids(rng, 10, 3, 20)
    keras.utils.set_random_seed(25)
    i = keras.Input((10,))
    e = keras.layers.Embedding(20, 6, mask_zero=True)(i)
    h = keras.layers.Attention(use_scale=True)([e, e], use_causal_mask=True)
    h = keras.layers.GlobalAveragePooling1D()(h)
    o = keras.layers.Dense(1, activation="sigmoid")(h)
    m = keras.Model(i, o)
    m.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1, momentum=0.9), loss="binary_crossentropy",
              metrics=["accuracy"])
    return m, x, y


def attention_scores(rng):
    """return_attention_scores inside the model: word ids padded with 0 (padded_ids) into Embedding(mask_zero=True),
    a MultiHeadAttention that returns its scores (the padded keys hidden, padded query rows all zeros) and an
    Attention with a trained scale that returns its own; the scores, flattened, join the pooled attention output
    before the classifier, so that the loss's gradient reaches the probabilities through them too; SGD with
    momentum."""
    x, y = padded_ids(rng, 8, 3, 20)
    keras.utils.set_random_seed(26)
    i = keras.Input((8,))
    e = keras.layers.Embedding(20, 6, mask_zero=True)(i)
    h, s = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4)(e, e, return_attention_scores=True)
    _, d = keras.layers.Attention(use_scale=True)([e, e], return_attention_scores=True)
    f = keras.layers.Concatenate()([keras.layers.GlobalAveragePooling1D()(h), keras.layers.Flatten()(s),
                                    keras.layers.Flatten()(d)])
    o = keras.layers.Dense(1, activation="sigmoid")(f)
    m = keras.Model(i, o)
    m.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1, momentum=0.9), loss="binary_crossentropy",
              metrics=["accuracy"])
    return m, x, y


def softmax_axes(rng):
    """Softmax over axes other than the last: attention pooling as users write it (a score per step, Softmax(axis=1)
    over the steps, the steps weighted by it), and a Softmax over two axes together (axis=[1, 2]); RMSprop."""
    x = rng.normal(size=(80, 8, 3))
    y = (x[:, :4, 0].mean(axis=1) > x[:, 4:, 1].mean(axis=1)).astype(np.int64)
    keras.utils.set_random_seed(27)
    i = keras.Input((8, 3))
    h = keras.layers.Dense(4, activation="tanh")(i)
    w = keras.layers.Softmax(axis=1)(keras.layers.Dense(1)(h))
    pooled = keras.layers.Flatten()(keras.layers.Multiply()([h, w]))
    both = keras.layers.Flatten()(keras.layers.Softmax(axis=[1, 2])(h))
    o = keras.layers.Dense(1, activation="sigmoid")(keras.layers.Concatenate()([pooled, both]))
    m = keras.Model(i, o)
    m.compile(optimizer=keras.optimizers.RMSprop(learning_rate=0.01), loss="binary_crossentropy",
              metrics=["accuracy"])
    return m, x, y


def einsum_dense(rng):
    """EinsumDense as attention's projections use it and in moved layouts: "abc,cde->abde" (tanh, a bias over the new
    axes), "abcd,cde->abe", "abc,dc->adb" (a bias over a new and a kept axis) and "abc,bd->acd"; Adam."""
    x = rng.normal(size=(80, 6, 3))
    y = (x[:, :3, 0].sum(axis=1) > x[:, 3:, 2].sum(axis=1)).astype(np.int64)
    keras.utils.set_random_seed(28)
    E = keras.layers.EinsumDense
    i = keras.Input((6, 3))
    h = E("abc,cde->abde", output_shape=(6, 2, 4), bias_axes="de", activation="tanh")(i)
    h = E("abcd,cde->abe", output_shape=(6, 3), bias_axes="e")(h)
    h = E("abc,dc->adb", output_shape=(2, 6), bias_axes="db")(h)
    h = E("abc,bd->acd", output_shape=(6, 2))(h)
    o = keras.layers.Dense(1, activation="sigmoid")(keras.layers.Flatten()(h))
    m = keras.Model(i, o)
    m.compile(optimizer=keras.optimizers.Adam(learning_rate=0.01), loss="binary_crossentropy",
              metrics=["accuracy"])
    return m, x, y


def gated_attention(rng):
    """use_gate: word ids padded with 0 (padded_ids) into Embedding(mask_zero=True), a gated MultiHeadAttention (the
    padded keys hidden) and a gated, causal GroupedQueryAttention, GlobalAveragePooling1D over the unmasked steps;
    SGD with momentum."""
    x, y = padded_ids(rng, 8, 3, 20)
    keras.utils.set_random_seed(29)
    i = keras.Input((8,))
    e = keras.layers.Embedding(20, 6, mask_zero=True)(i)
    h = keras.layers.MultiHeadAttention(num_heads=2, key_dim=3, use_gate=True)(e, e)
    h = keras.layers.GroupQueryAttention(head_dim=3, num_query_heads=2, num_key_value_heads=1, use_gate=True)(
        h, h, use_causal_mask=True)
    o = keras.layers.Dense(1, activation="sigmoid")(keras.layers.GlobalAveragePooling1D()(h))
    m = keras.Model(i, o)
    m.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1, momentum=0.9), loss="binary_crossentropy",
              metrics=["accuracy"])
    return m, x, y


def additive_attention(rng):
    """Bahdanau's additive attention and Attention's "concat" score under Keras's masks: word ids padded with 0
    (padded_ids) into Embedding(mask_zero=True), an AdditiveAttention (its scale trained), a causal
    Attention(score_mode="concat", use_scale=True) over its output, GlobalAveragePooling1D over the unmasked steps;
    SGD with momentum (Adam on an Embedding differs by Keras-on-TensorFlow's IndexedSlices: README)."""
    x, y = padded_ids(rng, 8, 3, 20)
    keras.utils.set_random_seed(30)
    i = keras.Input((8,))
    e = keras.layers.Embedding(20, 6, mask_zero=True)(i)
    h = keras.layers.AdditiveAttention()([e, e])
    h = keras.layers.Attention(score_mode="concat", use_scale=True)([h, e], use_causal_mask=True)
    o = keras.layers.Dense(1, activation="sigmoid")(keras.layers.GlobalAveragePooling1D()(h))
    m = keras.Model(i, o)
    m.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1, momentum=0.9), loss="binary_crossentropy",
              metrics=["accuracy"])
    return m, x, y


def axial_attention(rng):
    """MultiHeadAttention along one axis of a grid: inputs (6, 4, 2), attention_axes=(1,) (each of the 4 columns
    attends along the 6 rows), then Flatten and the classifier; Adam."""
    x = rng.normal(size=(80, 6, 4, 2))
    y = (x[:, :3, :, 0].mean(axis=(1, 2)) > x[:, 3:, :, 1].mean(axis=(1, 2))).astype(np.int64)
    keras.utils.set_random_seed(31)
    i = keras.Input((6, 4, 2))
    h = keras.layers.MultiHeadAttention(num_heads=2, key_dim=3, attention_axes=(1,))(i, i)
    o = keras.layers.Dense(1, activation="sigmoid")(keras.layers.Flatten()(h))
    m = keras.Model(i, o)
    m.compile(optimizer=keras.optimizers.Adam(learning_rate=0.01), loss="binary_crossentropy",
              metrics=["accuracy"])
    return m, x, y


CASES = [("binary", binary), ("regression", regression), ("columns", columns), ("factored", factored),
         ("orthogonal", orthogonal), ("sequence", sequence), ("text", text),
         ("recurrent", recurrent), ("masked_text", masked_text), ("masked_series", masked_series),
         ("masked_average", masked_average), ("transpose_series", transpose_series),
         ("gru_reset_before", gru_reset_before), ("states", states), ("stateful", stateful),
         ("masked_merges", masked_merges), ("stateful_bidirectional", stateful_bidirectional),
         ("tagger", tagger), ("steps_onehot", steps_onehot), ("masked_regression", masked_regression),
         ("masked_extrema", masked_extrema), ("transformer_series", transformer_series),
         ("masked_attention", masked_attention), ("text_transformer", text_transformer),
         ("grouped_attention", grouped_attention), ("luong_attention", luong_attention),
         ("attention_scores", attention_scores), ("softmax_axes", softmax_axes),
         ("einsum_dense", einsum_dense), ("gated_attention", gated_attention),
         ("additive_attention", additive_attention), ("axial_attention", axial_attention)]


def check(folder):
    """Keras reads what systolic wrote: for each NAME with FOLDER/NAME.keras (saved by `systolic train --save`) and
    FOLDER/NAME.json (`systolic evaluate --json` of it), Keras loads the model with its optimizer state, evaluates
    it on the fixture's test split as systolic did (within 2e-3) and trains on from it."""
    fixtures = os.path.join(os.path.dirname(__file__), "..", "fixtures", "keras_training")
    failures = 0
    for name, _ in CASES:
        path = os.path.join(folder, name + ".keras")
        if not os.path.exists(path):
            continue
        data = np.load(os.path.join(fixtures, name + ".npz"))
        xs, ys = data["x_test"].astype(np.float32), data["y_test"].astype(np.float32)
        model = keras.models.load_model(path)
        with open(os.path.join(folder, name + ".json")) as f:
            ours = json.load(f)
        theirs = model.evaluate(xs, ys, batch_size=16, return_dict=True, verbose=0)
        worst = max(abs(float(theirs[k]) - ours[k]) for k in theirs)
        same_keys = sorted(theirs) == sorted(ours)
        steps = int(model.optimizer.iterations.numpy())
        model.fit(data["x_train"].astype(np.float32), data["y_train"].astype(np.float32), batch_size=16,
                  epochs=1, shuffle=False, verbose=0)
        ok = same_keys and worst <= 2e-3
        failures += not ok
        print(f"{name}: {type(model.optimizer).__name__} at step {steps}, keys {'match' if same_keys else 'DIFFER'}, "
              f"max |Keras - systolic| = {worst:.2e} {'ok' if ok else 'FAIL'}; trained on to step "
              f"{int(model.optimizer.iterations.numpy())}")
    return failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "fixtures", "keras_training"))
    ap.add_argument("--check", metavar="FOLDER", help="check systolic's saved models with Keras instead")
    ap.add_argument("--only", metavar="NAME", help="write this case alone, keeping the others' fixtures (a rerun of a "
                    "case changes TensorFlow's last float32 bits)")
    args = ap.parse_args()
    if args.check:
        raise SystemExit(1 if check(args.check) else 0)
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(9)
    expected = {"generator": f"keras {keras.__version__}"}
    path = os.path.join(args.out, "expected.json")
    if args.only:
        with open(path) as f:
            expected = json.load(f)
    for name, make in CASES:
        model, x, y = make(rng)  # every case draws, so that each one's data stays the same
        if args.only and name != args.only:
            continue
        xt, yt, xs, ys = x[:64], y[:64], x[64:], y[64:]
        np.savez(os.path.join(args.out, name + ".npz"), x_train=xt, y_train=yt, x_test=xs, y_test=ys)
#Keras trains on float32 copies, as systolic reads float64 arrays.
        xt32, xs32 = xt.astype(np.float32), xs.astype(np.float32)
        yt32, ys32 = yt.astype(np.float32), ys.astype(np.float32)
        model.fit(xt32, yt32, batch_size=16, epochs=2, shuffle=False, verbose=0)
        model.save(os.path.join(args.out, name + ".keras"))
        for layer in model.layers:  # a stateful RNN's states are not in the file: start from zeros, as after loading
            if getattr(layer, "stateful", False):
                layer.reset_state()
        before = model.evaluate(xs32, ys32, batch_size=16, return_dict=True, verbose=0)
        model.fit(xt32, yt32, batch_size=16, epochs=1, shuffle=False, verbose=0)
        after = model.evaluate(xs32, ys32, batch_size=16, return_dict=True, verbose=0)
        expected[name] = {
            "evaluate": {k: float(v) for k, v in before.items()},
            "weights_after_fit": [float(v) for w in model.get_weights() for v in np.asarray(w).reshape(-1)],
            "evaluate_after_fit": {k: float(v) for k, v in after.items()},
            "iterations_after_fit": int(model.optimizer.iterations.numpy()),
        }
    with open(path + ".tmp", "w") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")
    os.replace(path + ".tmp", path)
    print(f"{path}: {len(expected) - 1} cases")


if __name__ == "__main__":
    main()
