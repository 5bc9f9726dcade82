// Deterministic per-column sums over a row-major [R, C] matrix (NHWC activations seen as R = N*H*W rows of C
// channels; dense outputs as M rows of U units), for .cu files only. Two stages and no atomics, so a result
// never depends on scheduling:
//   1. column_partials: block (bx, by) owns columns [32*bx, 32*bx + 32) and rows [by*rows_per_part, ...);
//      threadIdx.x picks the column (a warp reads 32 consecutive channels of a row: coalesced), threadIdx.y
//      one of 8 interleaved row lanes; each thread sums in float, the 8 lanes are added in a fixed order, and
//      the block writes partial[(part * K + k) * C + c].
//   2. column_finish: one thread per column adds the parts in order, in double, and hands the K sums to a
//      writer functor (which may accumulate into a gradient or derive statistics).
// The number of parts depends on (R, C) only; column_parts() is what the host asks the workspace size from.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops/cuda/kernels.cuh"

namespace systolic::ops::cuda::reduce {

constexpr int kColumnTile = 32;  // columns per block (threadIdx.x)
constexpr int kRowLanes = 8;     // interleaved rows per block (threadIdx.y)

struct Parts {
  std::int64_t count;          // parts along R (gridDim.y)
  std::int64_t rows_per_part;  // rows each part sums
  std::int64_t column_tiles;   // gridDim.x
};

// About 1024 blocks in all (a few waves on the largest GPUs), at least 64 rows per part, at most 65535 parts.
inline Parts column_parts(std::int64_t R, std::int64_t C) {
  Parts p;
  p.column_tiles = (C + kColumnTile - 1) / kColumnTile;
  std::int64_t target = 1024 / (p.column_tiles > 0 ? p.column_tiles : 1);
  if (target < 1) target = 1;
  std::int64_t rows = (R + target - 1) / target;
  if (rows < 64) rows = 64;
  p.count = R > 0 ? (R + rows - 1) / rows : 1;
  if (p.count > 65535) {
    p.count = 65535;
    rows = (R + p.count - 1) / p.count;
    p.count = (R + rows - 1) / rows;
  }
  p.rows_per_part = rows;
  return p;
}

// Floats of partial sums for K sums per column.
inline std::size_t partials_floats(std::int64_t R, std::int64_t C, int K) {
  return static_cast<std::size_t>(column_parts(R, C).count) * K * static_cast<std::size_t>(C);
}

// F: a copy per thread; f.init(c) once for the thread's column, then f(r, c, acc) adds row r's terms into
// acc[K].
template <int K, class F>
__global__ void __launch_bounds__(kColumnTile* kRowLanes)
    column_partials(F f, std::int64_t R, std::int64_t C, std::int64_t rows_per_part,
                    float* __restrict__ partial) {
  __shared__ float lanes[K][kRowLanes][kColumnTile];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const std::int64_t c = std::int64_t(blockIdx.x) * kColumnTile + tx;
  const std::int64_t r0 = std::int64_t(blockIdx.y) * rows_per_part;
  const std::int64_t r1 = r0 + rows_per_part < R ? r0 + rows_per_part : R;
  float acc[K];
#pragma unroll
  for (int k = 0; k < K; ++k) acc[k] = 0.0f;
  if (c < C) {
    F g = f;
    g.init(c);
    for (std::int64_t r = r0 + ty; r < r1; r += kRowLanes) g(r, c, acc);
  }
#pragma unroll
  for (int k = 0; k < K; ++k) lanes[k][ty][tx] = acc[k];
  __syncthreads();
  if (ty == 0 && c < C) {
#pragma unroll
    for (int k = 0; k < K; ++k) {
      float s = 0.0f;
#pragma unroll
      for (int i = 0; i < kRowLanes; ++i) s += lanes[k][i][tx];
      partial[(std::int64_t(blockIdx.y) * K + k) * C + c] = s;
    }
  }
}

// W: w(c, sums) with sums[K] in double.
template <int K, class W>
__global__ void column_finish(const float* __restrict__ partial, std::int64_t parts, std::int64_t C, W w) {
  SYSTOLIC_GRID_STRIDE(c, C) {
    double s[K];
#pragma unroll
    for (int k = 0; k < K; ++k) s[k] = 0.0;
    for (std::int64_t p = 0; p < parts; ++p)
#pragma unroll
      for (int k = 0; k < K; ++k) s[k] += partial[(p * K + k) * C + c];
    w(c, s);
  }
}

// Both stages on `stream`; `partial` holds partials_floats(R, C, K) floats. Returns the launch status.
template <int K, class F, class W>
cudaError_t column_sums(F f, W w, std::int64_t R, std::int64_t C, float* partial, cudaStream_t stream) {
  if (C <= 0) return cudaSuccess;
  Parts p = column_parts(R, C);
  // gridDim.x allows 2^31 - 1 tiles; C beyond that is refused by the callers' int checks long before.
  dim3 grid(static_cast<unsigned>(p.column_tiles), static_cast<unsigned>(p.count));
  dim3 block(kColumnTile, kRowLanes);
  column_partials<K><<<grid, block, 0, stream>>>(f, R, C, p.rows_per_part, partial);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  column_finish<K><<<blocks_for(C), kThreads, 0, stream>>>(partial, p.count, C, w);
  return cudaGetLastError();
}

}  // namespace systolic::ops::cuda::reduce
