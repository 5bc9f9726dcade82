#!/usr/bin/env bash
# Side-by-side CPU benchmark of issue 28's sequence models (bench/keras_sequence.py: bilstm_imdb, keras-io's
# bidirectional LSTM over 200 ids of a 20k vocabulary, batch 32; gru_series, two GRU(64) over (100, 6), batch 32;
# lstm_step, one step of an LSTM(64), batch 1) and issue 29's transformer_series (keras-io's time-series transformer
# encoder, 2 blocks of MultiHeadAttention over (128, 32), batch 32): systolic (the .keras files Keras writes, run by
# `systolic benchmark`), Keras 3 on TensorFlow and PyTorch 2.x, float32, training samples/s and single-sample predict
# latency.
# The frameworks take turns within each round. Prints one JSON line per run, then a table of the medians.
#
#   bench/cpu_sequence.sh [rounds] [steps]
#
# Needs a Release build in $BUILD (default ./build) and the bench venv ($BENCH_VENV, default
# /var/tmp/systolic-bench-venv, with tensorflow-cpu, keras and torch: see bench/cpu_seed_cnn.sh). $TORCH_VENV names
# another venv for PyTorch (default: the bench venv); $MODELS a subset of the models (default: all four).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-3}"
steps="${2:-20}"
build="${BUILD:-build}"
py="${BENCH_VENV:-/var/tmp/systolic-bench-venv}/bin/python"
torch_py="${TORCH_VENV:-${BENCH_VENV:-/var/tmp/systolic-bench-venv}}/bin/python"
read -r -a model_list <<<"${MODELS:-bilstm_imdb gru_series lstm_step transformer_series}"
models="$(mktemp -d)"
out="$(mktemp)"
trap 'rm -rf "$out" "$models"' EXIT
"$py" bench/keras_sequence.py --save "$models"
torch=1
"$torch_py" -c "import torch" 2>/dev/null ||
  { torch=0; echo "PyTorch does not import in $torch_py: its column is left out" >&2; }
for _ in $(seq "$rounds"); do
  for m in "${model_list[@]}"; do
    b=32
    [[ "$m" == lstm_step ]] && b=1
    "$build/systolic" benchmark --model "$models/$m.keras" --batch-size "$b" --steps "$steps" --device cpu 2>/dev/null |
      python3 -c "import json,sys; r=json.load(sys.stdin); print(json.dumps({'framework': 'systolic', 'model': '$m',
        'batch_size': r['batch_size'], 'train_samples_per_sec': r['train_images_per_sec'],
        'predict_ms': r['predict_ms']}))" | tee -a "$out"
    "$py" bench/keras_sequence.py --model "$m" --batch-size "$b" --steps "$steps" | tee -a "$out"
    if ((torch)); then "$torch_py" bench/pytorch_sequence.py --model "$m" --batch-size "$b" --steps "$steps" | tee -a "$out"; fi
  done
done
python3 - "$out" <<'PY'
import json, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    ver = r.get("torch_version") or r.get("keras_version") or ""
    runs.setdefault((r["model"], f"{r['framework']} {ver}".strip()), []).append((r["train_samples_per_sec"], r["predict_ms"]))
print()
print("| model | framework | runs | train samples/s (median) | (min-max) | predict ms, 1 sample (median) |")
print("|---|---|---:|---:|---:|---:|")
for (model, name), v in runs.items():
    t = [a for a, _ in v]
    p = [b for _, b in v]
    print(f"| {model} | {name} | {len(v)} | {statistics.median(t):.1f} | {min(t):.1f}-{max(t):.1f} | "
          f"{statistics.median(p):.3f} |")
PY
