// CudaBackend's losses and metrics: checks of dtypes and shapes (Error naming the op), then one kernel each
// on the device's stream (losses.h). A sparse label out of range cannot be reported at once without a host
// synchronisation: the kernel sets kLabelOutOfRange, which the next synchronize(device) raises as an Error.
// Contracts: include/systolic/ops.h.
#include "ops/cuda/context.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/losses.h"

namespace systolic::ops::cuda {

namespace {

// Rows and classes of a [..., C] prediction.
void rows_classes(const char* op, const Tensor& pred, std::int64_t& rows, std::int64_t& classes) {
  check_dtype(op, pred, {DType::float32, DType::bfloat16});
  SYSTOLIC_CHECK(pred.rank() >= 1 && pred.dim(-1) > 0, "{}: predictions of shape {} have no classes", op,
                 pred.shape().str());
  classes = pred.dim(-1);
  rows = pred.numel() / classes;
}

// int32 labels [rows] are sparse; float32 or bfloat16 labels [rows, classes] dense (as the CPU's
// sparse_labels).
Labels labels_of(const char* op, const Tensor& labels, std::int64_t rows, std::int64_t classes) {
  SYSTOLIC_CHECK(labels.defined(), "{}: the labels are undefined", op);
  Labels l;
  if (labels.dtype() == DType::int32) {
    SYSTOLIC_CHECK(labels.numel() == rows, "{}: {} integer labels for {} predictions", op, labels.numel(),
                   rows);
    l.sparse = labels.data<std::int32_t>();
  } else {
    SYSTOLIC_CHECK(labels.dtype() == DType::float32 || labels.dtype() == DType::bfloat16,
                   "{}: labels must be int32 (sparse) or float32 or bfloat16 (dense), not {}", op,
                   dtype_name(labels.dtype()));
    SYSTOLIC_CHECK(labels.numel() == rows * classes,
                   "{}: labels of shape {} do not match predictions with {} rows of {}", op,
                   labels.shape().str(), rows, classes);
    l.dense = labels.raw_data();
    l.dense_type = element_of(labels.dtype());
  }
  return l;
}

double* total_of(const char* op, Tensor& total) {
  SYSTOLIC_CHECK(total.defined() && total.dtype() == DType::float64 && total.numel() == 1,
                 "{}: the total must be a float64 scalar, not {} {}", op,
                 total.defined() ? dtype_name(total.dtype()) : "undefined", total.shape().str());
  return total.data<double>();
}

// The gradient's address (null when undefined): pred's dtype and shape.
void* gradient_of(const char* op, const Tensor& pred, Tensor& grad) {
  if (!grad.defined()) return nullptr;
  SYSTOLIC_CHECK(grad.dtype() == pred.dtype() && grad.numel() == pred.numel(),
                 "{}: gradient {} {} for predictions {} {}", op, dtype_name(grad.dtype()), grad.shape().str(),
                 dtype_name(pred.dtype()), pred.shape().str());
  return grad.raw_data();
}

}  // namespace

void CudaBackend::softmax_cross_entropy(const Tensor& logits, const Tensor& labels, Tensor& total,
                                        Tensor& dlogits, double grad_scale) {
  const char* op = "softmax_cross_entropy";
  std::int64_t rows, classes;
  rows_classes(op, logits, rows, classes);
  Labels l = labels_of(op, labels, rows, classes);
  double* t = total_of(op, total);
  void* g = gradient_of(op, logits, dlogits);
  Context& c = context(logits);
  SYSTOLIC_CUDA_CHECK(launch_softmax_cross_entropy(logits.raw_data(), element_of(logits.dtype()), l, rows,
                                                   classes, t, g, grad_scale, c.error_flags, kLabelOutOfRange,
                                                   c.stream));
}

void CudaBackend::crossentropy_from_probabilities(const Tensor& probs, const Tensor& labels, Tensor& total,
                                                  Tensor& dprobs, double grad_scale, double eps) {
  const char* op = "crossentropy_from_probabilities";
  std::int64_t rows, classes;
  rows_classes(op, probs, rows, classes);
  Labels l = labels_of(op, labels, rows, classes);
  double* t = total_of(op, total);
  void* g = gradient_of(op, probs, dprobs);
  Context& c = context(probs);
  SYSTOLIC_CUDA_CHECK(launch_crossentropy_from_probabilities(probs.raw_data(), element_of(probs.dtype()), l,
                                                             rows, classes, t, g, grad_scale, eps,
                                                             c.error_flags, kLabelOutOfRange, c.stream));
}

void CudaBackend::mean_squared_error(const Tensor& pred, const Tensor& target, Tensor& total, Tensor& dpred,
                                     double grad_scale) {
  const char* op = "mean_squared_error";
  check_dtype(op, pred, {DType::float32, DType::bfloat16});
  check_dtype(op, target, {DType::float32, DType::bfloat16});
  SYSTOLIC_CHECK(pred.numel() == target.numel() && pred.rank() >= 1,
                 "mean_squared_error: targets of shape {} for predictions of shape {}", target.shape().str(),
                 pred.shape().str());
  const std::int64_t rows = pred.dim(0), per_row = rows ? pred.numel() / rows : 0;
  double* t = total_of(op, total);
  void* g = gradient_of(op, pred, dpred);
  Context& c = context(pred);
  SYSTOLIC_CUDA_CHECK(launch_mean_squared_error(pred.raw_data(), element_of(pred.dtype()), target.raw_data(),
                                                element_of(target.dtype()), rows, per_row, t, g, grad_scale,
                                                c.stream));
}

void CudaBackend::accuracy_count(const Tensor& pred, const Tensor& labels, Tensor& total) {
  const char* op = "accuracy_count";
  std::int64_t rows, classes;
  rows_classes(op, pred, rows, classes);
  Labels l = labels_of(op, labels, rows, classes);
  double* t = total_of(op, total);
  Context& c = context(pred);
  SYSTOLIC_CUDA_CHECK(launch_accuracy_count(pred.raw_data(), element_of(pred.dtype()), l, rows, classes, t,
                                            c.error_flags, kLabelOutOfRange, c.stream));
}

}  // namespace systolic::ops::cuda
