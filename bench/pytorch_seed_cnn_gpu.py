#!/usr/bin/env python3
"""PyTorch GPU baseline for the systolic seed-CNN epoch benchmark (bench/gpu_seed_cnn.sh).

The seed CNN (bench/pytorch_seed_cnn.py's SeedCNN, Keras semantics, dropout on) trained for whole epochs on
CIFAR-shaped data: --samples random uint8 images (N, 32, 32, 3) and labels, resident on the GPU as uint8 like
systolic's; every step gathers a shuffled batch, converts it to float (channels_last) and runs forward, loss,
backward and Adam (eps 1e-7). The epoch loop never synchronises with the host until the epoch ends.

Modes: --mode eager (channels_last) or --mode compile (torch.compile, --compile-mode: default unless named; on
an H200, mode max-autotune had not finished its warm-up epoch after 284 s); --precision float32
(TF32 matmuls and convolutions allowed, as TensorFlow and systolic's float32 policy do) or bf16 (autocast to
bfloat16, float32 master weights: Keras's mixed_bfloat16). The first epoch is a warm-up (compilation, cuDNN
autotuning); the next --epochs are timed. Prints one JSON line.

    python3 bench/pytorch_seed_cnn_gpu.py --mode eager --precision float32 --samples 50000 --batch-size 1024 --epochs 5
"""

import argparse
import json
import time

import torch
import torch.nn.functional as F

from pytorch_seed_cnn import SeedCNN


def main():
    ap = argparse.ArgumentParser(description="PyTorch GPU seed-CNN epoch benchmark")
    ap.add_argument("--samples", type=int, default=50000)
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--epochs", type=int, default=5, help="timed epochs (after one warm-up epoch)")
    ap.add_argument("--mode", choices=["eager", "compile"], default="eager")
    ap.add_argument("--precision", choices=["float32", "bf16"], default="float32")
    ap.add_argument("--compile-mode", default="default",
                    help="torch.compile's mode (default, reduce-overhead, max-autotune, ...); with --mode compile")
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()

    dev = torch.device(args.device)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    classes = 10
    model = SeedCNN(32, 32, 3, classes).to(dev, memory_format=torch.channels_last)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7, fused=dev.type == "cuda")
    x_all = torch.randint(0, 256, (args.samples, 32, 32, 3), dtype=torch.uint8, device=dev)
    y_all = torch.randint(0, classes, (args.samples,), device=dev)
    autocast = torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=args.precision == "bf16")

    def step(idx):
        xb = x_all[idx].permute(0, 3, 1, 2).float().contiguous(memory_format=torch.channels_last)
        with autocast:
            loss = F.cross_entropy(model(xb), y_all[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    if args.mode == "compile":
        step = torch.compile(step, mode=args.compile_mode)

    steps = (args.samples + args.batch_size - 1) // args.batch_size

    def epoch():
        order = torch.randperm(args.samples, device=dev)
        loss = None
        for s in range(steps):
            loss = step(order[s * args.batch_size:(s + 1) * args.batch_size])
        return loss.item()  # the one synchronisation of the epoch

    model.train()
    t0 = time.perf_counter()
    epoch()  # warm-up: compilation, autotuning, allocator
    warm_s = time.perf_counter() - t0
    times = []
    for _ in range(args.epochs):
        t = time.perf_counter()
        last_loss = epoch()
        times.append(time.perf_counter() - t)
    sec = sum(times) / len(times)
    print(json.dumps({
        "framework": "pytorch", "torch_version": torch.__version__, "mode": args.mode,
        "compile_mode": args.compile_mode if args.mode == "compile" else None, "precision": args.precision,
        "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
        "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(), "samples": args.samples,
        "batch_size": args.batch_size, "epochs_timed": args.epochs, "warmup_epoch_s": round(warm_s, 3),
        "sec_per_epoch": round(sec, 4), "epoch_s": [round(t, 4) for t in times],
        "images_per_sec": round(args.samples / sec, 1), "last_loss": round(last_loss, 4),
    }))


if __name__ == "__main__":
    main()
