// The input pipeline: batches equal a plain gather + conversion whatever the thread count; partial last batch;
// labels flattened; augmentation (shifts with nearest/constant fill, horizontal flip) keeps shapes and labels, is
// deterministic per seed and independent of the thread count, and shifts as Keras's ImageDataGenerator does;
// fit with augmentation is repeatable; errors.
#include <gmock/gmock.h>
#include <systolic/systolic.h>

#include <cmath>
#include <numeric>

#include "test_util.h"

using namespace systolic;
using ::testing::HasSubstr;

using systolic::testing::error_of;

namespace {

Tensor images(std::int64_t n, std::int64_t h, std::int64_t w, std::int64_t c) {
  Tensor x({n, h, w, c}, DType::uint8);
  for (std::int64_t i = 0; i < x.numel(); ++i)
    x.data<std::uint8_t>()[i] = std::uint8_t((i * 37 + i / 7) % 256);
  return x;
}
Tensor labels(std::int64_t n) {
  Tensor y({n, 1}, DType::uint8);
  for (std::int64_t i = 0; i < n; ++i) y.data<std::uint8_t>()[i] = std::uint8_t(i % 10);
  return y;
}

struct Batches {
  std::vector<std::vector<double>> x, y;
  std::vector<Shape> xs, ys;
};
Batches collect(const Tensor& x, const Tensor& y, std::vector<std::int64_t> order, BatchPipelineOptions o) {
  BatchPipeline p(x, y, std::move(order), o);
  Batches b;
  for (Tensor xb, yb; p.next(xb, yb);) {
    b.x.push_back(xb.to_doubles());
    if (yb.defined()) b.y.push_back(yb.to_doubles()), b.ys.push_back(yb.shape());
    b.xs.push_back(xb.shape());
  }
  return b;
}

}  // namespace

TEST(Pipeline, BatchesAreGatheredRowsInOrderForAnyThreadCount) {
  Tensor x = images(23, 4, 5, 3), y = labels(23);
  std::vector<std::int64_t> order(23);
  std::iota(order.rbegin(), order.rend(), 0);  // reversed
  std::swap(order[3], order[17]);
  for (int workers : {0, 1, 3}) {
    SCOPED_TRACE(workers);
    Batches b = collect(x, y, order, {.batch_size = 8, .workers = workers, .max_queue_size = 2});
    ASSERT_EQ(b.x.size(), 3u);
    EXPECT_EQ(b.xs[0], Shape({8, 4, 5, 3}));
    EXPECT_EQ(b.xs[2], Shape({7, 4, 5, 3}));  // the last partial batch is kept
    EXPECT_EQ(b.ys[2], Shape({7}));           // (N, 1) labels come as (n,)
    auto xv = x.to_doubles(), yv = y.to_doubles();
    for (std::size_t k = 0; k < b.x.size(); ++k)
      for (std::size_t i = 0; i < b.y[k].size(); ++i) {
        std::int64_t row = order[k * 8 + i];
        EXPECT_EQ(b.y[k][i], yv[row]);
        for (int j = 0; j < 60; ++j)
          ASSERT_EQ(b.x[k][i * 60 + j], xv[row * 60 + j]) << "batch " << k << " sample " << i;
      }
  }
}

TEST(Pipeline, AugmentationKeepsShapesAndLabelsAndIsDeterministicPerSeed) {
  Tensor x = images(50, 8, 8, 3), y = labels(50);
  std::vector<std::int64_t> order(50);
  std::iota(order.begin(), order.end(), 0);
  Augmentation a{.width_shift_range = 0.25, .height_shift_range = 0.25, .horizontal_flip = true};
  Batches plain = collect(x, y, order, {.batch_size = 16});
  Batches b1 = collect(x, y, order, {.batch_size = 16, .augmentation = a, .seed = 5, .workers = 1});
  Batches b2 = collect(x, y, order, {.batch_size = 16, .augmentation = a, .seed = 5, .workers = 3});
  Batches b3 = collect(x, y, order, {.batch_size = 16, .augmentation = a, .seed = 6, .workers = 0});
  EXPECT_EQ(b1.xs, plain.xs);
  EXPECT_EQ(b1.y, plain.y);
  EXPECT_EQ(b1.x, b2.x) << "same seed, different thread counts";
  EXPECT_NE(b1.x, b3.x) << "another seed gives other shifts and flips";
  EXPECT_NE(b1.x, plain.x);
  for (auto& batch : b1.x)
    for (double v : batch)
      ASSERT_TRUE(v >= 0 && v <= 255) << v;  // interpolation of uint8 values stays in range
}

TEST(Pipeline, WidthShiftOfARampIsATranslationWithNearestFill) {
  // Each row is a ramp 0, 10, ..., 70: bilinear sampling at x + t with edges clamped gives clamp(x + t, 0, 7) * 10.
  const std::int64_t W = 8, N = 40;
  Tensor x({N, 2, W, 1}, DType::uint8);
  for (std::int64_t i = 0; i < x.numel(); ++i) x.data<std::uint8_t>()[i] = std::uint8_t((i % W) * 10);
  std::vector<std::int64_t> order(N);
  std::iota(order.begin(), order.end(), 0);
  Batches b =
      collect(x, Tensor(), order, {.batch_size = N, .augmentation = {.width_shift_range = 3.0}, .seed = 1});
  int shifted = 0;
  for (std::int64_t i = 0; i < N; ++i) {
    const double* img = b.x[0].data() + i * 2 * W;
    // Recover t from an interior pixel that is not clamped, then check every pixel of both rows.
    double t = 0;
    bool found = false;
    for (std::int64_t c = 0; c < W && !found; ++c)
      if (img[c] > 0 && img[c] < 70) t = img[c] / 10 - double(c), found = true;
    ASSERT_TRUE(found) << "sample " << i;
    EXPECT_LT(std::abs(t), 3.0 + 1e-4);
    shifted += std::abs(t) > 0.01;
    for (std::int64_t r = 0; r < 2; ++r)
      for (std::int64_t c = 0; c < W; ++c)
        EXPECT_NEAR(img[r * W + c], std::clamp(double(c) + t, 0.0, double(W - 1)) * 10, 1e-3)
            << i << " " << c;
  }
  EXPECT_GT(shifted, N / 2);
}

TEST(Pipeline, FlipOnlyGivesTheImageOrItsMirrorAndConstantFill) {
  const std::int64_t N = 64;
  Tensor x = images(N, 3, 4, 2);
  std::vector<std::int64_t> order(N);
  std::iota(order.begin(), order.end(), 0);
  Batches b =
      collect(x, Tensor(), order, {.batch_size = N, .augmentation = {.horizontal_flip = true}, .seed = 9});
  auto xv = x.to_doubles();
  int flipped = 0;
  for (std::int64_t i = 0; i < N; ++i) {
    bool same = true, mirror = true;
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < 4; ++c)
        for (int k = 0; k < 2; ++k) {
          double out = b.x[0][i * 24 + (r * 4 + c) * 2 + k];
          same &= out == xv[i * 24 + (r * 4 + c) * 2 + k];
          mirror &= out == xv[i * 24 + (r * 4 + (3 - c)) * 2 + k];
        }
    EXPECT_TRUE(same || mirror) << "sample " << i;
    flipped += mirror && !same;
  }
  EXPECT_GT(flipped, 10);
  EXPECT_LT(flipped, N - 10);

  // fill_mode constant: a shift of more than the whole height leaves only cval.
  Batches c = collect(x, Tensor(), order,
                      {.batch_size = N,
                       .augmentation = {.height_shift_range = 100.0, .fill_mode = "constant", .cval = 7},
                       .seed = 2});
  int all_cval = 0;
  for (std::int64_t i = 0; i < N; ++i) {
    bool every = true;
    for (int j = 0; j < 24; ++j) every &= c.x[0][i * 24 + j] == 7;
    all_cval += every;
  }
  EXPECT_GT(all_cval, N / 2);  // |shift| >= 3 rows for most draws from [-100, 100)
}

TEST(Pipeline, Errors) {
  Tensor x = images(4, 2, 2, 1), y = labels(4);
  EXPECT_THAT(error_of([&] { BatchPipeline(x, y, {0, 9}, {}); }), HasSubstr("row 9 out of range"));
  EXPECT_THAT(error_of([&] { BatchPipeline(x, labels(3), {0}, {}); }), HasSubstr("3 labels"));
  EXPECT_THAT(error_of([&] { BatchPipeline(x, y, {0}, {.augmentation = {.fill_mode = "wrap"}}); }),
              HasSubstr("wrap"));
  EXPECT_THAT(error_of([&] { BatchPipeline(x, y, {0}, {.augmentation = {.width_shift_range = -1}}); }),
              HasSubstr("width_shift_range"));
  Tensor flat({4, 3}, DType::uint8);
  EXPECT_THAT(error_of([&] { BatchPipeline(flat, y, {0}, {.augmentation = {.horizontal_flip = true}}); }),
              HasSubstr("(4, 3)"));
}

TEST(Pipeline, FitWithAugmentationIsRepeatableAndLearns) {
  // Two classes told apart by brightness, which shifts and flips keep.
  const std::int64_t N = 256;
  Tensor x({N, 8, 8, 1}, DType::uint8), y({N}, DType::uint8);
  Generator g(3);
  for (std::int64_t i = 0; i < N; ++i) {
    int label = int(i % 2);
    y.data<std::uint8_t>()[i] = std::uint8_t(label);
    for (int j = 0; j < 64; ++j)
      x.data<std::uint8_t>()[i * 64 + j] = std::uint8_t(label * 128 + g.next_u32() % 100);
  }
  auto train = [&] {
    set_random_seed(11);
    clear_session();
    auto in = layers::Input({8, 8, 1});
    auto h = layers::Rescaling(1.0 / 255)(in);
    h = layers::Flatten()(h);
    auto out = layers::Dense(2, {.activation = "softmax"})(h);
    Model m(in, out);
    m.compile(optimizers::Adam(0.01), "sparse_categorical_crossentropy", {"accuracy"});
    FitOptions o{.batch_size = 32, .epochs = 12, .verbose = 0};
    o.augmentation = {.width_shift_range = 0.2, .height_shift_range = 0.2, .horizontal_flip = true};
    return m.fit(x, y, o);
  };
  auto h1 = train(), h2 = train();
  EXPECT_EQ(h1["loss"], h2["loss"]);
  EXPECT_GT(h1["accuracy"].back(), 0.9);
}

TEST(Pipeline, AugmentImagesOpEqualsAugmentImagePerSample) {
  // ops::augment_images (the CPU backend, and the reference of the CUDA kernel) is the pipeline's per-image
  // augmentation applied to sample k with index first + k.
  const std::int64_t N = 6, H = 7, W = 9, C = 3, image = H * W * C;
  Tensor x = systolic::testing::random_tensor({N, H, W, C}, 3, DType::float32, 0.0, 255.0);
  for (bool constant : {false, true}) {
    SCOPED_TRACE(constant ? "constant" : "nearest");
    Augmentation a{.width_shift_range = 0.3,
                   .height_shift_range = 2.5,
                   .horizontal_flip = true,
                   .fill_mode = constant ? "constant" : "nearest",
                   .cval = 11};
    ops::AugmentParams p{.width_shift_range = 0.3,
                         .height_shift_range = 2.5,
                         .horizontal_flip = true,
                         .fill_constant = constant,
                         .cval = 11};
    Tensor y({N, H, W, C});
    systolic::testing::poison(y);
    ops::augment_images(x, y, p, 77, 1000);
    std::vector<float> want(static_cast<std::size_t>(image));
    for (std::int64_t k = 0; k < N; ++k) {
      augment_image(x.data<float>() + k * image, want.data(), H, W, C, a, 77, 1000 + std::uint64_t(k));
      for (std::int64_t j = 0; j < image; ++j)
        ASSERT_EQ(y.data<float>()[k * image + j], want[j]) << k << " " << j;
    }
  }
  Tensor flat({N, H * W * C});
  EXPECT_THAT(error_of([&] { ops::augment_images(x, x, {.horizontal_flip = true}, 1, 0); }),
              HasSubstr("overlap"));
  EXPECT_THAT(error_of([&] { ops::augment_images(x, flat, {}, 1, 0); }), HasSubstr("images"));
}
