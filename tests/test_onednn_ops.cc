// The oneDNN float32 ops (src/ops/cpu/onednn*.cc) against the reference loops run in float64 on the same
// inputs: every op forward and backward, odd sizes, strides, asymmetric (SAME-style) padding, dilation,
// batches of 1 and 3, channel counts that are not multiples of oneDNN's block of 8/16. Outputs start as NaN
// (an unwritten element fails), parameter gradients start non-zero (they must accumulate).
#include "ops/cpu/loops.h"
#include "ops/cpu/onednn.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace systolic::ops {
namespace {

using testing::normalised_max_error;
using testing::poison;
using testing::random_tensor;

constexpr double kTol = 1e-4;

// The float64 copy of a float32 tensor: the reference sees exactly the values oneDNN sees.
Tensor f64(const Tensor& t) {
  return t.defined() ? t.to(DType::float64) : Tensor();
}

Tensor nan_tensor(Shape shape) {
  Tensor t(std::move(shape));
  poison(t);
  return t;
}

// ---------------------------------------------------------------------------------------------- convolution

struct ConvCase {
  std::int64_t N, H, W, C, KH, KW, F;
  Conv2DParams p;
  bool bias;
  std::string str() const {
    return fmt::format("N{} {}x{}x{} k{}x{} F{} s{}x{} d{}x{} pad t{} b{} l{} r{} bias {}", N, H, W, C, KH,
                       KW, F, p.stride_h, p.stride_w, p.dilation_h, p.dilation_w, p.pad_top, p.pad_bottom,
                       p.pad_left, p.pad_right, bias);
  }
  std::int64_t OH() const {
    return (H + p.pad_top + p.pad_bottom - ((KH - 1) * p.dilation_h + 1)) / p.stride_h + 1;
  }
  std::int64_t OW() const {
    return (W + p.pad_left + p.pad_right - ((KW - 1) * p.dilation_w + 1)) / p.stride_w + 1;
  }
};

Conv2DParams conv_params(int sh, int sw, int dh, int dw, int pt, int pb, int pl, int pr) {
  Conv2DParams p;
  p.stride_h = sh, p.stride_w = sw, p.dilation_h = dh, p.dilation_w = dw;
  p.pad_top = pt, p.pad_bottom = pb, p.pad_left = pl, p.pad_right = pr;
  return p;
}

std::vector<ConvCase> conv_cases() {
  return {
      {1, 5, 7, 3, 3, 3, 4, conv_params(1, 1, 1, 1, 1, 1, 1, 1), true},
      // Keras SAME with stride 2 on an even input: all the padding goes after (bottom/right).
      {3, 8, 8, 5, 3, 3, 6, conv_params(2, 2, 1, 1, 0, 1, 0, 1), true},
      {2, 9, 11, 7, 3, 3, 9, conv_params(1, 1, 2, 2, 2, 2, 2, 2), false},
      {3, 6, 5, 16, 1, 1, 10, conv_params(1, 1, 1, 1, 0, 0, 0, 0), true},
      {1, 10, 10, 3, 5, 5, 32, conv_params(2, 2, 1, 1, 1, 2, 1, 2), true},
      {3, 7, 7, 17, 2, 3, 33, conv_params(1, 2, 1, 2, 0, 1, 2, 1), true},
      {2, 16, 16, 32, 3, 3, 64, conv_params(1, 1, 1, 1, 1, 1, 1, 1), true},
      {3, 13, 12, 64, 3, 3, 24, conv_params(2, 2, 1, 1, 1, 1, 0, 1), false},
  };
}

TEST(OnednnOps, Conv2DForward) {
  std::uint64_t seed = 100;
  for (const auto& c : conv_cases()) {
    SCOPED_TRACE(c.str());
    Tensor x = random_tensor({c.N, c.H, c.W, c.C}, ++seed);
    Tensor w = random_tensor({c.KH, c.KW, c.C, c.F}, ++seed);
    Tensor b = c.bias ? random_tensor({c.F}, ++seed) : Tensor();
    Tensor y = nan_tensor({c.N, c.OH(), c.OW(), c.F});
    Tensor ref(y.shape(), DType::float64);
    onednn::conv2d_forward(x, w, b, y, c.p);
    loops::conv2d_forward<double>(f64(x), f64(w), f64(b), ref, c.p);
    EXPECT_LE(normalised_max_error(y, ref), kTol);
  }
}

TEST(OnednnOps, Conv2DBackward) {
  std::uint64_t seed = 200;
  for (const auto& c : conv_cases()) {
    SCOPED_TRACE(c.str());
    Tensor x = random_tensor({c.N, c.H, c.W, c.C}, ++seed);
    Tensor w = random_tensor({c.KH, c.KW, c.C, c.F}, ++seed);
    Tensor dy = random_tensor({c.N, c.OH(), c.OW(), c.F}, ++seed);
    Tensor dx = nan_tensor(x.shape());
    Tensor dw = random_tensor(w.shape(), ++seed);  // non-zero: the op must add to it
    Tensor db = c.bias ? random_tensor({c.F}, ++seed) : Tensor();
    Tensor rdx(x.shape(), DType::float64), rdw = f64(dw), rdb = f64(db);
    onednn::conv2d_backward(x, w, dy, dx, dw, db, c.p);
    loops::conv2d_backward<double>(f64(x), f64(w), f64(dy), rdx, rdw, rdb, c.p);
    EXPECT_LE(normalised_max_error(dx, rdx), kTol);
    EXPECT_LE(normalised_max_error(dw, rdw), kTol);
    if (c.bias) {
      EXPECT_LE(normalised_max_error(db, rdb), kTol);
    }
  }
}

// Any subset of dx, dw, db may be requested; the others are left alone.
TEST(OnednnOps, Conv2DBackwardSubsets) {
  ConvCase c{3, 8, 9, 5, 3, 3, 6, conv_params(2, 2, 1, 1, 0, 1, 1, 1), true};
  Tensor x = random_tensor({c.N, c.H, c.W, c.C}, 1);
  Tensor w = random_tensor({c.KH, c.KW, c.C, c.F}, 2);
  Tensor dy = random_tensor({c.N, c.OH(), c.OW(), c.F}, 3);
  Tensor rdx(x.shape(), DType::float64), rdw = Tensor::full(w.shape(), 0.5, DType::float64),
                                         rdb = Tensor::full({c.F}, 0.5, DType::float64);
  loops::conv2d_backward<double>(f64(x), f64(w), f64(dy), rdx, rdw, rdb, c.p);
  for (int mask = 1; mask < 8; ++mask) {
    SCOPED_TRACE(mask);
    Tensor dx = mask & 1 ? nan_tensor(x.shape()) : Tensor();
    Tensor dw = mask & 2 ? Tensor::full(w.shape(), 0.5) : Tensor();
    Tensor db = mask & 4 ? Tensor::full({c.F}, 0.5) : Tensor();
    onednn::conv2d_backward(x, w, dy, dx, dw, db, c.p);
    if (dx.defined()) {
      EXPECT_LE(normalised_max_error(dx, rdx), kTol);
    }
    if (dw.defined()) {
      EXPECT_LE(normalised_max_error(dw, rdw), kTol);
    }
    if (db.defined()) {
      EXPECT_LE(normalised_max_error(db, rdb), kTol);
    }
  }
}

// Cached primitives must read each call's tensors, not the first call's.
TEST(OnednnOps, Conv2DRepeatedCallsUseNewData) {
  ConvCase c{2, 6, 6, 4, 3, 3, 5, conv_params(1, 1, 1, 1, 1, 1, 1, 1), true};
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    Tensor x = random_tensor({c.N, c.H, c.W, c.C}, seed * 10 + 1);
    Tensor w = random_tensor({c.KH, c.KW, c.C, c.F}, seed * 10 + 2);
    Tensor b = random_tensor({c.F}, seed * 10 + 3);
    Tensor y = nan_tensor({c.N, c.OH(), c.OW(), c.F});
    Tensor ref(y.shape(), DType::float64);
    onednn::conv2d_forward(x, w, b, y, c.p);
    loops::conv2d_forward<double>(f64(x), f64(w), f64(b), ref, c.p);
    EXPECT_LE(normalised_max_error(y, ref), kTol);
  }
}

TEST(OnednnOps, ErrorsNameTheOp) {
  Tensor x = random_tensor({1, 5, 5, 3}, 1), w = random_tensor({3, 3, 3, 4}, 2);
  Tensor y({1, 7, 7, 4});  // does not fit a 3x3 valid convolution of 5x5
  try {
    onednn::conv2d_forward(x, w, Tensor(), y, Conv2DParams{});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("oneDNN conv2d_forward"), std::string::npos) << e.what();
  }
}

// ------------------------------------------------------------------------------------------------- pooling

struct PoolCase {
  std::int64_t N, H, W, C;
  Pool2DParams p;
  std::string str() const {
    return fmt::format("N{} {}x{}x{} {} win{}x{} s{}x{} pad t{} b{} l{} r{}", N, H, W, C,
                       p.kind == PoolKind::max ? "max" : "avg", p.window_h, p.window_w, p.stride_h,
                       p.stride_w, p.pad_top, p.pad_bottom, p.pad_left, p.pad_right);
  }
  std::int64_t OH() const { return (H + p.pad_top + p.pad_bottom - p.window_h) / p.stride_h + 1; }
  std::int64_t OW() const { return (W + p.pad_left + p.pad_right - p.window_w) / p.stride_w + 1; }
};

std::vector<PoolCase> pool_cases() {
  auto params = [](int wh, int ww, int sh, int sw, int pt, int pb, int pl, int pr) {
    Pool2DParams p;
    p.window_h = wh, p.window_w = ww, p.stride_h = sh, p.stride_w = sw;
    p.pad_top = pt, p.pad_bottom = pb, p.pad_left = pl, p.pad_right = pr;
    return p;
  };
  std::vector<PoolCase> shapes = {
      {1, 5, 5, 3, params(2, 2, 2, 2, 0, 0, 0, 0)},   // VALID: the last row and column get no gradient
      {3, 7, 6, 10, params(3, 3, 2, 2, 1, 1, 0, 1)},  // SAME, odd and even sizes
      {2, 9, 9, 16, params(2, 2, 2, 2, 0, 1, 0, 1)},  // SAME with stride 2: padding after only
      {3, 6, 6, 5, params(3, 3, 1, 1, 1, 1, 1, 1)},   // overlapping windows
      {1, 8, 7, 33, params(2, 3, 2, 1, 0, 1, 1, 1)},
  };
  std::vector<PoolCase> cases;
  for (auto kind : {PoolKind::max, PoolKind::average})
    for (auto c : shapes) {
      c.p.kind = kind;
      cases.push_back(c);
    }
  return cases;
}

TEST(OnednnOps, Pool2DForward) {
  std::uint64_t seed = 300;
  for (const auto& c : pool_cases()) {
    SCOPED_TRACE(c.str());
    Tensor x = random_tensor({c.N, c.H, c.W, c.C}, ++seed);
    Tensor ref({c.N, c.OH(), c.OW(), c.C}, DType::float64);
    loops::pool2d_forward<double>(f64(x), ref, c.p);
    // Inference (no workspace) and training (a workspace to fill).
    Tensor none;
    Tensor y = nan_tensor(ref.shape());
    onednn::pool2d_forward(x, y, none, c.p);
    EXPECT_LE(normalised_max_error(y, ref), kTol);
    EXPECT_FALSE(none.defined());
    Tensor workspace(Shape{0}, DType::uint8);
    y = nan_tensor(ref.shape());
    onednn::pool2d_forward(x, y, workspace, c.p);
    EXPECT_LE(normalised_max_error(y, ref), kTol);
    if (c.p.kind == PoolKind::max) {
      EXPECT_GT(workspace.nbytes(), 0u);
    }
  }
}

TEST(OnednnOps, Pool2DBackward) {
  std::uint64_t seed = 400;
  for (const auto& c : pool_cases()) {
    SCOPED_TRACE(c.str());
    Tensor x = random_tensor({c.N, c.H, c.W, c.C}, ++seed);
    Tensor dy = random_tensor({c.N, c.OH(), c.OW(), c.C}, ++seed);
    Tensor rdx(x.shape(), DType::float64);
    loops::pool2d_backward<double>(f64(x), f64(dy), rdx, c.p);
    Tensor y(dy.shape());
    Tensor workspace(Shape{0}, DType::uint8);
    onednn::pool2d_forward(x, y, workspace, c.p);
    Tensor dx = nan_tensor(x.shape());
    onednn::pool2d_backward(x, y, dy, workspace, dx, c.p);
    EXPECT_LE(normalised_max_error(dx, rdx), kTol);
    // Without a workspace (forward ran as inference) backward recomputes what it needs.
    dx = nan_tensor(x.shape());
    onednn::pool2d_backward(x, y, dy, Tensor(), dx, c.p);
    EXPECT_LE(normalised_max_error(dx, rdx), kTol);
  }
}

// ------------------------------------------------------------------------------------------------ batch norm

std::vector<Shape> norm_shapes() {
  return {{3, 5, 7, 6}, {1, 4, 4, 17}, {64, 10}, {2, 3, 9}, {3, 8, 8, 32}};
}

TEST(OnednnOps, BatchNormForwardTraining) {
  std::uint64_t seed = 500;
  for (const auto& shape : norm_shapes()) {
    SCOPED_TRACE(shape.str());
    std::int64_t C = shape[-1];
    // Offset data: a non-zero mean, and a count small enough that biased and unbiased variance differ.
    Tensor x = random_tensor(shape, ++seed, DType::float32, 1.0, 4.0);
    Tensor gamma = random_tensor({C}, ++seed, DType::float32, 0.5, 1.5), beta = random_tensor({C}, ++seed);
    Tensor y = nan_tensor(shape), mean = nan_tensor({C}), var = nan_tensor({C});
    Tensor ry(shape, DType::float64), rmean({C}, DType::float64), rvar({C}, DType::float64);
    onednn::batch_norm_forward_training(x, gamma, beta, y, mean, var, 1e-3);
    loops::batch_norm_forward_training<double>(f64(x), f64(gamma), f64(beta), ry, rmean, rvar, 1e-3);
    EXPECT_LE(normalised_max_error(y, ry), kTol);
    EXPECT_LE(normalised_max_error(mean, rmean), kTol);
    EXPECT_LE(normalised_max_error(var, rvar), kTol);  // biased
  }
}

TEST(OnednnOps, BatchNormForwardInference) {
  std::uint64_t seed = 600;
  for (const auto& shape : norm_shapes()) {
    SCOPED_TRACE(shape.str());
    std::int64_t C = shape[-1];
    Tensor x = random_tensor(shape, ++seed, DType::float32, -2.0, 3.0);
    Tensor gamma = random_tensor({C}, ++seed, DType::float32, 0.5, 1.5), beta = random_tensor({C}, ++seed);
    Tensor mean = random_tensor({C}, ++seed), var = random_tensor({C}, ++seed, DType::float32, 0.2, 2.0);
    Tensor y = nan_tensor(shape), ry(shape, DType::float64);
    onednn::batch_norm_forward_inference(x, gamma, beta, mean, var, y, 1e-3);
    loops::batch_norm_forward_inference<double>(f64(x), f64(gamma), f64(beta), f64(mean), f64(var), ry, 1e-3);
    EXPECT_LE(normalised_max_error(y, ry), kTol);
  }
}

TEST(OnednnOps, BatchNormBackward) {
  std::uint64_t seed = 700;
  for (const auto& shape : norm_shapes()) {
    SCOPED_TRACE(shape.str());
    std::int64_t C = shape[-1];
    Tensor x = random_tensor(shape, ++seed, DType::float32, 1.0, 4.0);
    Tensor gamma = random_tensor({C}, ++seed, DType::float32, 0.5, 1.5), beta = random_tensor({C}, ++seed);
    // The batch statistics of x, as the training forward would have produced them.
    Tensor y64(shape, DType::float64), m64({C}, DType::float64), v64({C}, DType::float64);
    loops::batch_norm_forward_training<double>(f64(x), f64(gamma), f64(beta), y64, m64, v64, 1e-3);
    Tensor mean = m64.to(DType::float32), var = v64.to(DType::float32);
    Tensor dy = random_tensor(shape, ++seed);
    Tensor dx = nan_tensor(shape);
    Tensor dgamma = random_tensor({C}, ++seed), dbeta = random_tensor({C}, ++seed);  // accumulate into these
    Tensor rdx(shape, DType::float64), rdgamma = f64(dgamma), rdbeta = f64(dbeta);
    onednn::batch_norm_backward(x, gamma, mean, var, dy, dx, dgamma, dbeta, 1e-3);
    loops::batch_norm_backward<double>(f64(x), f64(gamma), f64(mean), f64(var), f64(dy), rdx, rdgamma, rdbeta,
                                       1e-3);
    EXPECT_LE(normalised_max_error(dx, rdx), kTol);
    EXPECT_LE(normalised_max_error(dgamma, rdgamma), kTol);
    EXPECT_LE(normalised_max_error(dbeta, rdbeta), kTol);
    // Parameter gradients only (dx undefined).
    Tensor none, dgamma2 = Tensor::zeros({C}), dbeta2 = Tensor::zeros({C});
    Tensor rdx2(shape, DType::float64), rdgamma2 = Tensor::zeros({C}, DType::float64),
                                        rdbeta2 = Tensor::zeros({C}, DType::float64);
    onednn::batch_norm_backward(x, gamma, mean, var, dy, none, dgamma2, dbeta2, 1e-3);
    loops::batch_norm_backward<double>(f64(x), f64(gamma), f64(mean), f64(var), f64(dy), rdx2, rdgamma2,
                                       rdbeta2, 1e-3);
    EXPECT_LE(normalised_max_error(dgamma2, rdgamma2), kTol);
    EXPECT_LE(normalised_max_error(dbeta2, rdbeta2), kTol);
  }
}

// ------------------------------------------------------------------------------------------------- dense

struct DenseCase {
  Shape x;
  std::int64_t U;
  bool bias;
};
std::vector<DenseCase> dense_cases() {
  return {{{1, 1}, 1, true},
          {{3, 5}, 7, true},
          {{33, 257}, 65, false},
          {{2, 3, 5}, 7, true},
          {{128, 300}, 10, true}};
}

TEST(OnednnOps, DenseForward) {
  std::uint64_t seed = 800;
  for (const auto& c : dense_cases()) {
    SCOPED_TRACE(c.x.str());
    std::int64_t K = c.x[-1];
    Tensor x = random_tensor(c.x, ++seed), w = random_tensor({K, c.U}, ++seed);
    Tensor b = c.bias ? random_tensor({c.U}, ++seed) : Tensor();
    Shape ys = c.x;
    ys[-1] = c.U;
    Tensor y = nan_tensor(ys), ry(ys, DType::float64);
    onednn::dense_forward(x, w, b, y);
    loops::dense_forward<double>(f64(x), f64(w), f64(b), ry);
    EXPECT_LE(normalised_max_error(y, ry), kTol);
  }
}

TEST(OnednnOps, DenseBackward) {
  std::uint64_t seed = 900;
  for (const auto& c : dense_cases()) {
    SCOPED_TRACE(c.x.str());
    std::int64_t K = c.x[-1];
    Shape ys = c.x;
    ys[-1] = c.U;
    Tensor x = random_tensor(c.x, ++seed), w = random_tensor({K, c.U}, ++seed),
           dy = random_tensor(ys, ++seed);
    Tensor dx = nan_tensor(c.x), dw = random_tensor(w.shape(), ++seed), db = random_tensor({c.U}, ++seed);
    Tensor rdx(c.x, DType::float64), rdw = f64(dw), rdb = f64(db);
    onednn::dense_backward(x, w, dy, dx, dw, db);
    loops::dense_backward<double>(f64(x), f64(w), f64(dy), rdx, rdw, rdb);
    EXPECT_LE(normalised_max_error(dx, rdx), kTol);
    EXPECT_LE(normalised_max_error(dw, rdw), kTol);
    EXPECT_LE(normalised_max_error(db, rdb), kTol);
    // Each gradient alone.
    Tensor none;
    Tensor dx2 = nan_tensor(c.x);
    onednn::dense_backward(x, w, dy, dx2, none, none);
    EXPECT_LE(normalised_max_error(dx2, rdx), kTol);
    Tensor dw2 = f64(dw).to(DType::float32);  // already holds one gradient: adds a second
    Tensor rdw2 = f64(dw2), rdx_unused(c.x, DType::float64), none64;
    onednn::dense_backward(x, w, dy, none, dw2, none);
    loops::dense_backward<double>(f64(x), f64(w), f64(dy), rdx_unused, rdw2, none64);
    EXPECT_LE(normalised_max_error(dw2, rdw2), kTol);
  }
}

// --------------------------------------------------------------------------------------------- activations

const Activation kActivations[] = {Activation::linear, Activation::relu, Activation::sigmoid,
                                   Activation::tanh, Activation::softmax};
std::vector<Shape> activation_shapes() {
  return {{3, 7}, {2, 5, 5, 9}, {1, 1000}, {1}};
}

TEST(OnednnOps, ActivationForward) {
  std::uint64_t seed = 1000;
  for (auto a : kActivations)
    for (const auto& shape : activation_shapes()) {
      SCOPED_TRACE(activation_name(a) + " " + shape.str());
      Tensor x = random_tensor(shape, ++seed, DType::float32, -3.0, 3.0);
      Tensor y = nan_tensor(shape), ry(shape, DType::float64);
      onednn::activation_forward(a, x, y);
      loops::activation_forward<double>(a, f64(x), ry);
      EXPECT_LE(normalised_max_error(y, ry), kTol);
    }
}

TEST(OnednnOps, ActivationBackward) {
  std::uint64_t seed = 1100;
  for (auto a : kActivations)
    for (const auto& shape : activation_shapes()) {
      SCOPED_TRACE(activation_name(a) + " " + shape.str());
      // y is a forward output (relu zeros included), rounded to float32 for both sides.
      Tensor x = random_tensor(shape, ++seed, DType::float64, -3.0, 3.0), y64(shape, DType::float64);
      loops::activation_forward<double>(a, x, y64);
      Tensor y = y64.to(DType::float32), dy = random_tensor(shape, ++seed);
      Tensor dx = nan_tensor(shape), rdx(shape, DType::float64);
      onednn::activation_backward(a, y, dy, dx);
      loops::activation_backward<double>(a, f64(y), f64(dy), rdx);
      EXPECT_LE(normalised_max_error(dx, rdx), kTol);
    }
}

TEST(OnednnOps, ActivationsInPlace) {
  std::uint64_t seed = 1200;
  for (auto a : kActivations) {
    SCOPED_TRACE(activation_name(a));
    Shape shape{4, 3, 3, 10};
    Tensor x = random_tensor(shape, ++seed, DType::float32, -3.0, 3.0);
    Tensor ry(shape, DType::float64);
    loops::activation_forward<double>(a, f64(x), ry);
    Tensor t = x.clone();
    onednn::activation_forward(a, t, t);  // y aliases x
    EXPECT_LE(normalised_max_error(t, ry), kTol);

    Tensor y = t, dy = random_tensor(shape, ++seed), rdx(shape, DType::float64);
    loops::activation_backward<double>(a, f64(y), f64(dy), rdx);
    Tensor g = dy.clone();
    onednn::activation_backward(a, y, g, g);  // dx aliases dy
    EXPECT_LE(normalised_max_error(g, rdx), kTol);
  }
}

TEST(OnednnOps, VersionAndIsa) {
  EXPECT_EQ(onednn::version().rfind("2.", 0), 0u) << onednn::version();
  EXPECT_NE(onednn::cpu_isa(), "unknown");
  EXPECT_FALSE(onednn::cpu_isa().empty());
}

}  // namespace
}  // namespace systolic::ops
