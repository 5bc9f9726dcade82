// Regularizers and constraints on the XLA backend (xla_backend.h). NOT YET EMITTED: these ops take no dtype on XLA devices yet
// (ops::supports is false, and a call is refused by name before it gets here).
#include <systolic/error.h>

#include "ops/xla/emit.h"
#include "ops/xla/xla_backend.h"

namespace systolic::ops::xla {

const DTypes regularize_dtypes{};
void regularize(const Tensor& x, Tensor& total, Tensor& dx, double l1, double l2, double total_scale,
                double grad_scale) {
  fail("xla: regularize is not emitted yet");
}

const DTypes orthogonal_regularize_dtypes{};
void orthogonal_regularize(const Tensor& x, Tensor& total, Tensor& dx, double factor, bool columns,
                           double total_scale, double grad_scale) {
  fail("xla: orthogonal_regularize is not emitted yet");
}

const DTypes constrain_dtypes{};
void constrain(Tensor& w, const ConstraintParams& p) {
  fail("xla: constrain is not emitted yet");
}

}  // namespace systolic::ops::xla
