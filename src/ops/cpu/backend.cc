// The CPU backend's table, from the list (include/systolic/ops.h) and what each op's file defines.
#include "ops/cpu/cpu_backend.h"

namespace systolic::ops::cpu {

SYSTOLIC_DEFINE_BACKEND("cpu")

}  // namespace systolic::ops::cpu
