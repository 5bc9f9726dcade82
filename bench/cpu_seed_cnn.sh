#!/usr/bin/env bash
# Side-by-side CPU benchmark of the seed CNN (32x32x3, batch 128, 10 steps): systolic, Keras 3 on TensorFlow and
# PyTorch 2.x, each in float32 and in bfloat16 (systolic and Keras: --policy mixed_bfloat16; PyTorch: bf16
# autocast), training images/s and single-image predict latency; and systolic on XLA:CPU (the PJRT CPU plugin that
# scripts/setup fetches; float32): one device, and 8 replicas (the plugin's 8 devices, one SPMD program, the same
# global batch of 128), with the seconds spent compiling XLA programs. The frameworks take turns within each round,
# so they see the same machine state. Prints one JSON line per run, then a table of the medians.
#
#   bench/cpu_seed_cnn.sh [rounds]
#
# Needs a Release build in $BUILD (default ./build). The peers come from pip in a virtual environment outside
# the repository, made on the first run: $BENCH_VENV (default /var/tmp/systolic-bench-venv) with tensorflow-cpu,
# keras and torch. KERAS_PYTHON / TORCH_PYTHON name other interpreters to use instead. Debian's PyTorch
# (/usr/bin/python3 with python3-torch) runs as an extra column when it is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-3}"
build="${BUILD:-build}"
venv="${BENCH_VENV:-/var/tmp/systolic-bench-venv}"
if [[ -z "${KERAS_PYTHON:-}" || -z "${TORCH_PYTHON:-}" ]]; then
  if [[ ! -x "$venv/bin/python" ]]; then
    echo "making $venv (pip: tensorflow-cpu keras torch; once)" >&2
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --upgrade pip
    "$venv/bin/pip" install --quiet tensorflow-cpu keras torch
  fi
fi
keras_py="${KERAS_PYTHON:-$venv/bin/python}"
torch_py="${TORCH_PYTHON:-$venv/bin/python}"
debian_torch=0
if /usr/bin/python3 -c "import torch" 2>/dev/null; then debian_torch=1; fi

out="$(mktemp)"
trap 'rm -f "$out"' EXIT
for _ in $(seq "$rounds"); do
  for policy in float32 mixed_bfloat16; do
    "$build/systolic" benchmark --model seed-cnn --batch-size 128 --steps 10 --device cpu --policy "$policy" 2>/dev/null |
      sed "s/^{/{\"framework\": \"systolic\", \"precision\": \"$policy\", /" | tee -a "$out"
    "$keras_py" bench/keras_seed_cnn.py --batch-size 128 --steps 10 --policy "$policy" |
      sed "s/^{/{\"precision\": \"$policy\", /" | tee -a "$out"
  done
  if "$build/systolic" info 2>/dev/null | grep -q '^XLA cpu: /'; then
    for replicas in 1 8; do
      "$build/systolic" benchmark --model seed-cnn --batch-size 128 --steps 10 --device xla:cpu \
        --replicas "$replicas" 2>/dev/null |
        sed "s/^{/{\"framework\": \"systolic xla:cpu x$replicas\", \"precision\": \"float32\", /" | tee -a "$out"
    done
  fi
  for precision in float32 bf16; do
    "$torch_py" bench/pytorch_seed_cnn.py --batch-size 128 --steps 10 --precision "$precision" | tee -a "$out"
    if ((debian_torch)); then
      /usr/bin/python3 bench/pytorch_seed_cnn.py --batch-size 128 --steps 10 --precision "$precision" |
        sed 's/"framework": "pytorch"/"framework": "pytorch (Debian)"/' | tee -a "$out"
    fi
  done
done
python3 - "$out" <<'PY'
import json, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    prec = {"mixed_bfloat16": "bf16"}.get(r.get("precision"), r.get("precision", "float32"))
    name = r["framework"]
    ver = r.get("torch_version") or r.get("keras_version") or r.get("version") or ""
    key = (f"{name} {ver}".strip(), prec)
    runs.setdefault(key, []).append((r["train_images_per_sec"], r.get("predict_ms"), r.get("xla_warmup_compile_s")))
print()
print("| framework | precision | runs | train img/s (median) | train img/s (min-max) | predict ms (median) "
      "| XLA compile s (median) |")
print("|---|---|---:|---:|---:|---:|---:|")
for (name, prec), v in runs.items():
    t = [a for a, _, _ in v]
    p = [b for _, b, _ in v if b is not None]
    c = [x for _, _, x in v if x is not None]
    print(f"| {name} | {prec} | {len(v)} | {statistics.median(t):.1f} | {min(t):.1f}-{max(t):.1f} | "
          f"{f'{statistics.median(p):.2f}' if p else '-'} | {f'{statistics.median(c):.2f}' if c else '-'} |")
PY
