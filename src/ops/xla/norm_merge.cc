// Normalisations over axes, broadcasting binary ops, normalize, transpose on the XLA backend (xla_backend.h). NOT YET EMITTED: these ops take no dtype on XLA devices yet
// (ops::supports is false, and a call is refused by name before it gets here).
#include <systolic/error.h>

#include "ops/xla/emit.h"
#include "ops/xla/xla_backend.h"

namespace systolic::ops::xla {

const DTypes layer_norm_forward_dtypes{};
void layer_norm_forward(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y, Tensor& mean,
                        Tensor& rstd, std::uint32_t axes, NormKind kind, double eps) {
  fail("xla: layer_norm_forward is not emitted yet");
}

const DTypes layer_norm_backward_dtypes{};
void layer_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                         const Tensor& dy, Tensor& dx, Tensor& dgamma, Tensor& dbeta, std::uint32_t axes,
                         NormKind kind) {
  fail("xla: layer_norm_backward is not emitted yet");
}

const DTypes broadcast_forward_dtypes{};
void broadcast_forward(BinaryKind kind, const Tensor& a, const Tensor& b, Tensor& y) {
  fail("xla: broadcast_forward is not emitted yet");
}

const DTypes broadcast_backward_dtypes{};
void broadcast_backward(BinaryKind kind, const Tensor& a, const Tensor& b, const Tensor& dy, Tensor& da,
                        Tensor& db) {
  fail("xla: broadcast_backward is not emitted yet");
}

const DTypes normalize_forward_dtypes{};
void normalize_forward(const Tensor& x, const Tensor& mean, const Tensor& variance, Tensor& y,
                       std::uint32_t axes, bool invert) {
  fail("xla: normalize_forward is not emitted yet");
}

const DTypes normalize_backward_dtypes{};
void normalize_backward(const Tensor& variance, const Tensor& dy, Tensor& dx, std::uint32_t axes,
                        bool invert) {
  fail("xla: normalize_backward is not emitted yet");
}

const DTypes transpose_dtypes{};
void transpose(const Tensor& x, Tensor& y, const std::vector<int>& perm) {
  fail("xla: transpose is not emitted yet");
}

}  // namespace systolic::ops::xla
