// The keras.applications families, each built by Keras 3 at 96x96x3 with 10 logit outputs, against Keras's own
// outputs (tests/reference/applications.py, tests/fixtures/applications): systolic reads the model's Keras JSON,
// recomputes the fixture's formula weights (randomised batch-norm statistics included) and predicts two images;
// every output must be within a relative 1e-4 of Keras's largest output.
#include <systolic/systolic.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "test_util.h"
#include "xla_test_util.h"

namespace sy = systolic;
using systolic::testing::read_text;
using systolic::testing::source_dir;

namespace {

using json = nlohmann::json;

// The fixture's formula (tests/reference/applications.py): u(stream, i) = (splitmix64(stream * 2^40 + i) >> 11)
// * 2^-53, in [0, 1).
double uniform01(std::uint64_t stream, std::uint64_t i) {
  std::uint64_t z = (stream << 40) + i + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return double(z >> 11) * 0x1p-53;
}

// The layer of that name, in the model or in a model nested in it.
sy::Layer* find_in(const std::shared_ptr<sy::Layer>& layer, const std::string& name) {
  if (layer->name() == name) return layer.get();
  for (auto& s : layer->sublayers())
    if (auto* found = find_in(s, name)) return found;
  return nullptr;
}
sy::Layer* find_layer(const sy::Model& model, const std::string& name) {
  for (auto& l : model.layers())
    if (auto* found = find_in(l.get(), name)) return found;
  return nullptr;
}

std::string fixture_path(const std::string& family) {
  return source_dir() + "/tests/fixtures/applications/" + family + ".json";
}

class Applications : public ::testing::TestWithParam<std::string> {};

// The family's model with the fixture's weights, the two images it predicts, and Keras's outputs for them.
struct Fixture {
  sy::Model model;
  sy::Tensor x;
  std::vector<double> want;
};

Fixture load_fixture(const std::string& family) {
  json f = json::parse(read_text(fixture_path(family)));
  EXPECT_EQ(f["family"], family);
  sy::clear_session();
  sy::Model model = sy::model_from_json(f["config"].dump());

  // The fixture's weights, by layer name and position among the layer's weights (Keras's order).
  for (auto& e : f["weights"]) {
    const std::string layer_name = e["layer"], weight_name = e["name"];
    sy::Layer* layer = find_layer(model, layer_name);
    SYSTOLIC_CHECK(layer, "{}: no layer {}", family, layer_name);
    const std::size_t index = e["index"];
    SYSTOLIC_CHECK(index < layer->weights().size(), "{}: {} has no weight {}", family, layer_name,
                   weight_name);
    // Keras's files match weights by position too; names may differ (Keras 3 calls DepthwiseConv2D's kernel
    // "kernel", tf.keras and systolic "depthwise_kernel").
    sy::Weight* weight = &layer->weights()[index];
    sy::Shape shape(e["shape"].get<std::vector<std::int64_t>>());
    SYSTOLIC_CHECK(weight->value.shape() == shape && weight->value.dtype() == sy::DType::float32,
                   "{}: {}/{} is {} {}, the fixture's {}", family, layer_name, weight_name,
                   weight->value.shape().str(), sy::dtype_name(weight->value.dtype()), shape.str());
    const std::uint64_t stream = e["stream"];
    const double offset = e["offset"], scale = e["scale"];
    float* p = weight->value.data<float>();
    for (std::int64_t i = 0; i < weight->value.numel(); ++i)
      p[i] = float(offset + scale * (2.0 * uniform01(stream, std::uint64_t(i)) - 1.0));
  }

  auto hwc = f["input_shape"].get<std::vector<std::int64_t>>();
  sy::Tensor x({2, hwc[0], hwc[1], hwc[2]});
  float* xp = x.data<float>();
  for (std::int64_t i = 0; i < x.numel(); ++i)
    xp[i] = float(std::floor(256.0 * uniform01(0, std::uint64_t(i))));
  std::vector<double> want;
  for (auto& row : f["outputs"])
    for (auto& v : row) want.push_back(v.get<double>());
  return {model, x, want};
}

// The largest |got - want| over the largest |want|.
double relative_difference(const std::vector<double>& got, const std::vector<double>& want) {
  EXPECT_EQ(got.size(), want.size());
  double largest = 0, worst = 0;
  for (double v : want) largest = std::max(largest, std::abs(v));
  for (std::size_t i = 0; i < want.size() && i < got.size(); ++i)
    worst = std::max(worst, std::abs(got[i] - want[i]));
  return worst / largest;
}

TEST_P(Applications, PredictsAsKeras) {
  const std::string family = GetParam();
  Fixture fx = load_fixture(family);
  sy::Model& model = fx.model;
  const sy::Tensor& x = fx.x;
  const std::vector<double>& want = fx.want;

  sy::Tensor y = model.predict(x);
  auto got = y.to_doubles();
  ASSERT_EQ(got.size(), want.size());
  double largest = 0, worst = 0;
  for (double v : want) largest = std::max(largest, std::abs(v));
  for (std::size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
  EXPECT_LE(worst, 1e-4 * largest) << family << ": largest |difference| " << worst << ", largest |output| "
                                   << largest;
  RecordProperty("relative_difference", std::to_string(worst / largest));

  // What systolic writes, Keras's layout (nested models, Keras 3's operation nodes and all), reads back to the
  // same model: a full-model .h5 saved and loaded predicts the same bits.
  systolic::testing::TempDir dir;
  const std::string path = (dir.path() / (family + ".h5")).string();
  model.save(path);
  sy::clear_session();
  sy::Model again = sy::load_model(path, {.compile = false});
  auto again_y = again.predict(x).to_doubles();
  ASSERT_EQ(again_y.size(), got.size());
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_EQ(again_y[i], got[i]) << family << " output " << i;
  std::printf("%s: largest |difference| %.3g = %.3g of the largest output %.4g\n", family.c_str(), worst,
              worst / largest, largest);
}

INSTANTIATE_TEST_SUITE_P(Keras3, Applications,
                         ::testing::Values("ResNet50", "ResNet50V2", "MobileNetV2", "MobileNetV3Small",
                                           "EfficientNetB0", "EfficientNetV2B0", "DenseNet121", "VGG16",
                                           "Xception", "InceptionV3", "NASNetMobile", "ConvNeXtTiny"),
                         [](const auto& info) { return info.param; });

// The same models on xla:cpu (the CPU PJRT plugin: predict is one XLA program per batch size) predict as on the
// CPU, within 1e-4 of the largest output, and as Keras. The suite runs three families (about 12 s on 2 cores,
// compiling included); scripts/xla-applications runs all twelve (about 70 s: the other nine are DISABLED_ here, to
// keep scripts/test's time down).
class ApplicationsOnXla : public ::testing::TestWithParam<std::string> {};

TEST_P(ApplicationsOnXla, PredictsAsOnTheCpu) {
  SYSTOLIC_REQUIRE_XLA();
  const std::string family = GetParam();
  Fixture fx = load_fixture(family);
  auto on_cpu = fx.model.predict(fx.x).to_doubles();
  auto t0 = std::chrono::steady_clock::now();
  sy::Model on_xla =
      sy::to_accelerator(fx.model, sy::distribute::OneDeviceStrategy(systolic::testing::xla_cpu()));
  auto got = on_xla.predict(fx.x).to_doubles();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  auto t1 = std::chrono::steady_clock::now();
  auto again = on_xla.predict(fx.x).to_doubles();
  double again_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  EXPECT_EQ(again, got) << family << ": a second predict on xla:cpu differs";
  const double vs_cpu = relative_difference(got, on_cpu), vs_keras = relative_difference(got, fx.want);
  EXPECT_LE(vs_cpu, 1e-4) << family << " on xla:cpu vs the CPU";
  EXPECT_LE(vs_keras, 1e-4) << family << " on xla:cpu vs Keras";
  std::printf(
      "%s on xla:cpu: %.3g of the largest output from the CPU's, %.3g from Keras's; first predict %.1f s "
      "(compiling), second %.3f s\n",
      family.c_str(), vs_cpu, vs_keras, seconds, again_seconds);
}

INSTANTIATE_TEST_SUITE_P(Xla, ApplicationsOnXla,
                         ::testing::Values("ResNet50", "MobileNetV2", "EfficientNetB0"),
                         [](const auto& info) { return info.param; });
INSTANTIATE_TEST_SUITE_P(DISABLED_Xla, ApplicationsOnXla,
                         ::testing::Values("ResNet50V2", "MobileNetV3Small", "EfficientNetV2B0",
                                           "DenseNet121", "VGG16", "Xception", "InceptionV3", "NASNetMobile",
                                           "ConvNeXtTiny"),
                         [](const auto& info) { return info.param; });

}  // namespace
