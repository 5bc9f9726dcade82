// The CPU backend's table, from the list (include/systolic/ops.h) and what each op's file defines.
// Every op goes through Bf16Emulated (ops/cpu/bf16_emulation.h): bfloat16 data is widened to float32 around the
// op's float32 implementation.
#include "ops/cpu/bf16_emulation.h"
#include "ops/cpu/cpu_backend.h"

namespace systolic::ops::cpu {

#define SYSTOLIC_CPU_TABLE_ENTRY(name, params, args) \
  .name = &Bf16Emulated<&name, &name##_dtypes>::run, .name##_dtypes = with_bf16_emulation(name##_dtypes),

const Backend& backend() {
  static const Backend table{.name = "cpu", SYSTOLIC_OPS(SYSTOLIC_CPU_TABLE_ENTRY)};
  return table;
}

}  // namespace systolic::ops::cpu
