// Host-side pieces shared by the cuDNN and cuBLASLt ops (conv.cc, pool.cc, dense.cc, attention.cc): element types,
// owned cuDNN descriptors and cuBLASLt plans, cuDNN's size limit. Compiled by g++ only.
#pragma once

#include <systolic/tensor.h>

#include <climits>
#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "ops/cuda/context.h"
#include "ops/cuda/dnn_kernels.h"

namespace systolic::ops::cuda {

inline cudnnDataType_t cudnn_type(DType t) {
  return t == DType::bfloat16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
}

// cuDNN's legacy descriptors take int dimensions and int strides: tensors must have fewer than 2^31 elements.
inline void check_int_sized(const char* op, const char* name, std::int64_t numel) {
  SYSTOLIC_CHECK(numel <= INT_MAX, "{}: {} has {} elements; cuDNN takes at most {}", op, name, numel,
                 INT_MAX);
}

// Owned cuDNN descriptors (cached plans keep them for the life of the process).
template <class T, cudnnStatus_t (*Create)(T*), cudnnStatus_t (*Destroy)(T)>
class CudnnDescriptor {
 public:
  CudnnDescriptor() { SYSTOLIC_CUDNN_CHECK(Create(&d_)); }
  ~CudnnDescriptor() {
    if (d_) (void)Destroy(d_);
  }
  CudnnDescriptor(const CudnnDescriptor&) = delete;
  CudnnDescriptor& operator=(const CudnnDescriptor&) = delete;
  operator T() const { return d_; }

 private:
  T d_ = nullptr;
};
using TensorDescriptor =
    CudnnDescriptor<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using FilterDescriptor =
    CudnnDescriptor<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor>;
using ConvolutionDescriptor = CudnnDescriptor<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor,
                                              cudnnDestroyConvolutionDescriptor>;
using PoolingDescriptor =
    CudnnDescriptor<cudnnPoolingDescriptor_t, cudnnCreatePoolingDescriptor, cudnnDestroyPoolingDescriptor>;

// An NHWC tensor of (n, h, w, c) for cuDNN (whose 4d setter takes n, c, h, w whatever the format).
inline void set_nhwc(cudnnTensorDescriptor_t d, DType t, std::int64_t n, std::int64_t h, std::int64_t w,
                     std::int64_t c) {
  SYSTOLIC_CUDNN_CHECK(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NHWC, cudnn_type(t), static_cast<int>(n),
                                                  static_cast<int>(c), static_cast<int>(h),
                                                  static_cast<int>(w)));
}

// A cuBLASLt matmul as planned once and cached (dense.cc, attention.cc): its descriptor, the layouts of its first
// and second operands (cuBLASLt's A and B) and of its output (C = D), the algorithm the heuristic chose and the
// workspace that takes.
struct MatmulPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  std::size_t workspace = 0;
  MatmulPlan() = default;
  MatmulPlan(const MatmulPlan&) = delete;
  MatmulPlan& operator=(const MatmulPlan&) = delete;
  ~MatmulPlan() {
    if (d) (void)cublasLtMatrixLayoutDestroy(d);
    if (b) (void)cublasLtMatrixLayoutDestroy(b);
    if (a) (void)cublasLtMatrixLayoutDestroy(a);
    if (desc) (void)cublasLtMatmulDescDestroy(desc);
  }
};

struct Preference {
  cublasLtMatmulPreference_t p = nullptr;
  Preference() { SYSTOLIC_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&p)); }
  ~Preference() { (void)cublasLtMatmulPreferenceDestroy(p); }
  Preference(const Preference&) = delete;
  Preference& operator=(const Preference&) = delete;
  template <class T>
  void set(cublasLtMatmulPreferenceAttributes_t attr, T value) {
    SYSTOLIC_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(p, attr, &value, sizeof(value)));
  }
};

// Whether work on the stream is being captured into a CUDA graph (then nothing may synchronise).
inline bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  SYSTOLIC_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  return status != cudaStreamCaptureStatusNone;
}

}  // namespace systolic::ops::cuda
