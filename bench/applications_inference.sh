#!/usr/bin/env bash
# Inference speed of ResNet50 and MobileNetV2 at 224x224x3 on the CPU, batch 1 and 32: systolic beside Keras 3 on
# TensorFlow and PyTorch (torchvision), alternating, on the same machine. One JSON line per run.
#   bench/applications_inference.sh [rounds]
# Environment: BUILD (default ./build: needs bench/predict_latency), KERAS_PYTHON (python with keras and
# tensorflow-cpu; default /work/venv/bin/python), TORCH_PYTHON (python with torch and torchvision; default
# /work/venv-torch/bin/python), MODELS_DIR (where the Keras .h5 files are written; default /tmp/systolic-bench).
# Weights are random (weights=None): speed does not depend on them.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-3}"
build=${BUILD:-./build}
keras_python=${KERAS_PYTHON:-/work/venv/bin/python}
torch_python=${TORCH_PYTHON:-/work/venv-torch/bin/python}
dir=${MODELS_DIR:-/tmp/systolic-bench}
mkdir -p "$dir"
export TF_CPP_MIN_LOG_LEVEL=3 CUDA_VISIBLE_DEVICES=""
for m in ResNet50 MobileNetV2; do
  [ -f "$dir/$m.h5" ] || "$keras_python" bench/keras_inference.py --model "$m" --save "$dir/$m.h5" >/dev/null
done
for _ in $(seq "$rounds"); do
  for m in ResNet50 MobileNetV2; do
    for b in 1 32; do
      repeats=$((b == 1 ? 30 : 5))
      "$build/bench/predict_latency" "$dir/$m.h5" "$b" "$repeats"
      "$keras_python" bench/keras_inference.py --model "$m" --batch "$b" --repeats "$repeats"
      if [ -x "$torch_python" ]; then
        "$torch_python" bench/pytorch_inference.py --model "$m" --batch "$b" --repeats "$repeats"
      fi
    done
  done
done
