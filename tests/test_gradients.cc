// Finite-difference gradient checks in double precision (float64 layers run the CPU reference loops) for every
// layer, every loss, and whole models (a chain and a DAG with Add and Concatenate).
#include <systolic/systolic.h>

#include <functional>

#include "layers/config.h"
#include "test_util.h"

using namespace systolic;
using systolic::testing::random_tensor;

namespace {

struct Float64Scope {
  Float64Scope() { set_floatx(DType::float64); }
  ~Float64Scope() { set_floatx(DType::float32); }
};

constexpr double kStep = 1e-5;
constexpr double kTolerance = 1e-6;

// |analytic - numeric| / max(1, |numeric|): the central difference of a smooth double function is good to ~1e-9.
void expect_close(double analytic, double numeric, const std::string& what) {
  double err = std::abs(analytic - numeric) / std::max(1.0, std::abs(numeric));
  EXPECT_LT(err, kTolerance) << what << ": analytic " << analytic << " numeric " << numeric;
}

// Numerical d f / d t[i] for every element of t (restored afterwards).
void check_all(Tensor& t, const Tensor& analytic, const std::function<double()>& f, const std::string& what) {
  double* p = t.data<double>();
  auto a = analytic.to_doubles();
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    double keep = p[i];
    p[i] = keep + kStep;
    double up = f();
    p[i] = keep - kStep;
    double down = f();
    p[i] = keep;
    expect_close(a[i], (up - down) / (2 * kStep), what + "[" + std::to_string(i) + "]");
  }
}

// L = sum(r * layer(x...)) in training mode (over every output of a layer of several: sum_k sum(r_k * y_k)); checks
// dL/dx for every input and dL/dw for every trainable weight. mask: Keras's mask of the first input (undefined: none);
// masks: every input's (LayerCall::masks; empty: none).
void check_layer(LayerRef layer, const std::vector<Shape>& shapes, std::uint64_t seed = 1, double lo = -1,
                 double hi = 1, const Tensor& mask = Tensor(), const std::vector<Tensor>& masks = {}) {
  std::vector<SymbolicTensor> sym;
  for (auto& s : shapes) sym.push_back(layers::Input(s.without_batch(), {.dtype = DType::float64}));
  std::vector<SymbolicTensor> outs = layer.call_all(sym);
  std::vector<Tensor> xs;
  for (std::size_t i = 0; i < shapes.size(); ++i)
    xs.push_back(random_tensor(shapes[i], seed + i, DType::float64, lo, hi));
  std::int64_t n = shapes[0][0];
  std::vector<Tensor> r;
  for (std::size_t k = 0; k < outs.size(); ++k)
    r.push_back(random_tensor(outs[k].shape().with_batch(n), seed + 100 + k, DType::float64));
  TrainingStep training;
  auto run = [&](LayerCall& c) {
    c.inputs = xs;
    c.output = Tensor(outs[0].shape().with_batch(n), DType::float64);
    c.more_outputs.clear();
    for (std::size_t k = 1; k < outs.size(); ++k)
      c.more_outputs.emplace_back(outs[k].shape().with_batch(n), DType::float64);
    c.training = &training;
    c.mask = mask;
    c.masks = masks;
    layer->call_forward(c);
  };
  auto loss = [&]() {
    LayerCall c;
    run(c);
    double s = 0;
    for (std::size_t k = 0; k < outs.size(); ++k) {
      auto y = (k == 0 ? c.output : c.more_outputs[k - 1]).to_doubles();
      auto rv = r[k].to_doubles();
      for (std::size_t i = 0; i < y.size(); ++i) s += y[i] * rv[i];
    }
    return s;
  };
  LayerCall c;
  run(c);
  for (auto& w : layer->weights())
    if (w.trainable) w.grad.fill(0.0);
  c.doutput = r[0].clone();
  for (std::size_t k = 1; k < outs.size(); ++k) c.more_doutputs.push_back(r[k].clone());
  for (auto& x : xs)
    c.dinputs.push_back(Tensor::full(x.shape(), 7.0, DType::float64));  // must be overwritten
  layer->call_backward(c, false);
  for (std::size_t i = 0; i < xs.size(); ++i)
    check_all(xs[i], c.dinputs[i], loss, layer->name() + " dx" + std::to_string(i));
  for (auto& w : layer->weights())
    if (w.trainable) check_all(w.value, w.grad, loss, layer->name() + " d" + w.name);
}

}  // namespace

TEST(GradientCheck, Conv2DValid) {
  Float64Scope f64;
  check_layer(layers::Conv2D(4, {3, 3}), {{2, 5, 6, 3}});
}
TEST(GradientCheck, Conv2DSameStride2OddSizeRelu) {
  Float64Scope f64;
  check_layer(layers::Conv2D(3, {3, 3}, {.strides = {2, 2}, .padding = "same", .activation = "relu"}),
              {{2, 5, 7, 2}});
}
TEST(GradientCheck, Conv2DDilatedNoBias) {
  Float64Scope f64;
  check_layer(layers::Conv2D(2, {2, 3}, {.padding = "same", .dilation_rate = {2, 2}, .use_bias = false}),
              {{1, 6, 5, 2}});
}
TEST(GradientCheck, DenseWithTanhAndRank3Input) {
  Float64Scope f64;
  check_layer(layers::Dense(4, {.activation = "tanh"}), {{3, 2, 5}});
}
TEST(GradientCheck, DenseSoftmax) {
  Float64Scope f64;
  check_layer(layers::Dense(5, {.activation = "softmax"}), {{3, 4}});
}
TEST(GradientCheck, BatchNormalizationTraining) {
  Float64Scope f64;
  check_layer(layers::BatchNormalization(), {{3, 2, 2, 3}});
}
TEST(GradientCheck, BatchNormalizationWithoutScaleAndCenter) {
  Float64Scope f64;
  check_layer(layers::BatchNormalization({.center = false, .scale = false}), {{4, 3}});
}
TEST(GradientCheck, MaxPooling2DValidAndSame) {
  Float64Scope f64;
  check_layer(layers::MaxPooling2D({2, 2}), {{2, 4, 5, 2}});
  check_layer(layers::MaxPooling2D({3, 3}, {.strides = std::array<int, 2>{2, 2}, .padding = "same"}),
              {{1, 5, 6, 2}});
}
TEST(GradientCheck, AveragePooling2DValidAndSame) {
  Float64Scope f64;
  check_layer(layers::AveragePooling2D({2, 2}), {{2, 4, 4, 2}});
  check_layer(layers::AveragePooling2D({3, 3}, {.strides = std::array<int, 2>{2, 2}, .padding = "same"}),
              {{1, 5, 6, 2}});
}
TEST(GradientCheck, GlobalAveragePooling2D) {
  Float64Scope f64;
  check_layer(layers::GlobalAveragePooling2D(), {{2, 3, 4, 3}});
}
// Every activation of the list (over [-4, 4], past hard_sigmoid's and the shrinks' kinks), the parametrised
// layers, and activations whose gradient needs the pre-activation values fused into a Dense layer.
TEST(GradientCheck, Activations) {
  Float64Scope f64;
  std::uint64_t seed = 1;
#define SYSTOLIC_CHECK_ACTIVATION(kind, name, alias) \
  check_layer(layers::Activation(name), {{2, 3, 4}}, ++seed, -4, 4);
  SYSTOLIC_ACTIVATIONS(SYSTOLIC_CHECK_ACTIVATION)
#undef SYSTOLIC_CHECK_ACTIVATION
  Activation gelu_tanh = Activation::gelu;
  gelu_tanh.approximate = true;
  check_layer(layers::Activation(gelu_tanh), {{2, 3, 4}}, ++seed, -4, 4);
  check_layer(layers::ReLU(), {{2, 6}}, ++seed, -4, 4);
  check_layer(layers::ReLU({.max_value = 6}), {{2, 6}}, ++seed, -8, 8);
  check_layer(layers::ReLU({.max_value = 2.5, .negative_slope = 0.1, .threshold = 0.3}), {{3, 6}}, ++seed, -4,
              4);
  check_layer(layers::ReLU({.negative_slope = 0.2}), {{2, 6}}, ++seed, -4, 4);
  check_layer(layers::LeakyReLU(0.1), {{2, 6}}, ++seed, -4, 4);
  check_layer(layers::ELU(0.5), {{2, 6}}, ++seed, -4, 4);
  check_layer(layers::Softmax(), {{2, 6}});
  // Over other axes: one (moved last and back), two together, and the last given by its index.
  check_layer(layers::Softmax({.axis = {1}}), {{2, 3, 4}}, ++seed, -2, 2);
  check_layer(layers::Softmax({.axis = {1, 3}}), {{2, 3, 2, 2}}, ++seed, -2, 2);
  check_layer(layers::Softmax({.axis = {2}}), {{2, 3, 4}}, ++seed, -2, 2);
  for (auto a : {"gelu", "silu", "mish", "log_softmax", "elu"})
    check_layer(layers::Dense(4, {.activation = a}), {{3, 5}}, ++seed);
}
TEST(GradientCheck, FlattenZeroPaddingRescaling) {
  Float64Scope f64;
  check_layer(layers::Flatten(), {{2, 3, 2, 2}});
  check_layer(layers::ZeroPadding2D(layers::Padding2D({1, 0}, {2, 1})), {{2, 3, 2, 2}});
  check_layer(layers::Rescaling(1.0 / 255, {.offset = -0.5}), {{2, 5}});
}
TEST(GradientCheck, AddAndConcatenate) {
  Float64Scope f64;
  check_layer(layers::Add(), {{2, 3, 3, 2}, {2, 3, 3, 2}, {2, 3, 3, 2}});
  check_layer(layers::Concatenate(), {{2, 2, 2, 3}, {2, 2, 2, 1}});
  check_layer(layers::Concatenate({.axis = 1}), {{2, 2, 3}, {2, 4, 3}});
}
TEST(GradientCheck, DropoutTrainingUsesTheSameMaskForward) {
  // The layer draws a fresh mask per call, so check the op with one fixed seed.
  Tensor x = random_tensor({4, 50}, 3, DType::float64);
  Tensor r = random_tensor({4, 50}, 4, DType::float64);
  auto loss = [&]() {
    Tensor y(x.shape(), DType::float64);
    ops::dropout_forward(x, y, 0.3, 99, Tensor());
    auto yv = y.to_doubles(), rv = r.to_doubles();
    double s = 0;
    for (std::size_t i = 0; i < yv.size(); ++i) s += yv[i] * rv[i];
    return s;
  };
  Tensor dx(x.shape(), DType::float64);
  ops::dropout_backward(r, dx, 0.3, 99, Tensor());
  check_all(x, dx, loss, "dropout dx");
}
TEST(GradientCheck, SpatialDropoutAndNoiseShapeDropoutInTraining) {
  // At a fixed training step the masks are fixed (keyed by the layer's seed and the step), so the layers are
  // linear maps whose gradient finite differences check.
  Float64Scope f64;
  check_layer(layers::SpatialDropout2D(0.4, {.seed = 3}), {{3, 2, 3, 4}}, 58);
  check_layer(layers::SpatialDropout1D(0.4, {.seed = 5}), {{3, 5, 4}}, 60);
  layers::DropoutOptions o{.seed = 4};
  o.noise_shape = std::vector<std::optional<std::int64_t>>{std::nullopt, 1, 3};
  check_layer(layers::Dropout(0.5, o), {{4, 2, 3}}, 59);
}

// ---- Losses: d(total)/d(prediction) with grad_scale 1.
namespace {
void check_loss(const std::function<void(const Tensor&, Tensor&, Tensor&)>& op, Tensor pred) {
  auto value = [&]() {
    Tensor total = Tensor::zeros({1}, DType::float64), none;
    op(pred, total, none);
    return total.item();
  };
  Tensor total = Tensor::zeros({1}, DType::float64);
  Tensor grad(pred.shape(), DType::float64);
  op(pred, total, grad);
  check_all(pred, grad, value, "loss gradient");
}
}  // namespace

TEST(GradientCheck, SparseSoftmaxCrossEntropyFromLogits) {
  Tensor labels = Tensor::from_vector<std::int32_t>({0, 3, 2}, {3});
  check_loss([&](const Tensor& p, Tensor& t,
                 Tensor& g) { ops::softmax_cross_entropy(p, labels, Tensor(), t, g, 1.0); },
             random_tensor({3, 4}, 11, DType::float64, -3, 3));
}
TEST(GradientCheck, CategoricalSoftmaxCrossEntropyFromLogits) {
  Tensor labels = Tensor::from_vector<double>({0, 1, 0, 0.3, 0.3, 0.4}, {2, 3});
  check_loss([&](const Tensor& p, Tensor& t,
                 Tensor& g) { ops::softmax_cross_entropy(p, labels, Tensor(), t, g, 1.0); },
             random_tensor({2, 3}, 12, DType::float64, -3, 3));
}
// Keras's CategoricalCrossentropy(label_smoothing) through its Loss, from the logits behind a softmax output.
TEST(GradientCheck, CategoricalCrossentropyWithLabelSmoothing) {
  losses::CategoricalCrossentropy loss({.label_smoothing = 0.2});
  Tensor labels = Tensor::from_vector<double>({0, 1, 0, 0.3, 0.3, 0.4}, {2, 3});
  check_loss(
      [&](const Tensor& p, Tensor& t, Tensor& g) {
        Tensor out(p.shape(), DType::float64), none;
        ops::activation_forward(Activation::softmax, p, out);
        losses::LossArgs a{out, p, none, labels, none, t, g, g, 1.0};
        EXPECT_TRUE(loss.compute(a));  // the gradient is w.r.t. the logits
      },
      random_tensor({2, 3}, 21, DType::float64, -3, 3));
}
TEST(GradientCheck, CrossEntropyFromProbabilities) {
  Tensor sparse = Tensor::from_vector<std::int32_t>({1, 0}, {2});
  Tensor onehot = Tensor::from_vector<double>({0, 1, 0, 1, 0, 0}, {2, 3});
  Tensor probs = random_tensor({2, 3}, 13, DType::float64, 0.05, 0.9);
  check_loss([&](const Tensor& p, Tensor& t,
                 Tensor& g) { ops::crossentropy_from_probabilities(p, sparse, Tensor(), t, g, 1.0, 1e-7); },
             probs.clone());
  check_loss([&](const Tensor& p, Tensor& t,
                 Tensor& g) { ops::crossentropy_from_probabilities(p, onehot, Tensor(), t, g, 1.0, 1e-7); },
             probs.clone());
}
// SparseCategoricalCrossentropy(ignore_class) through its Loss, from probabilities (what it reads behind a softmax
// output) and from logits, with sample weights: the ignored samples' rows get no gradient.
TEST(GradientCheck, SparseCrossentropyIgnoringAClass) {
  Tensor labels = Tensor::from_vector<std::int32_t>({1, 2, 0, 2}, {4});
  Tensor w = Tensor::from_vector<double>({0.5, 2.0, 1.0, 1.5}, {4});
  for (bool from_logits : {false, true}) {
    SCOPED_TRACE(from_logits ? "from logits" : "from probabilities");
    losses::SparseCategoricalCrossentropy loss({.from_logits = from_logits, .ignore_class = 2});
    check_loss(
        [&](const Tensor& p, Tensor& t, Tensor& g) {
          Tensor none;
          losses::LossArgs a{p, none, none, labels, w, t, g, g, 1.0};
          EXPECT_FALSE(loss.compute(a));
        },
        from_logits ? random_tensor({4, 3}, 23, DType::float64, -3, 3)
                    : random_tensor({4, 3}, 22, DType::float64, 0.05, 0.9));
  }
}
// Keras's sample weights (one per sample, a 0 among them) scale each sample's loss and its gradient.
TEST(GradientCheck, LossesWithSampleWeights) {
  Tensor w = Tensor::from_vector<double>({0.5, 0.0, 2.5}, {3});
  Tensor sparse = Tensor::from_vector<std::int32_t>({0, 3, 2}, {3});
  check_loss(
      [&](const Tensor& p, Tensor& t, Tensor& g) { ops::softmax_cross_entropy(p, sparse, w, t, g, 1.0); },
      random_tensor({3, 4}, 14, DType::float64, -3, 3));
  check_loss([&](const Tensor& p, Tensor& t,
                 Tensor& g) { ops::crossentropy_from_probabilities(p, sparse, w, t, g, 1.0, 1e-7); },
             random_tensor({3, 4}, 15, DType::float64, 0.05, 0.9));
  Tensor target = random_tensor({3, 2, 2}, 16, DType::float64, -1, 1);
  check_loss(
      [&](const Tensor& p, Tensor& t, Tensor& g) {
        ops::elementwise_loss(p, target, w, t, g, {.kind = ops::ElementLoss::log_cosh}, 1.0);
      },
      random_tensor({3, 2, 2}, 17, DType::float64, -1, 1));
}
// Losses over sequences (predictions [N, T, C], labels one per step) through their Loss, under an output's mask
// (Keras's apply_mask: the loss means over the unmasked steps) with sample weights: SparseCategoricalCrossentropy
// from logits, and with ignore_class (which folds the mask into its own), CategoricalCrossentropy from
// probabilities, MeanSquaredError, CategoricalHinge. The masked steps get no gradient.
TEST(GradientCheck, MaskedLossesOverSequences) {
  Tensor w = Tensor::from_vector<double>({0.5, 2.0}, {2});
  Tensor mask = Tensor::from_vector<double>({1, 1, 0, 1, 0, 0}, {2, 3});
  Tensor sparse = Tensor::from_vector<std::int32_t>({1, 3, 0, 2, 3, 1}, {2, 3});
  Tensor dense = random_tensor({2, 3, 4}, 24, DType::float64, 0, 1);
  std::vector<std::pair<std::string, std::unique_ptr<losses::Loss>>> cases;
  cases.emplace_back("sparse, from logits", std::make_unique<losses::SparseCategoricalCrossentropy>(
                                                losses::CrossentropyOptions{.from_logits = true}));
  cases.emplace_back("sparse, ignore_class 3", std::make_unique<losses::SparseCategoricalCrossentropy>(
                                                   losses::CrossentropyOptions{.ignore_class = 3}));
  cases.emplace_back("categorical", std::make_unique<losses::CategoricalCrossentropy>());
  cases.emplace_back("mse", std::make_unique<losses::MeanSquaredError>());
  cases.emplace_back("categorical hinge", std::make_unique<losses::CategoricalHinge>());
  for (auto& [name, loss] : cases) {
    SCOPED_TRACE(name);
    const Tensor& labels = loss->sparse_labels() ? sparse : dense;
    Tensor pred = loss->from_logits() ? random_tensor({2, 3, 4}, 25, DType::float64, -3, 3)
                                      : random_tensor({2, 3, 4}, 26, DType::float64, 0.05, 0.9);
    check_loss(
        [&](const Tensor& p, Tensor& t, Tensor& g) {
          Tensor none;
          losses::LossArgs a{p, none, none, labels, w, t, g, g, 1.0, mask};
          EXPECT_FALSE(loss->compute(a));
        },
        pred.clone());
    // The masked steps (sample 0's step 2, sample 1's steps 1 and 2) get no gradient.
    Tensor total = Tensor::zeros({1}, DType::float64), g(pred.shape(), DType::float64), none;
    losses::LossArgs a{pred, none, none, labels, w, total, g, g, 1.0, mask};
    loss->compute(a);
    const auto gv = g.to_doubles();
    for (int row : {2, 4, 5})
      for (int c = 0; c < 4; ++c) EXPECT_EQ(gv[std::size_t(row * 4 + c)], 0.0) << row;
  }
}
// Every elementwise loss, on predictions away from its kinks (finite differences straddle none).
TEST(GradientCheck, ElementwiseLosses) {
  using K = ops::ElementLoss;
  struct Case {
    ops::ElementLossParams p;
    double lo, hi;  // predictions
    Tensor target;
  };
  Tensor reals = random_tensor({3, 2, 4}, 14, DType::float64, -2, 2);
  Tensor positive = random_tensor({3, 2, 4}, 16, DType::float64, 0, 3);
  Tensor soft = random_tensor({3, 2, 4}, 17, DType::float64, 0, 1);
  Tensor binary = Tensor::from_vector<double>({0, 1, 1, 0, 1, 0, 0, 1, 1, 1, 0, 0,  //
                                               1, 0, 1, 0, 0, 1, 1, 0, 0, 1, 0, 1},
                                              {3, 2, 4});
  const std::vector<Case> cases{
      {{.kind = K::squared_error}, -2, 2, reals},
      {{.kind = K::absolute_error}, -2, 2, reals},
      {{.kind = K::absolute_percentage_error}, -2, 2, reals},
      {{.kind = K::squared_logarithmic_error}, 0.05, 3, positive},
      {{.kind = K::huber, .delta = 0.8}, -2, 2, reals},
      {{.kind = K::log_cosh}, -2, 2, reals},
      {{.kind = K::poisson}, 0.05, 3, positive},
      {{.kind = K::hinge}, -2, 2, binary},
      {{.kind = K::squared_hinge}, -2, 2, soft},
      {{.kind = K::kl_divergence}, 0.05, 0.95, soft},
      {{.kind = K::binary_crossentropy, .label_smoothing = 0.1}, 0.05, 0.95, soft},
      {{.kind = K::binary_crossentropy, .from_logits = true}, -4, 4, binary},
      {{.kind = K::binary_focal_crossentropy, .gamma = 1.5, .class_balancing = true}, 0.05, 0.95, binary},
      {{.kind = K::binary_focal_crossentropy, .from_logits = true, .label_smoothing = 0.2}, -4, 4, soft},
  };
  std::uint64_t seed = 40;
  for (const Case& c : cases) {
    SCOPED_TRACE(static_cast<int>(c.p.kind));
    Tensor pred = random_tensor({3, 2, 4}, seed++, DType::float64, c.lo, c.hi);
    check_loss([&](const Tensor& p, Tensor& t,
                   Tensor& g) { ops::elementwise_loss(p, c.target, Tensor(), t, g, c.p, 1.0); },
               pred);
  }
}

// Every row loss (one with Keras's sample weights), on [3, 2, 4] predictions without ties.
TEST(GradientCheck, RowLosses) {
  using K = ops::RowLoss;
  struct Case {
    ops::RowLossParams p;
    double lo, hi;  // predictions
    Tensor target;
    Tensor weights;
  };
  Tensor reals = random_tensor({3, 2, 4}, 61, DType::float64, -2, 2);
  Tensor soft = random_tensor({3, 2, 4}, 62, DType::float64, 0, 1);
  Tensor one_hot = Tensor::from_vector<double>({0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1,  //
                                                0, 0, 1, 0, 1, 0, 0, 0, 0, 1, 0, 0},
                                               {3, 2, 4});
  Tensor w = Tensor::from_vector<double>({0.5, 0.0, 2.5}, {3});
  const std::vector<Case> cases{
      {{.kind = K::cosine_similarity}, -2, 2, reals, {}},
      {{.kind = K::cosine_similarity}, -2, 2, one_hot, w},
      {{.kind = K::categorical_hinge}, -2, 2, one_hot, {}},
      {{.kind = K::categorical_hinge}, -1, 1, soft, w},
      {{.kind = K::categorical_focal_crossentropy}, 0.05, 0.95, one_hot, {}},
      {{.kind = K::categorical_focal_crossentropy, .label_smoothing = 0.1, .alpha = 0.4, .gamma = 1.5},
       0.05,
       0.95,
       soft,
       w},
      {{.kind = K::categorical_focal_crossentropy, .from_logits = true}, -3, 3, one_hot, {}},
      {{.kind = K::categorical_focal_crossentropy, .from_logits = true, .label_smoothing = 0.2, .gamma = 0.5},
       -3,
       3,
       soft,
       w},
  };
  std::uint64_t seed = 70;
  for (const Case& c : cases) {
    SCOPED_TRACE(fmt::format("kind {}, case {}", static_cast<int>(c.p.kind), &c - cases.data()));
    Tensor pred = random_tensor({3, 2, 4}, seed++, DType::float64, c.lo, c.hi);
    check_loss(
        [&](const Tensor& p, Tensor& t, Tensor& g) { ops::row_loss(p, c.target, c.weights, t, g, c.p, 1.0); },
        pred);
  }
}

// ---- Whole models: every trainable parameter's gradient of the training-mode batch loss.
namespace {
void check_model(Model model, const Tensor& x, const Tensor& y) {
  model.compile(optimizers::SGD(0.0), "sparse_categorical_crossentropy");  // lr 0: a step leaves the weights
  model.train_on_batch(x, y);
  Tensor analytic = model.gradients().clone();
  check_all(
      model.trainable_parameters(), analytic, [&]() { return model.train_on_batch(x, y)[0]; },
      "model parameter");
}
}  // namespace

TEST(GradientCheck, ChainModelWithEveryKindOfLayer) {
  Float64Scope f64;
  auto in = layers::Input({6, 6, 2});
  auto h = layers::BatchNormalization()(in);
  h = layers::Conv2D(3, {3, 3}, {.padding = "same", .activation = "relu"})(h);
  h = layers::MaxPooling2D({2, 2})(h);
  h = layers::ZeroPadding2D(1)(h);
  h = layers::Conv2D(2, {2, 2}, {.strides = {2, 2}, .activation = "tanh"})(h);
  h = layers::Flatten()(h);
  h = layers::Dense(5, {.activation = "sigmoid"})(h);
  auto out = layers::Dense(3, {.activation = "softmax"})(h);
  Tensor x = random_tensor({3, 6, 6, 2}, 21, DType::float64, 0, 4);
  check_model(Model(in, out), x, Tensor::from_vector<std::int32_t>({2, 0, 1}, {3}));
}

// ActivityRegularization's penalty (l1 * sum|y| + l2 * sum y^2 over the batch, divided by its size) joins the loss:
// its gradient reaches the weights before it.
TEST(GradientCheck, ActivityRegularizationInAModel) {
  Float64Scope f64;
  auto in = layers::Input({5});
  auto h = layers::Dense(4, {.activation = "tanh"})(in);
  h = layers::ActivityRegularization({.l1 = 0.05, .l2 = 0.3})(h);
  auto out = layers::Dense(3, {.activation = "softmax"})(h);
  Tensor x = random_tensor({4, 5}, 60, DType::float64);
  check_model(Model(in, out), x, Tensor::from_vector<std::int32_t>({2, 0, 1, 1}, {4}));
}

TEST(GradientCheck, DagModelWithSharedTensors) {
  Float64Scope f64;
  auto in = layers::Input({4, 4, 2});
  auto a = layers::Conv2D(3, {3, 3}, {.padding = "same", .activation = "relu"})(in);
  auto b = layers::Conv2D(3, {1, 1})(a);
  auto sum = layers::Add()({a, b});  // `a` feeds two layers: its gradient is a sum
  auto cat = layers::Concatenate()({sum, a});
  auto pooled = layers::GlobalAveragePooling2D()(cat);
  auto out = layers::Dense(4)(pooled);
  auto probs = layers::Softmax()(out);
  Tensor x = random_tensor({2, 4, 4, 2}, 22, DType::float64);
  check_model(Model(in, probs), x, Tensor::from_vector<std::int32_t>({3, 1}, {2}));
}

// ---- norm: LayerNormalization (every option), UnitNormalization, Normalization, LayerScale, the merges with
// broadcasting, Reshape, Permute, RepeatVector, Dense on rank 4.
TEST(GradientCheck, LayerNormalization) {
  Float64Scope f64;
  check_layer(layers::LayerNormalization({.epsilon = 1e-6}), {{3, 2, 5}}, 31);
  check_layer(layers::LayerNormalization({.axis = {2, 3}, .axis_is_list = true}), {{2, 3, 2, 4}}, 32);
  check_layer(layers::LayerNormalization({.axis = {-1, -2, -3}, .axis_is_list = true, .center = false}),
              {{2, 2, 2, 3}}, 33);
  check_layer(layers::LayerNormalization({.scale = false}), {{4, 5}}, 34);
  check_layer(layers::LayerNormalization({.rms_scaling = true}), {{3, 6}}, 35, 0.5, 2);
  // Axes that are not the trailing ones: one in the middle, two apart, in Keras's mixed-sign order (gamma (4, 2)).
  check_layer(layers::LayerNormalization({.axis = {1}}), {{2, 3, 2, 4}}, 52);
  check_layer(layers::LayerNormalization({.axis = {-1, 1}, .axis_is_list = true}), {{2, 2, 3, 4}}, 53);
  check_layer(layers::LayerNormalization({.axis = {2}, .rms_scaling = true}), {{2, 3, 4, 2}}, 54, 0.5, 2);
}
TEST(GradientCheck, UnitNormalization) {
  Float64Scope f64;
  check_layer(layers::UnitNormalization(), {{3, 2, 5}}, 36);
  check_layer(layers::UnitNormalization({2, 3}), {{2, 2, 3, 2}}, 37);
  check_layer(layers::UnitNormalization({1, 3}), {{2, 2, 3, 2}}, 55);
}
TEST(GradientCheck, NormalizationAndLayerScale) {
  Float64Scope f64;
  check_layer(layers::Normalization(
                  {.mean = std::vector<double>{0.5, -1, 2}, .variance = std::vector<double>{0.3, 0.5, 4}}),
              {{2, 2, 3}}, 38);
  check_layer(layers::Normalization(
                  {.invert = true, .mean = std::vector<double>{0.5}, .variance = std::vector<double>{2}}),
              {{2, 4}}, 39);
  // Statistics of a middle axis, and of two axes apart broadcast from a list along the last of them.
  check_layer(layers::Normalization({.axis = std::vector<int>{1},
                                     .mean = std::vector<double>{0.5, -1, 2},
                                     .variance = std::vector<double>{0.3, 0.5, 4}}),
              {{2, 3, 2, 2}}, 56);
  check_layer(layers::Normalization({.axis = std::vector<int>{1, 3},
                                     .invert = true,
                                     .mean = std::vector<double>{0.5, -1},
                                     .variance = std::vector<double>{0.3, 2}}),
              {{2, 3, 2, 2}}, 57);
  auto rescaling = layers::layer_from_config(
      "Rescaling", {{"name", "r"}, {"scale", {0.5, -2.0, 3.0}}, {"offset", {0.1, 0.2, 0.3}}});
  check_layer(LayerRef(rescaling), {{2, 2, 3}}, 51);
  auto ls = layers::LayerScale(0.7, 4);
  check_layer(ls, {{2, 3, 3, 4}}, 40);
}
TEST(GradientCheck, MergesWithBroadcasting) {
  Float64Scope f64;
  check_layer(layers::Multiply(), {{2, 3, 3, 4}, {2, 1, 1, 4}}, 41);
  check_layer(layers::Multiply(), {{2, 3, 4}, {2, 4}, {2, 3, 1}}, 42);
  check_layer(layers::Subtract(), {{2, 1, 4}, {2, 3, 4}}, 43);
  check_layer(layers::Average(), {{2, 3, 4}, {2, 3, 4}, {2, 1, 4}}, 44);
  check_layer(layers::Maximum(), {{2, 3, 4}, {2, 1, 4}, {2, 3, 4}}, 45);
  check_layer(layers::Minimum(), {{2, 3, 4}, {2, 4}}, 46);
  // keras.src.ops.numpy's TrueDivide and Divide of two tensors (a functional model's `x / y`): values in [0.5, 2].
  const nlohmann::json tensor = {{"class_name", "__keras_tensor__"}};
  for (const char* cls : {"TrueDivide", "Divide"}) {
    LayerRef divide(
        layers::numpy_operation_from_entry(cls, {{"name", "d"}}, nlohmann::json::array({tensor, tensor})));
    check_layer(divide, {{2, 3, 4}, {2, 1, 4}}, 60, 0.5, 2);
  }
}
TEST(GradientCheck, ReshapePermuteRepeatVectorDenseRank4) {
  Float64Scope f64;
  check_layer(layers::Reshape({1, 1, -1}), {{2, 6}}, 47);
  check_layer(layers::Permute({3, 1, 2}), {{2, 2, 3, 4}}, 48);
  check_layer(layers::RepeatVector(3), {{2, 4}}, 49);
  check_layer(layers::Dense(3, {.activation = "tanh"}), {{2, 2, 3, 4}}, 50);
}

// ---- conv area: grouped, depthwise, separable and transposed convolutions, cropping, pooling, upsampling.
TEST(GradientCheck, Conv2DGroups) {
  Float64Scope f64;
  check_layer(layers::Conv2D(4, {3, 3}, {.strides = {2, 2}, .padding = "same", .groups = 2}), {{2, 5, 6, 4}});
  check_layer(
      layers::Conv2D(
          6, {2, 3},
          {.padding = "same", .dilation_rate = {2, 1}, .groups = 3, .activation = "relu", .use_bias = false}),
      {{1, 5, 5, 3}});
}
TEST(GradientCheck, DepthwiseConv2D) {
  Float64Scope f64;
  check_layer(layers::DepthwiseConv2D({3, 3}, {.strides = {2, 2}, .padding = "same", .depth_multiplier = 2}),
              {{2, 6, 5, 3}});
  check_layer(
      layers::DepthwiseConv2D(
          {3, 2}, {.padding = "same", .dilation_rate = {2, 2}, .activation = "relu6", .use_bias = false}),
      {{1, 5, 6, 2}});
}
TEST(GradientCheck, SeparableConv2D) {
  Float64Scope f64;
  check_layer(
      layers::SeparableConv2D(3, {3, 3}, {.strides = {2, 2}, .padding = "same", .depth_multiplier = 2}),
      {{2, 5, 6, 2}});
  check_layer(layers::SeparableConv2D(2, {2, 2}, {.activation = "relu", .use_bias = false}), {{1, 4, 5, 3}});
}
TEST(GradientCheck, Conv2DTranspose) {
  Float64Scope f64;
  check_layer(layers::Conv2DTranspose(3, {3, 3}, {.strides = {2, 2}, .padding = "same"}), {{2, 3, 4, 2}});
  check_layer(layers::Conv2DTranspose(
                  2, {3, 2}, {.strides = {2, 1}, .output_padding = layers::Pair{1, 0}, .activation = "tanh"}),
              {{1, 3, 3, 3}});
  check_layer(layers::Conv2DTranspose(2, {2, 2}, {.dilation_rate = {2, 2}, .use_bias = false}),
              {{1, 3, 3, 2}});
}
TEST(GradientCheck, Cropping2DAndUpSampling2D) {
  Float64Scope f64;
  check_layer(layers::Cropping2D(layers::Padding2D({1, 0}, {1, 0})), {{2, 4, 5, 2}});
  check_layer(layers::UpSampling2D({2, 3}), {{2, 3, 2, 2}});
  check_layer(layers::UpSampling2D({3, 2}, {.interpolation = "bilinear"}), {{2, 3, 4, 2}});
}
// The 1-D layers over sequences (N, L, C), each a 2-D op on an (N, 1, L, C) view: its paddings (causal too),
// strides, dilation and groups.
TEST(GradientCheck, Conv1DFamily) {
  Float64Scope f64;
  check_layer(layers::Conv1D(3, 3), {{2, 7, 2}});
  check_layer(layers::Conv1D(4, 3, {.padding = "causal", .dilation_rate = 2, .activation = "relu"}),
              {{2, 8, 3}});
  check_layer(layers::Conv1D(4, 5, {.strides = 2, .padding = "same", .groups = 2, .use_bias = false}),
              {{1, 9, 4}});
  check_layer(layers::MaxPooling1D(2), {{2, 7, 3}});
  check_layer(layers::MaxPooling1D(3, {.strides = 1, .padding = "same"}), {{1, 6, 2}});
  check_layer(layers::AveragePooling1D(3, {.strides = 2, .padding = "same"}), {{2, 7, 2}});
  check_layer(layers::GlobalAveragePooling1D(), {{2, 5, 3}});
  check_layer(layers::GlobalMaxPooling1D({.keepdims = true}), {{2, 5, 3}});
  check_layer(layers::ZeroPadding1D({2, 1}), {{2, 4, 3}});
  check_layer(layers::Cropping1D({1, 2}), {{2, 6, 3}});
  check_layer(layers::UpSampling1D(3), {{2, 3, 2}});
  check_layer(layers::Conv1DTranspose(3, 3, {.strides = 2, .padding = "same"}), {{2, 4, 2}});
  check_layer(layers::Conv1DTranspose(2, 3, {.strides = 2, .output_padding = 1, .activation = "tanh"}),
              {{1, 3, 3}});
  check_layer(layers::Conv1DTranspose(2, 2, {.dilation_rate = 2, .use_bias = false}), {{2, 3, 2}});
  // data_format channels_first: (C, L).
  check_layer(layers::MaxPooling1D(2, {.data_format = "channels_first"}), {{2, 3, 7}});
  check_layer(layers::AveragePooling1D(3, {.strides = 2, .padding = "same", .data_format = "channels_first"}),
              {{2, 2, 7}});
  check_layer(layers::GlobalAveragePooling1D({.keepdims = true, .data_format = "channels_first"}),
              {{2, 3, 5}});
  check_layer(layers::GlobalMaxPooling1D({.data_format = "channels_first"}), {{2, 3, 5}});
}
// GlobalAveragePooling1D of a masked input: the average of the unmasked steps (both data formats); a masked step's
// gradient is zero.
// The merges of masked inputs, as Keras 3 merges them: Multiply reads masked values as 1s (zeros where no input
// counts), Maximum and Minimum take the extremum of the values that count (the first input's where none does:
// step 2 of both samples); the masked values get no gradient.
TEST(GradientCheck, MergesOfMaskedInputs) {
  Float64Scope f64;
  const std::vector<Tensor> masks{Tensor::from_vector<double>({1, 1, 0, 1, 0, 0}, {2, 3}),
                                  Tensor::from_vector<double>({1, 0, 0, 1, 1, 0}, {2, 3})};
  for (LayerRef layer : {layers::Multiply(), layers::Maximum(), layers::Minimum()}) {
    SCOPED_TRACE(layer->class_name());
    std::vector<SymbolicTensor> sym{layers::Input({3, 4}, {.dtype = DType::float64}),
                                    layers::Input({3, 4}, {.dtype = DType::float64})};
    layer.call_all(sym);
    std::vector<Tensor> xs{random_tensor({2, 3, 4}, 51, DType::float64),
                           random_tensor({2, 3, 4}, 52, DType::float64)};
    const Tensor r = random_tensor({2, 3, 4}, 53, DType::float64);
    TrainingStep training;
    auto run = [&](LayerCall& c) {
      c.inputs = xs;
      c.output = Tensor({2, 3, 4}, DType::float64);
      c.masks = masks;
      c.output_mask = Tensor({2, 3}, DType::float64);
      c.training = &training;
      layer->call_forward(c);
    };
    auto loss = [&] {
      LayerCall c;
      run(c);
      const auto y = c.output.to_doubles(), rv = r.to_doubles();
      double sum = 0;
      for (std::size_t i = 0; i < y.size(); ++i) sum += y[i] * rv[i];
      return sum;
    };
    LayerCall c;
    run(c);
    EXPECT_EQ(c.output_mask.to_doubles(), (std::vector<double>{1, 1, 0, 1, 1, 0}));  // the OR
    c.doutput = r.clone();
    for (auto& x : xs)
      c.dinputs.push_back(Tensor::full(x.shape(), 7.0, DType::float64));  // must be overwritten
    layer->call_backward(c, false);
    for (std::size_t i = 0; i < xs.size(); ++i)
      check_all(xs[i], c.dinputs[i], loss, "dx" + std::to_string(i));
  }
}

// attention: MultiHeadAttention over query and value (the value its own key), with a key of its own, grouped
// options (value_dim, output_shape, no bias), causal and sliding-window masks, Keras's masks of the query and of
// the value and key (ANDed), dropout of the probabilities (fixed at a fixed step), and inputs of rank 4 (attention
// over both middle axes).
TEST(GradientCheck, MultiHeadAttention) {
  Float64Scope f64;
  check_layer(layers::MultiHeadAttention(2, 3), {{2, 5, 4}, {2, 4, 3}}, 61);
  check_layer(layers::MultiHeadAttention(3, 2, {.value_dim = 4, .use_bias = false, .output_shape = {{2, 3}}}),
              {{2, 4, 3}, {2, 5, 2}, {2, 5, 4}}, 62);
  check_layer(layers::MultiHeadAttention(2, 2, {.use_causal_mask = true, .sliding_window = 2}),
              {{2, 5, 3}, {2, 5, 3}}, 63);
  const Tensor query_mask = Tensor::from_vector<double>({1, 1, 0, 1, 1, 1, 1, 1, 0, 0}, {2, 5});
  const Tensor value_mask = Tensor::from_vector<double>({1, 0, 1, 1, 0, 0, 1, 1}, {2, 4});
  const Tensor key_mask = Tensor::from_vector<double>({1, 1, 1, 0, 1, 0, 1, 1}, {2, 4});
  check_layer(layers::MultiHeadAttention(2, 3), {{2, 5, 3}, {2, 4, 3}}, 64, -1, 1, query_mask,
              {query_mask, value_mask});
  check_layer(layers::MultiHeadAttention(2, 3), {{2, 5, 3}, {2, 4, 3}, {2, 4, 2}}, 65, -1, 1, query_mask,
              {query_mask, value_mask, key_mask});
  check_layer(layers::MultiHeadAttention(2, 3, {.dropout = 0.3, .seed = 5}), {{2, 5, 3}, {2, 5, 3}}, 66);
  check_layer(layers::MultiHeadAttention(2, 2), {{2, 2, 3, 3}, {2, 3, 2, 2}}, 67);
  // attention_axes=(2,): each row of the first middle axis attends within itself (the value's first axis as the
  // query's), with the scores as an output.
  check_layer(layers::MultiHeadAttention(2, 2, {.attention_axes = {{2}}, .return_attention_scores = true}),
              {{2, 2, 3, 3}, {2, 2, 4, 2}}, 70);
  // attention_axes before an axis not attended over (the projections moved around the op): (1,) with the scores,
  // and (1, 3) over inputs of rank 5 with a key of its own.
  check_layer(layers::MultiHeadAttention(2, 2, {.attention_axes = {{1}}, .return_attention_scores = true}),
              {{2, 3, 2, 3}, {2, 4, 2, 2}}, 87);
  check_layer(layers::MultiHeadAttention(1, 2, {.value_dim = 3, .attention_axes = {{1, 3}}}),
              {{2, 2, 2, 3, 2}, {2, 3, 2, 2, 2}, {2, 3, 2, 2, 3}}, 88);
  // use_gate: the gate's gradient joins the query's (a key of its own, then the value its own key).
  check_layer(layers::MultiHeadAttention(2, 3, {.value_dim = 2, .use_gate = true}),
              {{2, 5, 3}, {2, 4, 3}, {2, 4, 2}}, 77);
  check_layer(layers::MultiHeadAttention(2, 3, {.use_gate = true}), {{2, 5, 3}, {2, 4, 3}}, 78, -1, 1,
              query_mask, {query_mask, value_mask});
  // return_attention_scores: the scores' gradient joins the output's (with masks, then with dropout: the scores
  // are the probabilities before it).
  check_layer(layers::MultiHeadAttention(2, 3, {.return_attention_scores = true}), {{2, 5, 3}, {2, 4, 3}}, 68,
              -1, 1, query_mask, {query_mask, value_mask});
  check_layer(layers::MultiHeadAttention(2, 3, {.dropout = 0.3, .return_attention_scores = true, .seed = 5}),
              {{2, 5, 3}, {2, 5, 3}}, 69);
}

// EinsumDense: attention's projections (a bias over the new axes: the product's own), the input, kernel and output
// moved, an ellipsis on either side with a bias broadcast over some axes, an activation.
TEST(GradientCheck, EinsumDense) {
  Float64Scope f64;
  check_layer(layers::EinsumDense("abc,cde->abde", {std::nullopt, 2, 3}, {.bias_axes = "de"}), {{2, 4, 3}},
              91);
  check_layer(layers::EinsumDense("abcd,cde->abe", {std::nullopt, 3}, {.bias_axes = "e"}), {{2, 4, 2, 3}},
              92);
  check_layer(layers::EinsumDense("abc,dc->adb", {2, 4}, {.bias_axes = "db"}), {{2, 4, 3}}, 93);
  check_layer(layers::EinsumDense("abc,bd->acd", {3, 2}, {.activation = "tanh"}), {{2, 4, 3}}, 94);
  check_layer(layers::EinsumDense("...b,bc->...c", {5}, {.bias_axes = "c"}), {{2, 3, 2, 4}}, 95);
  check_layer(layers::EinsumDense("ab...,bc->ac...", {3}, {.bias_axes = "c"}), {{2, 4, 2}}, 96);
}

// GroupedQueryAttention: query heads sharing key/value heads (two per group; multi-query with one), a key of its own,
// Keras's masks, causal and sliding-window rules, no bias, dropout.
TEST(GradientCheck, GroupedQueryAttention) {
  Float64Scope f64;
  check_layer(layers::GroupedQueryAttention(3, 4, 2), {{2, 5, 4}, {2, 4, 4}}, 71);
  check_layer(layers::GroupedQueryAttention(2, 3, 1, {.use_bias = false}), {{2, 4, 3}, {2, 5, 3}, {2, 5, 2}},
              72);
  check_layer(layers::GroupedQueryAttention(2, 2, 1, {.use_causal_mask = true, .sliding_window = 2}),
              {{2, 5, 3}, {2, 5, 3}}, 73);
  const Tensor query_mask = Tensor::from_vector<double>({1, 1, 0, 1, 1, 1, 1, 1, 0, 0}, {2, 5});
  const Tensor value_mask = Tensor::from_vector<double>({1, 0, 1, 1, 0, 0, 1, 1}, {2, 4});
  check_layer(layers::GroupedQueryAttention(3, 4, 2), {{2, 5, 3}, {2, 4, 3}}, 74, -1, 1, query_mask,
              {query_mask, value_mask});
  check_layer(layers::GroupedQueryAttention(2, 4, 2, {.dropout = 0.3, .seed = 5}), {{2, 5, 3}, {2, 5, 3}},
              75);
  check_layer(
      layers::GroupedQueryAttention(2, 4, 2, {.use_causal_mask = true, .return_attention_scores = true}),
      {{2, 5, 3}, {2, 5, 3}}, 76);
  check_layer(layers::GroupedQueryAttention(2, 4, 2, {.use_gate = true}), {{2, 5, 3}, {2, 4, 3}}, 79);
}

// Attention (dot product): a key of its own, the trained scale, a causal mask, Keras's masks (the query's zeroes
// output rows, the value's hides keys), dropout.
TEST(GradientCheck, DotProductAttention) {
  Float64Scope f64;
  check_layer(layers::Attention(), {{2, 5, 4}, {2, 4, 3}, {2, 4, 4}}, 81);
  check_layer(layers::Attention({.use_scale = true, .use_causal_mask = true}), {{2, 5, 3}, {2, 5, 3}}, 82);
  const Tensor query_mask = Tensor::from_vector<double>({1, 1, 0, 1, 1, 1, 1, 1, 0, 0}, {2, 5});
  const Tensor value_mask = Tensor::from_vector<double>({1, 0, 1, 1, 0, 0, 1, 1}, {2, 4});
  check_layer(layers::Attention({.use_scale = true}), {{2, 5, 3}, {2, 4, 3}}, 83, -1, 1, query_mask,
              {query_mask, value_mask});
  check_layer(layers::Attention({.dropout = 0.3, .seed = 5}), {{2, 5, 3}, {2, 5, 3}}, 84);
  // return_attention_scores: the scores (after dropout while training, as Keras returns them) pass their gradient on.
  check_layer(layers::Attention({.use_scale = true, .return_attention_scores = true}), {{2, 5, 3}, {2, 4, 3}},
              85, -1, 1, query_mask, {query_mask, value_mask});
  check_layer(layers::Attention({.dropout = 0.3, .return_attention_scores = true, .seed = 5}),
              {{2, 5, 3}, {2, 5, 3}}, 86);
}

// AdditiveAttention and Attention's "concat" score: a key of its own (else the value is the key), the trained scales
// (AdditiveAttention's per feature; Attention's scalar on the query and the key) and concat_score_weight, a causal
// mask, Keras's masks, dropout and the scores output.
TEST(GradientCheck, AdditiveAttention) {
  Float64Scope f64;
  const Tensor query_mask = Tensor::from_vector<double>({1, 1, 0, 1, 1, 1, 1, 1, 0, 0}, {2, 5});
  const Tensor value_mask = Tensor::from_vector<double>({1, 0, 1, 1, 0, 0, 1, 1}, {2, 4});
  check_layer(layers::AdditiveAttention(), {{2, 5, 4}, {2, 4, 3}, {2, 4, 4}}, 91);
  check_layer(layers::AdditiveAttention({.use_scale = false, .use_causal_mask = true}),
              {{2, 5, 3}, {2, 5, 3}}, 92);
  check_layer(layers::AdditiveAttention({.return_attention_scores = true}), {{2, 5, 3}, {2, 4, 3}}, 93, -1, 1,
              query_mask, {query_mask, value_mask});
  check_layer(layers::AdditiveAttention({.dropout = 0.3, .seed = 5}), {{2, 5, 3}, {2, 5, 3}}, 94);
  check_layer(layers::Attention({.score_mode = "concat"}), {{2, 5, 4}, {2, 4, 3}, {2, 4, 4}}, 95);
  check_layer(layers::Attention({.use_scale = true, .score_mode = "concat", .use_causal_mask = true}),
              {{2, 5, 3}, {2, 5, 3}}, 96);
  check_layer(layers::Attention({.use_scale = true, .score_mode = "concat", .return_attention_scores = true}),
              {{2, 5, 3}, {2, 4, 3}, {2, 4, 3}}, 97);
  check_layer(layers::Attention({.use_scale = true, .score_mode = "concat"}), {{2, 5, 3}, {2, 4, 3}}, 98, -1,
              1, query_mask, {query_mask, value_mask});
}

TEST(GradientCheck, MaskedGlobalAveragePooling1D) {
  Float64Scope f64;
  Tensor mask = Tensor::from_vector(std::vector<double>{1, 1, 0, 1, 0, 0, 1, 1, 1, 1}, {2, 5});
  check_layer(layers::GlobalAveragePooling1D(), {{2, 5, 3}}, 1, -1, 1, mask);
  check_layer(layers::GlobalAveragePooling1D({.keepdims = true, .data_format = "channels_first"}),
              {{2, 3, 5}}, 2, -1, 1, mask);
}
// Embedding: ids drawn as floats in [0, input_dim) (truncated toward zero; none within the step of an integer), so
// several repeat and their gradient rows add up; the ids' own gradient is zero.
TEST(GradientCheck, Embedding) {
  Float64Scope f64;
  check_layer(layers::Embedding(7, 3), {{2, 5}}, 1, 0, 6.99);
  check_layer(layers::Embedding(4, 2), {{2, 3, 2}}, 2, 0, 3.99);
}
// The recurrent layers through time: the last output and every step's (return_sequences), forwards and backwards,
// with biases (GRU's two rows) and the LSTM's forget bias of 1; other activations.
TEST(GradientCheck, RecurrentLayers) {
  Float64Scope f64;
  check_layer(layers::SimpleRNN(3), {{2, 4, 3}});
  check_layer(layers::SimpleRNN(2, {.activation = "relu", .return_sequences = true, .go_backwards = true}),
              {{2, 3, 2}});
  check_layer(layers::LSTM(3), {{2, 4, 2}});
  check_layer(layers::LSTM(2, {.return_sequences = true, .go_backwards = true}), {{3, 3, 2}});
  check_layer(layers::LSTM(2, {.activation = "softsign",
                               .recurrent_activation = "hard_sigmoid",
                               .use_bias = false,
                               .return_sequences = true}),
              {{2, 3, 3}});
  check_layer(layers::GRU(3), {{2, 4, 2}});
  check_layer(layers::GRU(2, {.return_sequences = true, .go_backwards = true}), {{2, 3, 3}});
}
// dropout and recurrent_dropout in training (the masks drawn for the harness's step, the same in every call): one
// input mask, a mask per gate for the input and the state, the state's alone; through Bidirectional.
TEST(GradientCheck, RecurrentDropout) {
  Float64Scope f64;
  check_layer(layers::SimpleRNN(3, {.dropout = 0.3, .recurrent_dropout = 0.3, .seed = 1}), {{2, 4, 3}});
  check_layer(layers::LSTM(3, {.dropout = 0.4, .seed = 2}), {{2, 4, 3}});
  check_layer(
      layers::LSTM(2, {.dropout = 0.3, .recurrent_dropout = 0.3, .seed = 3, .return_sequences = true}),
      {{3, 3, 3}});
  check_layer(layers::GRU(3, {.dropout = 0.3, .recurrent_dropout = 0.4, .seed = 4, .go_backwards = true}),
              {{2, 4, 3}});
  check_layer(layers::GRU(2, {.recurrent_dropout = 0.5, .seed = 5}), {{2, 4, 2}});
  check_layer(layers::Bidirectional(layers::LSTM(2, {.dropout = 0.3, .recurrent_dropout = 0.3, .seed = 6})),
              {{2, 3, 3}});
}
// GRU(reset_after=False): the candidate's product reads r * h; with a bias row, without one, backwards with every
// step's output, with dropout on the input and the state, and with a mask (masked steps keep the state).
TEST(GradientCheck, GruResetBefore) {
  Float64Scope f64;
  check_layer(layers::GRU(3, {.reset_after = false}), {{2, 4, 2}});
  check_layer(
      layers::GRU(2,
                  {.use_bias = false, .reset_after = false, .return_sequences = true, .go_backwards = true}),
      {{2, 3, 3}});
  check_layer(layers::GRU(3, {.reset_after = false, .dropout = 0.3, .recurrent_dropout = 0.3, .seed = 7}),
              {{2, 4, 3}});
  check_layer(layers::GRU(2, {.reset_after = false, .dropout = 0.4, .seed = 8}), {{2, 3, 2}});
  Tensor mask = Tensor::from_vector(std::vector<double>{1, 1, 0, 1, 1, 0, 0, 1}, {2, 4});
  check_layer(layers::GRU(3, {.reset_after = false, .return_sequences = true}), {{2, 4, 2}}, 9, -1, 1, mask);
}
// Masking alone (its mask kept by the layer): no step of random values equals mask_value, so every step passes.
TEST(GradientCheck, Masking) {
  Float64Scope f64;
  check_layer(layers::Masking({.mask_value = 0.25}), {{2, 4, 3}});
}
// Bidirectional: each merge mode, the last outputs and every step's (the backward run's put back in time order).
TEST(GradientCheck, Bidirectional) {
  Float64Scope f64;
  check_layer(layers::Bidirectional(layers::LSTM(2, {.return_sequences = true})), {{2, 3, 2}});
  check_layer(layers::Bidirectional(layers::GRU(2), {.merge_mode = "sum"}), {{2, 3, 2}});
  check_layer(layers::Bidirectional(layers::SimpleRNN(2, {.return_sequences = true}), {.merge_mode = "mul"}),
              {{2, 3, 2}});
  check_layer(
      layers::Bidirectional(layers::LSTM(2),
                            {.merge_mode = "ave", .backward_layer = layers::GRU(2, {.go_backwards = true})}),
      {{2, 4, 2}});
}

// return_state and initial_state: the final states as outputs (their gradients join the output's) and the initial
// states as inputs (their gradients are what reaches the first step), with sequences, backwards, under a mask,
// with dropout; Bidirectional's states (forward's then backward's) and merge_mode None's two outputs.
TEST(GradientCheck, RecurrentStates) {
  Float64Scope f64;
  check_layer(layers::LSTM(3, {.return_state = true}), {{2, 4, 2}, {2, 3}, {2, 3}});
  check_layer(layers::LSTM(2, {.return_sequences = true, .return_state = true, .go_backwards = true}),
              {{2, 3, 3}});
  check_layer(layers::GRU(3, {.return_state = true}), {{2, 4, 2}, {2, 3}});
  check_layer(layers::GRU(2, {.reset_after = false, .return_sequences = true, .return_state = true}),
              {{2, 3, 2}, {2, 2}});
  check_layer(layers::SimpleRNN(3, {.return_state = true, .go_backwards = true}), {{2, 4, 2}, {2, 3}});
  check_layer(layers::LSTM(2, {.dropout = 0.3, .recurrent_dropout = 0.3, .seed = 11, .return_state = true}),
              {{2, 3, 2}, {2, 2}, {2, 2}});
  // A mask without initial states (with them Keras 3 runs every step: steps_mask).
  Tensor mask = Tensor::from_vector(std::vector<double>{1, 1, 0, 1, 1, 0, 0, 1}, {2, 4});
  check_layer(layers::LSTM(3, {.return_sequences = true, .return_state = true}), {{2, 4, 2}}, 12, -1, 1,
              mask);
  check_layer(layers::Bidirectional(layers::LSTM(2, {.return_state = true})),
              {{2, 3, 2}, {2, 2}, {2, 2}, {2, 2}, {2, 2}});
  check_layer(layers::Bidirectional(layers::GRU(2, {.return_sequences = true, .return_state = true}),
                                    {.merge_mode = ""}),
              {{2, 3, 2}});
  check_layer(layers::Bidirectional(layers::SimpleRNN(2, {.return_sequences = true}), {.merge_mode = ""}),
              {{2, 3, 2}, {2, 2}, {2, 2}});
}
// A model that reads only a call's later outputs: an LSTM's final states feed the head, its sequences nothing (their
// gradient is zero); a GRU starts from the LSTM's h.
TEST(GradientCheck, ModelOfStates) {
  Float64Scope f64;
  auto in = layers::Input({4, 3});
  auto outs = layers::LSTM(3, {.return_sequences = true, .return_state = true}).call_all({in});
  auto g = layers::GRU(3)({in, outs[1]});
  auto h = layers::Concatenate()({outs[1], outs[2], g});
  auto out = layers::Dense(3, {.activation = "softmax"})(h);
  Tensor x = random_tensor({3, 4, 3}, 23, DType::float64);
  check_model(Model(in, out), x, Tensor::from_vector<std::int32_t>({2, 0, 1}, {3}));
}

// DepthwiseConv1D and SeparableConv1D: the 2-D layers along one axis (strides, dilation, same padding).
TEST(GradientCheck, DepthwiseAndSeparableConv1D) {
  Float64Scope f64;
  check_layer(layers::DepthwiseConv1D(3, {.padding = "same", .depth_multiplier = 2}), {{2, 5, 3}});
  check_layer(layers::DepthwiseConv1D(2, {.strides = 2, .activation = "tanh"}), {{2, 6, 2}});
  check_layer(layers::SeparableConv1D(3, 3, {.dilation_rate = 2, .depth_multiplier = 2}), {{2, 7, 2}});
  check_layer(layers::SeparableConv1D(2, 3, {.strides = 2, .padding = "same", .use_bias = false}),
              {{2, 6, 3}});
}

// TimeDistributed: a Dense with an activation the wrapped layer applies (its own buffers kept by the wrapper), a
// Conv2D over every frame, an LSTM over every step's sequence.
TEST(GradientCheck, TimeDistributed) {
  Float64Scope f64;
  check_layer(layers::TimeDistributed(layers::Dense(3, {.activation = "softmax"})), {{2, 3, 4}});
  check_layer(layers::TimeDistributed(layers::Conv2D(2, {3, 3}, {.padding = "same"})), {{2, 2, 4, 3, 2}});
  check_layer(layers::TimeDistributed(layers::LSTM(2)), {{2, 2, 3, 2}});
}

// One step of each cell with some rows masked (rnn_cell_forward/backward): a masked row keeps its state, and its
// gradients pass straight to the previous state. L = sum(r_h * h) + sum(r_c * c), checked by finite differences
// w.r.t. x_part, h_part, h_prev and c_prev.
TEST(GradientCheck, RnnCellsWithMaskedRows) {
  for (int k = 0; k < 4; ++k) {
    // The three cells, and GRU without reset_after (r's own gradient is the layer's: the cell's is checked with
    // h_part's h block as an independent input).
    const ops::RnnCell cell = k == 0 ? ops::RnnCell::simple : k == 1 ? ops::RnnCell::lstm : ops::RnnCell::gru;
    SCOPED_TRACE(k);
    const std::int64_t N = 4, u = 3,
                       G = (cell == ops::RnnCell::lstm  ? 4
                            : cell == ops::RnnCell::gru ? 3
                                                        : 1) *
                           u;
    const bool lstm = cell == ops::RnnCell::lstm;
    ops::RnnCellParams p{.cell = cell, .reset_after = k != 3};
    Tensor xp = random_tensor({N, G}, 1, DType::float64), hp = random_tensor({N, G}, 2, DType::float64);
    Tensor h0 = random_tensor({N, u}, 3, DType::float64), c0 = random_tensor({N, u}, 4, DType::float64);
    Tensor mask = Tensor::from_vector(std::vector<double>{1, 0, 1, 0}, {N});
    Tensor rh = random_tensor({N, u}, 5, DType::float64), rc = random_tensor({N, u}, 6, DType::float64);
    Tensor none, h({N, u}, DType::float64), c({N, u}, DType::float64), z({N, G}, DType::float64);
    auto run = [&] { ops::rnn_cell_forward(p, xp, hp, h0, lstm ? c0 : none, mask, h, lstm ? c : none, z); };
    auto loss = [&] {
      run();
      double s = 0;
      auto hv = h.to_doubles(), rv = rh.to_doubles(), cv = c.to_doubles(), rcv = rc.to_doubles();
      for (std::size_t i = 0; i < hv.size(); ++i) s += hv[i] * rv[i] + (lstm ? cv[i] * rcv[i] : 0.0);
      return s;
    };
    run();
    Tensor dxp({N, G}, DType::float64), dhp({N, G}, DType::float64), dh_prev({N, u}, DType::float64),
        dc_prev({N, u}, DType::float64);
    const bool gru = cell == ops::RnnCell::gru;
    Tensor dhp_arg = gru ? dhp : none, dcp_arg = lstm ? dc_prev : none;
    ops::rnn_cell_backward(p, hp, h0, lstm ? c0 : none, z, lstm ? c : none, mask, rh, lstm ? rc : none, dxp,
                           dhp_arg, dh_prev, dcp_arg);
    // The gradient w.r.t. h_part is dx_part's, except GRU's.
    check_all(xp, dxp, loss, "dx_part");
    check_all(hp, gru ? dhp : dxp, loss, "dh_part");
    // h_prev: only the direct part here (h_part is an independent input in this check).
    check_all(h0, dh_prev, loss, "dh_prev");
    if (lstm) check_all(c0, dc_prev, loss, "dc_prev");
  }
}

TEST(GradientCheck, PoolingPaddingsAndGlobalMax) {
  Float64Scope f64;
  check_layer(layers::MaxPooling2D({3, 3}, {.strides = layers::Pair{1, 1}, .padding = "same"}),
              {{1, 5, 4, 2}});
  check_layer(layers::AveragePooling2D({3, 2}, {.strides = layers::Pair{1, 2}, .padding = "same"}),
              {{2, 5, 5, 2}});
  check_layer(layers::AveragePooling2D({2, 2}, {.padding = "same"}), {{1, 5, 5, 2}});
  check_layer(layers::GlobalMaxPooling2D(), {{2, 3, 4, 3}});
  check_layer(layers::GlobalMaxPooling2D({.keepdims = true}), {{2, 3, 4, 3}});
  check_layer(layers::GlobalAveragePooling2D({.keepdims = true}), {{2, 3, 4, 3}});
}
