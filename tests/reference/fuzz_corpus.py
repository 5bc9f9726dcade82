"""Writes the seed corpora of the libFuzzer harnesses, tests/fuzz/corpus/NAME/, from small real files.

  /work/venv/bin/python tests/reference/fuzz_corpus.py [--tree-seeds build/tests/fuzz/hdf5_tree_seeds]

Keras files are copies of the small fixtures in tests/fixtures/keras (written by tf_keras and Keras 3 through
tests/reference/keras_files.py); images and CIFAR-10 records come from the real CIFAR-10 sample in
../shared/data/cifar10-sample; IDX files are the first records of Debian's Fashion-MNIST
(/usr/share/datasets/fashion-mnist); the npz and the npy arrays are written by NumPy and the tar.gz by Python's
tarfile.
hdf5_reader's seeds are links to the HDF5 seeds of the others; hdf5_tree's are the record streams the HDF5
reading child hands back for them, written by systolic's own encoder (the built hdf5_tree_seeds, given with
--tree-seeds; without it that folder is left as it is).
"""
import argparse
import gzip
import io
import os
import shutil
import struct
import subprocess
import tarfile
import zipfile

import numpy as np
from PIL import Image

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus")
KERAS = os.path.join(ROOT, "tests", "fixtures", "keras")
SAMPLE = os.path.join(ROOT, "..", "shared", "data", "cifar10-sample")
FASHION = "/usr/share/datasets/fashion-mnist"


def folder(name):
    d = os.path.join(CORPUS, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def write(d, name, data):
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


HDF5_SEEDS = ("weights_tfkeras/zoo.tfkeras.h5", "weights_keras3/zoo.keras3.weights.h5",
              "full_model_h5/zoo.tfkeras.full.h5", "full_model_h5/zoo.keras3.full.h5")


def npy_seeds():
    """npy: single .npy arrays (npy::read, predict --input) of each dtype family and order numpy writes."""
    d = folder("npy")
    rng = np.random.default_rng(0)
    seeds = {
        "float32.npy": rng.normal(size=(3, 4)).astype(np.float32),
        "float64-fortran.npy": np.asfortranarray(rng.normal(size=(2, 3, 2))),
        "float16.npy": rng.normal(size=(4,)).astype(np.float16),
        "int64.npy": rng.integers(0, 10, size=(5,)),
        "big-endian-int32.npy": np.array([1, -2, 3], dtype=">i4"),
        "bool.npy": np.array([True, False, True]),
        "uint8.npy": rng.integers(0, 256, size=(2, 2, 3), dtype=np.uint8),
    }
    for name, a in seeds.items():
        buf = io.BytesIO()
        np.save(buf, a)
        write(d, name, buf.getvalue())


def sequences_seeds():
    """sequences: .npy object arrays of integer sequences (npy::read_sequences, Keras's imdb.npz members), pickled
    by numpy: lists (protocol 3 and 4) and int32 arrays (protocol 3), as tests/reference/text_data.py writes them."""
    import pickle
    d = folder("sequences")
    lists = np.empty(4, dtype=object)
    for i, s in enumerate([[1, 14, 22, 16], [1, 194, 1153], [], [1, 70000, 5]]):
        lists[i] = s
    arrays = np.empty(3, dtype=object)
    for i, s in enumerate([[1, 2, 3], [4], [-5, 6]]):
        arrays[i] = np.array(s, dtype=np.int32)
    for name, a, protocol in (("lists-p3.npy", lists, 3), ("lists-p4.npy", lists, 4), ("arrays-p3.npy", arrays, 3)):
        buf = io.BytesIO()
        np.lib.format.write_array_header_1_0(buf, np.lib.format.header_data_from_array_1_0(a))
        pickle.dump(a, buf, protocol=protocol)
        write(d, name, buf.getvalue())
    # What Python 2's pickle wrote for numpy.array([[1, 2], [300]], dtype=object) (GLOBAL, SHORT_BINSTRING), by hand:
    # Keras's imdb.npz was written so.
    p2 = (b"\x80\x02cnumpy.core.multiarray\n_reconstruct\nq\x01cnumpy\nndarray\nq\x02K\x00\x85U\x01b\x87R"
          b"(K\x01K\x02\x85cnumpy\ndtype\nq\x03U\x02O8K\x00K\x01\x87R(K\x03U\x01|NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK?tb"
          b"\x89]q\x04(]q\x05(K\x01K\x02e]q\x06M,\x01aetb.")
    header = "{'descr': '|O', 'fortran_order': False, 'shape': (2,), }"
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    write(d, "python2-p2.npy", b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + p2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tree-seeds", help="the built tests/fuzz/hdf5_tree_seeds, to write hdf5_tree's seeds")
    args = ap.parse_args()
    d = folder("weights_tfkeras")
    shutil.copy(os.path.join(KERAS, "zoo.tfkeras.h5"), d)
    d = folder("weights_keras3")
    shutil.copy(os.path.join(KERAS, "zoo.keras3.weights.h5"), d)
    d = folder("full_model_h5")
    shutil.copy(os.path.join(KERAS, "zoo.tfkeras.full.h5"), d)
    shutil.copy(os.path.join(KERAS, "zoo.keras3.full.h5"), d)
    d = folder("hdf5_reader")
    for f in HDF5_SEEDS:
        os.symlink(os.path.join("..", f), os.path.join(d, os.path.basename(f)))
    if args.tree_seeds:
        d = folder("hdf5_tree")
        subprocess.run([args.tree_seeds, d] + [os.path.join(CORPUS, f) for f in HDF5_SEEDS], check=True)
    d = folder("keras_zip")  # Keras 3 .keras files (tests/reference/keras_zip.py)
    for f in ("nested.keras", "adam.keras"):
        shutil.copy(os.path.join(ROOT, "tests", "fixtures", "keras_zip", f), d)
    d = folder("model_json")
    for f in ("seq.tfkeras.json", "seq.keras3.json", "zoo.tfkeras.json", "zoo.keras3.json"):
        shutil.copy(os.path.join(KERAS, f), d)
    # Attention's call forms (key, attention_mask, use_causal_mask) and an operation's constant array.
    for src, name in (("attention/call_forms.keras", "attention.keras3.json"),
                      ("keras_training/text_transformer.keras", "text_transformer.keras3.json"),
                      ("attention/scores.keras", "attention_scores.keras3.json"),
                      ("attention/einsum.keras", "einsum_dense.keras3.json"),
                      ("attention/gate.keras", "attention_gate.keras3.json"),
                      ("keras_training/softmax_axes.keras", "softmax_axes.keras3.json"),
                      ("attention/additive.keras", "additive_attention.keras3.json"),
                      ("attention/axes.keras", "attention_axes.keras3.json")):
        with zipfile.ZipFile(os.path.join(ROOT, "tests", "fixtures", src)) as z:
            write(d, name, z.read("config.json"))

    images = [np.asarray(Image.open(os.path.join(SAMPLE, f"{i}.png")).convert("RGB")) for i in (1, 2)]
    d = folder("image")
    for fmt, ext in (("PNG", "png"), ("JPEG", "jpg"), ("BMP", "bmp"), ("GIF", "gif")):
        buf = io.BytesIO()
        Image.fromarray(images[0]).save(buf, format=fmt)
        write(d, f"cifar1.{ext}", buf.getvalue())
    buf = io.BytesIO()
    Image.fromarray(images[1]).convert("L").save(buf, format="PNG")
    write(d, "cifar2-grey.png", buf.getvalue())

    d = folder("cifar_batch")  # two records: label byte, then the R, G and B planes
    records = b"".join(bytes([label]) + img.transpose(2, 0, 1).tobytes() for label, img in zip((6, 9), images))
    write(d, "two_records.bin", records)

    d = folder("idx")
    with gzip.open(os.path.join(FASHION, "t10k-images-idx3-ubyte.gz")) as f:
        head = f.read(16 + 2 * 784)
    magic, _, rows, cols = struct.unpack(">IIII", head[:16])
    images_idx = struct.pack(">IIII", magic, 2, rows, cols) + head[16:]
    write(d, "images-2.idx3-ubyte.gz", gzip.compress(images_idx, mtime=0))
    write(d, "images-2.idx3-ubyte", images_idx)
    with gzip.open(os.path.join(FASHION, "t10k-labels-idx1-ubyte.gz")) as f:
        head = f.read(8 + 2)
    magic, _ = struct.unpack(">II", head[:8])
    write(d, "labels-2.idx1-ubyte.gz", gzip.compress(struct.pack(">II", magic, 2) + head[8:], mtime=0))

    d = folder("npz")  # mnist.npz's layout, two samples per split (the reader then refuses the counts)
    x = np.stack([img[:28, :28, 0] for img in images]).astype(np.uint8)
    y = np.array([6, 9], dtype=np.uint8)
    buf = io.BytesIO()
    np.savez_compressed(buf, x_train=x, y_train=y, x_test=x, y_test=y)
    write(d, "mnist-small.npz", buf.getvalue())
    buf = io.BytesIO()
    np.savez(buf, x_train=x, y_train=y, x_test=x, y_test=y)
    write(d, "mnist-small-stored.npz", buf.getvalue())

    npy_seeds()
    sequences_seeds()

    d = folder("tar")  # cifar-10-binary.tar.gz's layout, two records per batch
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.GNU_FORMAT) as t:
        info = tarfile.TarInfo("cifar-10-batches-bin")
        info.type = tarfile.DIRTYPE
        t.addfile(info)
        for name in ("data_batch_1.bin", "test_batch.bin"):
            info = tarfile.TarInfo("cifar-10-batches-bin/" + name)
            info.size = len(records)
            t.addfile(info, io.BytesIO(records))
    write(d, "cifar-small.tar.gz", buf.getvalue())


if __name__ == "__main__":
    main()
