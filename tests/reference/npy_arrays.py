#!/usr/bin/env python3
"""Writes tests/fixtures/npy/: arrays as numpy.save and numpy.savez write them, for tests/test_npy.cc.

    python3 tests/reference/npy_arrays.py [--out DIR]

Needs numpy. Each <name>.npy comes with its values as numpy reads them in arrays.json (shape, and the values
flattened in C order), so the test compares systolic's reading with numpy's own. bad_*.npy are arrays systolic
refuses: a pickled object array, a structured array, an int64 beyond int32.
"""
import argparse
import json
import os

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "fixtures", "npy"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(4)
    arrays = {
        "float64": rng.normal(size=(2, 3)),
        "float32_fortran": np.asfortranarray(rng.normal(size=(3, 4, 2)).astype(np.float32)),
        "float16": rng.normal(size=(5,)).astype(np.float16),
        "int64_labels": rng.integers(0, 10, size=(7,)),
        "int8": np.array([-128, -1, 0, 127], dtype=np.int8),
        "uint16": np.array([0, 1, 65535], dtype=np.uint16),
        "uint32": np.array([0, 2147483647], dtype=np.uint32),
        "bool": np.array([[True, False], [False, True]]),
        "uint8_image": rng.integers(0, 256, size=(2, 4, 4), dtype=np.uint8),
        "big_endian_int32": np.array([1, -2, 300000], dtype=">i4"),
        "big_endian_float64": np.array([[1.5, -2.25]], dtype=">f8"),
        "scalar": np.float32(3.5),
        "empty": np.zeros((0, 3), dtype=np.float32),
    }
    meta = {}
    for name, a in arrays.items():
        np.save(os.path.join(args.out, name + ".npy"), a)
        back = np.load(os.path.join(args.out, name + ".npy"))
        meta[name] = {"shape": list(back.shape), "values": [float(v) for v in np.ascontiguousarray(back).reshape(-1)]}
    np.save(os.path.join(args.out, "bad_object.npy"), np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    np.save(os.path.join(args.out, "bad_structured.npy"), np.zeros(3, dtype=[("a", "<i4"), ("b", "<f4")]))
    np.save(os.path.join(args.out, "bad_int64_range.npy"), np.array([1, 2**40], dtype=np.int64))
    # An npz data set (numpy.savez_compressed: deflated members) and one lacking y_test.
    x = rng.normal(size=(10, 3))
    np.savez_compressed(os.path.join(args.out, "regression.npz"), x_train=x[:8], y_train=x[:8].sum(1),
                        x_test=x[8:], y_test=x[8:].sum(1))
    np.savez(os.path.join(args.out, "no_y_test.npz"), x_train=x[:8], y_train=x[:8].sum(1), x_test=x[8:])
    with open(os.path.join(args.out, "arrays.json.tmp"), "w") as f:
        json.dump({"generator": f"numpy {np.__version__}", "arrays": meta}, f, indent=1)
        f.write("\n")
    os.replace(os.path.join(args.out, "arrays.json.tmp"), os.path.join(args.out, "arrays.json"))
    print(f"{args.out}: {len(arrays)} arrays")


if __name__ == "__main__":
    main()
