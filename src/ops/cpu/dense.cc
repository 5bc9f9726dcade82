// Dense layers on the CPU: oneDNN's matmul for float32 and bfloat16 (onednn_dense_norm.cc), loops for float64,
// the reference every backend is tested against (tests/test_ops.cc). Contracts: include/systolic/ops.h.
#include "ops/cpu/bf16_emulation.h"
#include "ops/cpu/cpu_backend.h"
#include "ops/cpu/onednn.h"

namespace systolic::ops::cpu {

namespace {

template <class T>
void dense_forward_loop(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) {
  std::int64_t K = w.dim(0), U = w.dim(1), M = x.numel() / K;
  const T* xp = x.data<T>();
  const T* wp = w.data<T>();
  const T* bp = b.defined() ? b.data<T>() : nullptr;
  T* yp = y.data<T>();
  parallel_ranges(M, M * K * U, [&](std::int64_t m0, std::int64_t m1) {
    for (std::int64_t m = m0; m < m1; ++m) {
      T* out = yp + m * U;
      for (std::int64_t u = 0; u < U; ++u) out[u] = bp ? bp[u] : T(0);
      for (std::int64_t k = 0; k < K; ++k) {
        T xv = xp[m * K + k];
        const T* wr = wp + k * U;
        for (std::int64_t u = 0; u < U; ++u) out[u] += xv * wr[u];
      }
    }
  });
}

template <class T>
void dense_backward_loop(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw,
                         Tensor& db) {
  std::int64_t K = w.dim(0), U = w.dim(1), M = x.numel() / K;
  const T* xp = x.data<T>();
  const T* wp = w.data<T>();
  const T* gp = dy.data<T>();
  if (dx.defined()) {
    T* dxp = dx.data<T>();
    parallel_ranges(M, M * K * U, [&](std::int64_t m0, std::int64_t m1) {
      for (std::int64_t m = m0; m < m1; ++m)
        for (std::int64_t k = 0; k < K; ++k) {
          T s = 0;
          for (std::int64_t u = 0; u < U; ++u) s += gp[m * U + u] * wp[k * U + u];
          dxp[m * K + k] = s;
        }
    });
  }
  if (dw.defined()) {
    T* dwp = dw.data<T>();
    parallel_ranges(K, M * K * U, [&](std::int64_t k0, std::int64_t k1) {
      for (std::int64_t k = k0; k < k1; ++k)
        for (std::int64_t m = 0; m < M; ++m) {
          T xv = xp[m * K + k];
          for (std::int64_t u = 0; u < U; ++u) dwp[k * U + u] += xv * gp[m * U + u];
        }
    });
  }
  if (db.defined()) {
    T* dbp = db.data<T>();
    for (std::int64_t m = 0; m < M; ++m)
      for (std::int64_t u = 0; u < U; ++u) dbp[u] += gp[m * U + u];
  }
}

}  // namespace

const DTypes dense_forward_dtypes = kFloatsAndBf16;
void dense_forward(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) {
  if (x.dtype() == DType::float64) return dense_forward_loop<double>(x, w, b, y);
  if (x.dtype() == DType::float32 && w.dtype() == DType::float32 && x.numel() * w.dim(1) < kOneDnnMinWork)
    return dense_forward_loop<float>(x, w, b, y);
  if (!onednn::takes(x.dtype())) return Widened<&dense_forward>::run(x, w, b, y);
  onednn::dense_forward(x, w, b, y);
}

const DTypes dense_backward_dtypes = kFloatsAndBf16;
void dense_backward(const Tensor& x, const Tensor& w, const Tensor& dy, Tensor& dx, Tensor& dw, Tensor& db) {
  if (x.dtype() == DType::float64) return dense_backward_loop<double>(x, w, dy, dx, dw, db);
  if (!onednn::takes(x.dtype())) return Widened<&dense_backward>::run(x, w, dy, dx, dw, db);
  onednn::dense_backward(x, w, dy, dx, dw, db);
}

}  // namespace systolic::ops::cpu
