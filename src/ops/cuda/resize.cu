// Image resizing on CUDA (UpSampling2D), kernel -> launcher -> entry. Contract (ops.h): tf.image.resize's
// nearest and bilinear with half-pixel centres, no antialias. Forward: one thread per output value. Backward
// gathers (deterministic, no atomics): each dx value sums the dy values whose taps read it, searching the output
// cells within ceil(out/in) + 2 of the cell's inverse image along each axis (every cell that reads it lies
// there). Tap coordinates in double, as the CPU's loops compute them; bfloat16 data in float.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "ops/cuda/context.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/cuda/kernels.cuh"

namespace systolic::ops::cuda {

namespace {

struct Tap {
  std::int64_t lo, hi;
  double f;
};
// Where output cell o reads along an axis of `in` cells resized to `out` (the CPU's taps()).
__device__ Tap tap(std::int64_t o, std::int64_t in, std::int64_t out, bool bilinear) {
  double scale = static_cast<double>(in) / static_cast<double>(out);
  if (!bilinear) {
    std::int64_t i = static_cast<std::int64_t>(floor((o + 0.5) * scale));
    i = i < in - 1 ? i : in - 1;
    return {i, i, 0.0};
  }
  double s = (o + 0.5) * scale - 0.5;
  double fl = floor(s);
  std::int64_t lo = static_cast<std::int64_t>(fl), hi = static_cast<std::int64_t>(ceil(s));
  return {lo > 0 ? lo : 0, hi < in - 1 ? hi : in - 1, s - fl};
}
// The weight with which output cell o reads input cell i along an axis.
__device__ double weight(const Tap& t, std::int64_t i) {
  return (t.lo == i ? 1.0 - t.f : 0.0) + (t.hi == i ? t.f : 0.0);
}

template <class T>
__global__ void resize_forward_kernel(const T* x, T* y, std::int64_t N, std::int64_t H, std::int64_t W,
                                      std::int64_t C, std::int64_t OH, std::int64_t OW, bool bilinear) {
  using A = acc_t<T>;
  SYSTOLIC_GRID_STRIDE(i, N * OH * OW * C) {
    std::int64_t c = i % C, t = i / C;
    std::int64_t ow = t % OW;
    t /= OW;
    std::int64_t oh = t % OH, n = t / OH;
    Tap a = tap(oh, H, OH, bilinear), b = tap(ow, W, OW, bilinear);
    A fh = static_cast<A>(a.f), fw = static_cast<A>(b.f);
    auto at = [&](std::int64_t h, std::int64_t w) { return load(x, ((n * H + h) * W + w) * C + c); };
    A top = at(a.lo, b.lo) + (at(a.lo, b.hi) - at(a.lo, b.lo)) * fw;
    A bottom = at(a.hi, b.lo) + (at(a.hi, b.hi) - at(a.hi, b.lo)) * fw;
    store(y, i, top + (bottom - top) * fh);
  }
}

// The output cells along an axis that may read input cell i: [first, last].
__device__ void readers(std::int64_t i, std::int64_t in, std::int64_t out, std::int64_t& first,
                        std::int64_t& last) {
  double ratio = static_cast<double>(out) / static_cast<double>(in);
  std::int64_t center = static_cast<std::int64_t>(floor((i + 0.5) * ratio));
  std::int64_t radius = static_cast<std::int64_t>(ceil(ratio)) + 2;
  first = center - radius > 0 ? center - radius : 0;
  last = center + radius < out - 1 ? center + radius : out - 1;
}

template <class T>
__global__ void resize_backward_kernel(const T* dy, T* dx, std::int64_t N, std::int64_t H, std::int64_t W,
                                       std::int64_t C, std::int64_t OH, std::int64_t OW, bool bilinear) {
  using A = acc_t<T>;
  SYSTOLIC_GRID_STRIDE(i, N * H * W * C) {
    std::int64_t c = i % C, t = i / C;
    std::int64_t w = t % W;
    t /= W;
    std::int64_t h = t % H, n = t / H;
    std::int64_t oh0, oh1, ow0, ow1;
    readers(h, H, OH, oh0, oh1);
    readers(w, W, OW, ow0, ow1);
    A sum = 0;
    for (std::int64_t oh = oh0; oh <= oh1; ++oh) {
      A wh = static_cast<A>(weight(tap(oh, H, OH, bilinear), h));
      if (wh == A(0)) continue;
      for (std::int64_t ow = ow0; ow <= ow1; ++ow) {
        A ww = static_cast<A>(weight(tap(ow, W, OW, bilinear), w));
        if (ww != A(0)) sum += wh * ww * load(dy, ((n * OH + oh) * OW + ow) * C + c);
      }
    }
    store(dx, i, sum);
  }
}

cudaError_t launch_resize_forward(const void* x, void* y, Element t, std::int64_t N, std::int64_t H,
                                  std::int64_t W, std::int64_t C, std::int64_t OH, std::int64_t OW,
                                  bool bilinear, cudaStream_t stream) {
  std::int64_t n = N * OH * OW * C;
  if (n == 0) return cudaSuccess;
  return visit_element<float, __nv_bfloat16, double>(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return launch_elementwise(resize_forward_kernel<T>, n, stream, static_cast<const T*>(x),
                              static_cast<T*>(y), N, H, W, C, OH, OW, bilinear);
  });
}

cudaError_t launch_resize_backward(const void* dy, void* dx, Element t, std::int64_t N, std::int64_t H,
                                   std::int64_t W, std::int64_t C, std::int64_t OH, std::int64_t OW,
                                   bool bilinear, cudaStream_t stream) {
  std::int64_t n = N * H * W * C;
  if (n == 0) return cudaSuccess;
  return visit_element<float, __nv_bfloat16, double>(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return launch_elementwise(resize_backward_kernel<T>, n, stream, static_cast<const T*>(dy),
                              static_cast<T*>(dx), N, H, W, C, OH, OW, bilinear);
  });
}

}  // namespace

const DTypes resize2d_forward_dtypes{DType::float32, DType::bfloat16, DType::float64};
void resize2d_forward(const Tensor& x, Tensor& y, Interpolation mode) {
  Context& c = context(y);
  SYSTOLIC_CUDA_CHECK(launch_resize_forward(x.raw_data(), y.raw_data(), element_of(x.dtype()), x.dim(0),
                                            x.dim(1), x.dim(2), x.dim(3), y.dim(1), y.dim(2),
                                            mode == Interpolation::bilinear, c.stream));
}

const DTypes resize2d_backward_dtypes{DType::float32, DType::bfloat16, DType::float64};
void resize2d_backward(const Tensor& dy, Tensor& dx, Interpolation mode) {
  Context& c = context(dx);
  SYSTOLIC_CUDA_CHECK(launch_resize_backward(dy.raw_data(), dx.raw_data(), element_of(dx.dtype()), dx.dim(0),
                                             dx.dim(1), dx.dim(2), dx.dim(3), dy.dim(1), dy.dim(2),
                                             mode == Interpolation::bilinear, c.stream));
}

}  // namespace systolic::ops::cuda
