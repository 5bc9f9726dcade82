// TEMPORARY: ops of the CUDA backend not written yet refuse by name. Each family file removes its entries.
#include "ops/cuda/cuda_backend.h"

namespace systolic::ops::cuda {

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
void CudaBackend::conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y, const Conv2DParams& p) { unsupported("conv2d_forward"); }
void CudaBackend::conv2d_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw, Tensor& db, const Conv2DParams& p) { unsupported("conv2d_backward"); }
void CudaBackend::pool2d_forward(const Tensor& x, Tensor& y, Tensor& workspace, const Pool2DParams& p) { unsupported("pool2d_forward"); }
void CudaBackend::pool2d_backward(const Tensor& x, const Tensor& y, const Tensor& dy, const Tensor& workspace, Tensor& dx, const Pool2DParams& p) { unsupported("pool2d_backward"); }
void CudaBackend::batch_norm_forward_training(const Tensor& x, const Tensor& gamma, const Tensor& beta, Tensor& y, Tensor& mean, Tensor& var, double eps) { unsupported("batch_norm_forward_training"); }
void CudaBackend::batch_norm_forward_inference(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& mean, const Tensor& var, Tensor& y, double eps) { unsupported("batch_norm_forward_inference"); }
void CudaBackend::batch_norm_backward(const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& var, const Tensor& dy, Tensor& dx, Tensor& dgamma, Tensor& dbeta, double eps) { unsupported("batch_norm_backward"); }
void CudaBackend::dense_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) { unsupported("dense_forward"); }
void CudaBackend::dense_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw, Tensor& db) { unsupported("dense_backward"); }
#pragma GCC diagnostic pop

}  // namespace systolic::ops::cuda
