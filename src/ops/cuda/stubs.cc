// TEMPORARY: ops of the CUDA backend not written yet refuse by name. Each family file removes its entries.
#include "ops/cuda/cuda_backend.h"

namespace systolic::ops::cuda {

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
void CudaBackend::activation_forward(Activation a, const Tensor& x, Tensor& y) { unsupported("activation_forward"); }
void CudaBackend::activation_backward(Activation a, const Tensor& y, const Tensor& dy, Tensor& dx) { unsupported("activation_backward"); }
void CudaBackend::dropout_forward(const Tensor& x, Tensor& y, double rate, std::uint64_t seed, const Tensor& step) { unsupported("dropout_forward"); }
void CudaBackend::dropout_backward(const Tensor& dy, Tensor& dx, double rate, std::uint64_t seed, const Tensor& step) { unsupported("dropout_backward"); }
void CudaBackend::pad2d_forward(const Tensor& x, Tensor& y, const Pad2D& p) { unsupported("pad2d_forward"); }
void CudaBackend::pad2d_backward(const Tensor& dy, Tensor& dx, const Pad2D& p) { unsupported("pad2d_backward"); }
void CudaBackend::concat_forward(const std::vector<Tensor>& xs, Tensor& y, int axis) { unsupported("concat_forward"); }
void CudaBackend::concat_backward(const Tensor& dy, std::vector<Tensor>& dxs, int axis) { unsupported("concat_backward"); }
void CudaBackend::fill(Tensor& x, double value) { unsupported("fill"); }
void CudaBackend::copy(const Tensor& src, Tensor& dst) { unsupported("copy"); }
void CudaBackend::add_n(const std::vector<Tensor>& xs, Tensor& y) { unsupported("add_n"); }
void CudaBackend::accumulate(const Tensor& src, Tensor& dst) { unsupported("accumulate"); }
void CudaBackend::scale_shift(const Tensor& x, Tensor& y, double scale, double shift) { unsupported("scale_shift"); }
void CudaBackend::moving_average(Tensor& moving, const Tensor& value, double momentum) { unsupported("moving_average"); }
void CudaBackend::gather_rows(const Tensor& src, const std::vector<std::int64_t>& indices, Tensor& dst) { unsupported("gather_rows"); }
void CudaBackend::gather_rows(const Tensor& src, const Tensor& indices, Tensor& dst) { unsupported("gather_rows"); }
void CudaBackend::augment_images(const Tensor& x, Tensor& y, const AugmentParams& p, std::uint64_t seed, std::uint64_t first) { unsupported("augment_images"); }
void CudaBackend::softmax_cross_entropy(const Tensor& logits, const Tensor& labels, Tensor& total, Tensor& dlogits, double grad_scale) { unsupported("softmax_cross_entropy"); }
void CudaBackend::crossentropy_from_probabilities(const Tensor& probs, const Tensor& labels, Tensor& total, Tensor& dprobs, double grad_scale, double eps) { unsupported("crossentropy_from_probabilities"); }
void CudaBackend::mean_squared_error(const Tensor& pred, const Tensor& target, Tensor& total, Tensor& dpred, double grad_scale) { unsupported("mean_squared_error"); }
void CudaBackend::accuracy_count(const Tensor& pred, const Tensor& labels, Tensor& total) { unsupported("accuracy_count"); }
void CudaBackend::adam_update(Tensor& w, const Tensor& g, Tensor& m, Tensor& v, const AdamStep& s, const Tensor& iterations) { unsupported("adam_update"); }
void CudaBackend::sgd_update(Tensor& w, const Tensor& g, Tensor& velocity, double lr, double momentum, bool nesterov) { unsupported("sgd_update"); }
void CudaBackend::rmsprop_update(Tensor& w, const Tensor& g, Tensor& ms, Tensor& mom, double lr, double rho, double momentum, double epsilon) { unsupported("rmsprop_update"); }
#pragma GCC diagnostic pop

}  // namespace systolic::ops::cuda
