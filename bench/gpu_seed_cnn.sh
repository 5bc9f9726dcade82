#!/usr/bin/env bash
# The GPU benchmark of issue 5: the seed CNN on CIFAR-shaped data (50,000 uint8 images, batch 1024), one warm-up
# epoch then 5 timed epochs, systolic beside PyTorch on the same GPU: eager (channels_last) and torch.compile
# (COMPILE_MODE, default "default": max-autotune had not finished its warm-up epoch after 284 s on an H200),
# float32 (TF32 allowed) and bf16 (systolic's mixed_bfloat16 policy, PyTorch's bf16 autocast); and systolic float32
# with deterministic ops (SYSTOLIC_DETERMINISTIC_OPS=1: what reproducibility costs).
# One JSON line per run, into bench/gpu_results.jsonl (or $1). Needs a CUDA build (scripts/build) and python3 with
# PyTorch and a GPU.
# Environment: SYSTOLIC (the command; default ./build/systolic), PYTHON (the python3 that holds PyTorch; default
# python3), SAMPLES, BATCH, EPOCHS, and TIME_LIMIT (seconds for the whole script; default none). A run that fails
# or is stopped by the time limit writes a JSON line with its "error" instead, and the next one runs; the exit
# status is then 1. The torch.compile runs come last: their compilation time is the least predictable.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench/gpu_results.jsonl}
systolic=${SYSTOLIC:-./build/systolic}
python=${PYTHON:-python3}
samples=${SAMPLES:-50000}
compile_mode=${COMPILE_MODE:-default}
batch=${BATCH:-1024}
epochs=${EPOCHS:-5}
deadline=0
if [ "${TIME_LIMIT:-0}" -gt 0 ]; then deadline=$(($(date +%s) + TIME_LIMIT)); fi
status=0
stdout=$(mktemp)
trap 'rm -f "$stdout"' EXIT
: >"$out"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$out.txt" >&2 || true
"$systolic" info >&2 || status=1

# measure NAME COMMAND...: the command's JSON line (its last line starting with "{") into $out, or one naming the
# run and its error.
measure() {
  local name=$1 limit=0 rc=0 line error
  shift
  if [ "$deadline" -gt 0 ]; then
    limit=$((deadline - $(date +%s)))
    if [ "$limit" -lt 5 ]; then
      printf '{"run": "%s", "error": "not run: TIME_LIMIT reached"}\n' "$name" | tee -a "$out"
      status=1
      return 0
    fi
  fi
  echo "gpu_seed_cnn.sh: $name: $*" >&2
  timeout --kill-after=10 "$limit" "$@" >"$stdout" || rc=$?
  line=$(grep '^{' "$stdout" | tail -1 || true)
  if [ "$rc" -eq 0 ] && [ -n "$line" ]; then
    echo "$line" | tee -a "$out"
    return 0
  fi
  case "$rc" in
    124 | 137) error="stopped by TIME_LIMIT after $limit s" ;;
    0) error="no JSON line" ;;
    *) error="exit $rc" ;;
  esac
  printf '{"run": "%s", "error": "%s"}\n' "$name" "$error" | tee -a "$out"
  status=1
}

for policy in float32 mixed_bfloat16; do
  measure "systolic $policy" "$systolic" benchmark --model seed-cnn --device cuda --policy "$policy" \
    --batch-size "$batch" --samples "$samples" --epochs "$epochs"
done
measure "systolic float32 deterministic" env SYSTOLIC_DETERMINISTIC_OPS=1 "$systolic" benchmark --model seed-cnn \
  --device cuda --policy float32 --batch-size "$batch" --samples "$samples" --epochs "$epochs"
for mode in eager compile; do
  for precision in float32 bf16; do
    measure "pytorch $mode $precision" "$python" bench/pytorch_seed_cnn_gpu.py --mode "$mode" \
      --compile-mode "$compile_mode" --precision "$precision" --samples "$samples" --batch-size "$batch" \
      --epochs "$epochs"
  done
done
exit "$status"
