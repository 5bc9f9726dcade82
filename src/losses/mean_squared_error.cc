// Keras's MeanSquaredError: per sample, the mean over the non-batch axes of (pred - target)^2
// (ops::mean_squared_error).
#include <systolic/ops.h>

#include "losses/registry.h"

namespace systolic::losses {

bool MeanSquaredError::compute(LossArgs& a) const {
  ops::mean_squared_error(a.output, a.labels, a.total, a.doutput, a.grad_scale);
  return false;
}

const Entry& mean_squared_error_entry() {
  static const Entry e{
      "MeanSquaredError", {"mean_squared_error", "mse", "MSE"}, [](keras_object::StrictConfig&) {
        return std::unique_ptr<Loss>(std::make_unique<MeanSquaredError>());
      }};
  return e;
}

}  // namespace systolic::losses
