// The CUDA backend's convolution, pooling, batch normalisation and dense ops (src/ops/cuda/{conv,pool,dense,
// batch_norm_ops}.cc) against the CPU backend on the same inputs: forward and backward, the seed CNN's
// shapes, strides, asymmetric 'same' padding (stride 2, even kernels), dilation, average pooling with
// padding, batch norm on images and on (N, C), dense with row counts that are not multiples of 8 and with
// unaligned parameter views, undefined gradient arguments, float32 (TF32 matrix math) and bfloat16 data. GPU
// outputs start as NaN (an unwritten element fails) and gradient accumulators start random (they must
// accumulate). Bounds, as normalised max errors: TF32 convolution/dense 5e-3, bfloat16 3e-2 (the CPU
// reference runs float32 on the bfloat16-rounded inputs), batch norm and pooling in float32 1e-4. Every test
// skips visibly without a GPU (label gpu).
#include <systolic/ops.h>

#include "gpu_test_util.h"

#if SYSTOLIC_HAS_CUDA
#include "core/cuda/runtime.h"
#endif

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace systolic::ops {
namespace {

using testing::error_of;
using testing::normalised_max_error;
using testing::on_gpu;
using testing::poison;
using testing::poisoned_gpu;
using testing::random_tensor;

constexpr double kTf32 = 5e-3;
constexpr double kBf16 = 3e-2;
constexpr double kFloat = 1e-4;

Tensor host(const Tensor& t) {
  return t.to(Device::cpu());
}

// A random tensor in `dtype`: its float32 values on the host (what the CPU reference computes with: bfloat16
// values are exact in float32) and a copy on the GPU in `dtype`.
struct Pair {
  Tensor cpu, gpu;
};
Pair random_pair(Shape shape, std::uint64_t seed, DType dtype, double lo = -1.0, double hi = 1.0) {
  Tensor t = random_tensor(std::move(shape), seed, dtype, lo, hi);
  return {t.dtype() == DType::float32 ? t : t.to(DType::float32), on_gpu(t)};
}
Pair from_host(const Tensor& t, DType dtype) {  // t float32 on the host, already representable in dtype
  return {t.clone(), on_gpu(dtype == DType::float32 ? t : t.to(dtype))};
}

Tensor nan_host(Shape shape) {
  Tensor t(std::move(shape));
  poison(t);
  return t;
}

double tolerance(DType dtype) {
  return dtype == DType::bfloat16 ? kBf16 : kTf32;
}

// ---------------------------------------------------------------------------------------------- convolution

Conv2DParams conv_params(int sh, int sw, int dh, int dw, int pt, int pb, int pl, int pr) {
  Conv2DParams p;
  p.stride_h = sh, p.stride_w = sw, p.dilation_h = dh, p.dilation_w = dw;
  p.pad_top = pt, p.pad_bottom = pb, p.pad_left = pl, p.pad_right = pr;
  return p;
}

struct ConvCase {
  std::string name;
  std::int64_t N, H, W, C, KH, KW, F;
  Conv2DParams p;
  bool bias = true;
  std::int64_t OH() const {
    return (H + p.pad_top + p.pad_bottom - ((KH - 1) * p.dilation_h + 1)) / p.stride_h + 1;
  }
  std::int64_t OW() const {
    return (W + p.pad_left + p.pad_right - ((KW - 1) * p.dilation_w + 1)) / p.stride_w + 1;
  }
};

std::vector<ConvCase> conv_cases() {
  return {
      // The seed CNN (batch 8): 32x32x3 -> same 32 -> valid 32 -> pool -> same 64 -> valid 64.
      {"seed conv1 same", 8, 32, 32, 3, 3, 3, 32, conv_params(1, 1, 1, 1, 1, 1, 1, 1)},
      {"seed conv2 valid", 8, 32, 32, 32, 3, 3, 32, conv_params(1, 1, 1, 1, 0, 0, 0, 0)},
      {"seed conv3 same", 8, 15, 15, 32, 3, 3, 64, conv_params(1, 1, 1, 1, 1, 1, 1, 1)},
      {"seed conv4 valid", 8, 15, 15, 64, 3, 3, 64, conv_params(1, 1, 1, 1, 0, 0, 0, 0), false},
      // Keras 'same' with stride 2 on an even input: the padding goes after (bottom/right).
      {"stride 2 same asymmetric", 3, 8, 8, 5, 3, 3, 6, conv_params(2, 2, 1, 1, 0, 1, 0, 1)},
      {"stride 2 even kernel same", 2, 9, 9, 8, 4, 4, 16, conv_params(2, 2, 1, 1, 1, 2, 1, 2)},
      {"even kernel same", 2, 10, 10, 6, 2, 2, 8, conv_params(1, 1, 1, 1, 0, 1, 0, 1), false},
      {"dilation 2", 2, 9, 11, 7, 3, 3, 9, conv_params(1, 1, 2, 2, 2, 2, 2, 2)},
      {"dilation 3 asymmetric", 2, 12, 10, 4, 2, 2, 5, conv_params(1, 1, 3, 3, 1, 2, 1, 2)},
      {"mixed strides, asymmetric in W only", 3, 7, 7, 17, 2, 3, 33, conv_params(1, 2, 1, 1, 0, 1, 1, 1)},
      {"1x1", 3, 6, 5, 16, 1, 1, 10, conv_params(1, 1, 1, 1, 0, 0, 0, 0)},
  };
}

// Forward and backward (all gradients) of one case on both backends. param: dtype of b, dw, db.
void check_conv(const ConvCase& c, DType dtype, DType param, std::uint64_t seed) {
  SCOPED_TRACE(c.name + " " + std::string(dtype_name(dtype)) + " params " + std::string(dtype_name(param)));
  const double tol = tolerance(dtype);
  Shape xs{c.N, c.H, c.W, c.C}, ws{c.KH, c.KW, c.C, c.F}, ys{c.N, c.OH(), c.OW(), c.F};
  Pair x = random_pair(xs, seed + 1, dtype), w = random_pair(ws, seed + 2, dtype, -0.5, 0.5);
  Pair b = c.bias ? random_pair({c.F}, seed + 3, param) : Pair{};

  Tensor y_cpu = nan_host(ys), y_gpu = poisoned_gpu(ys, dtype);
  conv2d_forward(x.cpu, w.cpu, b.cpu, y_cpu, c.p);
  conv2d_forward(x.gpu, w.gpu, b.gpu, y_gpu, c.p);
  EXPECT_LE(normalised_max_error(host(y_gpu), y_cpu), tol) << "y";

  Pair dy = random_pair(ys, seed + 4, dtype);
  Pair dw = random_pair(ws, seed + 5, param), db = random_pair({c.F}, seed + 6, param);  // accumulated into
  Tensor dx_cpu = nan_host(xs), dx_gpu = poisoned_gpu(xs, dtype);
  conv2d_backward(x.cpu, w.cpu, dy.cpu, dx_cpu, dw.cpu, db.cpu, c.p);
  conv2d_backward(x.gpu, w.gpu, dy.gpu, dx_gpu, dw.gpu, db.gpu, c.p);
  EXPECT_LE(normalised_max_error(host(dx_gpu), dx_cpu), tol) << "dx";
  EXPECT_LE(normalised_max_error(host(dw.gpu), dw.cpu), tol) << "dw";
  EXPECT_LE(normalised_max_error(host(db.gpu), db.cpu), tol) << "db";
}

TEST(CudaDnn, Conv2DFloat32) {
  SYSTOLIC_REQUIRE_GPU();
  std::uint64_t seed = 1000;
  for (const auto& c : conv_cases()) check_conv(c, DType::float32, DType::float32, seed += 10);
}

TEST(CudaDnn, Conv2DFusedRelu) {
  SYSTOLIC_REQUIRE_GPU();
  std::uint64_t seed = 1500;
  for (auto c : conv_cases()) {
    c.p.activation = Activation::relu;  // forward applies it in the bias epilogue (also without a bias)
    check_conv(c, DType::float32, DType::float32, seed += 10);
  }
}

TEST(CudaDnn, Conv2DBfloat16) {
  SYSTOLIC_REQUIRE_GPU();
  auto cases = conv_cases();
  std::uint64_t seed = 2000;
  // float32 parameters and gradients (master weights) and bfloat16 ones.
  check_conv(cases[0], DType::bfloat16, DType::float32, seed += 10);  // C = 3
  check_conv(cases[1], DType::bfloat16, DType::float32, seed += 10);
  check_conv(cases[4], DType::bfloat16, DType::bfloat16, seed += 10);
  check_conv(cases[7], DType::bfloat16, DType::float32, seed += 10);
}

// Any of dx, dw, db may be undefined; what is given is still right.
TEST(CudaDnn, Conv2DBackwardSubsets) {
  SYSTOLIC_REQUIRE_GPU();
  for (const ConvCase& c : {conv_cases()[0], conv_cases()[4]}) {
    SCOPED_TRACE(c.name);
    Shape xs{c.N, c.H, c.W, c.C}, ws{c.KH, c.KW, c.C, c.F}, ys{c.N, c.OH(), c.OW(), c.F};
    Pair x = random_pair(xs, 3001, DType::float32), w = random_pair(ws, 3002, DType::float32);
    Pair dy = random_pair(ys, 3003, DType::float32);
    Tensor rdx = nan_host(xs), rdw = random_tensor(ws, 3004), rdb = random_tensor({c.F}, 3005);
    Tensor dw0 = rdw.clone(), db0 = rdb.clone();
    conv2d_backward(x.cpu, w.cpu, dy.cpu, rdx, rdw, rdb, c.p);
    Tensor none;
    for (int mask = 1; mask < 8; ++mask) {
      SCOPED_TRACE("dx " + std::to_string(mask & 1) + " dw " + std::to_string((mask >> 1) & 1) + " db " +
                   std::to_string((mask >> 2) & 1));
      Tensor dx = (mask & 1) ? poisoned_gpu(xs) : Tensor();
      Tensor dw = (mask & 2) ? on_gpu(dw0) : Tensor();
      Tensor db = (mask & 4) ? on_gpu(db0) : Tensor();
      conv2d_backward(x.gpu, w.gpu, dy.gpu, dx, dw, db, c.p);
      if (mask & 1) {
        EXPECT_LE(normalised_max_error(host(dx), rdx), kTf32) << "dx";
      }
      if (mask & 2) {
        EXPECT_LE(normalised_max_error(host(dw), rdw), kTf32) << "dw";
      }
      if (mask & 4) {
        EXPECT_LE(normalised_max_error(host(db), rdb), kTf32) << "db";
      }
    }
    conv2d_backward(x.gpu, w.gpu, dy.gpu, none, none, none, c.p);  // nothing asked: nothing done, no error
  }
}

// Repeated calls on one shape (cached plan) read the new data each time.
TEST(CudaDnn, Conv2DRepeatedCallsUseNewData) {
  SYSTOLIC_REQUIRE_GPU();
  ConvCase c = conv_cases()[4];
  for (std::uint64_t seed : {4000u, 4100u, 4200u}) check_conv(c, DType::float32, DType::float32, seed);
}

// ------------------------------------------------------------------------------------------------- pooling

Pool2DParams pool_params(PoolKind kind, int wh, int ww, int sh, int sw, int pt, int pb, int pl, int pr) {
  Pool2DParams p;
  p.kind = kind, p.window_h = wh, p.window_w = ww, p.stride_h = sh, p.stride_w = sw;
  p.pad_top = pt, p.pad_bottom = pb, p.pad_left = pl, p.pad_right = pr;
  return p;
}

struct PoolCase {
  std::string name;
  std::int64_t N, H, W, C;
  Pool2DParams p;
  std::int64_t OH() const { return (H + p.pad_top + p.pad_bottom - p.window_h) / p.stride_h + 1; }
  std::int64_t OW() const { return (W + p.pad_left + p.pad_right - p.window_w) / p.stride_w + 1; }
};

std::vector<PoolCase> pool_cases() {
  const PoolKind mx = PoolKind::max, avg = PoolKind::average;
  return {
      {"seed max 2x2", 8, 30, 30, 32, pool_params(mx, 2, 2, 2, 2, 0, 0, 0, 0)},
      {"seed max 2x2 odd input", 8, 13, 13, 64, pool_params(mx, 2, 2, 2, 2, 0, 0, 0, 0)},
      {"max 3x3 stride 2 same (asymmetric)", 3, 8, 8, 5, pool_params(mx, 3, 3, 2, 2, 0, 1, 0, 1)},
      {"max 2x2 stride 2 same (asymmetric)", 2, 7, 7, 3, pool_params(mx, 2, 2, 2, 2, 0, 1, 0, 1)},
      {"max 3x3 stride 1 same", 2, 7, 9, 4, pool_params(mx, 3, 3, 1, 1, 1, 1, 1, 1)},
      {"avg 3x3 stride 1 same", 2, 7, 9, 4, pool_params(avg, 3, 3, 1, 1, 1, 1, 1, 1)},
      {"avg 2x2 stride 2 same (asymmetric)", 2, 15, 15, 8, pool_params(avg, 2, 2, 2, 2, 0, 1, 0, 1)},
      {"avg 3x3 stride 2 same (asymmetric)", 3, 8, 8, 5, pool_params(avg, 3, 3, 2, 2, 0, 1, 0, 1)},
      {"avg 2x3 mixed padding", 2, 9, 10, 6, pool_params(avg, 2, 3, 1, 2, 0, 1, 1, 1)},
      {"avg 2x2 valid", 4, 10, 10, 3, pool_params(avg, 2, 2, 2, 2, 0, 0, 0, 0)},
  };
}

// Values distinct within every window (and exact in bfloat16: multiples of 1/128 below 1), so max pooling has
// no ties: on ties cuDNN may route the gradient to another tied cell than the CPU's first maximum (pool.cc).
Tensor tie_free(Shape s) {
  Tensor t(s);
  float* p = t.data<float>();
  std::int64_t N = s[0], H = s[1], W = s[2], C = s[3];
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t w = 0; w < W; ++w)
        for (std::int64_t c = 0; c < C; ++c)
          p[((n * H + h) * W + w) * C + c] = float(((h * W + w) * 37 + c * 11 + n * 5) % 251 - 125) / 128.0f;
  return t;
}

void check_pool(const PoolCase& c, DType dtype, std::uint64_t seed) {
  SCOPED_TRACE(c.name + " " + std::string(dtype_name(dtype)));
  const double tol = dtype == DType::bfloat16 ? kBf16 : kFloat;
  Shape xs{c.N, c.H, c.W, c.C}, ys{c.N, c.OH(), c.OW(), c.C};
  Pair x = dtype == DType::float32 ? random_pair(xs, seed + 1, dtype) : from_host(tie_free(xs), dtype);
  Tensor y_cpu = nan_host(ys), y_gpu = poisoned_gpu(ys, dtype);
  Tensor ws_cpu(Shape{0}, DType::uint8), ws_gpu = on_gpu(Tensor(Shape{0}, DType::uint8));
  pool2d_forward(x.cpu, y_cpu, ws_cpu, c.p);
  pool2d_forward(x.gpu, y_gpu, ws_gpu, c.p);
  EXPECT_LE(normalised_max_error(host(y_gpu), y_cpu), tol) << "y";

  Pair dy = random_pair(ys, seed + 2, dtype);
  Tensor dx_cpu = nan_host(xs), dx_gpu = poisoned_gpu(xs, dtype);
  pool2d_backward(x.cpu, y_cpu, dy.cpu, ws_cpu, dx_cpu, c.p);
  pool2d_backward(x.gpu, y_gpu, dy.gpu, ws_gpu, dx_gpu, c.p);
  EXPECT_LE(normalised_max_error(host(dx_gpu), dx_cpu), tol) << "dx";

  // Inference forward (no workspace) gives the same y.
  Tensor none, y2 = poisoned_gpu(ys, dtype);
  pool2d_forward(x.gpu, y2, none, c.p);
  EXPECT_LE(normalised_max_error(host(y2), y_cpu), tol) << "y (inference)";
}

TEST(CudaDnn, Pool2DFloat32) {
  SYSTOLIC_REQUIRE_GPU();
  std::uint64_t seed = 5000;
  for (const auto& c : pool_cases()) check_pool(c, DType::float32, seed += 10);
}

TEST(CudaDnn, Pool2DBfloat16) {
  SYSTOLIC_REQUIRE_GPU();
  std::uint64_t seed = 6000;
  for (const auto& c : pool_cases()) check_pool(c, DType::bfloat16, seed += 10);
}

// ------------------------------------------------------------------------------------------------ batch norm

constexpr double kEps = 1e-3;

struct NormInputs {
  Pair x, gamma, beta;
};
NormInputs norm_inputs(const Shape& shape, DType dtype, std::uint64_t seed, double lo = -1.0,
                       double hi = 3.0) {
  std::int64_t C = shape[-1];
  return {random_pair(shape, seed + 1, dtype, lo, hi), random_pair({C}, seed + 2, DType::float32, 0.5, 1.5),
          random_pair({C}, seed + 3, DType::float32)};
}

void check_norm(const Shape& shape, DType dtype, std::uint64_t seed) {
  SCOPED_TRACE(shape.str() + " " + std::string(dtype_name(dtype)));
  const double tol = dtype == DType::bfloat16 ? kBf16 : kFloat;
  const std::int64_t C = shape[-1];
  NormInputs in = norm_inputs(shape, dtype, seed);

  // Training forward: y and the batch statistics.
  Tensor y_cpu = nan_host(shape), mean_cpu = nan_host({C}), var_cpu = nan_host({C});
  Tensor y_gpu = poisoned_gpu(shape, dtype), mean_gpu = poisoned_gpu({C}), var_gpu = poisoned_gpu({C});
  batch_norm_forward_training(in.x.cpu, in.gamma.cpu, in.beta.cpu, y_cpu, mean_cpu, var_cpu, kEps);
  batch_norm_forward_training(in.x.gpu, in.gamma.gpu, in.beta.gpu, y_gpu, mean_gpu, var_gpu, kEps);
  EXPECT_LE(normalised_max_error(host(y_gpu), y_cpu), tol) << "y";
  EXPECT_LE(normalised_max_error(host(mean_gpu), mean_cpu), kFloat) << "mean";
  EXPECT_LE(normalised_max_error(host(var_gpu), var_cpu), kFloat) << "var";

  // Inference forward with other statistics.
  Pair mean = random_pair({C}, seed + 4, DType::float32),
       var = random_pair({C}, seed + 5, DType::float32, 0.2, 2.0);
  Tensor yi_cpu = nan_host(shape), yi_gpu = poisoned_gpu(shape, dtype);
  batch_norm_forward_inference(in.x.cpu, in.gamma.cpu, in.beta.cpu, mean.cpu, var.cpu, yi_cpu, kEps);
  batch_norm_forward_inference(in.x.gpu, in.gamma.gpu, in.beta.gpu, mean.gpu, var.gpu, yi_gpu, kEps);
  EXPECT_LE(normalised_max_error(host(yi_gpu), yi_cpu), tol) << "y (inference)";

  // Backward from the CPU's batch statistics (both sides see the same ones).
  Pair bm = from_host(mean_cpu, DType::float32), bv = from_host(var_cpu, DType::float32);
  Pair dy = random_pair(shape, seed + 6, dtype);
  Pair dgamma = random_pair({C}, seed + 7, DType::float32),
       dbeta = random_pair({C}, seed + 8, DType::float32);
  Tensor dx_cpu = nan_host(shape), dx_gpu = poisoned_gpu(shape, dtype);
  batch_norm_backward(in.x.cpu, in.gamma.cpu, bm.cpu, bv.cpu, dy.cpu, dx_cpu, dgamma.cpu, dbeta.cpu, kEps);
  batch_norm_backward(in.x.gpu, in.gamma.gpu, bm.gpu, bv.gpu, dy.gpu, dx_gpu, dgamma.gpu, dbeta.gpu, kEps);
  EXPECT_LE(normalised_max_error(host(dx_gpu), dx_cpu), tol) << "dx";
  EXPECT_LE(normalised_max_error(host(dgamma.gpu), dgamma.cpu), dtype == DType::bfloat16 ? kBf16 : kFloat)
      << "dgamma";
  EXPECT_LE(normalised_max_error(host(dbeta.gpu), dbeta.cpu), dtype == DType::bfloat16 ? kBf16 : kFloat)
      << "dbeta";

  // Subsets: dx only, parameter gradients only.
  Tensor none, dx2 = poisoned_gpu(shape, dtype);
  batch_norm_backward(in.x.gpu, in.gamma.gpu, bm.gpu, bv.gpu, dy.gpu, dx2, none, none, kEps);
  EXPECT_LE(normalised_max_error(host(dx2), dx_cpu), tol) << "dx alone";
  Tensor dg = Tensor::zeros({C}, DType::float32, testing::gpu()), dg_ref = Tensor::zeros({C});
  Tensor db_cpu_none;
  batch_norm_backward(in.x.cpu, in.gamma.cpu, bm.cpu, bv.cpu, dy.cpu, db_cpu_none, dg_ref, db_cpu_none, kEps);
  batch_norm_backward(in.x.gpu, in.gamma.gpu, bm.gpu, bv.gpu, dy.gpu, none, dg, none, kEps);
  EXPECT_LE(normalised_max_error(host(dg), dg_ref), dtype == DType::bfloat16 ? kBf16 : kFloat)
      << "dgamma alone";
}

TEST(CudaDnn, BatchNormImagesFloat32) {
  SYSTOLIC_REQUIRE_GPU();
  check_norm({8, 32, 32, 32}, DType::float32, 7000);
  check_norm({3, 5, 7, 6}, DType::float32, 7100);
}

TEST(CudaDnn, BatchNormRowsFloat32) {
  SYSTOLIC_REQUIRE_GPU();
  check_norm({37, 50}, DType::float32, 7200);
  check_norm({8, 512}, DType::float32, 7300);
  check_norm({1000, 3}, DType::float32, 7400);
}

TEST(CudaDnn, BatchNormBfloat16) {
  SYSTOLIC_REQUIRE_GPU();
  check_norm({5, 3, 7, 16}, DType::bfloat16, 7500);
  check_norm({40, 24}, DType::bfloat16, 7600);
}

// Inputs with a large mean and a small spread: the statistics must not lose the variance to cancellation
// (E[x^2] - E[x]^2 in float would). Reference: the CPU's float64 loops on the same float32 values.
TEST(CudaDnn, BatchNormLargeMean) {
  SYSTOLIC_REQUIRE_GPU();
  Shape shape{8, 16, 16, 8};
  const std::int64_t C = 8;
  NormInputs in = norm_inputs(shape, DType::float32, 7700, 999.0, 1001.0);
  auto f64 = [](const Tensor& t) { return t.to(DType::float64); };
  Tensor ry(shape, DType::float64), rmean({C}, DType::float64), rvar({C}, DType::float64);
  batch_norm_forward_training(f64(in.x.cpu), f64(in.gamma.cpu), f64(in.beta.cpu), ry, rmean, rvar, kEps);
  Tensor y = poisoned_gpu(shape), mean = poisoned_gpu({C}), var = poisoned_gpu({C});
  batch_norm_forward_training(in.x.gpu, in.gamma.gpu, in.beta.gpu, y, mean, var, kEps);
  EXPECT_LE(normalised_max_error(host(mean), rmean), 1e-6);
  // The variance is about 1/3: compare it relative to itself.
  auto v = host(var).to_doubles(), rv = rvar.to_doubles();
  for (std::int64_t c = 0; c < C; ++c) EXPECT_NEAR(v[c], rv[c], 1e-4 * rv[c]) << "channel " << c;
  EXPECT_LE(normalised_max_error(host(y), ry), kFloat);
}

// ------------------------------------------------------------------------------------------------- dense

struct DenseCase {
  std::string name;
  Shape x;
  std::int64_t U;
  bool bias = true;
};
std::vector<DenseCase> dense_cases() {
  return {
      {"seed 2304 -> 512", {8, 2304}, 512},
      {"seed 512 -> 10", {8, 512}, 10},
      {"M 13 (not a multiple of 8), odd sizes", {13, 70}, 33},
      {"rank 3 input", {2, 5, 16}, 7},
      {"no bias", {9, 40}, 24, false},
      {"one row", {1, 1}, 1},
  };
}

void check_dense(const DenseCase& c, DType dtype, DType param, std::uint64_t seed) {
  SCOPED_TRACE(c.name + " " + std::string(dtype_name(dtype)) + " params " + std::string(dtype_name(param)));
  const double tol = tolerance(dtype);
  const std::int64_t K = c.x[-1], U = c.U;
  Shape ys = c.x;
  ys[-1] = U;
  Pair x = random_pair(c.x, seed + 1, dtype), w = random_pair({K, U}, seed + 2, dtype);
  Pair b = c.bias ? random_pair({U}, seed + 3, param) : Pair{};
  Tensor y_cpu = nan_host(ys), y_gpu = poisoned_gpu(ys, dtype);
  dense_forward(x.cpu, w.cpu, b.cpu, y_cpu);
  dense_forward(x.gpu, w.gpu, b.gpu, y_gpu);
  EXPECT_LE(normalised_max_error(host(y_gpu), y_cpu), tol) << "y";

  Pair dy = random_pair(ys, seed + 4, dtype);
  Pair dw = random_pair({K, U}, seed + 5, param), db = random_pair({U}, seed + 6, param);
  Tensor dx_cpu = nan_host(c.x), dx_gpu = poisoned_gpu(c.x, dtype);
  dense_backward(x.cpu, w.cpu, dy.cpu, dx_cpu, dw.cpu, db.cpu);
  dense_backward(x.gpu, w.gpu, dy.gpu, dx_gpu, dw.gpu, db.gpu);
  EXPECT_LE(normalised_max_error(host(dx_gpu), dx_cpu), tol) << "dx";
  EXPECT_LE(normalised_max_error(host(dw.gpu), dw.cpu), tol) << "dw";
  EXPECT_LE(normalised_max_error(host(db.gpu), db.cpu), tol) << "db";
}

TEST(CudaDnn, DenseFloat32) {
  SYSTOLIC_REQUIRE_GPU();
  std::uint64_t seed = 8000;
  for (const auto& c : dense_cases()) check_dense(c, DType::float32, DType::float32, seed += 10);
}

TEST(CudaDnn, DenseBfloat16) {
  SYSTOLIC_REQUIRE_GPU();
  auto cases = dense_cases();
  std::uint64_t seed = 9000;
  check_dense(cases[0], DType::bfloat16, DType::float32, seed += 10);   // float32 bias: added by a kernel
  check_dense(cases[1], DType::bfloat16, DType::bfloat16, seed += 10);  // bfloat16 bias: the GEMM's epilogue
  check_dense(cases[2], DType::bfloat16, DType::float32, seed += 10);
  check_dense(cases[3], DType::bfloat16, DType::bfloat16, seed += 10);
}

// Kernel, bias and their gradients as views into one flat buffer at offsets that are not 16-byte aligned (as
// weights inside a model's flat parameter buffer may be): the GEMMs are planned for that alignment and the
// bias goes through the kernel instead of the epilogue.
TEST(CudaDnn, DenseUnalignedParameterViews) {
  SYSTOLIC_REQUIRE_GPU();
  const std::int64_t M = 13, K = 70, U = 33;
  Tensor xh = random_tensor({M, K}, 9501), dyh = random_tensor({M, U}, 9502);
  Tensor flat = random_tensor({1 + K * U + U}, 9503), grads = random_tensor({1 + K * U + U}, 9504);
  Tensor wh = flat.view(1, {K, U}).clone(), bh = flat.view(1 + K * U, {U}).clone();
  Tensor dwh = grads.view(1, {K, U}).clone(), dbh = grads.view(1 + K * U, {U}).clone();
  Tensor flat_gpu = on_gpu(flat), grads_gpu = on_gpu(grads);
  Tensor w = flat_gpu.view(1, {K, U}), b = flat_gpu.view(1 + K * U, {U});
  Tensor dw = grads_gpu.view(1, {K, U}), db = grads_gpu.view(1 + K * U, {U});

  Tensor y_cpu = nan_host({M, U}), y = poisoned_gpu({M, U});
  dense_forward(xh, wh, bh, y_cpu);
  dense_forward(on_gpu(xh), w, b, y);
  EXPECT_LE(normalised_max_error(host(y), y_cpu), kTf32) << "y";

  Tensor dx_cpu = nan_host({M, K}), dx = poisoned_gpu({M, K});
  dense_backward(xh, wh, dyh, dx_cpu, dwh, dbh);
  dense_backward(on_gpu(xh), w, on_gpu(dyh), dx, dw, db);
  EXPECT_LE(normalised_max_error(host(dx), dx_cpu), kTf32) << "dx";
  EXPECT_LE(normalised_max_error(host(dw), dwh), kTf32) << "dw";
  EXPECT_LE(normalised_max_error(host(db), dbh), kTf32) << "db";
  // The element before the views is untouched.
  EXPECT_EQ(host(grads_gpu.view(0, {1})).item(), grads.view(0, {1}).item());
}

TEST(CudaDnn, DenseBackwardSubsets) {
  SYSTOLIC_REQUIRE_GPU();
  const std::int64_t M = 13, K = 70, U = 33;
  Pair x = random_pair({M, K}, 9601, DType::float32), w = random_pair({K, U}, 9602, DType::float32);
  Pair dy = random_pair({M, U}, 9603, DType::float32);
  Tensor rdx = nan_host({M, K}), rdw = random_tensor({K, U}, 9604), rdb = random_tensor({U}, 9605);
  Tensor dw0 = rdw.clone(), db0 = rdb.clone();
  dense_backward(x.cpu, w.cpu, dy.cpu, rdx, rdw, rdb);
  for (int mask = 1; mask < 8; ++mask) {
    SCOPED_TRACE("dx " + std::to_string(mask & 1) + " dw " + std::to_string((mask >> 1) & 1) + " db " +
                 std::to_string((mask >> 2) & 1));
    Tensor dx = (mask & 1) ? poisoned_gpu({M, K}) : Tensor();
    Tensor dw = (mask & 2) ? on_gpu(dw0) : Tensor();
    Tensor db = (mask & 4) ? on_gpu(db0) : Tensor();
    dense_backward(x.gpu, w.gpu, dy.gpu, dx, dw, db);
    if (mask & 1) {
      EXPECT_LE(normalised_max_error(host(dx), rdx), kTf32) << "dx";
    }
    if (mask & 2) {
      EXPECT_LE(normalised_max_error(host(dw), rdw), kTf32) << "dw";
    }
    if (mask & 4) {
      EXPECT_LE(normalised_max_error(host(db), rdb), kTf32) << "db";
    }
  }
}

// ------------------------------------------------------------------------------------------------- errors

TEST(CudaDnn, ErrorsNameTheOpAndShapes) {
  SYSTOLIC_REQUIRE_GPU();
  Conv2DParams p = conv_params(1, 1, 1, 1, 1, 1, 1, 1);
  Tensor x = poisoned_gpu({2, 8, 8, 3}), w = poisoned_gpu({3, 3, 3, 4}), none;
  Tensor wrong_y = poisoned_gpu({2, 7, 8, 4});
  std::string e = error_of([&] { conv2d_forward(x, w, none, wrong_y, p); });
  EXPECT_NE(e.find("conv2d_forward"), std::string::npos) << e;
  EXPECT_NE(e.find("(2, 8, 8, 4)"), std::string::npos) << e;
  Tensor x64 = on_gpu(Tensor::zeros({2, 8, 8, 3}, DType::float64)), y = poisoned_gpu({2, 8, 8, 4});
  e = error_of([&] { conv2d_forward(x64, w, none, y, p); });
  EXPECT_NE(e.find("float64"), std::string::npos) << e;
  Tensor wrong_dtype_w = on_gpu(Tensor::zeros({3, 3, 3, 4}, DType::bfloat16));
  e = error_of([&] { conv2d_forward(x, wrong_dtype_w, none, y, p); });
  EXPECT_NE(e.find("bfloat16"), std::string::npos) << e;
  Tensor dwx = poisoned_gpu({8, 4}), dwy = poisoned_gpu({8, 5});
  e = error_of([&] { dense_forward(dwx, poisoned_gpu({3, 5}), none, dwy); });
  EXPECT_NE(e.find("dense_forward"), std::string::npos) << e;
  Tensor px = poisoned_gpu({1, 4, 4, 2}), py = poisoned_gpu({1, 3, 3, 2});
  Pool2DParams pp = pool_params(PoolKind::max, 2, 2, 2, 2, 0, 0, 0, 0);
  e = error_of([&] { pool2d_forward(px, py, none, pp); });
  EXPECT_NE(e.find("pool2d_forward"), std::string::npos) << e;
  Tensor bx = poisoned_gpu({4, 3}), by = poisoned_gpu({4, 3}), g = poisoned_gpu({4});
  e = error_of([&] { batch_norm_forward_inference(bx, g, g, g, g, by, 1e-3); });
  EXPECT_NE(e.find("batch_norm_forward_inference"), std::string::npos) << e;
}

// ------------------------------------------------------------------------------------------------- memory

// A training step is captured as a CUDA graph after a warm-up step, so once the ops have run on their shapes
// (algorithms chosen, the workspace grown) later calls must not allocate device memory.
TEST(CudaDnn, SteadyStateCallsAllocateNothing) {
  SYSTOLIC_REQUIRE_GPU();
#if SYSTOLIC_HAS_CUDA
  const DType f = DType::float32;
  ConvCase c1 = conv_cases()[0], c2 = conv_cases()[4];
  auto conv_tensors = [&](const ConvCase& c, std::uint64_t seed) {
    Shape xs{c.N, c.H, c.W, c.C}, ws{c.KH, c.KW, c.C, c.F}, ys{c.N, c.OH(), c.OW(), c.F};
    return std::vector<Tensor>{random_pair(xs, seed, f).gpu,
                               random_pair(ws, seed + 1, f).gpu,
                               random_pair({c.F}, seed + 2, f).gpu,
                               poisoned_gpu(ys),
                               random_pair(ys, seed + 3, f).gpu,
                               poisoned_gpu(xs),
                               poisoned_gpu(ws),
                               poisoned_gpu({c.F})};
  };
  auto t1 = conv_tensors(c1, 10001), t2 = conv_tensors(c2, 10101);
  PoolCase pc = pool_cases()[6];  // average, asymmetric: the explicit-padding path
  Tensor px = random_pair({pc.N, pc.H, pc.W, pc.C}, 10201, f).gpu,
         py = poisoned_gpu({pc.N, pc.OH(), pc.OW(), pc.C});
  Tensor pdy = random_pair({pc.N, pc.OH(), pc.OW(), pc.C}, 10202, f).gpu, pdx = poisoned_gpu(px.shape());
  Tensor nx = random_pair({8, 16, 16, 32}, 10301, f).gpu, ny = poisoned_gpu(nx.shape()),
         ndx = poisoned_gpu(nx.shape());
  Tensor ng = random_pair({32}, 10302, f).gpu, nb = random_pair({32}, 10303, f).gpu, nm = poisoned_gpu({32}),
         nv = poisoned_gpu({32}), ndg = poisoned_gpu({32}), ndb = poisoned_gpu({32});
  Tensor dx = random_pair({8, 2304}, 10401, f).gpu, dw = random_pair({2304, 512}, 10402, f).gpu,
         db = random_pair({512}, 10403, f).gpu, dy = poisoned_gpu({8, 512}),
         ddy = random_pair({8, 512}, 10404, f).gpu, ddx = poisoned_gpu({8, 2304}),
         ddw = poisoned_gpu({2304, 512}), ddb = poisoned_gpu({512});
  Tensor none;
  auto step = [&] {
    for (auto* t : {&t1, &t2}) {
      auto& v = *t;
      const ConvCase& c = t == &t1 ? c1 : c2;
      conv2d_forward(v[0], v[1], v[2], v[3], c.p);
      conv2d_backward(v[0], v[1], v[4], v[5], v[6], v[7], c.p);
    }
    pool2d_forward(px, py, none, pc.p);
    pool2d_backward(px, py, pdy, none, pdx, pc.p);
    batch_norm_forward_training(nx, ng, nb, ny, nm, nv, kEps);
    batch_norm_backward(nx, ng, nm, nv, ny, ndx, ndg, ndb, kEps);
    dense_forward(dx, dw, db, dy);
    dense_backward(dx, dw, ddy, ddx, ddw, ddb);
  };
  step();  // warm-up
  systolic::cuda::synchronize(0);
  auto before = systolic::cuda::allocator(0).stats();
  for (int i = 0; i < 3; ++i) step();
  systolic::cuda::synchronize(0);
  auto after = systolic::cuda::allocator(0).stats();
  EXPECT_EQ(after.raw_allocations, before.raw_allocations);
  EXPECT_EQ(after.in_use, before.in_use);
#endif
}

}  // namespace
}  // namespace systolic::ops
