#!/usr/bin/env python3
"""Writes tests/fixtures/series/: three small real time-series classification sets of the UCR/UEA archive
(timeseriesclassification.com), as sktime bundles them in its wheel (sktime/datasets/data/<Name>/<Name>_TRAIN.ts and
_TEST.ts), turned into .npz files that `--dataset npz:PATH` reads:

    gunpoint.npz        GunPoint: 50 + 150 series of 150 steps, 1 channel (a hand's x coordinate), 2 classes
                        (drawing a gun, pointing a finger)
    basic_motions.npz   BasicMotions: 40 + 40 series of 100 steps, 6 channels (a smart watch's accelerometer and
                        gyroscope), 4 classes (standing, running, walking, badminton)
    italy_power.npz     ItalyPowerDemand: 67 + 1029 series of 24 steps (a day's hourly electricity demand), 1
                        channel, 2 classes (October to March, April to September)

Each holds x_train and x_test (float32, (series, steps, channels)) and y_train and y_test (int64 class indices, in
the order the file's @classLabel line lists the labels).

    python3 -m pip download sktime==1.2.0 --no-deps -d /tmp/sk
    python3 tests/reference/ucr_series.py /tmp/sk/sktime-1.2.0-py3-none-any.whl [--out DIR]

Needs numpy only; the .ts files are read here (the format: '#' comments, '@' headers, then one line per series:
each channel's comma-separated values, channels separated by ':', the class label last).
"""
import argparse
import io
import os
import zipfile

import numpy as np

SETS = {"GunPoint": "gunpoint", "BasicMotions": "basic_motions", "ItalyPowerDemand": "italy_power"}


def read_ts(text):
    labels, rows, ys = None, [], []
    in_data = False
    for line in io.StringIO(text):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if not in_data:
            if line.lower().startswith("@classlabel"):
                labels = line.split()[2:]
            if line.lower() == "@data":
                in_data = True
            continue
        *channels, label = line.split(":")
        rows.append([[float(v) for v in c.split(",")] for c in channels])
        ys.append(labels.index(label))
    x = np.asarray(rows, dtype=np.float32).transpose(0, 2, 1)  # (series, steps, channels)
    return x, np.asarray(ys, dtype=np.int64), labels


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("wheel", help="sktime's wheel (pip download sktime --no-deps)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "fixtures", "series"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    with zipfile.ZipFile(args.wheel) as whl:
        for name, short in SETS.items():
            parts = {}
            for split in ("TRAIN", "TEST"):
                text = whl.read(f"sktime/datasets/data/{name}/{name}_{split}.ts").decode("utf-8")
                parts[split] = read_ts(text)
            (xt, yt, labels), (xs, ys, _) = parts["TRAIN"], parts["TEST"]
            path = os.path.join(args.out, short + ".npz")
            np.savez(path, x_train=xt, y_train=yt, x_test=xs, y_test=ys)
            print(f"{path}: {name} train {xt.shape} test {xs.shape}, classes {labels}")


if __name__ == "__main__":
    main()
