// Known-value forward tests for every layer (float32, the production path), values worked out by hand:
// SAME padding with odd sizes and stride 2 included; plus output shapes, Keras weight order and shape errors.
#include <gmock/gmock.h>
#include <systolic/systolic.h>

#include "test_util.h"

using namespace systolic;

namespace {

// Runs one layer call (inference unless training) on float32 inputs.
Tensor run(LayerRef layer, const std::vector<Tensor>& xs, bool training = false, double step = 0,
           int replica = 0) {
  std::vector<SymbolicTensor> sym;
  for (auto& x : xs) sym.push_back(layers::Input(x.shape().without_batch()));
  SymbolicTensor out = sym.size() == 1 ? layer(sym[0]) : layer(sym);
  LayerCall c;
  c.inputs = xs;
  c.output = Tensor(out.shape().with_batch(xs[0].dim(0)));
  systolic::testing::poison(c.output);
  TrainingStep t{.counter = Tensor::full({1}, step, DType::float64), .replica = replica};
  c.training = training ? &t : nullptr;
  layer->call_forward(c);
  return c.output;
}

Tensor iota(Shape shape, float start = 1) {
  Tensor t(shape);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = start + float(i);
  return t;
}

void set_weights(LayerRef layer, const std::vector<std::vector<float>>& values) {
  auto& w = layer->weights();
  ASSERT_EQ(w.size(), values.size());
  for (std::size_t i = 0; i < w.size(); ++i)
    w[i].value.copy_from(Tensor::from_vector(values[i], w[i].value.shape()));
}

void expect_values(const Tensor& t, const std::vector<double>& want, double tol = 1e-5) {
  auto got = t.to_doubles();
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

}  // namespace

TEST(Conv2D, ValidOnes) {
  auto conv = layers::Conv2D(1, {2, 2});
  Tensor x = iota({1, 3, 3, 1});
  run(conv, {x});  // builds
  set_weights(conv, {{1, 1, 1, 1}, {0.5}});
  expect_values(run(conv, {x}), {12.5, 16.5, 24.5, 28.5});
}

TEST(Conv2D, SameStride2EvenSizePadsBottomRight) {
  // 4x4 input, 3x3 ones, stride 2, SAME: out 2x2, pad 1 in total, all of it after (bottom/right).
  auto conv = layers::Conv2D(1, {3, 3}, {.strides = {2, 2}, .padding = "same", .use_bias = false});
  Tensor x = iota({1, 4, 4, 1});
  run(conv, {x});
  set_weights(conv, {std::vector<float>(9, 1.0f)});
  Tensor y = run(conv, {x});
  EXPECT_EQ(y.shape(), Shape({1, 2, 2, 1}));
  expect_values(y, {54, 45, 72, 54});
}

TEST(Conv2D, SameStride2OddSize) {
  // 5x5 input (1..25), 3x3 ones, stride 2, SAME: out 3x3, pad 1 before and 1 after.
  auto conv = layers::Conv2D(1, {3, 3}, {.strides = {2, 2}, .padding = "same", .use_bias = false});
  Tensor x = iota({1, 5, 5, 1});
  run(conv, {x});
  set_weights(conv, {std::vector<float>(9, 1.0f)});
  Tensor y = run(conv, {x});
  EXPECT_EQ(y.shape(), Shape({1, 3, 3, 1}));
  expect_values(y, {16, 33, 28, 69, 117, 87, 76, 123, 88});
}

TEST(Conv2D, ChannelsAndReluAndDilation) {
  // Two input channels, two filters: filter 0 sums channel 0, filter 1 is minus channel 1 (relu clips it).
  auto conv = layers::Conv2D(2, {1, 1}, {.activation = "relu"});
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4}, {1, 1, 2, 2});
  run(conv, {x});
  set_weights(conv, {{1, 0, 0, -1}, {0, 0}});
  expect_values(run(conv, {x}), {1, 0, 3, 0});
  // Dilation 2 on a 5x5: a 2x2 kernel of ones reads x[i][j] + x[i][j+2] + x[i+2][j] + x[i+2][j+2].
  auto dil = layers::Conv2D(1, {2, 2}, {.dilation_rate = {2, 2}, .use_bias = false});
  Tensor x5 = iota({1, 5, 5, 1});
  run(dil, {x5});
  set_weights(dil, {{1, 1, 1, 1}});
  Tensor y = run(dil, {x5});
  EXPECT_EQ(y.shape(), Shape({1, 3, 3, 1}));
  EXPECT_NEAR(y.to_doubles()[0], 1 + 3 + 11 + 13, 1e-5);
}

TEST(Conv2D, WeightsShapesAndErrors) {
  auto conv = layers::Conv2D(8, {3, 5});
  run(conv, {Tensor::zeros({1, 6, 6, 3})});
  ASSERT_EQ(conv->weights().size(), 2u);
  EXPECT_EQ(conv->weights()[0].name, "kernel");
  EXPECT_EQ(conv->weights()[0].value.shape(), Shape({3, 5, 3, 8}));
  EXPECT_EQ(conv->weights()[1].value.shape(), Shape({8}));
  EXPECT_THROW(layers::Conv2D(4, {7, 7})(layers::Input({5, 5, 1})), Error);  // does not fit (valid)
  EXPECT_THROW(layers::Conv2D(4, {3, 3})(layers::Input({5, 5})), Error);     // not (H, W, C)
  EXPECT_THROW(layers::Conv2D(4, {3, 3}, {.padding = "full"}), Error);
  EXPECT_THROW(layers::Conv2D(4, {3, 3}, {.activation = "swishy"}), Error);
  EXPECT_THROW(layers::Conv2D(4, {3, 3}, {.kernel_initializer = "nope"})(layers::Input({5, 5, 1})), Error);
  EXPECT_THROW(layers::Conv2D(4, {3, 3}, {.strides = {2, 2}, .dilation_rate = {2, 2}}), Error);
}

TEST(Conv2D, GlorotUniformWithinLimit) {
  auto conv = layers::Conv2D(64, {3, 3});
  run(conv, {Tensor::zeros({1, 3, 3, 32})});
  double limit = std::sqrt(6.0 / (3 * 3 * 32 + 3 * 3 * 64)), mx = 0, sum = 0;
  for (double v : conv->weights()[0].value.to_doubles()) mx = std::max(mx, std::abs(v)), sum += v;
  EXPECT_LE(mx, limit);
  EXPECT_GT(mx, 0.95 * limit);
  EXPECT_NEAR(sum / conv->weights()[0].value.numel(), 0.0, 0.05 * limit);
  for (double v : conv->weights()[1].value.to_doubles()) EXPECT_EQ(v, 0.0);
}

TEST(Dense, KnownValuesAndRank3) {
  auto dense = layers::Dense(3);
  Tensor x = Tensor::from_vector<float>({1, 2}, {1, 2});
  run(dense, {x});
  set_weights(dense, {{1, 2, 3, 4, 5, 6}, {0.5, 0, -1}});
  expect_values(run(dense, {x}), {9.5, 12, 14});
  auto d3 = layers::Dense(1, {.use_bias = false});
  Tensor x3 = iota({1, 2, 2});
  run(d3, {x3});
  set_weights(d3, {{1, 1}});
  Tensor y = run(d3, {x3});
  EXPECT_EQ(y.shape(), Shape({1, 2, 1}));
  expect_values(y, {3, 7});
}

TEST(BatchNormalization, InferenceAndTrainingKnownValues) {
  auto bn = layers::BatchNormalization();
  Tensor x = Tensor::from_vector<float>({1, 3}, {2, 1});
  run(bn, {x});
  auto& w = bn->weights();
  ASSERT_EQ(w.size(), 4u);
  EXPECT_EQ(w[0].name, "gamma");
  EXPECT_EQ(w[1].name, "beta");
  EXPECT_EQ(w[2].name, "moving_mean");
  EXPECT_EQ(w[3].name, "moving_variance");
  EXPECT_FALSE(w[2].trainable);
  // Training: batch mean 2, biased variance 1.
  expect_values(run(bn, {x}, true), {-1 / std::sqrt(1.001), 1 / std::sqrt(1.001)});
  expect_values(w[2].value, {0.02});  // 0*0.99 + 2*0.01
  expect_values(w[3].value, {1.0});   // 1*0.99 + 1*0.01
  set_weights(bn, {{2}, {1}, {3}, {4}});
  expect_values(run(bn, {x}), {2 * (1 - 3) / std::sqrt(4.001) + 1, 2 * (3 - 3) / std::sqrt(4.001) + 1});
}

TEST(Pooling, MaxAndAverageValid) {
  Tensor x = iota({1, 4, 4, 1});
  expect_values(run(layers::MaxPooling2D({2, 2}), {x}), {6, 8, 14, 16});
  expect_values(run(layers::AveragePooling2D({2, 2}), {x}), {3.5, 5.5, 11.5, 13.5});
  Tensor y = run(layers::MaxPooling2D({3, 3}, {.strides = std::array<int, 2>{1, 1}}), {x});
  EXPECT_EQ(y.shape(), Shape({1, 2, 2, 1}));
  expect_values(y, {11, 12, 15, 16});
}

TEST(Pooling, SamePaddingIsIgnoredByMaxAndNotCountedByAverage) {
  // 2x2 pool, stride 1, SAME on 2x2: the pad goes after (bottom/right).
  Tensor neg = Tensor::from_vector<float>({-1, -2, -3, -4}, {1, 2, 2, 1});
  expect_values(
      run(layers::MaxPooling2D({2, 2}, {.strides = std::array<int, 2>{1, 1}, .padding = "same"}), {neg}),
      {-1, -2, -3, -4});
  Tensor pos = Tensor::from_vector<float>({1, 2, 3, 4}, {1, 2, 2, 1});
  expect_values(
      run(layers::AveragePooling2D({2, 2}, {.strides = std::array<int, 2>{1, 1}, .padding = "same"}), {pos}),
      {2.5, 3, 3.5, 4});
  // 3x3 stride 2 SAME on 5x5: out 3x3, one padded row/column on each side.
  Tensor x = iota({1, 5, 5, 1});
  expect_values(
      run(layers::MaxPooling2D({3, 3}, {.strides = std::array<int, 2>{2, 2}, .padding = "same"}), {x}),
      {7, 9, 10, 17, 19, 20, 22, 24, 25});
}

TEST(GlobalAveragePooling2D, MeanPerChannel) {
  Tensor x = Tensor::from_vector<float>({1, 10, 2, 20, 3, 30, 4, 40}, {1, 2, 2, 2});
  Tensor y = run(layers::GlobalAveragePooling2D(), {x});
  EXPECT_EQ(y.shape(), Shape({1, 2}));
  expect_values(y, {2.5, 25});
}

TEST(Dropout, IdentityAtInferenceInvertedWhenTraining) {
  Tensor x = Tensor::full({4, 25000}, 2.0);
  expect_values(run(layers::Dropout(0.4), {x}), std::vector<double>(100000, 2.0));
  auto drop = layers::Dropout(0.4);
  Tensor y = run(drop, {x}, true);
  std::int64_t zeros = 0;
  for (double v : y.to_doubles()) {
    if (v == 0)
      ++zeros;
    else
      EXPECT_NEAR(v, 2.0 / 0.6, 1e-5);
  }
  EXPECT_NEAR(double(zeros) / 100000, 0.4, 0.01);
  EXPECT_EQ(y.to_doubles(), run(drop, {x}, true).to_doubles());  // the mask is a function of (seed, step)
  Tensor y2 = run(drop, {x}, true, 1.0);                         // a fresh mask at the next step
  EXPECT_NE(y.to_doubles(), y2.to_doubles());
  Tensor other = run(drop, {x}, true, 0.0, 1);  // another replica at the same step: its own mask
  EXPECT_NE(y.to_doubles(), other.to_doubles());
  EXPECT_THROW(layers::Dropout(1.0), Error);
}

TEST(Flatten, ChannelsLastOrder) {
  Tensor x = iota({2, 2, 3, 2});
  Tensor y = run(layers::Flatten(), {x});
  EXPECT_EQ(y.shape(), Shape({2, 12}));
  expect_values(y.slice(1, 2), {13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24});
}

TEST(Activation, KnownValues) {
  Tensor x = Tensor::from_vector<float>({-1, 0, std::log(2.0f)}, {1, 3});
  expect_values(run(layers::Activation("relu"), {x}), {0, 0, std::log(2.0)});
  expect_values(run(layers::Activation("sigmoid"), {x}), {1 / (1 + std::exp(1.0)), 0.5, 2.0 / 3});
  expect_values(run(layers::Activation("tanh"), {x}), {std::tanh(-1.0), 0, 0.6});
  expect_values(run(layers::Activation("linear"), {x}), {-1, 0, std::log(2.0)});
  expect_values(run(layers::ReLU(), {x}), {0, 0, std::log(2.0)});
  // softmax of (-1, 0, ln 2) = (1/e, 1, 2) / (3 + 1/e)
  double z = 3 + std::exp(-1.0);
  expect_values(run(layers::Softmax(), {x}), {std::exp(-1.0) / z, 1 / z, 2 / z});
  expect_values(run(layers::Activation("softmax"), {x}), {std::exp(-1.0) / z, 1 / z, 2 / z});
}

// Softmax over other axes than the last: each column of a (2, 3) sample over axis 1, and a whole sample over
// axes [1, 2] (a list, in either order), computed here from the definition.
TEST(Softmax, OverAnyAxes) {
  Tensor x = systolic::testing::random_tensor({2, 2, 3}, 3);
  const std::vector<double> v = x.to_doubles();
  auto at = [&](int n, int i, int j) { return v[static_cast<std::size_t>((n * 2 + i) * 3 + j)]; };
  std::vector<double> columns, whole;
  for (int n = 0; n < 2; ++n) {
    double all = 0;
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) all += std::exp(at(n, i, j));
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) {
        columns.push_back(std::exp(at(n, i, j)) / (std::exp(at(n, 0, j)) + std::exp(at(n, 1, j))));
        whole.push_back(std::exp(at(n, i, j)) / all);
      }
  }
  expect_values(run(layers::Softmax({.axis = {1}}), {x}), columns);
  expect_values(run(layers::Softmax({.axis = {-2}}), {x}), columns);
  expect_values(run(layers::Softmax({.axis = {1, 2}}), {x}), whole);
  expect_values(run(layers::Softmax({.axis = {-1, 1}}), {x}), whole);
  expect_values(run(layers::Softmax({.axis = {2}}), {x}), run(layers::Softmax(), {x}).to_doubles());
  auto in = layers::Input({2, 3});
  EXPECT_THAT(systolic::testing::error_of([&] { layers::Softmax({.axis = {0}})(in); }),
              ::testing::HasSubstr("batch axis"));
  EXPECT_THAT(systolic::testing::error_of([&] { layers::Softmax({.axis = {3}})(in); }),
              ::testing::HasSubstr("out of range"));
  EXPECT_THAT(systolic::testing::error_of([&] {
                layers::Softmax({.axis = {1, -2}})(in);
              }),
              ::testing::HasSubstr("twice"));
}

TEST(ZeroPadding2D, PadsEachSide) {
  Tensor x = Tensor::from_vector<float>({5}, {1, 1, 1, 1});
  Tensor y = run(layers::ZeroPadding2D(layers::Padding2D({1, 0}, {0, 2})), {x});
  EXPECT_EQ(y.shape(), Shape({1, 2, 3, 1}));
  expect_values(y, {0, 0, 0, 5, 0, 0});
  EXPECT_EQ(run(layers::ZeroPadding2D(1), {x}).shape(), Shape({1, 3, 3, 1}));
}

TEST(Rescaling, ScaleAndOffset) {
  Tensor x = Tensor::from_vector<float>({0, 255}, {1, 2});
  expect_values(run(layers::Rescaling(1.0 / 127.5, {.offset = -1}), {x}), {-1, 1});
}

TEST(Merge, AddAndConcatenate) {
  Tensor a = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2}),
         b = Tensor::from_vector<float>({10, 20, 30, 40}, {2, 2});
  expect_values(run(layers::Add(), {a, b, a}), {12, 24, 36, 48});
  Tensor c = Tensor::from_vector<float>({7, 8}, {2, 1});
  expect_values(run(layers::Concatenate(), {a, c}), {1, 2, 7, 3, 4, 8});
  expect_values(run(layers::Concatenate({.axis = 1}), {a.reshape({2, 2, 1}), c.reshape({2, 1, 1})}),
                {1, 2, 7, 3, 4, 8});
  EXPECT_THROW(layers::Add()({layers::Input({2}), layers::Input({3})}), Error);
  EXPECT_THROW(layers::Concatenate()({layers::Input({2, 2}), layers::Input({3, 2})}), Error);
  EXPECT_THROW(layers::Concatenate({.axis = 0})({layers::Input({2}), layers::Input({2})}), Error);
  EXPECT_THROW(layers::Add()(layers::Input({2})), Error);  // needs two or more inputs
}

TEST(Merge, ConcatenateBackwardSkipsAnUndefinedGradientButNotItsWidth) {
  // An input that needs no gradient (a model's Input) leaves its slot undefined; the parts after it still start
  // after its width.
  Tensor dy = iota({2, 5});  // parts of widths 2 and 3 along axis 1
  std::vector<Tensor> dxs = {Tensor(), Tensor({2, 3})};
  ops::concat_backward(dy, dxs, 1);
  expect_values(dxs[1], {3, 4, 5, 8, 9, 10});
  dxs = {Tensor({2, 2}), Tensor()};
  ops::concat_backward(dy, dxs, 1);
  expect_values(dxs[0], {1, 2, 6, 7});
  std::vector<Tensor> ambiguous = {Tensor(), Tensor(), Tensor({2, 1})};
  EXPECT_THROW(ops::concat_backward(dy, ambiguous, 1), Error);
}

TEST(Input, ShapeAndReuseErrors) {
  auto in = layers::Input({4, 4, 3});
  EXPECT_EQ(in.shape(), Shape({4, 4, 3}));
  EXPECT_THROW(layers::Input({0, 3}), Error);
  auto dense = layers::Dense(2);
  dense(layers::Input({3}));
  EXPECT_THROW(dense(layers::Input({4})), Error);  // built for 3 inputs
}

TEST(Conv2D, FusedReluEqualsConvolutionThenRelu) {
  // The layer passes its relu to the op (fused); the op's result equals a linear convolution then relu.
  Tensor x = systolic::testing::random_tensor({2, 6, 5, 3}, 31);
  auto fused = layers::Conv2D(4, {3, 3}, {.padding = "same", .activation = "relu"});
  Tensor y = run(fused, {x});
  Tensor w = fused->weights()[0].value, b = fused->weights()[1].value;
  ops::Conv2DParams p{.pad_top = 1, .pad_bottom = 1, .pad_left = 1, .pad_right = 1};
  Tensor linear({2, 6, 5, 4});
  ops::conv2d_forward(x, w, b, linear, p);
  auto yv = y.to_doubles(), lv = linear.to_doubles();
  int negatives = 0;
  for (std::size_t i = 0; i < yv.size(); ++i) {
    EXPECT_NEAR(yv[i], std::max(lv[i], 0.0), 1e-6) << i;
    negatives += lv[i] < 0;
  }
  EXPECT_GT(negatives, 0);  // the relu had something to do
  // float64 (the reference loops) fuse it too.
  p.activation = Activation::relu;
  Tensor y64({2, 6, 5, 4}, DType::float64);
  ops::conv2d_forward(x.to(DType::float64), w.to(DType::float64), b.to(DType::float64), y64, p);
  EXPECT_LT(systolic::testing::normalised_max_error(y64, y), 1e-5);
}
