#!/usr/bin/env python3
"""Writes tests/fixtures/text/: real short texts for the text tools and what Keras 3 computes from them.

    fortunes/train/<class>/NNN.txt, fortunes/test/<class>/NNN.txt
        Real English texts: the BSD fortune collection as Debian's package `fortunes` (1:1.99.1) installs it in
        /usr/share/games/fortunes, one fortune per file, four classes by the file they come from (computers,
        food, law, politics). The first fortunes of each file of at most 400 characters: 100 for train/ and
        the next 35 for test/. The layout text_dataset_from_directory reads (as keras-io's aclImdb).
    imdb_small.npz, reuters_small.npz
        Keras's imdb.npz / reuters.npz format (numpy.savez of object arrays of word-id lists, pickled by numpy;
        int64 labels), holding the fortunes as word ranks (1 = most frequent) of imdb_small_word_index.json:
        imdb_small's x_train/y_train from train/ (computers 0, politics 1) and x_test/y_test from test/;
        reuters_small's x/y from train/ with all four classes.
    imdb_small_arrays.npz
        imdb_small with each sequence a numpy int32 array instead of a list, pickled with protocol 3 (what numpy
        1.x wrote).
    keras_expected.json
        Computed by Keras 3 and numpy: numpy.random.RandomState permutations; keras.datasets.imdb.load_data and
        reuters.load_data on the small files (their get_file pointed at them) under several options;
        keras.utils.pad_sequences; keras.utils.timeseries_dataset_from_array (unshuffled windows, and the start
        order numpy's RandomState gives when shuffled); Keras's index_directory order of fortunes/train with
        shuffle and seed 1337 (what text_dataset_from_directory reads before its tf.data buffer shuffle);
        keras.layers.TextVectorization adapted on fortunes/train (max_tokens 1000, output_sequence_length 30):
        its vocabulary and the ids of fortunes/test; a second layer with split "character".

    apt-get install fortunes   # Debian 12
    /var/tmp/systolic-bench-venv/bin/python tests/reference/text_data.py [--out tests/fixtures/text]

Needs keras 3 and tensorflow (TextVectorization's tf.strings ops).
"""
import argparse
import io
import json
import os
import pickle
import shutil
import zipfile

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

FORTUNES = "/usr/share/games/fortunes"
CLASSES = ["computers", "food", "law", "politics"]
TRAIN, TEST, MAX_CHARS = 100, 35, 400


def fortunes(name):
    with open(os.path.join(FORTUNES, name), encoding="utf-8", errors="strict") as f:
        text = f.read()
    out = []
    for item in text.split("\n%\n"):
        item = item.strip("%\n")
        if item and len(item) <= MAX_CHARS:
            out.append(item + "\n")
    return out


def write_fortunes(out):
    root = os.path.join(out, "fortunes")
    shutil.rmtree(root, ignore_errors=True)
    texts = {}
    for c in CLASSES:
        items = fortunes(c)
        assert len(items) >= TRAIN + TEST, (c, len(items))
        texts[c] = items
        for split, chunk in (("train", items[:TRAIN]), ("test", items[TRAIN:TRAIN + TEST])):
            folder = os.path.join(root, split, c)
            os.makedirs(folder)
            for i, t in enumerate(chunk):
                with open(os.path.join(folder, f"{i:03d}.txt"), "w", encoding="utf-8") as f:
                    f.write(t)
    return texts


def words(text):
    import re
    return re.findall(r"[a-z']+", text.lower())


def save_object_npz(path, arrays, protocol=None):
    """numpy.savez of `arrays`; with `protocol`, object arrays are pickled with that protocol (numpy.save's
    header then pickle.dump, as numpy's format module writes them)."""
    if protocol is None:
        np.savez(path, **arrays)
        return
    with zipfile.ZipFile(path, "w") as z:
        for name, a in arrays.items():
            buf = io.BytesIO()
            if a.dtype == object:
                np.lib.format.write_array_header_1_0(buf, np.lib.format.header_data_from_array_1_0(a))
                pickle.dump(a, buf, protocol=protocol)
            else:
                np.lib.format.write_array(buf, a, allow_pickle=False)
            z.writestr(name + ".npy", buf.getvalue())


def ragged(seqs, as_arrays=False):
    a = np.empty(len(seqs), dtype=object)
    for i, s in enumerate(seqs):
        a[i] = np.array(s, dtype=np.int32) if as_arrays else list(s)
    return a


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "fixtures", "text"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    texts = write_fortunes(args.out)

    import keras
    from keras.src.datasets import imdb, reuters
    from keras.src.utils import dataset_utils

    expected = {}

    # numpy's legacy shuffle
    perms = []
    for n, seed in ((1, 0), (2, 0), (3, 1), (10, 113), (1000, 1337), (1000, 4294967295), (25000, 113)):
        p = np.arange(n)
        np.random.RandomState(seed).shuffle(p)
        perms.append({"n": n, "seed": seed, "head": p[:50].tolist(), "tail": p[-50:].tolist(),
                      "sum_i_times_p": int((np.arange(n, dtype=np.int64) * p).sum())})
    rng = np.random.RandomState(113)
    a, b = np.arange(7), np.arange(5)
    rng.shuffle(a)
    rng.shuffle(b)
    expected["permutations"] = perms
    expected["two_shuffles"] = {"seed": 113, "first": a.tolist(), "second": b.tolist()}

    # the small IMDB and Reuters files: fortunes as word ranks
    counts = {}
    for c in CLASSES:
        for t in texts[c][:TRAIN + TEST]:
            for w in words(t):
                counts[w] = counts.get(w, 0) + 1
    ranked = sorted(counts, key=lambda w: (-counts[w], w))
    index = {w: i + 1 for i, w in enumerate(ranked)}
    with open(os.path.join(args.out, "imdb_small_word_index.json"), "w") as f:
        json.dump(index, f, sort_keys=True)

    def encode(items):
        return [[index[w] for w in words(t)] for t in items]

    x_train = encode(texts["computers"][:TRAIN]) + encode(texts["politics"][:TRAIN])
    y_train = np.array([0] * TRAIN + [1] * TRAIN, dtype=np.int64)
    x_test = encode(texts["computers"][TRAIN:TRAIN + TEST]) + encode(texts["politics"][TRAIN:TRAIN + TEST])
    y_test = np.array([0] * TEST + [1] * TEST, dtype=np.int64)
    imdb_path = os.path.join(args.out, "imdb_small.npz")
    save_object_npz(imdb_path, {"x_train": ragged(x_train), "y_train": y_train, "x_test": ragged(x_test),
                                "y_test": y_test})
    save_object_npz(os.path.join(args.out, "imdb_small_arrays.npz"),
                    {"x_train": ragged(x_train, True), "y_train": y_train, "x_test": ragged(x_test, True),
                     "y_test": y_test}, protocol=3)
    xs = sum((encode(texts[c][:TRAIN]) for c in CLASSES), [])
    ys = np.repeat(np.arange(len(CLASSES), dtype=np.int64), TRAIN)
    reuters_path = os.path.join(args.out, "reuters_small.npz")
    save_object_npz(reuters_path, {"x": ragged(xs), "y": ys})

    def run(module, path, **kw):
        original = module.get_file
        module.get_file = lambda *a, **k: path
        try:
            (xt, yt), (xe, ye) = module.load_data(**kw)
        finally:
            module.get_file = original
        return {"options": kw, "x_train": [list(map(int, s)) for s in xt], "y_train": [int(v) for v in yt],
                "x_test": [list(map(int, s)) for s in xe], "y_test": [int(v) for v in ye]}

    expected["imdb"] = [
        run(imdb, imdb_path),
        run(imdb, imdb_path, num_words=50, skip_top=5, maxlen=30, seed=7),
        run(imdb, imdb_path, num_words=100, oov_char=None, start_char=None, index_from=0),
    ]
    expected["imdb_arrays"] = run(imdb, os.path.join(args.out, "imdb_small_arrays.npz"))
    expected["reuters"] = [
        run(reuters, reuters_path),
        run(reuters, reuters_path, num_words=200, test_split=0.3, seed=3, maxlen=40),
    ]

    # pad_sequences
    seqs = [[1, 2, 3, 4, 5], [6], [], [7, 8, 9]]
    pads = []
    for kw in ({}, {"maxlen": 3}, {"maxlen": 3, "padding": "post", "truncating": "post", "value": -1},
               {"maxlen": 6, "padding": "post"}, {"maxlen": 2, "truncating": "post"}):
        pads.append({"options": kw, "out": keras.utils.pad_sequences(seqs, **kw).tolist()})
    expected["pad_sequences"] = {"sequences": seqs, "cases": pads}

    # timeseries_dataset_from_array
    data = np.arange(40, dtype=np.float32).reshape(20, 2)
    targets = np.arange(100, 120, dtype=np.int32)
    series = []
    for kw in ({"sequence_length": 4}, {"sequence_length": 4, "sequence_stride": 3, "sampling_rate": 2},
               {"sequence_length": 3, "sequence_stride": 2, "start_index": 2, "end_index": 15}):
        ds = keras.utils.timeseries_dataset_from_array(data, targets, batch_size=None, **kw)
        xs_, ys_ = zip(*[(x.numpy().tolist(), int(y.numpy())) for x, y in ds])
        series.append({"options": kw, "x": list(xs_), "y": list(ys_)})
    # shuffled: the starts in the order RandomState(seed).shuffle gives (Keras's tf.data buffer shuffle after it
    # is not reproduced)
    starts = np.arange(0, 20 - 3, 1, dtype=np.int32)
    np.random.RandomState(5).shuffle(starts)
    expected["timeseries"] = {"data_shape": [20, 2], "cases": series,
                              "shuffled": {"sequence_length": 4, "seed": 5, "starts": starts.tolist()}}

    # text_dataset_from_directory's file order
    train_dir = os.path.join(args.out, "fortunes", "train")
    paths, labels, names = dataset_utils.index_directory(train_dir, labels="inferred", formats=(".txt",),
                                                         shuffle=True, seed=1337)
    expected["text_directory"] = {"seed": 1337, "class_names": list(names),
                                  "files": [os.path.relpath(p, train_dir) for p in paths],
                                  "labels": [int(v) for v in labels]}

    # TextVectorization
    def read_split(split):
        out = []
        for c in CLASSES:
            folder = os.path.join(args.out, "fortunes", split, c)
            for fn in sorted(os.listdir(folder)):
                with open(os.path.join(folder, fn), "rb") as f:
                    out.append(f.read().decode("utf-8"))
        return out

    train_texts, test_texts = read_split("train"), read_split("test")
    tv = keras.layers.TextVectorization(max_tokens=1000, output_sequence_length=30)
    tv.adapt(train_texts)
    chars = keras.layers.TextVectorization(split="character", standardize="lower", max_tokens=60)
    chars.adapt(train_texts)
    expected["text_vectorization"] = {
        "words": {"max_tokens": 1000, "output_sequence_length": 30, "vocabulary": tv.get_vocabulary(),
                  "test_ids": np.asarray(tv(test_texts)).tolist()},
        "characters": {"max_tokens": 60, "vocabulary": chars.get_vocabulary(),
                       "test_ids": [np.asarray(chars([t]))[0].tolist() for t in test_texts[:10]]},
    }
    with open(os.path.join(args.out, "keras_expected.json"), "w") as f:
        json.dump(expected, f)
    print("wrote", args.out, "with keras", keras.__version__, "numpy", np.__version__)


if __name__ == "__main__":
    main()
