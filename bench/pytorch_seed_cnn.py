#!/usr/bin/python3
"""PyTorch CPU baseline for the systolic "seed CNN" benchmark.

Same network as the systolic seed CNN (Keras semantics), with real dropout:
  BN -> Conv(32,3x3,same,relu) -> Conv(32,3x3,same,relu) -> MaxPool 2x2
  -> Dropout(0.25) -> BN -> Conv(64,3x3,same,relu) -> Conv(64,3x3,valid,relu)
  -> MaxPool 2x2 -> Dropout(0.25) -> Flatten (channels_last order)
  -> Dense(512,relu) -> Dropout(0.5) -> Dense(10) (softmax folded into the loss)
BatchNorm eps 1e-3, momentum 0.01 (= Keras momentum 0.99); channels_last
memory format; Adam(lr 1e-3, eps 1e-7); sparse categorical cross-entropy.
Input: random float32 data with uint8 values (0..255), random labels. --precision bf16 runs forward and loss
under torch.autocast("cpu", dtype=torch.bfloat16) (PyTorch's mixed precision: float32 weights and optimizer).

Runs 2 warm-up training steps, times --steps training steps (forward, loss,
backward, optimizer step) and reports training images/s; then single-image
predict latency (model.eval(), torch.no_grad(), batch 1) as the median of 50
calls after 5 warm-ups.  Prints one JSON line.

    /usr/bin/python3 bench/pytorch_seed_cnn.py --batch-size 128 --steps 10
"""

import argparse
import json
import os
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class SeedCNN(nn.Module):
    def __init__(self, h, w, c, classes=10):
        super().__init__()
        self.bn0 = nn.BatchNorm2d(c, eps=1e-3, momentum=0.01)
        self.conv0 = nn.Conv2d(c, 32, 3, padding=1)
        self.conv1 = nn.Conv2d(32, 32, 3, padding=1)
        self.drop0 = nn.Dropout(0.25)
        self.bn1 = nn.BatchNorm2d(32, eps=1e-3, momentum=0.01)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.conv3 = nn.Conv2d(64, 64, 3)
        self.drop1 = nn.Dropout(0.25)
        hh, ww = (h // 2 - 2) // 2, (w // 2 - 2) // 2
        if hh < 1 or ww < 1:
            raise SystemExit("input shape too small for the seed CNN")
        self.dense0 = nn.Linear(hh * ww * 64, 512)
        self.drop2 = nn.Dropout(0.5)
        self.dense1 = nn.Linear(512, classes)

    def forward(self, x):
        x = F.relu(self.conv0(self.bn0(x)))
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = self.bn1(self.drop0(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(F.relu(self.conv3(x)), 2)
        x = self.drop1(x)
        # Keras Flatten order (h, w, c); free for a channels_last tensor.
        x = x.permute(0, 2, 3, 1).reshape(x.shape[0], -1)
        x = self.drop2(F.relu(self.dense0(x)))
        return self.dense1(x)  # logits; softmax is part of the loss / predict


def main():
    ap = argparse.ArgumentParser(description="PyTorch CPU seed-CNN benchmark")
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=None,
                    help="intra-op threads (default: all cores available to the process)")
    ap.add_argument("--input-shape", default="32,32,3", help="H,W,C")
    ap.add_argument("--precision", choices=["float32", "bf16"], default="float32",
                    help="bf16: torch.autocast('cpu', dtype=torch.bfloat16) around forward and loss")
    ap.add_argument("--memory-format", choices=["channels_last", "contiguous"], default="channels_last",
                    help="tensor layout: channels_last (NHWC, as systolic) or contiguous (NCHW, PyTorch's default)")
    args = ap.parse_args()
    fmt = torch.channels_last if args.memory_format == "channels_last" else torch.contiguous_format

    h, w, c = (int(v) for v in args.input_shape.split(","))
    threads = args.threads or len(os.sched_getaffinity(0))
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    classes = 10

    model = SeedCNN(h, w, c, classes).to(memory_format=fmt)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7)
    x = torch.randint(0, 256, (args.batch_size, c, h, w)).float().contiguous(
        memory_format=fmt)
    y = torch.randint(0, classes, (args.batch_size,))

    autocast = lambda: torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.precision == "bf16")  # noqa: E731

    def train_step():
        opt.zero_grad(set_to_none=True)
        with autocast():
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    model.train()
    for _ in range(2):
        train_step()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        loss = train_step()
    loss.item()
    train_s = time.perf_counter() - t0
    ips = args.batch_size * args.steps / train_s

    model.eval()
    x1 = x[:1].contiguous(memory_format=fmt)
    times = []
    with torch.no_grad(), autocast():
        for i in range(55):
            t = time.perf_counter()
            torch.softmax(model(x1), dim=1)
            dt = time.perf_counter() - t
            if i >= 5:
                times.append(dt)
    predict_ms = statistics.median(times) * 1e3

    print(json.dumps({
        "model": "seed-cnn", "framework": "pytorch", "torch_version": torch.__version__,
        "device": "cpu", "precision": args.precision, "memory_format": args.memory_format, "threads": threads,
        "batch_size": args.batch_size,
        "train_images_per_sec": round(ips, 2), "predict_ms": round(predict_ms, 4),
    }))


if __name__ == "__main__":
    main()
