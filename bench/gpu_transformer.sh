#!/usr/bin/env bash
# The GPU benchmark of issue 29: keras-io's time-series transformer (bench/keras_sequence.py's transformer_series:
# 2 encoder blocks over (128 steps, 32 channels), MultiHeadAttention of 4 heads of 32 with dropout 0.25, Adam)
# trained on one GPU by systolic (the .keras file Keras writes, run by `systolic benchmark --device cuda`: the
# attention op's cuBLASLt batches, dense layers in TF32) and by PyTorch eager (bench/pytorch_sequence.py --device
# cuda: F.scaled_dot_product_attention, PyTorch's fused SDPA, TF32 allowed), at batch 32 and 256: training samples/s
# over STEPS steps after the warm-up, and single-sample predict latency. One JSON line per run into $1 (default
# bench/gpu_transformer.jsonl); a run that fails writes a line with its error and the next one runs (exit status 1).
# Environment: SYSTOLIC (the command; default ./build/systolic), PYTHON (the python3 that holds PyTorch; default
# python3), MODEL (the .keras file; default: made here by `python3 bench/keras_sequence.py --save`, which needs
# Keras), STEPS (default 50).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench/gpu_transformer.jsonl}
systolic=${SYSTOLIC:-./build/systolic}
python=${PYTHON:-python3}
steps=${STEPS:-50}
model=${MODEL:-}
status=0
if [ -z "$model" ]; then
  dir=$(mktemp -d)
  trap 'rm -rf "$dir"' EXIT
  "$python" bench/keras_sequence.py --save "$dir" || exit 1
  model=$dir/transformer_series.keras
fi
: >"$out"
for b in 32 256; do
  line=$("$systolic" benchmark --model "$model" --batch-size "$b" --steps "$steps" --device cuda 2>/dev/null |
    grep '^{' | tail -1)
  if [ -n "$line" ]; then
    python3 -c "import json,sys; r=json.loads(sys.argv[1]); print(json.dumps({'framework': 'systolic',
      'model': 'transformer_series', 'device': r['device'], 'batch_size': r['batch_size'],
      'train_samples_per_sec': r['train_images_per_sec'], 'predict_ms': r['predict_ms'],
      'step_mode': r.get('step_mode')}))" "$line" | tee -a "$out"
  else
    echo "{\"framework\": \"systolic\", \"batch_size\": $b, \"error\": \"no JSON line\"}" | tee -a "$out"
    status=1
  fi
  "$python" bench/pytorch_sequence.py --model transformer_series --device cuda --batch-size "$b" \
    --steps "$steps" | grep '^{' | tail -1 | tee -a "$out"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
done
exit $status
