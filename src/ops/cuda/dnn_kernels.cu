// Helper kernels around cuDNN and cuBLASLt: kernel-layout transposes, NHWC padding and cropping, the
// average-pooling count correction, bias addition and bias gradients. Contracts: dnn_kernels.h.
#include "ops/cuda/dnn_kernels.h"
#include "ops/cuda/kernels.cuh"
#include "ops/cuda/reduce.cuh"

namespace systolic::ops::cuda::dnn {

namespace {

constexpr int kTile = 32;
constexpr int kTileRows = 8;

// One 32x32 tile per block iteration through shared memory, so both the reads (along in's rows) and the
// writes (along out's rows) are coalesced.
template <class Tin, class Tout, bool kAccumulate>
__global__ void __launch_bounds__(kTile* kTileRows)
    transpose_kernel(const Tin* __restrict__ in, Tout* __restrict__ out, std::int64_t rows, std::int64_t cols,
                     std::int64_t tiles_r, std::int64_t tiles_c) {
  __shared__ float tile[kTile][kTile + 1];  // +1: no bank conflicts reading columns
  for (std::int64_t t = blockIdx.x; t < tiles_r * tiles_c; t += gridDim.x) {
    const std::int64_t r0 = (t / tiles_c) * kTile, c0 = (t % tiles_c) * kTile;
    for (int i = threadIdx.y; i < kTile; i += kTileRows) {
      std::int64_t r = r0 + i, c = c0 + threadIdx.x;
      if (r < rows && c < cols) tile[i][threadIdx.x] = to_float(in[r * cols + c]);
    }
    __syncthreads();
    for (int i = threadIdx.y; i < kTile; i += kTileRows) {
      std::int64_t c = c0 + i, r = r0 + threadIdx.x;
      if (r < rows && c < cols) {
        float v = tile[threadIdx.x][i];
        Tout* o = out + c * rows + r;
        if (kAccumulate) v += to_float(*o);
        *o = from_float<Tout>(v);
      }
    }
    __syncthreads();  // the tile is refilled by the next iteration
  }
}

template <class T>
__global__ void pad_kernel(const T* __restrict__ x, T* __restrict__ y, std::int64_t N, std::int64_t H,
                           std::int64_t W, std::int64_t C, std::int64_t PH, std::int64_t PW, std::int64_t top,
                           std::int64_t left, float value) {
  const T fill = from_float<T>(value);
  SYSTOLIC_GRID_STRIDE(i, N * PH * PW * C) {
    std::int64_t c = i % C, t = i / C;
    std::int64_t w = t % PW;
    t /= PW;
    std::int64_t h = t % PH, n = t / PH;
    std::int64_t ih = h - top, iw = w - left;
    y[i] = (ih >= 0 && ih < H && iw >= 0 && iw < W) ? x[((n * H + ih) * W + iw) * C + c] : fill;
  }
}

template <class T>
__global__ void crop_kernel(const T* __restrict__ y, T* __restrict__ x, std::int64_t N, std::int64_t H,
                            std::int64_t W, std::int64_t C, std::int64_t PH, std::int64_t PW,
                            std::int64_t top, std::int64_t left) {
  SYSTOLIC_GRID_STRIDE(i, N * H * W * C) {
    std::int64_t c = i % C, t = i / C;
    std::int64_t w = t % W;
    t /= W;
    std::int64_t h = t % H, n = t / H;
    x[i] = y[((n * PH + h + top) * PW + w + left) * C + c];
  }
}

// Cells of [begin, begin + size) inside [0, limit).
__device__ __forceinline__ std::int64_t overlap(std::int64_t begin, std::int64_t size, std::int64_t limit) {
  std::int64_t lo = begin > 0 ? begin : 0;
  std::int64_t hi = begin + size < limit ? begin + size : limit;
  return hi > lo ? hi - lo : 0;
}

template <class T>
__global__ void pool_count_rescale_kernel(const T* in, T* out, std::int64_t N, std::int64_t OH,
                                          std::int64_t OW, std::int64_t C, std::int64_t H, std::int64_t W,
                                          int window_h, int window_w, int stride_h, int stride_w, int pad_top,
                                          int pad_left) {
  const float area = float(window_h) * float(window_w);
  SYSTOLIC_GRID_STRIDE(i, N * OH * OW * C) {
    std::int64_t t = i / C;
    std::int64_t ow = t % OW;
    std::int64_t oh = (t / OW) % OH;
    std::int64_t count =
        overlap(oh * stride_h - pad_top, window_h, H) * overlap(ow * stride_w - pad_left, window_w, W);
    float scale = count > 0 ? area / float(count) : 0.0f;
    out[i] = from_float<T>(to_float(in[i]) * scale);
  }
}

template <class Ty, class Tb>
__global__ void add_bias_kernel(Ty* __restrict__ y, const Tb* __restrict__ b, std::int64_t rows,
                                std::int64_t cols, bool relu) {
  SYSTOLIC_GRID_STRIDE(i, rows * cols) {
    float v = b ? to_float(y[i]) + to_float(b[i % cols]) : to_float(y[i]);
    if (relu) v = v > 0.0f ? v : 0.0f;
    y[i] = from_float<Ty>(v);
  }
}

template <class T>
struct ColumnOf {
  const T* dy;
  std::int64_t C;
  __device__ void init(std::int64_t) {}
  __device__ void operator()(std::int64_t r, std::int64_t c, float* acc) const {
    acc[0] += to_float(dy[r * C + c]);
  }
};

template <class T>
struct AddInto {
  T* db;
  __device__ void operator()(std::int64_t c, const double* s) const {
    db[c] = from_float<T>(static_cast<float>(double(to_float(db[c])) + s[0]));
  }
};

}  // namespace

cudaError_t launch_transpose(const void* in, Element in_type, void* out, Element out_type, std::int64_t rows,
                             std::int64_t cols, bool accumulate, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  std::int64_t tiles_r = (rows + kTile - 1) / kTile, tiles_c = (cols + kTile - 1) / kTile;
  std::int64_t tiles = tiles_r * tiles_c;
  unsigned grid = static_cast<unsigned>(tiles < 65535 * 8 ? tiles : 65535 * 8);
  dim3 block(kTile, kTileRows);
  return visit_element<float, __nv_bfloat16>(in_type, [&](auto tin) {
    using Tin = typename decltype(tin)::type;
    return visit_element<float, __nv_bfloat16>(out_type, [&](auto tout) {
      using Tout = typename decltype(tout)::type;
      if (accumulate)
        transpose_kernel<Tin, Tout, true><<<grid, block, 0, stream>>>(
            static_cast<const Tin*>(in), static_cast<Tout*>(out), rows, cols, tiles_r, tiles_c);
      else
        transpose_kernel<Tin, Tout, false><<<grid, block, 0, stream>>>(
            static_cast<const Tin*>(in), static_cast<Tout*>(out), rows, cols, tiles_r, tiles_c);
      return cudaGetLastError();
    });
  });
}

cudaError_t launch_pad_nhwc(const void* x, void* y, Element type, std::int64_t N, std::int64_t H,
                            std::int64_t W, std::int64_t C, std::int64_t PH, std::int64_t PW,
                            std::int64_t top, std::int64_t left, float value, cudaStream_t stream) {
  std::int64_t n = N * PH * PW * C;
  if (n <= 0) return cudaSuccess;
  return visit_element<float, __nv_bfloat16>(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return launch_elementwise(pad_kernel<T>, n, stream, static_cast<const T*>(x), static_cast<T*>(y), N, H, W,
                              C, PH, PW, top, left, value);
  });
}

cudaError_t launch_crop_nhwc(const void* y, void* x, Element type, std::int64_t N, std::int64_t H,
                             std::int64_t W, std::int64_t C, std::int64_t PH, std::int64_t PW,
                             std::int64_t top, std::int64_t left, cudaStream_t stream) {
  std::int64_t n = N * H * W * C;
  if (n <= 0) return cudaSuccess;
  return visit_element<float, __nv_bfloat16>(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return launch_elementwise(crop_kernel<T>, n, stream, static_cast<const T*>(y), static_cast<T*>(x), N, H,
                              W, C, PH, PW, top, left);
  });
}

cudaError_t launch_pool_count_rescale(const void* in, void* out, Element type, std::int64_t N,
                                      std::int64_t OH, std::int64_t OW, std::int64_t C, std::int64_t H,
                                      std::int64_t W, int window_h, int window_w, int stride_h, int stride_w,
                                      int pad_top, int pad_left, cudaStream_t stream) {
  std::int64_t n = N * OH * OW * C;
  if (n <= 0) return cudaSuccess;
  return visit_element<float, __nv_bfloat16>(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return launch_elementwise(pool_count_rescale_kernel<T>, n, stream, static_cast<const T*>(in),
                              static_cast<T*>(out), N, OH, OW, C, H, W, window_h, window_w, stride_h,
                              stride_w, pad_top, pad_left);
  });
}

cudaError_t launch_add_bias(void* y, Element y_type, const void* b, Element b_type, std::int64_t rows,
                            std::int64_t cols, bool relu, cudaStream_t stream) {
  std::int64_t n = rows * cols;
  if (n <= 0) return cudaSuccess;
  return visit_element<float, __nv_bfloat16>(y_type, [&](auto ty) {
    using Ty = typename decltype(ty)::type;
    return visit_element<float, __nv_bfloat16>(b_type, [&](auto tb) {
      using Tb = typename decltype(tb)::type;
      return launch_elementwise(add_bias_kernel<Ty, Tb>, n, stream, static_cast<Ty*>(y),
                                static_cast<const Tb*>(b), rows, cols, relu);
    });
  });
}

std::size_t bias_grad_partial_bytes(std::int64_t rows, std::int64_t cols) {
  return reduce::partials_floats(rows, cols, 1) * sizeof(float);
}

cudaError_t launch_bias_grad(const void* dy, Element dy_type, void* db, Element db_type, std::int64_t rows,
                             std::int64_t cols, void* partial, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  return visit_element<float, __nv_bfloat16>(dy_type, [&](auto tdy) {
    using Tdy = typename decltype(tdy)::type;
    return visit_element<float, __nv_bfloat16>(db_type, [&](auto tdb) {
      using Tdb = typename decltype(tdb)::type;
      return reduce::column_sums<1>(ColumnOf<Tdy>{static_cast<const Tdy*>(dy), cols},
                                    AddInto<Tdb>{static_cast<Tdb*>(db)}, rows, cols,
                                    static_cast<float*>(partial), stream);
    });
  });
}

}  // namespace systolic::ops::cuda::dnn
