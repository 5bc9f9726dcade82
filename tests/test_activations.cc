// The activations against real Keras (tests/fixtures/activations/activations.json, written by
// tests/reference/activations.py with Keras 3.15 over TensorFlow 2.21 and tf_keras 2.21): every activation name
// Keras knows and systolic runs, and parametrised relu, leaky_relu, elu and gelu(approximate=True), forward and
// gradient in float64 and float32, on inputs around every kink; the activation layers (ReLU, LeakyReLU, ELU,
// Activation, Softmax) read from the JSON that tf.keras and Keras 3 write, giving Keras's outputs; names and
// configs round-trip.
#include <gmock/gmock.h>
#include <systolic/systolic.h>

#include <nlohmann/json.hpp>

#include "json_fixture.h"
#include "keras_compare.h"
#include "ops/activation_math.h"
#include "saving/keras_zip.h"
#include "test_util.h"

using namespace systolic;
using json = nlohmann::json;
using systolic::testing::error_of;
using systolic::testing::normalised_max_error;
using ::testing::HasSubstr;

namespace {

// The first element where a and b differ most, for the message.
std::string worst(const std::vector<double>& a, const std::vector<double>& b, const std::vector<double>& x) {
  std::size_t at = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::abs(a[i] - b[i]) > std::abs(a[at] - b[at])) at = i;
  return fmt::format("worst at x = {}: {} vs Keras {}", x[at], a[at], b[at]);
}

const json& fixture() {
  return systolic::testing::json_fixture("activations/activations.json");
}

Activation activation_of(const json& entry) {
  Activation a = activation_from_name(entry["name"].get<std::string>());
  const json& p = entry["params"];
  if (p.contains("max_value")) a.max_value = p["max_value"].get<double>();
  if (p.contains("negative_slope")) a.alpha = p["negative_slope"].get<double>();
  if (p.contains("threshold")) a.threshold = p["threshold"].get<double>();
  if (p.contains("alpha")) a.alpha = p["alpha"].get<double>();
  if (p.contains("approximate")) a.approximate = p["approximate"].get<bool>();
  return a;
}

// y and dL/dx of L = sum(f(x) * w), w = linspace(0.5, 1.5, n), as the fixture computes them.
void run(const Activation& a, DType dtype, std::vector<double>& y, std::vector<double>& dx) {
  const json& f = fixture();
  auto xs = f["inputs"].get<std::vector<double>>();
  Shape shape{f["rows"][0].get<std::int64_t>(), f["rows"][1].get<std::int64_t>()};
  const auto n = static_cast<std::int64_t>(xs.size());
  std::vector<double> w(xs.size());
  for (std::int64_t i = 0; i < n; ++i) w[i] = 0.5 + double(i) / double(n - 1);
  Tensor x = Tensor::from_vector(xs, shape).to(dtype), out(shape, dtype),
         dy = Tensor::from_vector(w, shape).to(dtype);
  Tensor g(shape, dtype);
  ops::activation_forward(a, x, out);
  ops::activation_backward(a, x, out, dy, g);
  y = out.to_doubles();
  dx = g.to_doubles();
}

// Within 1e-7, not to the last bit: TensorFlow passes some constants as float32 attributes (leaky_relu's alpha,
// relu's negative_slope: 0.2 is 0.20000000298...), which moves its float64 results by about 1e-9.
TEST(KerasActivations, ForwardAndGradientEqualKerasInFloat64) {
  for (const json& e : fixture()["activations"]) {
    Activation a = activation_of(e);
    SCOPED_TRACE(e["name"].get<std::string>() + " " + e["params"].dump());
    std::vector<double> y, dx;
    run(a, DType::float64, y, dx);
    auto want_y = e["y"].get<std::vector<double>>(), want_dx = e["dx"].get<std::vector<double>>();
    Shape s{std::int64_t(y.size())};
    auto x = fixture()["inputs"].get<std::vector<double>>();
    EXPECT_LE(normalised_max_error(Tensor::from_vector(y, s), Tensor::from_vector(want_y, s)), 1e-7)
        << "y, " << worst(y, want_y, x);
    EXPECT_LE(normalised_max_error(Tensor::from_vector(dx, s), Tensor::from_vector(want_dx, s)), 1e-7)
        << "dx, " << worst(dx, want_dx, x);
  }
}

TEST(KerasActivations, Float32IsCloseToKeras) {
  for (const json& e : fixture()["activations"]) {
    Activation a = activation_of(e);
    SCOPED_TRACE(e["name"].get<std::string>() + " " + e["params"].dump());
    std::vector<double> y, dx;
    run(a, DType::float32, y, dx);
    auto want_y = e["y"].get<std::vector<double>>(), want_dx = e["dx"].get<std::vector<double>>();
    Shape s{std::int64_t(y.size())};
    EXPECT_LE(normalised_max_error(Tensor::from_vector(y, s), Tensor::from_vector(want_y, s)), 1e-5) << "y";
    EXPECT_LE(normalised_max_error(Tensor::from_vector(dx, s), Tensor::from_vector(want_dx, s)), 1e-5)
        << "dx";
  }
}

// Every Keras name in the fixture is known, and names come back as Keras spells them (swish and hard_swish are
// silu's and hard_silu's aliases; silu is written "swish", which tf.keras and Keras 3 both read).
TEST(KerasActivations, NamesRoundTrip) {
  for (const json& e : fixture()["activations"]) {
    std::string name = e["name"];
    Activation a = activation_from_name(name);
    EXPECT_EQ(activation_from_name(activation_name(a)), a) << name;
  }
  EXPECT_EQ(activation_from_name("swish"), activation_from_name("silu"));
  EXPECT_EQ(activation_from_name("hard_swish"), activation_from_name("hard_silu"));
  EXPECT_EQ(activation_name(Activation::silu), "swish");
  EXPECT_EQ(activation_from_name("leaky_relu").alpha, 0.2);
  EXPECT_THAT(error_of([] { activation_from_name("sparsemax"); }),
              HasSubstr("unknown activation 'sparsemax'"));
}

// The layers as tf.keras and Keras 3 write them: read, run, written again.
TEST(KerasActivationLayers, ReadFromBothKerasLinesAndGiveKerasOutputs) {
  const json& layers_fixture = fixture()["layers"];
  auto x = layers_fixture["layer_inputs"].get<std::vector<double>>();
  Tensor input = Tensor::from_vector(x, {std::int64_t(x.size()) / 4, 4}).to(DType::float32);
  for (const char* tag : {"tfkeras", "keras3"}) {
    SCOPED_TRACE(tag);
    Model m = model_from_json(layers_fixture[tag]["json"].dump());
    std::vector<std::string> classes;
    for (auto& l : m.layers()) classes.push_back(l->class_name());
    EXPECT_THAT(classes, ::testing::ElementsAre("ReLU", "ReLU", "LeakyReLU", "ELU", "Activation",
                                                "Activation", "Softmax"));
    EXPECT_EQ(m.layers()[1]->activation().max_value, 2.5);
    EXPECT_NEAR(m.layers()[1]->activation().threshold, 0.3, 1e-7);
    EXPECT_NEAR(m.layers()[2]->activation().alpha, 0.1, 1e-7);
    EXPECT_EQ(m.layers()[5]->activation(), Activation::silu);
    auto want = layers_fixture[tag]["outputs"].get<std::vector<double>>();
    Tensor got = m.predict(input);
    EXPECT_LE(normalised_max_error(got, Tensor::from_vector(want, got.shape())), 1e-5);
    // Written again (tf.keras's keys) and read back: the same layers and outputs.
    Model back = model_from_json(m.to_json());
    EXPECT_EQ(back.to_json(), m.to_json());
    EXPECT_LE(normalised_max_error(back.predict(input), got), 0.0);
  }
}

TEST(KerasActivationLayers, BadParametersAndUnwritableActivationsFailClearly) {
  EXPECT_THAT(error_of([] { layers::ReLU({.max_value = -1}); }), HasSubstr("max_value must be >= 0"));
  EXPECT_THAT(error_of([] { layers::ReLU({.negative_slope = -0.1}); }),
              HasSubstr("negative_slope must be >= 0"));
  EXPECT_THAT(error_of([] { layers::LeakyReLU(-1); }), HasSubstr("negative_slope must be >= 0"));
  Activation gelu_tanh = Activation::gelu;
  gelu_tanh.approximate = true;
  auto in = layers::Input({3});
  Model m(in, layers::Activation(gelu_tanh)(in));
  EXPECT_THAT(error_of([&] { m.to_json(); }),
              HasSubstr("gelu with non-default parameters has no Keras config"));
}

// Softmax over other axes than the last, as Keras 3 wrote it (tests/fixtures/keras_training/softmax_axes.keras:
// axis=1 and axis=[1, 2]; its training against Keras: tests/test_keras_training.cc): the configs written back as
// Keras wrote them; axes that do not fit are refused by name.
TEST(KerasActivationLayers, SoftmaxOverOtherAxesIsWrittenAsKerasWritesIt) {
  const std::string path =
      systolic::testing::source_dir() + "/tests/fixtures/keras_training/softmax_axes.keras";
  auto keras = keras_io::read_keras_archive_file(path).config;
  Model m = load_model(path);
  auto softmaxes = [](const json& config) {
    std::vector<json> out;
    for (auto& l : config["config"]["layers"])
      if (l["class_name"] == "Softmax") {
        json c = l["config"];
        c.erase("dtype");
        out.push_back(c);
      }
    return out;
  };
  const json ours = json::parse(m.to_json());
  ASSERT_EQ(softmaxes(keras).size(), 2u);
  EXPECT_EQ(softmaxes(ours), softmaxes(keras));
  EXPECT_EQ(softmaxes(ours)[0]["axis"], 1);
  EXPECT_EQ(softmaxes(ours)[1]["axis"], json::array({1, 2}));
  auto with_axis = [&](const json& axis) {
    return systolic::testing::error_with_layer_changed(keras, "Softmax",
                                                       [&](json& l) { l["config"]["axis"] = axis; });
  };
  EXPECT_THAT(with_axis(0), HasSubstr("batch axis"));
  EXPECT_THAT(with_axis(3), HasSubstr("out of range"));
  EXPECT_THAT(with_axis("steps"), HasSubstr("expected an int or a list of ints"));
  EXPECT_THAT(with_axis(json::array()), HasSubstr("expected an int or a list of ints"));
  EXPECT_THAT(with_axis(json::array({1, 1})), HasSubstr("twice"));
}

}  // namespace

// The host's float tanh (ops/activation_math.h: a polynomial below |x| = 0.55, exp above) within 2 ulp of tanh over
// [-12, 12] in steps of 2^-14 and across the branch point; signed zeros, infinities and NaN as tanhf gives them.
TEST(KerasActivations, HostFloatTanhIsWithinTwoUlp) {
  double worst = 0;
  auto check = [&](float x) {
    const float y = systolic::ops::activation::tanh_(x);
    const double want = std::tanh(double(x));
    const float near = float(want);
    const double ulp = double(std::nextafter(std::fabs(near), INFINITY)) - std::fabs(near);
    worst = std::max(worst, std::fabs(double(y) - want) / ulp);
  };
  for (int i = -12 * 16384; i <= 12 * 16384; ++i) check(float(i) / 16384.0f);
  for (float x = 0.549f; x < 0.551f; x = std::nextafter(x, 1.0f)) {
    check(x);
    check(-x);
  }
  for (float x = 1e-30f; x < 1e-2f; x *= 1.37f) check(x);
  std::printf("host float tanh: worst error %.3f ulp\n", worst);
  EXPECT_LE(worst, 2.0);
  EXPECT_TRUE(std::signbit(systolic::ops::activation::tanh_(-0.0f)));
  EXPECT_EQ(systolic::ops::activation::tanh_(0.0f), 0.0f);
  EXPECT_EQ(systolic::ops::activation::tanh_(INFINITY), 1.0f);
  EXPECT_EQ(systolic::ops::activation::tanh_(-INFINITY), -1.0f);
  EXPECT_TRUE(std::isnan(systolic::ops::activation::tanh_(NAN)));
}
