// The CPU backend: oneDNN primitives for float32 convolution, pooling, batch norm, dense, activations and
// softmax; plain C++ loops (loops.h, OpenMP-parallel) for float64 and for the ops oneDNN has no primitive for.
#pragma once

#include "ops/backend.h"

namespace systolic::ops::cpu {

Backend& cpu_backend();

}  // namespace systolic::ops::cpu
