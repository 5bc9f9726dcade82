// The XLA backend's counters (docs/xla.md): how many programs this process compiled, and how long that took.
// Traced steps compile once per batch size; ops run outside a step compile once per distinct program.
#pragma once

#include <cstdint>

namespace systolic {

struct XlaCompileStats {
  std::int64_t programs = 0;    // compiled
  std::int64_t cache_hits = 0;  // programs taken from the cache instead
  double seconds = 0;           // spent compiling
};
XlaCompileStats xla_compile_stats();

}  // namespace systolic
