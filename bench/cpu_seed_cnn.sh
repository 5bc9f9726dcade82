#!/usr/bin/env bash
# Side-by-side CPU benchmark of the seed CNN (32x32x3, batch 128): systolic vs PyTorch (channels_last and NCHW),
# alternating runs so both see the same machine state. Prints one JSON line per run.
#   bench/cpu_seed_cnn.sh [rounds]      (needs a build in ./build and /usr/bin/python3 with python3-torch)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-3}"
for _ in $(seq "$rounds"); do
  ./build/systolic benchmark --model seed-cnn --batch-size 128 --steps 10 --device cpu
  /usr/bin/python3 bench/pytorch_seed_cnn.py --batch-size 128 --steps 10 --memory-format channels_last
  /usr/bin/python3 bench/pytorch_seed_cnn.py --batch-size 128 --steps 10 --memory-format contiguous
done
