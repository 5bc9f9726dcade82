#!/usr/bin/env python3
"""Writes tests/fixtures/multi_output/: Keras 3 models of several inputs or several outputs, compiled with per-output
losses, loss weights and metrics, fitted and evaluated; and the check that Keras 3 evaluates the multi-output models
systolic writes the same as systolic does.

    python tests/reference/multi_output.py [write] [--out DIR]           # writes tests/fixtures/multi_output/
    python tests/reference/multi_output.py check DIR [--fixtures DIR]    # loads files systolic wrote (not a CI test)

Needs keras (3.x) and tensorflow-cpu from pip; last run with /var/tmp/systolic-bench-venv/bin/python (keras 3.15.1,
tensorflow 2.21.0, CPU).

For each case NAME: NAME.keras, NAME.npz (the training arrays and a test split) and, in expected.json under NAME: the
compile_config as the .keras file's config.json holds it, model.output_names, the fit's arguments ("fit": batch_size,
epochs, the npz names of x, y, sample_weight and validation data, validation_split; every fit is shuffle=False),
Keras's History (keys in Keras's order in "history_keys"), the weights after the fit (model.get_weights() flattened
in order, with their shapes), evaluate on the test split as a dict (return_dict=True, batch_size 8; "evaluate_keys"
holds Keras's key order) and as the list evaluate returns by default (in Keras's order), model.metrics_names, and
"test": the npz names of the test inputs and targets (what `check` evaluates on). Every layer and input is named.
  two_outputs  features(6) -> Dense(8, tanh) "shared" -> Dense(3, softmax) "label" and Dense(1) "value"; loss and
               loss_weights and metrics as dicts by output name; Adam(0.01). Saved AFTER a first fit of 2 epochs
               (fit_before), so the file holds the Adam state: evaluate (dict, list, and with the per-sample weights
               ws, which Keras applies to both outputs' losses) of the saved state, then a second fit of 2 epochs with
               validation_data (fit, history), the weights, evaluate and predict(xs[:4]) after it.
  two_inputs   a(4), b(3) -> Concatenate "concat" -> Dense(5, relu) "hidden" -> Dense(1, sigmoid) "prob"; binary
               crossentropy, accuracy, SGD(0.1, momentum 0.9); saved compiled and untrained, then fitted 2 epochs;
               predict(test inputs [:4]) after it.
  list_losses  x(5) -> Dense(6, tanh) "trunk" -> Dense(2) "out_a" and Dense(1, sigmoid) "out_b"; loss, loss_weights
               and metrics as lists ([["mse"], ["accuracy", "auc"]]); RMSprop(0.01); saved untrained; fitted 2 epochs
               with per-sample weights (some 0).
  shared_loss  inp(4) -> Dense(5, tanh) "body" -> Dense(2) "left" and Dense(2) "right"; one loss "mse" for both
               outputs, metrics ["mae", "mae"] (a list as long as the outputs: one metric per output); "adam"; saved
               untrained; fitted 1 epoch with validation_split 0.25.
  more_of_keras  x(6) -> Dense(8, tanh) "trunk" -> Dense(3, softmax) "cls" (one-hot labels) and Dense(4) "emb";
               CategoricalFocalCrossentropy(alpha 0.4, gamma 1.5, label_smoothing 0.05) and CosineSimilarity, loss
               weights 1 and 0.5; metrics OneHotMeanIoU(3), PrecisionAtRecall(0.5, class_id 1), AUC(multi_label),
               Precision(top_k 2), CategoricalHinge, F1Score(macro), "categorical_crossentropy" (from the softmax's
               logits, as Keras's TensorFlow backend computes it) on "cls", CosineSimilarity on "emb"; Lamb(0.02,
               loss_scale_factor 8, use_ema with momentum 0.7: the fit ends on the averaged weights); saved
               untrained; fitted 2 epochs. Its own random stream (`write --only
               more_of_keras` writes it alone).
two_outputs also has "evaluate_verbose2_text": what evaluate(xs, ys, batch_size=8, verbose=2) printed on the final
model, its two times (which vary from run to run) replaced by X and Y. `write` checks itself: it loads each .keras it
saved, repeats the recorded fit on it and stops unless History and the weights agree within 1e-5.

What Keras 3.15 does here (read from keras/src/trainers/compile_utils.py and trainer.py, and seen in the fixture):
  * with more than one loss, each output's unweighted loss is logged as "<output name>_loss" (a Mean over batches,
    weighted by batch size); "loss" is the weighted sum (loss_weights), plus regularization.
  * compiled metrics are logged as "<output name>_<metric name>" when the model has several outputs, the bare metric
    name when it has one. `metrics` (not `weighted_metrics`) ignore sample_weight; the losses use it, one weight
    array for all outputs.
  * evaluate's dict and History (like every callback's logs) have their keys sorted (pythonify_logs), val_ keys
    included ("val_..." sorts before "value_..."); evaluate's list is "loss", then the per-output losses in output
    order, then the rest in sorted key order (_flatten_metrics_in_order looks up the unprefixed metric names, which
    miss when the names carry an output prefix).
  * an optimizer given as a string ("adam") is saved as its full config; its name ("adam", "adam_1", ...) depends on
    the optimizers made before it in the process, so every case starts with keras.backend.clear_session().

`check DIR`: DIR holds NAME.keras files systolic wrote and results.json, {NAME: {"evaluate": {log name: value},
"data": CASE}} (optionally "sample_weight": an npz array name of CASE, e.g. "ws", and "file": the NAME of
another entry whose .keras file it evaluates). For each NAME, Keras 3 loads
DIR/NAME.keras (keras.saving.load_model) and evaluates it on CASE's test arrays from the fixtures (CASE.npz and the
"test" entry of expected.json; return_dict=True, batch_size 8); every key of either dict must be in the other and
the values must agree within 2e-3 (absolute). One line per name; exits 1 on any mismatch.
"""
import argparse
import contextlib
import io
import json
import os
import re
import sys
import warnings
import zipfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np  # noqa: E402
import keras  # noqa: E402

FIXTURES = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures",
                                         "multi_output"))
TOLERANCE = 2e-3


def floats(a):
    return [float(v) for v in np.asarray(a).reshape(-1)]


def weights_record(m):
    ws = m.get_weights()
    return {"weights_after_fit": [float(v) for a in ws for v in np.asarray(a).reshape(-1)],
            "weight_shapes": [list(np.asarray(a).shape) for a in ws]}


def saved_compile_config(path):
    with zipfile.ZipFile(path) as z:
        return json.loads(z.read("config.json"))["compile_config"]


def inputs_of(arrays, names):
    return arrays[names[0]] if len(names) == 1 else [arrays[n] for n in names]


def evaluate_record(m, x, y, prefix="evaluate", sample_weight=None):
    d = m.evaluate(x, y, sample_weight=sample_weight, batch_size=8, return_dict=True, verbose=0)
    out = {prefix: {k: float(v) for k, v in d.items()}, prefix + "_keys": list(d)}
    if sample_weight is None:
        lst = m.evaluate(x, y, batch_size=8, verbose=0)
        out[prefix + "_list"] = [float(v) for v in (lst if isinstance(lst, list) else [lst])]
    return out


def history_record(h, prefix=""):
    return {prefix + "history": {k: [float(v) for v in vs] for k, vs in h.history.items()},
            prefix + "history_keys": list(h.history)}


def fit_kwargs(fit, arrays):
    """keras fit kwargs from the JSON "fit" record."""
    kw = {"batch_size": fit["batch_size"], "epochs": fit["epochs"], "shuffle": False, "verbose": 0}
    if "sample_weight" in fit:
        kw["sample_weight"] = arrays[fit["sample_weight"]]
    if "validation_split" in fit:
        kw["validation_split"] = fit["validation_split"]
    if "validation_data" in fit:
        v = fit["validation_data"]
        kw["validation_data"] = (inputs_of(arrays, v["x"]), inputs_of(arrays, v["y"]))
    return kw


def do_fit(m, fit, arrays):
    return m.fit(inputs_of(arrays, fit["x"]), inputs_of(arrays, fit["y"]), **fit_kwargs(fit, arrays))


def load_quietly(path):
    """load_model, without the warning that a file saved before any step has fewer optimizer variables."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Skipping variable loading for optimizer")
        return keras.saving.load_model(path)


def assert_close(a, b, what, tol=1e-5):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape or not np.allclose(a, b, atol=tol, rtol=0):
        raise SystemExit(f"self-check failed: {what}: {a} vs {b}")


def two_outputs(rng, out):
    x = rng.normal(size=(72, 6)).astype(np.float32)
    y_label = np.argmax(x[:, :3] + 0.3 * rng.normal(size=(72, 3)), axis=1).astype(np.float32)
    y_value = (x[:, 3] - 0.5 * x[:, 4] + 0.3 * x[:, 5] ** 2 + 0.05 * rng.normal(size=72))[:, None].astype(np.float32)
    ws = rng.uniform(0, 2, size=24).astype(np.float32)
    arrays = {"x": x[:48], "y_label": y_label[:48], "y_value": y_value[:48],
              "xs": x[48:], "ys_label": y_label[48:], "ys_value": y_value[48:], "ws": ws}
    keras.backend.clear_session()
    keras.utils.set_random_seed(21)
    i = keras.Input((6,), name="features")
    h = keras.layers.Dense(8, activation="tanh", name="shared")(i)
    a = keras.layers.Dense(3, activation="softmax", name="label")(h)
    b = keras.layers.Dense(1, name="value")(h)
    m = keras.Model(i, [a, b], name="two_outputs")
    m.compile(optimizer=keras.optimizers.Adam(learning_rate=0.01),
              loss={"label": "sparse_categorical_crossentropy", "value": "mse"},
              loss_weights={"label": 1.0, "value": 0.5},
              metrics={"label": ["accuracy"], "value": ["mae", "mse"]})
    test = {"x": ["xs"], "y": ["ys_label", "ys_value"]}
    fit_before = {"batch_size": 8, "epochs": 2, "x": ["x"], "y": ["y_label", "y_value"]}
    fit = {"batch_size": 8, "epochs": 2, "x": ["x"], "y": ["y_label", "y_value"],
           "validation_data": {"x": ["xs"], "y": ["ys_label", "ys_value"]}}
    rec = {"saved": "after fit_before (holds the Adam state)", "output_names": list(m.output_names),
           "fit_before": fit_before, "fit": fit, "test": test}
    rec.update(history_record(do_fit(m, fit_before, arrays), "before_"))
    path = os.path.join(out, "two_outputs.keras")
    m.save(path)
    xs, ys = arrays["xs"], [arrays["ys_label"], arrays["ys_value"]]
    rec.update(evaluate_record(m, xs, ys, "evaluate_saved"))
    rec.update(evaluate_record(m, xs, ys, "evaluate_saved_weighted", sample_weight=ws))
    rec["metrics_names"] = list(m.metrics_names)
    h = do_fit(m, fit, arrays)
    rec.update(history_record(h))
    rec.update(weights_record(m))
    rec.update(evaluate_record(m, xs, ys))
    rec.update(evaluate_record(m, xs, ys, "evaluate_weighted", sample_weight=ws))
    p = m.predict(xs[:4], verbose=0)
    rec["predict_input"] = "xs[:4]"
    rec["predict"] = {n: floats(v) for n, v in zip(m.output_names, p)}
    rec["predict_shapes"] = {n: list(v.shape) for n, v in zip(m.output_names, p)}
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        m.evaluate(xs, ys, batch_size=8, verbose=2)
    # "3/3 - 0s - 22ms/step - label_accuracy: 0.6250 - ...": the times vary, so they are kept as X and Y.
    rec["evaluate_verbose2_text"] = re.sub(r"^(\d+/\d+) - \d+s - \d+(?:s|ms|us)/step", r"\1 - Xs - Y/step",
                                           text.getvalue())
    rec["evaluate_verbose2_note"] = ("X: the whole seconds evaluate took; Y: the time per step as Keras formats it "
                                     "(Nms, Nus or Ns, N rounded to an integer)")
    # The saved file reproduces the second fit.
    loaded = load_quietly(path)
    assert_close(loaded.evaluate(xs, ys, batch_size=8, verbose=0), rec["evaluate_saved_list"], "loaded evaluate")
    h2 = do_fit(loaded, fit, arrays)
    assert list(h2.history) == rec["history_keys"], (list(h2.history), rec["history_keys"])
    for k in rec["history_keys"]:
        assert_close(h2.history[k], rec["history"][k], f"two_outputs loaded history {k}")
    assert_close(weights_record(loaded)["weights_after_fit"], rec["weights_after_fit"], "loaded weights")
    return "two_outputs", arrays, rec


def two_inputs(rng, out):
    xa = rng.normal(size=(56, 4)).astype(np.float32)
    xb = rng.normal(size=(56, 3)).astype(np.float32)
    y = (xa[:, 0] - 0.5 * xa[:, 2] + xb[:, 1] + 0.3 * rng.normal(size=56) > 0).astype(np.float32)[:, None]
    arrays = {"xa": xa[:40], "xb": xb[:40], "y": y[:40], "xas": xa[40:], "xbs": xb[40:], "ys": y[40:]}
    keras.backend.clear_session()
    keras.utils.set_random_seed(22)
    a = keras.Input((4,), name="a")
    b = keras.Input((3,), name="b")
    c = keras.layers.Concatenate(name="concat")([a, b])
    h = keras.layers.Dense(5, activation="relu", name="hidden")(c)
    o = keras.layers.Dense(1, activation="sigmoid", name="prob")(h)
    m = keras.Model([a, b], o, name="two_inputs")
    m.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1, momentum=0.9), loss="binary_crossentropy",
              metrics=["accuracy"])
    fit = {"batch_size": 8, "epochs": 2, "x": ["xa", "xb"], "y": ["y"]}
    test = {"x": ["xas", "xbs"], "y": ["ys"]}
    return "two_inputs", m, arrays, fit, test, {"predict_input": ["xas[:4]", "xbs[:4]"]}


def list_losses(rng, out):
    x = rng.normal(size=(56, 5)).astype(np.float32)
    y_a = np.stack([x[:, 0] + 0.5 * x[:, 1], np.tanh(x[:, 2]) - x[:, 3]], axis=1).astype(np.float32)
    y_b = (x[:, 4] + 0.5 * x[:, 0] + 0.3 * rng.normal(size=56) > 0).astype(np.float32)[:, None]
    w = rng.uniform(0, 2, size=40).astype(np.float32)
    w[::6] = 0
    arrays = {"x": x[:40], "y_a": y_a[:40], "y_b": y_b[:40], "w": w, "xs": x[40:], "ys_a": y_a[40:],
              "ys_b": y_b[40:]}
    keras.backend.clear_session()
    keras.utils.set_random_seed(23)
    i = keras.Input((5,), name="x")
    h = keras.layers.Dense(6, activation="tanh", name="trunk")(i)
    a = keras.layers.Dense(2, name="out_a")(h)
    b = keras.layers.Dense(1, activation="sigmoid", name="out_b")(h)
    m = keras.Model(i, [a, b], name="list_losses")
    m.compile(optimizer=keras.optimizers.RMSprop(learning_rate=0.01), loss=["mae", "binary_crossentropy"],
              loss_weights=[2.0, 1.0], metrics=[["mse"], ["accuracy", "auc"]])
    fit = {"batch_size": 8, "epochs": 2, "x": ["x"], "y": ["y_a", "y_b"], "sample_weight": "w"}
    test = {"x": ["xs"], "y": ["ys_a", "ys_b"]}
    return "list_losses", m, arrays, fit, test, {}


def shared_loss(rng, out):
    x = rng.normal(size=(40, 4)).astype(np.float32)
    y_left = np.stack([x[:, 0] - x[:, 1], 0.5 * x[:, 2]], axis=1).astype(np.float32)
    y_right = np.stack([np.sin(x[:, 3]), x[:, 0] * x[:, 2]], axis=1).astype(np.float32)
    arrays = {"x": x[:32], "y_left": y_left[:32], "y_right": y_right[:32], "xs": x[32:], "ys_left": y_left[32:],
              "ys_right": y_right[32:]}
    keras.backend.clear_session()
    keras.utils.set_random_seed(24)
    i = keras.Input((4,), name="inp")
    h = keras.layers.Dense(5, activation="tanh", name="body")(i)
    a = keras.layers.Dense(2, name="left")(h)
    b = keras.layers.Dense(2, name="right")(h)
    m = keras.Model(i, [a, b], name="shared_loss")
    m.compile(optimizer="adam", loss="mse", metrics=["mae", "mae"])
    fit = {"batch_size": 8, "epochs": 1, "x": ["x"], "y": ["y_left", "y_right"], "validation_split": 0.25}
    test = {"x": ["xs"], "y": ["ys_left", "ys_right"]}
    return "shared_loss", m, arrays, fit, test, {}


def more_of_keras(rng, out):
    """Losses, metrics and an optimizer beyond the first cases': a row loss per output, IoU, the rates, multi-label
    AUC, top-k precision, F1, Lamb with a loss scale factor and a moving average of the weights."""
    x = rng.normal(size=(56, 6)).astype(np.float32)
    y_cls = np.eye(3, dtype=np.float32)[np.argmax(x[:, :3] + 0.4 * rng.normal(size=(56, 3)), axis=1)]
    y_emb = np.stack([x[:, 0] - x[:, 3], np.tanh(x[:, 1]), x[:, 2] * x[:, 4], 0.5 + 0 * x[:, 5]],
                     axis=1).astype(np.float32)
    arrays = {"x": x[:40], "y_cls": y_cls[:40], "y_emb": y_emb[:40], "xs": x[40:], "ys_cls": y_cls[40:],
              "ys_emb": y_emb[40:]}
    keras.backend.clear_session()
    keras.utils.set_random_seed(25)
    M = keras.metrics
    i = keras.Input((6,), name="x")
    h = keras.layers.Dense(8, activation="tanh", name="trunk")(i)
    a = keras.layers.Dense(3, activation="softmax", name="cls")(h)
    b = keras.layers.Dense(4, name="emb")(h)
    m = keras.Model(i, [a, b], name="more_of_keras")
    m.compile(optimizer=keras.optimizers.Lamb(learning_rate=0.02, loss_scale_factor=8.0, use_ema=True,
                                              ema_momentum=0.7),
              loss={"cls": keras.losses.CategoricalFocalCrossentropy(alpha=0.4, gamma=1.5, label_smoothing=0.05),
                    "emb": keras.losses.CosineSimilarity()},
              loss_weights={"cls": 1.0, "emb": 0.5},
              metrics={"cls": [M.OneHotMeanIoU(num_classes=3), M.PrecisionAtRecall(0.5, class_id=1),
                               M.AUC(multi_label=True), M.Precision(top_k=2), M.CategoricalHinge(),
                               M.F1Score(average="macro"), "categorical_crossentropy"],
                       "emb": [M.CosineSimilarity()]})
    fit = {"batch_size": 8, "epochs": 2, "x": ["x"], "y": ["y_cls", "y_emb"]}
    test = {"x": ["xs"], "y": ["ys_cls", "ys_emb"]}
    return "more_of_keras", m, arrays, fit, test, {}


def untrained_case(make, rng, out):
    """A case saved compiled and untrained, then fitted: returns (name, arrays, record)."""
    name, m, arrays, fit, test, extra = make(rng, out)
    path = os.path.join(out, name + ".keras")
    m.save(path)
    rec = {"saved": "compiled, untrained", "output_names": list(m.output_names), "fit": fit, "test": test}
    h = do_fit(m, fit, arrays)
    rec.update(history_record(h))
    rec.update(weights_record(m))
    xs, ys = inputs_of(arrays, test["x"]), inputs_of(arrays, test["y"])
    rec.update(evaluate_record(m, xs, ys))
    rec["metrics_names"] = list(m.metrics_names)
    if "predict_input" in extra:
        p = m.predict([a[:4] for a in xs] if isinstance(xs, list) else xs[:4], verbose=0)
        p = p if isinstance(p, list) else [p]
        rec["predict_input"] = extra["predict_input"]
        rec["predict"] = {n: floats(v) for n, v in zip(m.output_names, p)}
        rec["predict_shapes"] = {n: list(v.shape) for n, v in zip(m.output_names, p)}
    # The saved file reproduces the fit.
    loaded = load_quietly(path)
    h2 = do_fit(loaded, fit, arrays)
    assert list(h2.history) == rec["history_keys"], (list(h2.history), rec["history_keys"])
    for k in rec["history_keys"]:
        assert_close(h2.history[k], rec["history"][k], f"{name} loaded history {k}")
    assert_close(weights_record(loaded)["weights_after_fit"], rec["weights_after_fit"], f"{name} loaded weights")
    return name, arrays, rec


def write(args):
    out = args.out
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(31)
    path = os.path.join(out, "expected.json")
    if args.only and args.only != "more_of_keras":
        raise SystemExit("--only takes more_of_keras (the earlier cases share one random stream)")
    if args.only:  # that case alone, into the expected.json there (the other cases' files are left as they are)
        with open(path) as f:
            expected = json.load(f)
    else:
        expected = {"generator": f"keras {keras.__version__}"}
    makes = {"two_outputs": None, "two_inputs": two_inputs, "list_losses": list_losses, "shared_loss": shared_loss,
             "more_of_keras": more_of_keras}
    results = []
    for name, make in makes.items():
        if args.only and name != args.only:
            continue
        # Each case draws from its own stream (more_of_keras and later), so writing one alone writes what all do.
        case_rng = rng if make is not more_of_keras else np.random.default_rng(32)
        results.append(two_outputs(case_rng, out) if make is None else untrained_case(make, case_rng, out))
    for name, arrays, rec in results:
        np.savez(os.path.join(out, name + ".npz"), **arrays)
        rec["compile_config"] = saved_compile_config(os.path.join(out, name + ".keras"))
        expected[name] = rec
    with open(path + ".tmp", "w") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")
    os.replace(path + ".tmp", path)
    print(f"{path}: {len(expected) - 1} cases")


def check(args):
    with open(os.path.join(args.dir, "results.json")) as f:
        results = json.load(f)
    with open(os.path.join(args.fixtures, "expected.json")) as f:
        expected = json.load(f)
    ok = True
    for name, entry in results.items():
        case = entry.get("data", name)
        try:
            if case not in expected:
                raise ValueError(f"no case {case!r} in {args.fixtures}/expected.json")
            test = expected[case]["test"]
            with np.load(os.path.join(args.fixtures, case + ".npz")) as z:
                arrays = {k: z[k] for k in z.files}
            sw = arrays[entry["sample_weight"]] if entry.get("sample_weight") else None
            m = keras.saving.load_model(os.path.join(args.dir, entry.get("file", name) + ".keras"))
            got = m.evaluate(inputs_of(arrays, test["x"]), inputs_of(arrays, test["y"]), sample_weight=sw,
                             batch_size=8, return_dict=True, verbose=0)
        except Exception as e:  # a file Keras cannot load or evaluate is a failure of its own
            ok = False
            print(f"{name}: FAILED: {type(e).__name__}: {e}")
            continue
        theirs = entry["evaluate"]
        diffs = []
        for k in sorted(set(got) | set(theirs)):
            if k not in theirs:
                diffs.append(f"{k}: keras {float(got[k]):.6g}, missing in results.json")
            elif k not in got:
                diffs.append(f"{k}: systolic {float(theirs[k]):.6g}, not logged by keras")
            elif not abs(float(got[k]) - float(theirs[k])) <= TOLERANCE:
                diffs.append(f"{k}: keras {float(got[k]):.6g}, systolic {float(theirs[k]):.6g}")
        if diffs:
            ok = False
            print(f"{name} ({case}): MISMATCH: " + "; ".join(diffs))
        else:
            worst = max((abs(float(got[k]) - float(theirs[k])) for k in got), default=0.0)
            print(f"{name} ({case}): ok ({len(got)} values, max |difference| {worst:.2g})")
    sys.exit(0 if ok else 1)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd")
    w = sub.add_parser("write")
    w.add_argument("--out", default=FIXTURES)
    w.add_argument("--only", help="write this case alone (its files, its entry of expected.json)")
    c = sub.add_parser("check")
    c.add_argument("dir")
    c.add_argument("--fixtures", default=FIXTURES)
    p.add_argument("--out", default=FIXTURES)  # `multi_output.py --out DIR` writes too
    a = p.parse_args()
    if a.cmd == "check":
        check(a)
    else:
        a.only = getattr(a, "only", None)
        write(a)


if __name__ == "__main__":
    main()
