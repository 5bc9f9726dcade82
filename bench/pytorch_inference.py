#!/usr/bin/env python3
"""PyTorch (torchvision) inference speed of ResNet50 / MobileNetV2 at 224x224x3 on the CPU, channels_last,
eval mode under torch.inference_mode(); one warm-up call, the median of --repeats. One JSON line.

    python bench/pytorch_inference.py --model ResNet50 --batch 32 --repeats 5
"""
import argparse
import json
import time

import torch
import torchvision

ap = argparse.ArgumentParser()
ap.add_argument("--model", required=True, choices=["ResNet50", "MobileNetV2"])
ap.add_argument("--batch", type=int, default=1)
ap.add_argument("--repeats", type=int, default=10)
a = ap.parse_args()
torch.manual_seed(1)
net = {"ResNet50": torchvision.models.resnet50, "MobileNetV2": torchvision.models.mobilenet_v2}[a.model]()
net = net.eval().to(memory_format=torch.channels_last)
x = (torch.rand(a.batch, 3, 224, 224) * 255).to(memory_format=torch.channels_last)
with torch.inference_mode():
    net(x)
    ms = []
    for _ in range(a.repeats):
        t0 = time.perf_counter()
        net(x)
        ms.append((time.perf_counter() - t0) * 1000)
ms.sort()
med = ms[len(ms) // 2] if len(ms) % 2 else (ms[len(ms) // 2 - 1] + ms[len(ms) // 2]) / 2
print(json.dumps({"framework": f"pytorch {torch.__version__} / torchvision {torchvision.__version__}",
                  "model": a.model, "batch": a.batch, "repeats": a.repeats, "ms_median": round(med, 2),
                  "ms_min": round(ms[0], 2), "images_per_sec": round(a.batch * 1000 / med, 1),
                  "threads": torch.get_num_threads()}))
