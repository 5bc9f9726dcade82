"""Keras 3 fixtures for systolic's convolution, cropping, pooling and upsampling layers, 2-D and 1-D, Embedding and
the recurrent layers (SimpleRNN, LSTM, GRU, Bidirectional; with dropout), TimeDistributed, DepthwiseConv1D,
SeparableConv1D and Conv1DTranspose, the 1-D pools with data_format channels_first.

    /var/tmp/systolic-bench-venv/bin/python tests/reference/conv_layers.py            # rewrites tests/fixtures/conv_layers/
    /var/tmp/systolic-bench-venv/bin/python tests/reference/conv_layers.py --out DIR  # elsewhere

Each case is a one-layer functional model, Input(shape) -> layer, built in Keras 3 with deterministic weights
(uniform in [-0.5, 0.5] from a seeded NumPy generator, biases included) and run on deterministic inputs in
float32 (Embedding's: ids, some with a fractional part, which Keras truncates). For each case it writes:
  <case>.h5            model.save (Keras 3's legacy full-model HDF5: model_config + model_weights)
  <case>.weights.h5    model.save_weights (Keras 3's object-tree layout: layers/<key>/vars/<i>)
  <case>.inputs.bin    the inputs, raw little-endian float32, shape (N,) + input shape
  <case>.outputs.bin   Keras's predictions, raw little-endian float32
  <case>.tfkeras.h5    the same layer with the same weights in tf.keras (tf_keras): model.save, tf.keras's
                       full-model HDF5 (tf.keras's config and weight names); its predictions are checked here to
                       equal Keras 3's within 1e-5
and manifest.json: per case its input and output shapes (batch included), the layer's class and its Keras 3
get_config(), and the model's to_json(). tests/test_conv_layers.cc reads them.
"""
import argparse
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import numpy as np  # noqa: E402
import keras  # noqa: E402
import tf_keras  # noqa: E402

N = 2  # batch

# name -> (input shape without the batch, layer factory)
CASES = {
    # Conv2D groups (ConvNeXt's depthwise 7x7 is Conv2D(groups=C)).
    "conv2d_groups2_stride2_same": ((9, 8, 6), lambda L: L.Conv2D(4, 3, strides=2, padding="same", groups=2)),
    "conv2d_groups4_dilation2_relu": (
        (10, 9, 8),
        lambda L: L.Conv2D(12, 3, padding="same", dilation_rate=2, groups=4, activation="relu", use_bias=False),
    ),
    "conv2d_depthwise7x7_groups_c": ((9, 9, 8), lambda L: L.Conv2D(8, 7, padding="same", groups=8)),
    # DepthwiseConv2D (MobileNet, EfficientNet).
    "depthwise_3x3_stride2_same_m2": (
        (8, 8, 5),
        lambda L: L.DepthwiseConv2D(3, strides=2, padding="same", depth_multiplier=2),
    ),
    "depthwise_5x5_stride2_same_odd": ((9, 11, 4), lambda L: L.DepthwiseConv2D(5, strides=2, padding="same")),
    "depthwise_3x3_dilation2_relu6_nobias": (
        (9, 9, 3),
        lambda L: L.DepthwiseConv2D(3, padding="same", dilation_rate=2, use_bias=False, activation="relu6"),
    ),
    "depthwise_2x3_valid": ((6, 7, 3), lambda L: L.DepthwiseConv2D((2, 3), depth_multiplier=3)),
    # SeparableConv2D (Xception, NASNet).
    "separable_3x3_same": ((8, 8, 4), lambda L: L.SeparableConv2D(6, 3, padding="same")),
    "separable_5x5_stride2_same_m2_relu": (
        (9, 10, 3),
        lambda L: L.SeparableConv2D(5, 5, strides=2, padding="same", depth_multiplier=2, activation="relu"),
    ),
    "separable_3x3_dilation2_nobias": (
        (9, 9, 3),
        lambda L: L.SeparableConv2D(4, 3, dilation_rate=2, use_bias=False),
    ),
    # Cropping2D (NASNet's ((1, 0), (1, 0))).
    "cropping_nasnet": ((7, 7, 3), lambda L: L.Cropping2D(((1, 0), (1, 0)))),
    "cropping_int": ((6, 7, 2), lambda L: L.Cropping2D(1)),
    "cropping_pair": ((8, 7, 2), lambda L: L.Cropping2D((2, 1))),
    # Pooling with every padding and stride.
    "maxpool_3_stride2_same": ((9, 8, 3), lambda L: L.MaxPooling2D(3, strides=2, padding="same")),
    "maxpool_3_stride1_same": ((7, 6, 3), lambda L: L.MaxPooling2D(3, strides=1, padding="same")),
    "maxpool_3_stride2_valid": ((9, 8, 3), lambda L: L.MaxPooling2D(3, strides=2)),
    "maxpool_2_same_odd": ((7, 7, 2), lambda L: L.MaxPooling2D(2, padding="same")),
    "avgpool_3_stride2_same": ((9, 8, 3), lambda L: L.AveragePooling2D(3, strides=2, padding="same")),
    "avgpool_3_stride1_same": ((7, 6, 3), lambda L: L.AveragePooling2D(3, strides=1, padding="same")),
    "avgpool_2_same_odd": ((7, 7, 2), lambda L: L.AveragePooling2D(2, padding="same")),
    "avgpool_3x2_strides1x2_same": ((6, 7, 2), lambda L: L.AveragePooling2D((3, 2), strides=(1, 2), padding="same")),
    "avgpool_3_stride2_valid": ((9, 8, 3), lambda L: L.AveragePooling2D(3, strides=2)),
    "global_max": ((5, 6, 4), lambda L: L.GlobalMaxPooling2D()),
    "global_max_keepdims": ((5, 6, 4), lambda L: L.GlobalMaxPooling2D(keepdims=True)),
    "global_avg_keepdims": ((5, 6, 4), lambda L: L.GlobalAveragePooling2D(keepdims=True)),
    # Conv2DTranspose.
    "transpose_3x3_stride2_same": ((5, 6, 4), lambda L: L.Conv2DTranspose(3, 3, strides=2, padding="same")),
    "transpose_4x4_stride2_same": ((4, 5, 3), lambda L: L.Conv2DTranspose(2, 4, strides=2, padding="same")),
    "transpose_3x3_stride2_valid_relu": (
        (4, 4, 3),
        lambda L: L.Conv2DTranspose(5, 3, strides=2, activation="relu"),
    ),
    "transpose_3x3_stride2_output_padding": (
        (4, 5, 2),
        lambda L: L.Conv2DTranspose(3, 3, strides=2, padding="same", output_padding=(0, 1)),
    ),
    # (TensorFlow's CPU kernels refuse dilation_rate > 1 in Conv2DTranspose: no case for it.)
    "transpose_3x2_stride1_nobias": ((5, 5, 3), lambda L: L.Conv2DTranspose(4, (3, 2), use_bias=False)),
    # UpSampling2D.
    "upsampling_nearest_2": ((3, 4, 2), lambda L: L.UpSampling2D(2)),
    "upsampling_nearest_2x3": ((3, 4, 2), lambda L: L.UpSampling2D((2, 3))),
    "upsampling_bilinear_2": ((3, 4, 2), lambda L: L.UpSampling2D(2, interpolation="bilinear")),
    "upsampling_bilinear_3x2": ((4, 3, 2), lambda L: L.UpSampling2D((3, 2), interpolation="bilinear")),
    # The 1-D layers over sequences (steps, channels).
    "conv1d_3_valid": ((10, 4), lambda L: L.Conv1D(5, 3)),
    "conv1d_causal_dilation2_relu": ((12, 3), lambda L: L.Conv1D(4, 3, padding="causal", dilation_rate=2,
                                                                  activation="relu")),
    "conv1d_5_stride2_same_groups2": ((11, 6), lambda L: L.Conv1D(4, 5, strides=2, padding="same", groups=2)),
    "conv1d_1_nobias": ((7, 3), lambda L: L.Conv1D(2, 1, use_bias=False)),
    "maxpool1d_2": ((9, 3), lambda L: L.MaxPooling1D()),
    "maxpool1d_3_stride1_same": ((8, 2), lambda L: L.MaxPooling1D(3, strides=1, padding="same")),
    "avgpool1d_3_stride2_same": ((9, 3), lambda L: L.AveragePooling1D(3, strides=2, padding="same")),
    "global_avg1d": ((6, 4), lambda L: L.GlobalAveragePooling1D()),
    "global_max1d_keepdims": ((6, 4), lambda L: L.GlobalMaxPooling1D(keepdims=True)),
    "zero_padding1d_2_1": ((5, 3), lambda L: L.ZeroPadding1D((2, 1))),
    "cropping1d_1_2": ((8, 3), lambda L: L.Cropping1D((1, 2))),
    "upsampling1d_3": ((4, 2), lambda L: L.UpSampling1D(3)),
    # Embedding: ids as float32 (Keras casts them to int32, toward zero), so the fractional case checks the cast.
    "embedding_10x4": ((7,), lambda L: L.Embedding(10, 4)),
    "embedding_fractional_ids": ((6,), lambda L: L.Embedding(9, 3)),
    "embedding_rank2_ids": ((3, 2), lambda L: L.Embedding(12, 5)),
    # The recurrent layers: the last output or every step's, forwards and backwards, other activations, no bias.
    "simple_rnn_4": ((5, 3), lambda L: L.SimpleRNN(4)),
    "simple_rnn_seq_backwards_relu": (
        (4, 2), lambda L: L.SimpleRNN(3, activation="relu", return_sequences=True, go_backwards=True)),
    "lstm_5": ((6, 3), lambda L: L.LSTM(5)),
    "lstm_seq_backwards": ((5, 2), lambda L: L.LSTM(3, return_sequences=True, go_backwards=True)),
    "lstm_softsign_tanh_nobias": (
        (4, 3), lambda L: L.LSTM(2, activation="softsign", recurrent_activation="tanh", use_bias=False)),
    "gru_4": ((6, 3), lambda L: L.GRU(4)),
    "gru_seq_backwards": ((5, 2), lambda L: L.GRU(3, return_sequences=True, go_backwards=True)),
    # Bidirectional: every merge mode, sequences or the last outputs, an explicit backward_layer.
    "bidirectional_lstm_concat_seq": ((5, 2), lambda L: L.Bidirectional(L.LSTM(3, return_sequences=True))),
    "bidirectional_gru_sum": ((4, 3), lambda L: L.Bidirectional(L.GRU(2), merge_mode="sum")),
    "bidirectional_lstm_mul": ((4, 2), lambda L: L.Bidirectional(L.LSTM(2), merge_mode="mul")),
    "bidirectional_rnn_backward_layer_ave_seq": (
        (4, 2),
        lambda L: L.Bidirectional(L.SimpleRNN(3, return_sequences=True), merge_mode="ave",
                                  backward_layer=L.SimpleRNN(3, activation="relu", return_sequences=True,
                                                             go_backwards=True))),
    # TimeDistributed: a Dense, a Conv2D and an LSTM applied to every step (the LSTM's weights under layer/cell/vars).
    "time_distributed_dense": ((4, 3), lambda L: L.TimeDistributed(L.Dense(5, activation="tanh"))),
    "time_distributed_conv2d": ((3, 6, 5, 2), lambda L: L.TimeDistributed(L.Conv2D(3, 3, padding="same"))),
    "time_distributed_lstm": ((3, 4, 2), lambda L: L.TimeDistributed(L.LSTM(3))),
    # DepthwiseConv1D and SeparableConv1D.
    "depthwise1d_3_m2_same": ((7, 3), lambda L: L.DepthwiseConv1D(3, depth_multiplier=2, padding="same")),
    "depthwise1d_2_stride2_relu": ((8, 4), lambda L: L.DepthwiseConv1D(2, strides=2, activation="relu")),
    "separable1d_3_dilation2": ((9, 3), lambda L: L.SeparableConv1D(4, 3, dilation_rate=2, depth_multiplier=2)),
    "separable1d_5_stride2_same_nobias": (
        (10, 2), lambda L: L.SeparableConv1D(3, 5, strides=2, padding="same", use_bias=False, activation="relu")),
    # Recurrent dropout: the configs (rates, seed) and inference, where nothing is dropped.
    "lstm_dropout_recurrent_dropout": ((5, 3), lambda L: L.LSTM(4, dropout=0.2, recurrent_dropout=0.3, seed=7)),
    "gru_dropout_seq": ((4, 3), lambda L: L.GRU(3, dropout=0.25, return_sequences=True)),
    "simple_rnn_recurrent_dropout": ((5, 2), lambda L: L.SimpleRNN(3, recurrent_dropout=0.4)),
    "bidirectional_lstm_dropout": ((4, 2), lambda L: L.Bidirectional(L.LSTM(2, dropout=0.1, recurrent_dropout=0.2))),
    # GRU(reset_after=False): the reset gate before the candidate's recurrent product, one bias row.
    "gru_reset_before": ((6, 3), lambda L: L.GRU(4, reset_after=False)),
    "gru_reset_before_seq_backwards_nobias": (
        (5, 2), lambda L: L.GRU(3, reset_after=False, return_sequences=True, go_backwards=True, use_bias=False)),
    "bidirectional_gru_reset_before_dropout": (
        (4, 3), lambda L: L.Bidirectional(L.GRU(2, reset_after=False, dropout=0.2, recurrent_dropout=0.1))),
    # Conv1DTranspose, and the 1-D pools with data_format channels_first (C, L).
    "conv1d_transpose_3_stride2_same": ((6, 3), lambda L: L.Conv1DTranspose(4, 3, strides=2, padding="same")),
    "conv1d_transpose_4_stride3_valid_relu": (
        (5, 2), lambda L: L.Conv1DTranspose(3, 4, strides=3, activation="relu", use_bias=False)),
    "conv1d_transpose_3_stride2_output_padding1": (
        (5, 3), lambda L: L.Conv1DTranspose(2, 3, strides=2, padding="same", output_padding=1)),
    "conv1d_transpose_3_dilation2": ((6, 2), lambda L: L.Conv1DTranspose(3, 3, dilation_rate=2)),
    "max_pooling1d_channels_first": ((3, 7), lambda L: L.MaxPooling1D(2, data_format="channels_first")),
    "average_pooling1d_channels_first_same": (
        (4, 7), lambda L: L.AveragePooling1D(3, strides=2, padding="same", data_format="channels_first")),
    "global_average_pooling1d_channels_first_keepdims": (
        (3, 5), lambda L: L.GlobalAveragePooling1D(data_format="channels_first", keepdims=True)),
    "global_max_pooling1d_channels_first": ((4, 6), lambda L: L.GlobalMaxPooling1D(data_format="channels_first")),
}

# Cases whose inputs are ids: name -> (input_dim, fractional part added to each id).
IDS = {"embedding_10x4": (10, 0.0), "embedding_fractional_ids": (9, 0.75), "embedding_rank2_ids": (12, 0.0)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--out", default=os.path.join(os.path.dirname(__file__), "..", "fixtures", "conv_layers"))
    args = ap.parse_args()
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(20261123)
    manifest = {"keras_version": keras.__version__, "cases": []}
    for name, (shape, make) in CASES.items():
        keras.backend.clear_session()
        x_in = keras.Input(shape, name="input")
        layer = make(keras.layers)
        model = keras.Model(x_in, layer(x_in), name=name)
        weights = [rng.uniform(-0.5, 0.5, w.shape).astype("float32") for w in model.get_weights()]
        model.set_weights(weights)
        if name in IDS:
            dim, frac = IDS[name]
            x = (rng.integers(0, dim, (N,) + shape) + frac).astype("float32")
        else:
            x = rng.uniform(-1, 1, (N,) + shape).astype("float32")
        y = np.asarray(model.predict(x, verbose=0), dtype="float32")
        tf_keras.backend.clear_session()
        t_in = tf_keras.Input(shape, name="input")
        t_model = tf_keras.Model(t_in, make(tf_keras.layers)(t_in), name=name)
        t_model.set_weights(weights)
        t_y = t_model.predict(x, verbose=0)
        assert np.abs(t_y - y).max() <= 1e-5 * max(1.0, np.abs(y).max()), (name, np.abs(t_y - y).max())
        t_model.save(os.path.join(out, f"{name}.tfkeras.h5"))
        model.save(os.path.join(out, f"{name}.h5"))
        model.save_weights(os.path.join(out, f"{name}.weights.h5"))
        x.tofile(os.path.join(out, f"{name}.inputs.bin"))
        y.tofile(os.path.join(out, f"{name}.outputs.bin"))
        manifest["cases"].append({
            "name": name,
            "input_shape": list(x.shape),
            "output_shape": list(y.shape),
            "class_name": layer.__class__.__name__,
            "config": layer.get_config(),
            "weights": [[w.path, list(w.shape)] for w in layer.weights],
            "model_json": json.loads(model.to_json()),
        })
        print(f"{name}: {layer.__class__.__name__} {x.shape} -> {y.shape}")
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    print(f"wrote {out}: {len(CASES)} cases (keras {keras.__version__})")


if __name__ == "__main__":
    main()
