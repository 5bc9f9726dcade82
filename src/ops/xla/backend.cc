// The XLA backend's table, from the list (include/systolic/ops.h) and what each op's file defines.
#include "ops/xla/xla_backend.h"

namespace systolic::ops::xla {

SYSTOLIC_DEFINE_BACKEND("xla")

}  // namespace systolic::ops::xla
