// resize2d on the XLA backend (xla_backend.h). NOT YET EMITTED: these ops take no dtype on XLA devices yet
// (ops::supports is false, and a call is refused by name before it gets here).
#include <systolic/error.h>

#include "ops/xla/emit.h"
#include "ops/xla/xla_backend.h"

namespace systolic::ops::xla {

const DTypes resize2d_forward_dtypes{};
void resize2d_forward(const Tensor& x, Tensor& y, Interpolation mode) {
  fail("xla: resize2d_forward is not emitted yet");
}

const DTypes resize2d_backward_dtypes{};
void resize2d_backward(const Tensor& dy, Tensor& dx, Interpolation mode) {
  fail("xla: resize2d_backward is not emitted yet");
}

}  // namespace systolic::ops::xla
