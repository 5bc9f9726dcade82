#!/usr/bin/env bash
# The GPU benchmark of issue 5: the seed CNN on CIFAR-shaped data (50,000 uint8 images, batch 1024), one warm-up
# epoch then 5 timed epochs, systolic beside PyTorch on the same GPU: eager (channels_last) and torch.compile
# (max-autotune), float32 (TF32 allowed) and bf16 (systolic's mixed_bfloat16 policy, PyTorch's bf16 autocast).
# One JSON line per run, into bench/gpu_results.jsonl (or $1). Needs a CUDA build (scripts/build) and python3 with PyTorch and a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench/gpu_results.jsonl}
samples=${SAMPLES:-50000}
batch=${BATCH:-1024}
epochs=${EPOCHS:-5}
: > "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$out.txt" >&2 || true
./build/systolic info >&2
for policy in float32 mixed_bfloat16; do
  ./build/systolic benchmark --model seed-cnn --device cuda --policy "$policy" --batch-size "$batch" \
    --samples "$samples" --epochs "$epochs" | tee -a "$out"
done
for precision in float32 bf16; do
  for mode in eager compile; do
    python3 bench/pytorch_seed_cnn_gpu.py --mode "$mode" --precision "$precision" --samples "$samples" \
      --batch-size "$batch" --epochs "$epochs" | tee -a "$out"
  done
done
