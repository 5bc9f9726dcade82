// Regularizers, constraints and their training-step hooks against real Keras 3
// (tests/fixtures/regularizers/, written by tests/reference/regularizers.py), finite-difference checks of the
// regularized loss in double precision, config round trips, and a Keras-written .h5 with regularizers,
// constraints and a seeded initializer.
#include <gmock/gmock.h>
#include <systolic/systolic.h>

#include <nlohmann/json.hpp>

#include "json_fixture.h"
#include "layers/config.h"
#include "test_util.h"

using namespace systolic;
using json = nlohmann::ordered_json;
using systolic::testing::random_tensor;

namespace {

const json& fixture() {
  return systolic::testing::json_fixture<json>("regularizers/regularizers.json");
}

// A float32 tensor from nested JSON lists.
Tensor tensor_of(const json& v) {
  std::vector<std::int64_t> dims;
  const json* at = &v;
  while (at->is_array()) {
    dims.push_back(static_cast<std::int64_t>(at->size()));
    at = &(*at)[0];
  }
  std::vector<float> flat;
  std::function<void(const json&)> walk = [&](const json& e) {
    if (e.is_array())
      for (auto& c : e) walk(c);
    else
      flat.push_back(e.get<float>());
  };
  walk(v);
  return Tensor::from_vector<float>(flat, Shape(dims));
}

void expect_near_all(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  auto g = got.to_doubles(), w = want.to_doubles();
  for (std::size_t i = 0; i < g.size(); ++i)
    EXPECT_NEAR(g[i], w[i], tol * std::max(1.0, std::abs(w[i]))) << what << " [" << i << "]";
}

}  // namespace

TEST(Regularizers, PenaltiesAndGradientsEqualKeras) {
  Tensor x = tensor_of(fixture()["x"]);
  for (const json& r : fixture()["regularizers"]) {
    Regularizer reg = layers::regularizer_from_config(r["config"]);
    std::string what = r["config"].dump();
    EXPECT_NEAR(regularizers::penalty(reg, x), r["penalty"].get<double>(), 1e-6 * r["penalty"].get<double>())
        << what;
    Tensor total = Tensor::zeros({1}, DType::float64), dx = Tensor::zeros(x.shape());
    regularizers::apply(reg, x, total, dx, 2.0, 1.0);
    EXPECT_NEAR(total.to_doubles()[0], 2 * r["penalty"].get<double>(), 2e-6 * r["penalty"].get<double>());
    expect_near_all(dx, tensor_of(r["grad"]), 1e-5, what + " gradient");
  }
}

TEST(Regularizers, ConfigsRoundTripAsKerasWritesThem) {
  for (const json& r : fixture()["regularizers"])
    EXPECT_EQ(layers::regularizer_config(layers::regularizer_from_config(r["config"])), r["config"]);
  for (const json& c : fixture()["constraints"])
    EXPECT_EQ(layers::constraint_config(layers::constraint_from_config(c["config"])), c["config"]);
  // Names and tf.keras's form (no module) are read too; unknown classes and arguments are refused by name.
  EXPECT_EQ(layers::regularizer_from_config("l2"), regularizers::L2(0.01));
  EXPECT_EQ(
      layers::regularizer_from_config(json{{"class_name", "L1L2"}, {"config", {{"l1", 0.0}, {"l2", 0.5}}}}),
      regularizers::L1L2(0.0, 0.5));
  EXPECT_EQ(layers::constraint_from_config("non_neg"), constraints::NonNeg());
  EXPECT_THAT(systolic::testing::error_of([] { layers::regularizer_from_config("l3"); }),
              ::testing::HasSubstr("regularizer class 'l3' is not supported"));
  EXPECT_THAT(systolic::testing::error_of([] {
                layers::constraint_from_config(json{{"class_name", "MaxNorm"}, {"config", {{"norm", 2}}}});
              }),
              ::testing::HasSubstr("unsupported argument 'norm'"));
}

TEST(Constraints, ProjectionsEqualKeras) {
  for (const json& c : fixture()["constraints"]) {
    Tensor w = tensor_of(fixture()[c["input"].get<std::string>()]).clone();
    constraints::apply(layers::constraint_from_config(c["config"]), w);
    expect_near_all(w, tensor_of(c["output"]), 1e-6, c["config"].dump());
  }
}

// d penalty / dx by central differences in float64, for every regularizer kind.
TEST(GradientCheck, RegularizerPenalties) {
  Tensor x = random_tensor({7, 5}, 3, DType::float64);
  for (const Regularizer& r : {regularizers::L1(0.3), regularizers::L2(0.2), regularizers::L1L2(0.1, 0.4),
                               regularizers::OrthogonalRegularizer(0.5, "rows"),
                               regularizers::OrthogonalRegularizer(0.5, "columns")}) {
    Tensor total = Tensor::zeros({1}, DType::float64), dx = Tensor::zeros(x.shape(), DType::float64);
    regularizers::apply(r, x, total, dx, 1.0, 1.0);
    auto a = dx.to_doubles();
    double* p = x.data<double>();
    for (std::int64_t i = 0; i < x.numel(); ++i) {
      double keep = p[i], h = 1e-6;
      p[i] = keep + h;
      double up = regularizers::penalty(r, x);
      p[i] = keep - h;
      double down = regularizers::penalty(r, x);
      p[i] = keep;
      EXPECT_NEAR(a[i], (up - down) / (2 * h), 1e-7)
          << layers::regularizer_config(r).dump() << " [" << i << "]";
    }
  }
}

namespace {
// The fixture's model, built with systolic's API in `floatx`, its weights set from the fixture.
Model regularized_model() {
  auto in = layers::Input({4}, {.name = "input"});
  auto h = layers::Dense(5, {.activation = "tanh",
                             .kernel_regularizer = regularizers::L2(0.01),
                             .bias_regularizer = regularizers::L1(0.019999999552965164),
                             .activity_regularizer = regularizers::L1L2(0.001, 0.002),
                             .kernel_constraint = constraints::MaxNorm(0.8),
                             .bias_constraint = constraints::NonNeg(),
                             .name = "hidden"})(in);
  h = layers::ActivityRegularization({.l1 = 0.003, .l2 = 0.004, .name = "act_reg"})(h);
  auto out = layers::Dense(3, {.activation = "softmax",
                               .kernel_regularizer = regularizers::OrthogonalRegularizer(0.05, "columns"),
                               .bias_regularizer = regularizers::L1L2(0.01, 0.03),
                               .kernel_constraint = constraints::MinMaxNorm(0.2, 0.9, 0.7),
                               .name = "out"})(h);
  Model m(in, out, "regularized");
  std::size_t k = 0;
  for (auto& l : m.layers())
    for (auto& w : l->weights())
      w.value.copy_from(tensor_of(fixture()["fit"]["weights"][k++]).to(w.value.dtype()));
  return m;
}
Tensor batch_x() {
  return tensor_of(fixture()["fit"]["x"]);
}
Tensor batch_y() {
  return Tensor::from_vector<std::int32_t>(fixture()["fit"]["y"].get<std::vector<std::int32_t>>(), {6});
}
}  // namespace

// One SGD step of Keras's fit: the loss it reports includes every regularization loss (weights' and
// activities'), the update includes their gradients, the constraints project the updated weights; evaluate
// reports the same loss.
TEST(RegularizedTraining, OneFitStepEqualsKeras) {
  const json& f = fixture()["fit"];
  Model m = regularized_model();
  m.compile(optimizers::SGD(0.1), "sparse_categorical_crossentropy");
  EXPECT_NEAR(m.evaluate(batch_x(), batch_y(), {.batch_size = 6, .verbose = 0})[0],
              f["evaluate_before"].get<double>(), 1e-5);
  History h = m.fit(batch_x(), batch_y(), {.batch_size = 6, .epochs = 1, .verbose = 0, .shuffle = false});
  EXPECT_NEAR(h["loss"][0], f["fit_loss"].get<double>(), 1e-5);
  std::size_t k = 0;
  for (auto& l : m.layers())
    for (auto& w : l->weights())
      expect_near_all(w.value, tensor_of(f["weights_after"][k++]), 1e-5, l->name() + "/" + w.name);
  EXPECT_NEAR(m.evaluate(batch_x(), batch_y(), {.batch_size = 6, .verbose = 0})[0],
              f["evaluate_after"].get<double>(), 1e-5);

  // Two steps (4 + 2 samples): the epoch's loss weighs each step's loss-plus-penalties by its batch size.
  Model m2 = regularized_model();
  m2.compile(optimizers::SGD(0.1), "sparse_categorical_crossentropy");
  History h2 = m2.fit(batch_x(), batch_y(), {.batch_size = 4, .epochs = 1, .verbose = 0, .shuffle = false});
  EXPECT_NEAR(h2["loss"][0], f["fit_loss_batch4"].get<double>(), 1e-5);
  k = 0;
  for (auto& l : m2.layers())
    for (auto& w : l->weights())
      expect_near_all(w.value, tensor_of(f["weights_after_batch4"][k++]), 1e-5, l->name() + "/" + w.name);
}

// The gradient of the whole regularized training loss (loss + weight and activity penalties), by central
// differences in float64 (no constraints: they would move the weights).
TEST(GradientCheck, RegularizedModelLoss) {
  set_floatx(DType::float64);
  auto in = layers::Input({4});
  auto h = layers::Dense(5, {.activation = "tanh",
                             .kernel_regularizer = regularizers::L2(0.05),
                             .bias_regularizer = regularizers::L1(0.02),
                             .activity_regularizer = regularizers::L1L2(0.01, 0.02)})(in);
  h = layers::ActivityRegularization({.l1 = 0.03, .l2 = 0.04})(h);
  auto out = layers::Dense(3, {.activation = "softmax",
                               .kernel_regularizer = regularizers::OrthogonalRegularizer(0.1, "columns"),
                               .bias_regularizer = regularizers::L1L2(0.01, 0.03),
                               .activity_regularizer = regularizers::L2(0.05)})(h);
  Model model(in, out);
  for (auto& l : model.layers())
    for (auto& w : l->weights())
      w.value.copy_from(random_tensor(w.value.shape(), 5, DType::float64, -0.8, 0.8));
  Tensor x = random_tensor({6, 4}, 9, DType::float64), y = batch_y();
  model.compile(optimizers::SGD(0.0), "sparse_categorical_crossentropy");
  model.train_on_batch(x, y);
  Tensor analytic = model.gradients().clone();
  Tensor& p = model.trainable_parameters();
  auto a = analytic.to_doubles();
  double* v = p.data<double>();
  for (std::int64_t i = 0; i < p.numel(); ++i) {
    double keep = v[i], step = 1e-6;
    v[i] = keep + step;
    double up = model.train_on_batch(x, y)[0];  // lr 0: the weights stay
    v[i] = keep - step;
    double down = model.train_on_batch(x, y)[0];
    v[i] = keep;
    EXPECT_NEAR(a[i], (up - down) / (2 * step), 1e-6) << "parameter " << i;
  }
  set_floatx(DType::float32);
}

TEST(RegularizedLayers, ConfigsCarryRegularizersAndConstraints) {
  // The fixture model's layer configs, read and written back as Keras 3 writes them.
  const json& layers_json = fixture()["fit"]["config"]["config"]["layers"];
  for (const json& l : layers_json) {
    std::string cls = l["class_name"].get<std::string>();
    if (cls == "InputLayer") continue;
    auto layer = layers::layer_from_config(cls, l["config"]);
    json written;
    layer->get_config(written);
    for (const char* key : {"kernel_regularizer", "bias_regularizer", "activity_regularizer",
                            "kernel_constraint", "bias_constraint", "l1", "l2"})
      if (l["config"].contains(key)) {
        EXPECT_EQ(written[key], l["config"][key]) << cls << " " << key;
      }
  }
  // BatchNormalization's gamma and beta.
  auto bn = layers::BatchNormalization(
      {.gamma_regularizer = regularizers::L2(0.5), .beta_constraint = constraints::NonNeg()});
  json c;
  bn->get_config(c);
  EXPECT_EQ(c["gamma_regularizer"], layers::regularizer_config(regularizers::L2(0.5)));
  EXPECT_EQ(c["beta_constraint"]["class_name"], "NonNeg");
  auto back = layers::layer_from_config("BatchNormalization", c);
  (*back)(layers::Input({3}));
  EXPECT_EQ(back->weights()[0].regularizer, regularizers::L2(0.5));
  EXPECT_EQ(back->weights()[1].constraint, constraints::NonNeg());
}

// model.save("model.h5") by Keras 3 of the fixture model (regularizers, constraints, GlorotUniform(seed=42)):
// it loads, and its loss on the batch is Keras's after its fit step.
TEST(RegularizedLayers, KerasWrittenH5Loads) {
  Model m = load_model(systolic::testing::source_dir() + "/tests/fixtures/regularizers/model.h5");
  m.compile(optimizers::SGD(0.1), "sparse_categorical_crossentropy");
  EXPECT_NEAR(m.evaluate(batch_x(), batch_y(), {.batch_size = 6, .verbose = 0})[0],
              fixture()["fit"]["evaluate_after"].get<double>(), 1e-5);
  EXPECT_EQ(m.get_layer("hidden")->weights()[0].constraint, constraints::MaxNorm(0.8));
  EXPECT_TRUE(m.get_layer("act_reg")->activity_regularizer());
}

// Seeded initializers: the same seed gives the same values (systolic's generator: not TensorFlow's numbers), read
// and written with Keras's arguments.
TEST(Initializers, SeededInitializersAreReproducible) {
  Initializer seeded = "glorot_uniform";
  seeded.seed = 42;
  auto a = layers::Dense(7, {.kernel_initializer = seeded});
  auto b = layers::Dense(7, {.kernel_initializer = seeded});
  auto c = layers::Dense(7);
  auto in = layers::Input({5});
  a(in), b(in), c(in);
  EXPECT_EQ(a->weights()[0].value.to_doubles(), b->weights()[0].value.to_doubles());
  EXPECT_NE(a->weights()[0].value.to_doubles(), c->weights()[0].value.to_doubles());
  json config;
  a->get_config(config);
  EXPECT_EQ(config["kernel_initializer"]["config"]["seed"], 42);
  auto back = layers::layer_from_config("Dense", config);
  (*back)(in);
  EXPECT_EQ(back->weights()[0].value.to_doubles(), a->weights()[0].value.to_doubles());
}

TEST(Initializers, KerasArgumentsAreReadAndUsed) {
  auto make = [](const json& init, Shape shape) {
    json c = {{"name", "d"}, {"units", shape[1]}, {"kernel_initializer", init}};
    auto l = layers::layer_from_config("Dense", c);
    (*l)(layers::Input({shape[0]}));
    json written;
    l->get_config(written);
    EXPECT_EQ(written["kernel_initializer"]["class_name"], init["class_name"]);
    return l->weights()[0].value.to_doubles();
  };
  auto k = make({{"class_name", "Constant"}, {"config", {{"value", 0.3}}}}, {4, 3});
  for (double v : k) EXPECT_FLOAT_EQ(v, 0.3f);
  k = make({{"class_name", "Identity"}, {"config", {{"gain", 2.0}}}}, {3, 4});
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) EXPECT_EQ(k[i * 4 + j], i == j ? 2.0 : 0.0);
  k = make({{"class_name", "RandomUniform"}, {"config", {{"seed", 1}, {"minval", 2}, {"maxval", 3}}}},
           {50, 40});
  for (double v : k) EXPECT_TRUE(v >= 2 && v <= 3) << v;
  k = make({{"class_name", "TruncatedNormal"}, {"config", {{"seed", 1}, {"mean", 5.0}, {"stddev", 0.1}}}},
           {50, 40});
  for (double v : k) EXPECT_TRUE(std::abs(v - 5.0) <= 0.2 + 1e-6) << v;
  // Orthogonal (gain 1.5), rows < cols: the rows are orthogonal with norm 1.5.
  k = make({{"class_name", "Orthogonal"}, {"config", {{"seed", 3}, {"gain", 1.5}}}}, {4, 9});
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      double dot = 0;
      for (int c = 0; c < 9; ++c) dot += k[i * 9 + c] * k[j * 9 + c];
      EXPECT_NEAR(dot, i == j ? 2.25 : 0.0, 1e-5);
    }
  // VarianceScaling(scale 2, fan_out, uniform): limit sqrt(3 * 2 / 20).
  k = make({{"class_name", "VarianceScaling"},
            {"config", {{"seed", 5}, {"scale", 2.0}, {"mode", "fan_out"}, {"distribution", "uniform"}}}},
           {30, 20});
  double limit = std::sqrt(3.0 * 2.0 / 20.0), top = 0;
  for (double v : k) top = std::max(top, std::abs(v));
  EXPECT_LE(top, limit + 1e-6);
  EXPECT_GT(top, 0.9 * limit);
  EXPECT_THAT(systolic::testing::error_of([&] {
                make({{"class_name", "RandomNormal"}, {"config", {{"variance", 1.0}}}}, {2, 2});
              }),
              ::testing::HasSubstr("RandomNormal argument 'variance'"));
}

// systolic's own full-model files (.h5) carry the regularizers, constraints and seeds: a saved and reloaded
// model trains as Keras's fit step does.
TEST(RegularizedLayers, SavedModelsRoundTrip) {
  systolic::testing::TempDir tmp;
  for (std::string file : {"m.h5"}) {  // systolic writes full models as legacy HDF5
    Model saved = regularized_model();
    saved.compile(optimizers::SGD(0.1), "sparse_categorical_crossentropy");
    saved.save(tmp.file(file));
    Model m = load_model(tmp.file(file));
    m.compile(optimizers::SGD(0.1), "sparse_categorical_crossentropy");
    EXPECT_EQ(m.to_json(), saved.to_json()) << file;
    History h = m.fit(batch_x(), batch_y(), {.batch_size = 6, .epochs = 1, .verbose = 0, .shuffle = false});
    EXPECT_NEAR(h["loss"][0], fixture()["fit"]["fit_loss"].get<double>(), 1e-5) << file;
    std::size_t k = 0;
    for (auto& l : m.layers())
      for (auto& w : l->weights())
        expect_near_all(w.value, tensor_of(fixture()["fit"]["weights_after"][k++]), 1e-5,
                        file + " " + w.name);
  }
}

// Conv2D's regularizers and BatchNormalization's gamma/beta regularizers in the loss and its gradient (float64,
// central differences).
TEST(GradientCheck, RegularizedConvolutionAndBatchNorm) {
  set_floatx(DType::float64);
  auto in = layers::Input({4, 4, 2});
  auto h = layers::Conv2D(2, {3, 3},
                          {.padding = "same",
                           .activation = "tanh",
                           .kernel_regularizer = regularizers::L1L2(0.02, 0.05),
                           .bias_regularizer = regularizers::L2(0.1),
                           .activity_regularizer = regularizers::L1(0.01)})(in);
  h = layers::BatchNormalization(
      {.beta_regularizer = regularizers::L2(0.2), .gamma_regularizer = regularizers::L1L2(0.05, 0.1)})(h);
  h = layers::Flatten()(h);
  auto out = layers::Dense(3, {.activation = "softmax"})(h);
  Model model(in, out);
  for (auto& l : model.layers())
    for (auto& w : l->weights())
      if (w.trainable) w.value.copy_from(random_tensor(w.value.shape(), 11, DType::float64, -0.8, 0.8));
  Tensor x = random_tensor({3, 4, 4, 2}, 12, DType::float64),
         y = Tensor::from_vector<std::int32_t>({2, 0, 1}, {3});
  model.compile(optimizers::SGD(0.0), "sparse_categorical_crossentropy");
  model.train_on_batch(x, y);
  Tensor analytic = model.gradients().clone();
  Tensor& p = model.trainable_parameters();
  auto a = analytic.to_doubles();
  double* v = p.data<double>();
  for (std::int64_t i = 0; i < p.numel(); ++i) {
    double keep = v[i], step = 1e-6;
    v[i] = keep + step;
    double up = model.train_on_batch(x, y)[0];
    v[i] = keep - step;
    double down = model.train_on_batch(x, y)[0];
    v[i] = keep;
    EXPECT_NEAR(a[i], (up - down) / (2 * step), 1e-6) << "parameter " << i;
  }
  set_floatx(DType::float32);
}
