// The CUDA backend's elementwise ops, losses, metrics, optimizer updates and augmentation against the CPU
// backend: fresh random inputs, the CPU op on host tensors, the CUDA op on copies with its outputs poisoned
// (NaN), then the normalised max error within a bound per precision (float32: 1e-5 elementwise, 1e-4
// reductions and losses; bfloat16: 1e-2, against the CPU run in float32 on the same bfloat16-rounded inputs).
// Dropout masks, gathers, padding, concatenation and augmentation must be equal. Sizes that are not multiples
// of 4, 32 or 256 (1000003 elements), concatenation on axes 1 and 3, asymmetric padding, uint8 sources, bad
// labels and indices (reported by synchronize), Adam over three steps with its counter advanced on the
// device. Skipped without a GPU.
#include <gmock/gmock.h>
#include <systolic/ops.h>
#include <systolic/system.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gpu_test_util.h"

namespace systolic {
namespace {

using testing::error_of;
using testing::gpu;
using ::testing::HasSubstr;
using testing::normalised_max_error;
using testing::on_gpu;
using testing::poisoned_gpu;
using testing::random_tensor;

constexpr double kElementwise = 1e-5;  // float32
constexpr double kReduction = 1e-4;    // float32 losses, softmax, sums over rows
constexpr double kBf16 = 1e-2;

Tensor host(const Tensor& t) {
  return t.to(Device::cpu());
}

// bfloat16 copies of float32 values, and the float32 values they hold (the CPU backend's input).
Tensor bf16(const Tensor& f32) {
  return f32.to(DType::bfloat16);
}
Tensor f32(const Tensor& t) {
  return host(t).to(DType::float32);
}

// The GPU result against the CPU's.
void expect_close(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(got.numel(), want.numel());
  EXPECT_LE(normalised_max_error(host(got), want), tol);
}

void expect_equal(const Tensor& got, const Tensor& want, const std::string& what) {
  SCOPED_TRACE(what);
  auto g = host(got).to_doubles(), w = want.to_doubles();
  ASSERT_EQ(g.size(), w.size());
  for (std::size_t i = 0; i < g.size(); ++i) ASSERT_EQ(g[i], w[i]) << "element " << i;
}

Tensor gpu_scalar(double v) {
  return Tensor::full({1}, v, DType::float64, gpu());
}

// ------------------------------------------------------------------------------------------------ fill, copy

TEST(CudaElementwise, FillEveryDtypeAsTheHostRounds) {
  SYSTOLIC_REQUIRE_GPU();
  for (DType d : {DType::float32, DType::bfloat16, DType::float64, DType::int32, DType::uint8}) {
    for (double v : {0.0, 2.7, -3.5, 200.0}) {
      if (d == DType::uint8 && v < 0) continue;
      Tensor t = poisoned_gpu({1000003}, d);
      ops::fill(t, v);
      Tensor want({1000003}, d);
      want.fill(v);
      expect_equal(t, want, std::string(dtype_name(d)) + " " + std::to_string(v));
    }
  }
  Tensor step = poisoned_gpu({1}, DType::float64);
  ops::fill(step, 41.0);
  EXPECT_EQ(step.item(), 41.0);
}

TEST(CudaElementwise, CopyAnyDtypeSameNumel) {
  SYSTOLIC_REQUIRE_GPU();
  for (DType d : {DType::float32, DType::bfloat16, DType::float64, DType::int32, DType::uint8}) {
    Tensor x = random_tensor({37, 27}, 1, d, 0, 100);
    Tensor y = poisoned_gpu({999}, d);
    ops::copy(on_gpu(x), y);
    expect_equal(y, x, std::string(dtype_name(d)));
  }
  Tensor a = on_gpu(random_tensor({4}, 2)), b = poisoned_gpu({5});
  EXPECT_THAT(error_of([&] { ops::copy(a, b); }), HasSubstr("copy"));
}

// ------------------------------------------------------------------------ add_n, accumulate, scale_shift,
// ...

TEST(CudaElementwise, AddNAndAccumulate) {
  SYSTOLIC_REQUIRE_GPU();
  const Shape s({1000003});
  std::vector<Tensor> xs, gxs;
  for (int k = 0; k < 3; ++k) xs.push_back(random_tensor(s, 10 + k)), gxs.push_back(on_gpu(xs.back()));
  Tensor want(s), got = poisoned_gpu(s);
  ops::add_n(xs, want);
  ops::add_n(gxs, got);
  expect_close(got, want, kElementwise, "add_n of 3");

  // More inputs than one launch takes (8), the output one of the first.
  std::vector<Tensor> many, gmany;
  for (int k = 0; k < 11; ++k)
    many.push_back(random_tensor({1001}, 20 + k)), gmany.push_back(on_gpu(many.back()));
  Tensor want11({1001});
  ops::add_n(many, want11);
  Tensor out = gmany[0];
  ops::add_n(gmany, out);
  expect_close(out, want11, kElementwise, "add_n of 11 into its first input");

  // bfloat16.
  std::vector<Tensor> bx, gbx;
  for (int k = 0; k < 3; ++k)
    bx.push_back(f32(bf16(random_tensor({4097}, 40 + k)))), gbx.push_back(on_gpu(bf16(bx.back())));
  Tensor wantb({4097}), gotb = poisoned_gpu({4097}, DType::bfloat16);
  ops::add_n(bx, wantb);
  ops::add_n(gbx, gotb);
  expect_close(gotb, wantb, kBf16, "add_n bfloat16");

  Tensor src = random_tensor(s, 50), dst = random_tensor(s, 51);
  Tensor gdst = on_gpu(dst);
  ops::accumulate(on_gpu(src), gdst);
  ops::accumulate(src, dst);
  expect_close(gdst, dst, kElementwise, "accumulate");
}

TEST(CudaElementwise, ScaleShiftMovingAverageAndTheStepCounter) {
  SYSTOLIC_REQUIRE_GPU();
  Tensor x = random_tensor({1000003}, 60);
  Tensor want({1000003}), got = poisoned_gpu({1000003});
  ops::scale_shift(x, want, -0.37, 1.25);
  ops::scale_shift(on_gpu(x), got, -0.37, 1.25);
  expect_close(got, want, kElementwise, "scale_shift float32");

  Tensor xb = f32(bf16(x)), wantb({1000003}), gotb = on_gpu(bf16(x));
  ops::scale_shift(xb, wantb, 3.0, -0.5);
  ops::scale_shift(gotb, gotb, 3.0, -0.5);  // in place
  expect_close(gotb, wantb, kBf16, "scale_shift bfloat16 in place");

  Tensor step = gpu_scalar(0.0);
  for (int i = 0; i < 3; ++i) ops::scale_shift(step, step, 1.0, 1.0);
  EXPECT_EQ(step.item(), 3.0);

  Tensor moving = random_tensor({1027}, 61), value = random_tensor({1027}, 62);
  Tensor gmoving = on_gpu(moving);
  ops::moving_average(gmoving, on_gpu(value), 0.99);
  ops::moving_average(moving, value, 0.99);
  expect_close(gmoving, moving, kElementwise, "moving_average");
}

// -------------------------------------------------------------------------------------------- activations

TEST(CudaElementwise, ActivationsForwardAndBackward) {
  SYSTOLIC_REQUIRE_GPU();
  for (Activation a :
       {Activation::linear, Activation::relu, Activation::sigmoid, Activation::tanh, Activation::softmax}) {
    for (Shape s : {Shape({5, 3, 37}), Shape({3, 1000}), Shape({1000003, 1})}) {
      std::string what = activation_name(a) + " " + s.str();
      double tol = a == Activation::softmax ? kReduction : kElementwise;
      Tensor x = random_tensor(s, 70, DType::float32, -4, 4), dy = random_tensor(s, 71);
      Tensor y(s), dx(s);
      ops::activation_forward(a, x, y);
      ops::activation_backward(a, y, dy, dx);

      Tensor gy = poisoned_gpu(s), gdx = poisoned_gpu(s);
      ops::activation_forward(a, on_gpu(x), gy);
      expect_close(gy, y, tol, what + " forward");
      ops::activation_backward(a, on_gpu(y), on_gpu(dy), gdx);
      expect_close(gdx, dx, tol, what + " backward");

      // In place: y aliases x, dx aliases dy.
      Tensor inplace = on_gpu(x);
      ops::activation_forward(a, inplace, inplace);
      expect_close(inplace, y, tol, what + " forward in place");
      Tensor ginplace = on_gpu(dy);
      ops::activation_backward(a, on_gpu(y), ginplace, ginplace);
      expect_close(ginplace, dx, tol, what + " backward in place");

      // bfloat16.
      Tensor xb = f32(bf16(x)), yb(s);
      ops::activation_forward(a, xb, yb);
      Tensor gyb = poisoned_gpu(s, DType::bfloat16);
      ops::activation_forward(a, on_gpu(bf16(x)), gyb);
      expect_close(gyb, yb, kBf16, what + " forward bfloat16");
      Tensor yb16 = f32(bf16(yb)), dyb = f32(bf16(dy)), dxb(s);
      ops::activation_backward(a, yb16, dyb, dxb);
      Tensor gdxb = poisoned_gpu(s, DType::bfloat16);
      ops::activation_backward(a, on_gpu(bf16(yb16)), on_gpu(bf16(dyb)), gdxb);
      expect_close(gdxb, dxb, kBf16, what + " backward bfloat16");
    }
  }
  Tensor ints = Tensor::zeros({4}, DType::int32, gpu()), out = Tensor::zeros({4}, DType::int32, gpu());
  std::string e = error_of([&] { ops::activation_forward(Activation::relu, ints, out); });
  EXPECT_THAT(e, HasSubstr("activation_forward"));
  EXPECT_THAT(e, HasSubstr("int32"));
}

// ------------------------------------------------------------------------------------------------ dropout

TEST(CudaElementwise, DropoutMaskIsTheCpuMaskBitForBit) {
  SYSTOLIC_REQUIRE_GPU();
  const Shape s({1000003});
  Tensor x = random_tensor(s, 80, DType::float32, 0.5, 1.5);  // no zeros: a zero output is a dropped element
  for (double step : {0.0, 5.0, 123456.0}) {
    for (double rate : {0.1, 0.5}) {
      std::string what = "step " + std::to_string(step) + " rate " + std::to_string(rate);
      Tensor host_step = Tensor::full({1}, step, DType::float64);
      Tensor want(s), got = poisoned_gpu(s);
      ops::dropout_forward(x, want, rate, 99, host_step);
      ops::dropout_forward(on_gpu(x), got, rate, 99, gpu_scalar(step));
      expect_equal(got, want, what + " forward");

      Tensor dwant(s), dgot = on_gpu(x);
      ops::dropout_backward(x, dwant, rate, 99, host_step);
      ops::dropout_backward(dgot, dgot, rate, 99, gpu_scalar(step));  // dx aliases dy
      expect_equal(dgot, dwant, what + " backward in place");
    }
  }
  // An undefined step is step 0.
  Tensor want(s), got = poisoned_gpu(s);
  ops::dropout_forward(x, want, 0.3, 7, Tensor());
  ops::dropout_forward(on_gpu(x), got, 0.3, 7, Tensor());
  expect_equal(got, want, "undefined step");

  // bfloat16: the same mask, the kept values scaled in float and rounded.
  Tensor xb = f32(bf16(x)), wantb(s), gotb = poisoned_gpu(s, DType::bfloat16);
  ops::dropout_forward(xb, wantb, 0.4, 3, Tensor::full({1}, 2.0, DType::float64));
  ops::dropout_forward(on_gpu(bf16(x)), gotb, 0.4, 3, gpu_scalar(2.0));
  auto g = host(gotb).to_doubles(), w = wantb.to_doubles();
  for (std::size_t i = 0; i < g.size(); ++i)
    ASSERT_EQ(g[i] == 0, w[i] == 0) << "bfloat16 mask, element " << i;
  expect_close(gotb, wantb, kBf16, "bfloat16 values");
}

// ------------------------------------------------------------------------------------ padding, concatenation

TEST(CudaElementwise, Pad2DAsymmetric) {
  SYSTOLIC_REQUIRE_GPU();
  ops::Pad2D p{.top = 1, .bottom = 2, .left = 0, .right = 3};
  Tensor x = random_tensor({3, 5, 7, 6}, 90);
  Shape ys({3, 8, 10, 6});
  Tensor y(ys), gy = poisoned_gpu(ys);
  ops::pad2d_forward(x, y, p);
  ops::pad2d_forward(on_gpu(x), gy, p);
  expect_equal(gy, y, "forward");
  Tensor dy = random_tensor(ys, 91), dx({3, 5, 7, 6}), gdx = poisoned_gpu({3, 5, 7, 6});
  ops::pad2d_backward(dy, dx, p);
  ops::pad2d_backward(on_gpu(dy), gdx, p);
  expect_equal(gdx, dx, "backward");

  Tensor gyb = poisoned_gpu(ys, DType::bfloat16);
  ops::pad2d_forward(on_gpu(bf16(x)), gyb, p);
  Tensor yb(ys);
  ops::pad2d_forward(f32(bf16(x)), yb, p);
  expect_equal(gyb, yb, "forward bfloat16");
  EXPECT_THAT(error_of([&] { ops::pad2d_forward(on_gpu(x), gdx, p); }), HasSubstr("pad2d_forward"));
}

TEST(CudaElementwise, ConcatOnAxes1And3ForwardAndBackward) {
  SYSTOLIC_REQUIRE_GPU();
  for (int axis : {0, 1, 3}) {
    std::vector<Shape> shapes = {Shape({2, 3, 4, 5}), Shape({2, 3, 4, 5}), Shape({2, 3, 4, 5})};
    shapes[1][axis] = 1;
    shapes[2][axis] = 7;
    Shape ys = shapes[0];
    ys[axis] = shapes[0][axis] + 1 + 7;
    std::vector<Tensor> xs, gxs;
    for (std::size_t k = 0; k < shapes.size(); ++k)
      xs.push_back(random_tensor(shapes[k], 100 + k)), gxs.push_back(on_gpu(xs.back()));
    Tensor y(ys), gy = poisoned_gpu(ys);
    ops::concat_forward(xs, y, axis);
    ops::concat_forward(gxs, gy, axis);
    expect_equal(gy, y, "forward axis " + std::to_string(axis));

    Tensor dy = random_tensor(ys, 110);
    std::vector<Tensor> dxs, gdxs;
    for (auto& s : shapes) dxs.push_back(Tensor(s)), gdxs.push_back(poisoned_gpu(s));
    ops::concat_backward(dy, dxs, axis);
    ops::concat_backward(on_gpu(dy), gdxs, axis);
    for (std::size_t k = 0; k < dxs.size(); ++k)
      expect_equal(gdxs[k], dxs[k], "backward part " + std::to_string(k));

    // The middle gradient not wanted: the last still starts after its width.
    std::vector<Tensor> some = {poisoned_gpu(shapes[0]), Tensor(), poisoned_gpu(shapes[2])};
    ops::concat_backward(on_gpu(dy), some, axis);
    expect_equal(some[0], dxs[0], "first part, middle undefined");
    expect_equal(some[2], dxs[2], "last part, middle undefined");
  }
  // bfloat16 on axis 3.
  Tensor a = random_tensor({2, 2, 2, 3}, 120), b = random_tensor({2, 2, 2, 1}, 121);
  Tensor y({2, 2, 2, 4}), gy = poisoned_gpu({2, 2, 2, 4}, DType::bfloat16);
  ops::concat_forward({f32(bf16(a)), f32(bf16(b))}, y, 3);
  ops::concat_forward({on_gpu(bf16(a)), on_gpu(bf16(b))}, gy, 3);
  expect_equal(gy, y, "bfloat16 axis 3");
}

// --------------------------------------------------------------------------------------------- gather rows

TEST(CudaElementwise, GatherRowsFromUint8WithDeviceAndHostIndices) {
  SYSTOLIC_REQUIRE_GPU();
  Tensor images = random_tensor({50, 4, 5, 3}, 130, DType::uint8, 0, 255);
  Tensor labels = random_tensor({50}, 131, DType::int32, 0, 9);
  std::vector<std::int64_t> rows = {49, 0, 7, 7, 13, 21, 48};
  std::vector<std::int32_t> rows32(rows.begin(), rows.end());
  Tensor idx = on_gpu(Tensor::from_vector(rows32, {7}));
  Tensor gimages = on_gpu(images), glabels = on_gpu(labels);

  Tensor want({7, 4, 5, 3});
  ops::gather_rows(images, rows, want);
  Tensor got = poisoned_gpu({7, 4, 5, 3});
  ops::gather_rows(gimages, idx, got);
  expect_equal(got, want, "uint8 -> float32, device indices");
  Tensor got_host = poisoned_gpu({7, 4, 5, 3});
  ops::gather_rows(gimages, rows, got_host);
  expect_equal(got_host, want, "uint8 -> float32, host indices");
  Tensor gotb = poisoned_gpu({7, 4, 5, 3}, DType::bfloat16);
  ops::gather_rows(gimages, idx, gotb);
  expect_equal(gotb, want, "uint8 -> bfloat16 (exact for 0..255)");

  Tensor want_labels({7}, DType::int32);
  ops::gather_rows(labels, rows, want_labels);
  Tensor got_labels = poisoned_gpu({7}, DType::int32);
  ops::gather_rows(glabels, idx, got_labels);
  expect_equal(got_labels, want_labels, "int32 labels");

  Tensor doubles = random_tensor({50, 6}, 132, DType::float64);
  Tensor want_d({7, 6});
  ops::gather_rows(doubles, rows, want_d);
  Tensor got_d = poisoned_gpu({7, 6});
  ops::gather_rows(on_gpu(doubles), idx, got_d);
  expect_equal(got_d, want_d, "float64 -> float32");

  Tensor one = poisoned_gpu({1, 4, 5, 3});
  EXPECT_THAT(error_of([&] { ops::gather_rows(gimages, std::vector<std::int64_t>{50}, one); }),
              HasSubstr("range"));
}

TEST(CudaElementwise, GatherRowsOutOfRangeDeviceIndexIsReportedBySynchronize) {
  SYSTOLIC_REQUIRE_GPU();
  synchronize(gpu());
  Tensor images = on_gpu(random_tensor({10, 3}, 140, DType::uint8, 0, 255));
  Tensor idx = on_gpu(Tensor::from_vector(std::vector<std::int32_t>{1, 10, -1, 2}, {4}));
  Tensor got = poisoned_gpu({4, 3});
  ops::gather_rows(images, idx, got);  // must not fault
  EXPECT_THAT(error_of([&] { synchronize(gpu()); }), HasSubstr("row index"));
  auto v = host(got).to_doubles();
  for (int j = 3; j < 9; ++j) EXPECT_EQ(v[j], 0.0) << "the rows of bad indices are zeros";
  synchronize(gpu());  // the flag was cleared
}

// ------------------------------------------------------------------------------------------ augmentation

TEST(CudaElementwise, AugmentImagesEqualsTheCpu) {
  SYSTOLIC_REQUIRE_GPU();
  Tensor x = random_tensor({9, 13, 11, 3}, 150, DType::float32, 0, 255);
  for (bool constant : {false, true}) {
    for (double range : {0.2, 3.5}) {
      ops::AugmentParams p{.width_shift_range = range,
                           .height_shift_range = range * 0.7,
                           .horizontal_flip = true,
                           .fill_constant = constant,
                           .cval = -2};
      Tensor want(x.shape()), got = poisoned_gpu(x.shape());
      ops::augment_images(x, want, p, 5, 17);
      ops::augment_images(on_gpu(x), got, p, 5, 17);
      EXPECT_LE(normalised_max_error(host(got), want), 1e-5) << "constant " << constant << " range " << range;
    }
  }
  Tensor gray = random_tensor({4, 6, 6}, 151, DType::float32, 0, 1);  // (N, H, W): one channel
  Tensor want(gray.shape()), got = poisoned_gpu(gray.shape());
  ops::augment_images(gray, want, {.width_shift_range = 0.3, .horizontal_flip = true}, 8, 0);
  ops::augment_images(on_gpu(gray), got, {.width_shift_range = 0.3, .horizontal_flip = true}, 8, 0);
  EXPECT_LE(normalised_max_error(host(got), want), 1e-5) << "rank 3";
}

// ------------------------------------------------------------------------------------------------- losses

// Probabilities (rows sum to 1) from random logits.
Tensor softmax_of(const Tensor& logits) {
  Tensor p(logits.shape());
  ops::activation_forward(Activation::softmax, logits, p);
  return p;
}

TEST(CudaLosses, SoftmaxCrossEntropySparseAndDense) {
  SYSTOLIC_REQUIRE_GPU();
  for (std::int64_t C : {10, 37, 1000}) {
    const std::int64_t N = 1000;
    Tensor logits = random_tensor({N, C}, 160, DType::float32, -5, 5);
    Tensor sparse = random_tensor({N}, 161, DType::int32, 0, double(C - 1));
    Tensor dense = softmax_of(random_tensor({N, C}, 162));
    for (const Tensor* labels : {&sparse, &dense}) {
      std::string what = (labels == &sparse ? "sparse C " : "dense C ") + std::to_string(C);
      Tensor total = Tensor::full({1}, 1.5, DType::float64), grad({N, C});
      ops::softmax_cross_entropy(logits, *labels, total, grad, 1.0 / N);
      Tensor gtotal = gpu_scalar(1.5), ggrad = poisoned_gpu({N, C});
      ops::softmax_cross_entropy(on_gpu(logits), on_gpu(*labels), gtotal, ggrad, 1.0 / N);
      expect_close(gtotal, total, kReduction, what + " total (added to 1.5)");
      expect_close(ggrad, grad, kReduction, what + " gradient");
      Tensor no_grad;
      ops::softmax_cross_entropy(on_gpu(logits), on_gpu(*labels), gtotal, no_grad, 1.0 / N);
      EXPECT_NEAR(gtotal.item(), 2 * total.item() - 1.5, kReduction * std::abs(total.item())) << what;

      // bfloat16 logits (and dense labels).
      Tensor lb = f32(bf16(logits)), yb = labels == &sparse ? sparse : f32(bf16(dense));
      Tensor tb = Tensor::full({1}, 0.0, DType::float64), gb({N, C});
      ops::softmax_cross_entropy(lb, yb, tb, gb, 1.0);
      Tensor gtb = gpu_scalar(0.0), ggb = poisoned_gpu({N, C}, DType::bfloat16);
      ops::softmax_cross_entropy(on_gpu(bf16(logits)),
                                 labels == &sparse ? on_gpu(sparse) : on_gpu(bf16(dense)), gtb, ggb, 1.0);
      expect_close(gtb, tb, kBf16, what + " bfloat16 total");
      expect_close(ggb, gb, kBf16, what + " bfloat16 gradient");
    }
  }
}

TEST(CudaLosses, OutOfRangeLabelIsReportedBySynchronize) {
  SYSTOLIC_REQUIRE_GPU();
  synchronize(gpu());
  Tensor logits = on_gpu(random_tensor({4, 10}, 170));
  Tensor labels = on_gpu(Tensor::from_vector(std::vector<std::int32_t>{1, 10, 3, -1}, {4}));
  Tensor total = gpu_scalar(0.0), grad = poisoned_gpu({4, 10});
  ops::softmax_cross_entropy(logits, labels, total, grad, 1.0);
  EXPECT_THAT(error_of([&] { synchronize(gpu()); }), HasSubstr("label"));
  // The bad rows add nothing and get no gradient.
  Tensor want = Tensor::full({1}, 0.0, DType::float64), none, hl = host(logits);
  ops::softmax_cross_entropy(hl.view(0, {1, 10}), Tensor::from_vector(std::vector<std::int32_t>{1}, {1}),
                             want, none, 1.0);
  ops::softmax_cross_entropy(hl.view(20, {1, 10}), Tensor::from_vector(std::vector<std::int32_t>{3}, {1}),
                             want, none, 1.0);
  EXPECT_NEAR(total.item(), want.item(), 1e-4 * std::abs(want.item()));
  auto g = host(grad).to_doubles();
  for (int c = 0; c < 10; ++c) {
    EXPECT_EQ(g[10 + c], 0.0);
    EXPECT_EQ(g[30 + c], 0.0);
  }

  Tensor count = gpu_scalar(0.0);
  ops::accuracy_count(logits, labels, count);
  EXPECT_THAT(error_of([&] { synchronize(gpu()); }), HasSubstr("label"));
  synchronize(gpu());  // cleared
}

TEST(CudaLosses, CrossentropyFromProbabilitiesWithClipping) {
  SYSTOLIC_REQUIRE_GPU();
  const std::int64_t N = 777, C = 13;
  Tensor probs = softmax_of(random_tensor({N, C}, 180, DType::float32, -8, 8));
  probs.data<float>()[0] = 0.0f, probs.data<float>()[1] = 1.0f, probs.data<float>()[2] = 1e-9f;  // clipped
  Tensor sparse = random_tensor({N}, 181, DType::int32, 0, C - 1);
  sparse.data<std::int32_t>()[0] = 0;  // a clipped 0 for the true class
  Tensor dense = softmax_of(random_tensor({N, C}, 182));
  for (const Tensor* labels : {&sparse, &dense}) {
    std::string what = labels == &sparse ? "sparse" : "dense";
    Tensor total = Tensor::full({1}, 0.25, DType::float64), grad({N, C});
    ops::crossentropy_from_probabilities(probs, *labels, total, grad, 0.5, 1e-7);
    Tensor gtotal = gpu_scalar(0.25), ggrad = poisoned_gpu({N, C});
    ops::crossentropy_from_probabilities(on_gpu(probs), on_gpu(*labels), gtotal, ggrad, 0.5, 1e-7);
    expect_close(gtotal, total, kReduction, what + " total");
    expect_close(ggrad, grad, kReduction, what + " gradient");
  }
}

TEST(CudaLosses, MeanSquaredError) {
  SYSTOLIC_REQUIRE_GPU();
  Tensor pred = random_tensor({37, 5, 3}, 190), target = random_tensor({37, 5, 3}, 191);
  Tensor total = Tensor::full({1}, 2.0, DType::float64), grad({37, 5, 3});
  ops::mean_squared_error(pred, target, total, grad, 1.0 / 37);
  Tensor gtotal = gpu_scalar(2.0), ggrad = poisoned_gpu({37, 5, 3});
  ops::mean_squared_error(on_gpu(pred), on_gpu(target), gtotal, ggrad, 1.0 / 37);
  expect_close(gtotal, total, kReduction, "total");
  expect_close(ggrad, grad, kReduction, "gradient");

  Tensor big = random_tensor({1000003, 1}, 192), bigt = random_tensor({1000003, 1}, 193);
  Tensor tb = Tensor::full({1}, 0.0, DType::float64), gtb = gpu_scalar(0.0), none;
  ops::mean_squared_error(big, bigt, tb, none, 1.0);
  ops::mean_squared_error(on_gpu(big), on_gpu(bigt), gtb, none, 1.0);
  expect_close(gtb, tb, kReduction, "1000003 rows");
}

TEST(CudaLosses, AccuracyCountWithTiesAsTheCpu) {
  SYSTOLIC_REQUIRE_GPU();
  for (std::int64_t C : {3, 10, 100}) {
    const std::int64_t N = 1001;
    // Small integers: many rows have tied maxima, which the CPU resolves to the first.
    Tensor pred = random_tensor({N, C}, 200, DType::float32, 0, 2);
    for (std::int64_t i = 0; i < pred.numel(); ++i) pred.data<float>()[i] = std::round(pred.data<float>()[i]);
    Tensor sparse = random_tensor({N}, 201, DType::int32, 0, double(C - 1));
    Tensor dense = random_tensor({N, C}, 202, DType::float32, 0, 2);
    for (std::int64_t i = 0; i < dense.numel(); ++i)
      dense.data<float>()[i] = std::round(dense.data<float>()[i]);
    for (const Tensor* labels : {&sparse, &dense}) {
      Tensor total = Tensor::full({1}, 4.0, DType::float64), gtotal = gpu_scalar(4.0);
      ops::accuracy_count(pred, *labels, total);
      ops::accuracy_count(on_gpu(pred), on_gpu(*labels), gtotal);
      EXPECT_EQ(gtotal.item(), total.item()) << (labels == &sparse ? "sparse" : "dense") << " C " << C;
    }
  }
}

// --------------------------------------------------------------------------------------------- optimizers

TEST(CudaOptimizers, AdamThreeStepsWithTheCounterOnTheDevice) {
  SYSTOLIC_REQUIRE_GPU();
  const Shape s({100003});
  ops::AdamStep step{.lr = 1e-3, .beta_1 = 0.9, .beta_2 = 0.999, .epsilon = 1e-7};
  Tensor w = random_tensor(s, 210), m = Tensor::zeros(s), v = Tensor::zeros(s);
  Tensor gw = on_gpu(w), gm = on_gpu(m), gv = on_gpu(v);
  Tensor it = Tensor::full({1}, 0.0, DType::float64), git = gpu_scalar(0.0);
  for (int k = 0; k < 3; ++k) {
    Tensor g = random_tensor(s, 211 + k);
    ops::adam_update(w, g, m, v, step, it);
    ops::scale_shift(it, it, 1.0, 1.0);
    ops::adam_update(gw, on_gpu(g), gm, gv, step, git);
    ops::scale_shift(git, git, 1.0, 1.0);
  }
  EXPECT_EQ(git.item(), 3.0);
  EXPECT_LE(normalised_max_error(host(gw), w), 1e-6);
  EXPECT_LE(normalised_max_error(host(gm), m), 1e-6);
  EXPECT_LE(normalised_max_error(host(gv), v), 1e-6);
}

TEST(CudaOptimizers, SgdAndRmspropWithAndWithoutMomentum) {
  SYSTOLIC_REQUIRE_GPU();
  const Shape s({4099});
  for (double momentum : {0.0, 0.9}) {
    for (bool nesterov : {false, true}) {
      Tensor w = random_tensor(s, 220), vel = random_tensor(s, 221);
      Tensor gw = on_gpu(w), gvel = momentum ? on_gpu(vel) : Tensor();
      Tensor hvel = momentum ? vel : Tensor();
      for (int k = 0; k < 2; ++k) {
        Tensor g = random_tensor(s, 222 + k);
        ops::sgd_update(w, g, hvel, 0.01, momentum, nesterov);
        ops::sgd_update(gw, on_gpu(g), gvel, 0.01, momentum, nesterov);
      }
      EXPECT_LE(normalised_max_error(host(gw), w), 1e-6)
          << "sgd momentum " << momentum << " nesterov " << nesterov;
      if (momentum) {
        EXPECT_LE(normalised_max_error(host(gvel), vel), 1e-6);
      }
    }
    Tensor w = random_tensor(s, 230), ms = random_tensor(s, 231, DType::float32, 0, 1),
           mom = random_tensor(s, 232);
    Tensor gw = on_gpu(w), gms = on_gpu(ms), gmom = momentum ? on_gpu(mom) : Tensor();
    Tensor hmom = momentum ? mom : Tensor();
    for (int k = 0; k < 2; ++k) {
      Tensor g = random_tensor(s, 233 + k);
      ops::rmsprop_update(w, g, ms, hmom, 0.001, 0.9, momentum, 1e-7);
      ops::rmsprop_update(gw, on_gpu(g), gms, gmom, 0.001, 0.9, momentum, 1e-7);
    }
    EXPECT_LE(normalised_max_error(host(gw), w), 1e-6) << "rmsprop momentum " << momentum;
    EXPECT_LE(normalised_max_error(host(gms), ms), 1e-6);
  }
}

}  // namespace
}  // namespace systolic
