// The norm area's layers against real Keras 3 (tests/reference/norm_layers.py wrote tests/fixtures/norm_layers):
// models saved by Keras 3.15 (model.save, legacy HDF5) load into systolic and predict what Keras predicted; each
// model's JSON survives a round trip (systolic's to_json read back gives the same predictions); the config
// readers refuse what systolic does not run, by name; dropout's noise shapes drop whole samples or channels;
// Normalization.adapt() computes Keras's statistics and its count is written as Keras's int64.
#include <gmock/gmock.h>
#include <systolic/systolic.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "io/hdf5.h"
#include "layers/config.h"
#include "saving/keras_zip.h"
#include "test_util.h"

namespace sy = systolic;
using systolic::testing::error_of;
using systolic::testing::random_tensor;
using systolic::testing::read_floats;
using systolic::testing::source_dir;
using ::testing::HasSubstr;

namespace {

std::string fixtures() {
  return source_dir() + "/tests/fixtures/norm_layers";
}

// max |got - want| / max(1, |want|) over the elements.
double max_rel_error(const sy::Tensor& got, const sy::Tensor& want) {
  auto a = got.to_doubles(), b = want.to_doubles();
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i)
    m = std::max(m, std::abs(a[i] - b[i]) / std::max(1.0, std::abs(b[i])));
  return m;
}

nlohmann::json manifest() {
  std::ifstream in(fixtures() + "/manifest.json");
  return nlohmann::json::parse(in);
}

sy::Shape shape_of(const nlohmann::json& j) {
  return sy::Shape(j.get<std::vector<std::int64_t>>());
}

class KerasNormModels : public ::testing::TestWithParam<std::string> {};

TEST_P(KerasNormModels, LoadAndPredictAsKeras) {
  const std::string name = GetParam();
  auto m = manifest()["models"][name];
  sy::Tensor x = read_floats(fixtures() + "/" + name + ".inputs.bin", shape_of(m["input"]));
  sy::Tensor want = read_floats(fixtures() + "/" + name + ".predictions.bin", shape_of(m["output"]));
  auto model = sy::load_model(fixtures() + "/" + name + ".h5");
  EXPECT_LT(max_rel_error(model.predict(x), want), 1e-5);
  // The JSON systolic writes reads back into the same model (weights copied by position).
  auto again = sy::model_from_json(model.to_json());
  auto from = model.layers(), to = again.layers();
  ASSERT_EQ(from.size(), to.size());
  for (std::size_t i = 0; i < from.size(); ++i) {
    ASSERT_EQ(from[i]->weights().size(), to[i]->weights().size()) << from[i]->name();
    for (std::size_t k = 0; k < from[i]->weights().size(); ++k)
      to[i]->weights()[k].value.copy_from(from[i]->weights()[k].value);
  }
  EXPECT_EQ(again.to_json(), model.to_json());
  EXPECT_LT(max_rel_error(again.predict(x), want), 1e-5);
}
// Each norm layer's own options as systolic writes them equal Keras's (the common keys name, trainable, dtype
// aside).
TEST_P(KerasNormModels, LayerConfigsAsKeras) {
  const std::string name = GetParam();
  std::ifstream in(fixtures() + "/" + name + ".keras3.json");
  auto keras = nlohmann::json::parse(in)["config"]["layers"];
  auto mine =
      nlohmann::json::parse(sy::load_model(fixtures() + "/" + name + ".h5").to_json())["config"]["layers"];
  ASSERT_EQ(keras.size(), mine.size());
  for (std::size_t i = 0; i < keras.size(); ++i) {
    auto want = keras[i]["config"], got = mine[i]["config"];
    EXPECT_EQ(keras[i]["class_name"], mine[i]["class_name"]);
    // The norm area's layers (the others' configs are checked with their own tests).
    const std::set<std::string> others = {"InputLayer", "Dense", "GlobalAveragePooling2D", "Flatten",
                                          "Concatenate"};
    if (others.count(keras[i]["class_name"].get<std::string>())) continue;
    for (auto* k : {"name", "trainable", "dtype"}) {
      want.erase(k);
      got.erase(k);
    }
    EXPECT_EQ(got, want) << keras[i]["class_name"];
  }
}
INSTANTIATE_TEST_SUITE_P(NormLayers, KerasNormModels,
                         ::testing::Values("layer_norms", "normalizations", "merges", "axes_norms"));

// The model over non-trailing axes also loads from the .keras Keras wrote (Keras 3's own weight layout).
TEST(NormLayers, AxesModelFromKerasZip) {
  auto m = manifest()["models"]["axes_norms"];
  sy::Tensor x = read_floats(fixtures() + "/axes_norms.inputs.bin", shape_of(m["input"]));
  sy::Tensor want = read_floats(fixtures() + "/axes_norms.predictions.bin", shape_of(m["output"]));
  auto model = sy::load_model(fixtures() + "/axes_norms.keras");
  EXPECT_LT(max_rel_error(model.predict(x), want), 1e-5);
  // Keras's weight shapes: input_shape[d] for d in sorted(axis), negative axes first.
  EXPECT_EQ(model.get_layer("layer_normalization_2")->weights()[0].value.shape(), sy::Shape({6, 3}));
  EXPECT_EQ(model.get_layer("layer_normalization_3")->weights()[0].value.shape(), sy::Shape({3, 4}));
  EXPECT_EQ(model.get_layer("normalization")->weights()[0].value.shape(), sy::Shape({3}));
}

// Normalization.adapt(data) gives Keras's statistics (np.mean / np.var over every axis but the kept ones) and
// leaves count at 0, as Keras 3 does; it builds the layer for the data's shape.
TEST(NormLayers, AdaptAsKeras) {
  auto a = manifest()["adapt"];
  sy::Tensor data = read_floats(fixtures() + "/adapt.data.bin", shape_of(a["data"]));
  for (auto& c : a["cases"]) {
    SCOPED_TRACE(c.dump());
    sy::layers::NormalizationOptions o;
    if (c["axis"].is_null())
      o.axis = std::nullopt;
    else if (c["axis"].is_number())
      o.axis = std::vector<int>{c["axis"].get<int>()};
    else
      o.axis = c["axis"].get<std::vector<int>>();
    auto layer = sy::layers::Normalization(o);
    layer->adapt(data);
    ASSERT_TRUE(layer->built());
    sy::Shape shape = shape_of(c["shape"]);
    const std::string base = fixtures() + "/" + c["file"].get<std::string>();
    auto& w = layer->weights();
    ASSERT_EQ(w.size(), 3u);
    EXPECT_EQ(w[0].value.shape(), shape);
    EXPECT_LT(max_rel_error(w[0].value, read_floats(base + ".mean.bin", shape)), 1e-6);
    EXPECT_LT(max_rel_error(w[1].value, read_floats(base + ".variance.bin", shape)), 1e-6);
    EXPECT_EQ(w[2].value.item(), c["count"].get<double>());
    // The adapted layer normalises the data to mean 0 and variance 1 over the reduced axes.
    auto in = sy::layers::Input({3, 4, 5});
    auto model = sy::Model(in, layer(in));
    auto y = model.predict(data).to_doubles();
    double mean = 0, sq = 0;
    for (double v : y) mean += v, sq += v * v;
    EXPECT_NEAR(mean / double(y.size()), 0.0, 1e-5);
    EXPECT_NEAR(sq / double(y.size()), 1.0, 1e-4);
  }
  // Data of another kept shape, a layer with given statistics, a layer without adapt() are refused by name.
  auto layer = sy::layers::Normalization();
  layer->adapt(data);
  EXPECT_THAT(error_of([&] { layer->adapt(sy::Tensor({2, 3, 4, 6})); }), HasSubstr("built for input shape"));
  sy::layers::NormalizationOptions given;
  given.mean = std::vector<double>{1.0};
  given.variance = std::vector<double>{2.0};
  EXPECT_THAT(error_of([&] { sy::layers::Normalization(given)->adapt(data); }), HasSubstr("given mean"));
  EXPECT_THAT(error_of([&] {
                sy::layers::Normalization()->adapt(sy::Tensor({0, 4}));
              }),
              HasSubstr("non-empty"));
  EXPECT_THAT(error_of([&] { sy::layers::Dense(3)->adapt(data); }), HasSubstr("has no adapt()"));
}

// Normalization's count is an int64 variable in Keras (3 and tf.keras): systolic writes it as int64 in the legacy
// .h5, the Keras 3 .weights.h5 and the .keras it saves, and reads it back.
TEST(NormLayers, NormalizationCountIsWrittenAsInt64) {
  auto model = sy::load_model(fixtures() + "/normalizations.h5");
  sy::testing::TempDir dir;
  const std::string h5 = dir.file("n.h5"), weights = dir.file("n.weights.h5"), zip = dir.file("n.keras");
  model.save(h5);
  model.save_weights(weights);
  model.save(zip);
  auto archive = sy::keras_io::read_keras_archive_file(zip);
  struct Where {
    sy::hdf5::ReadGroup file;
    std::string group, count, mean;
  };
  for (auto& w :
       {Where{sy::hdf5::read_file(h5), "model_weights/normalization_1/normalization_1", "count:0", "mean:0"},
        Where{sy::hdf5::read_file(weights), "layers/normalization_1/vars", "2", "0"},
        Where{sy::hdf5::read_image(archive.weights.data(), archive.weights.size(), "n.keras"),
              "layers/normalization_1/vars", "2", "0"}}) {
    SCOPED_TRACE(w.file.where());
    auto g = w.file.group(w.group);
    EXPECT_TRUE(g.dataset_is_integer(w.count));
    EXPECT_FALSE(g.dataset_is_integer(w.mean));  // the statistics stay float32
    EXPECT_EQ(g.read_scalar(w.count), 10.0);
  }
  // What Keras itself wrote: Keras 3's legacy .h5 and its .keras hold an int64 count too.
  EXPECT_TRUE(sy::hdf5::read_file(fixtures() + "/normalizations.h5")
                  .group("model_weights/normalization_1/normalization_1")
                  .dataset_is_integer("count"));
  auto keras_zip = sy::keras_io::read_keras_archive_file(fixtures() + "/axes_norms.keras");
  EXPECT_TRUE(sy::hdf5::read_image(keras_zip.weights.data(), keras_zip.weights.size(), "axes_norms.keras")
                  .group("layers/normalization/vars")
                  .dataset_is_integer("2"));
  auto back = sy::load_model(h5);
  EXPECT_EQ(back.get_layer("normalization_1")->weights()[2].value.item(), 10.0);
}

TEST(NormLayers, NormalizationWeightsAreMeanVarianceCount) {
  auto model = sy::load_model(fixtures() + "/normalizations.h5");
  auto layer = model.get_layer("normalization_1");
  ASSERT_EQ(layer->weights().size(), 3u);
  EXPECT_EQ(layer->weights()[0].name, "mean");
  EXPECT_EQ(layer->weights()[1].name, "variance");
  EXPECT_EQ(layer->weights()[2].name, "count");
  EXPECT_EQ(layer->weights()[2].value.item(), 10.0);  // int64 in Keras's file
  EXPECT_EQ(model.get_layer("normalization_2")->weights()[0].value.shape(), sy::Shape({4, 6}));
}

TEST(NormLayers, ConfigReadersRefuseWhatSystolicDoesNotRun) {
  using sy::layers::layer_from_config;
  // LayerNormalization reads Keras's regularizers (L2 works); an unknown class is refused by name.
  nlohmann::ordered_json c = {{"name", "ln"}, {"axis", -1}, {"gamma_regularizer", {{"class_name", "L3"}}}};
  EXPECT_THAT(error_of([&] { layer_from_config("LayerNormalization", c); }), HasSubstr("gamma_regularizer"));
  // Axes Keras cannot build: the batch axis, one out of range, one twice (LayerNormalization, UnitNormalization,
  // Normalization alike).
  auto in = sy::layers::Input({3, 4});
  for (auto* cls : {"LayerNormalization", "UnitNormalization", "Normalization"})
    for (auto axis :
         {nlohmann::ordered_json(0), nlohmann::ordered_json(3), nlohmann::ordered_json({1, -2})}) {
      SCOPED_TRACE(std::string(cls) + " axis " + axis.dump());
      c = {{"name", "n"}, {"axis", axis}};
      auto layer = sy::LayerRef(layer_from_config(cls, c));
      EXPECT_THAT(error_of([&] { layer(in); }), HasSubstr("axis"));
    }
  c = {{"name", "n"}, {"axis", -1}, {"mean", {1.0, 2.0}}, {"variance", nullptr}};
  EXPECT_THAT(error_of([&] { layer_from_config("Normalization", c); }), HasSubstr("variance"));
  c = {{"name", "n"}, {"axis", -1}, {"mean", {{1.0}, {2.0, 3.0}}}, {"variance", 1.0}};
  EXPECT_THAT(error_of([&] { layer_from_config("Normalization", c); }), HasSubstr("rectangular"));
  c = {{"name", "n"}, {"axis", -1}, {"mean", {1.0, 2.0, 3.0}}, {"variance", {1.0, 2.0, 3.0}}};
  auto three = sy::LayerRef(layer_from_config("Normalization", c));
  EXPECT_THAT(error_of([&] { three(in); }), HasSubstr("does not broadcast"));
  c = {{"name", "s"}, {"rate", 0.1}, {"data_format", "channels_first"}};
  EXPECT_THAT(error_of([&] { layer_from_config("SpatialDropout2D", c); }), HasSubstr("data_format"));
  c = {{"name", "p"}, {"dims", {1, 1}}};
  EXPECT_THAT(error_of([&] { layer_from_config("Permute", c); }), HasSubstr("permutation"));
  c = {{"name", "r"}, {"target_shape", {-1, -1}}};
  EXPECT_THAT(error_of([&] { layer_from_config("Reshape", c); }), HasSubstr("more than one -1"));
  auto a = sy::layers::Input({3, 4}), b = sy::layers::Input({2, 4});
  EXPECT_THAT(error_of([&] { sy::layers::Multiply()({a, b}); }), HasSubstr("do not broadcast"));
}

// A training forward of Dropout(noise_shape [null, 1, 1, 1]) keeps or drops whole samples; SpatialDropout2D whole
// channels of a sample (as SpatialDropout1D does of a sequence (12, 5)); survivors are scaled by 1/(1-rate).
TEST(NormLayers, DropoutNoiseShapes) {
  auto check = [](sy::LayerRef layer, bool per_channel, sy::Shape sample = {3, 4, 5}) {
    auto in = sy::layers::Input(sample);
    layer(in);
    sy::Tensor x = sy::Tensor::full(sample.with_batch(16), 1.0);
    sy::TrainingStep step;
    sy::LayerCall c;
    c.inputs = {x};
    c.output = sy::Tensor(x.shape());
    c.training = &step;
    layer->call_forward(c);
    auto y = c.output.to_doubles();
    int dropped = 0, kept = 0;
    for (std::int64_t n = 0; n < 16; ++n)
      for (std::int64_t ch = 0; ch < (per_channel ? 5 : 1); ++ch) {
        std::set<double> values;
        for (std::int64_t i = 0; i < 12; ++i)
          for (std::int64_t k = 0; k < (per_channel ? 1 : 5); ++k)
            values.insert(y[n * 60 + i * 5 + (per_channel ? ch : k)]);
        ASSERT_EQ(values.size(), 1u) << "sample " << n << " channel " << ch;
        double v = *values.begin();
        EXPECT_TRUE(v == 0.0 || std::abs(v - 2.0) < 1e-6) << v;
        (v == 0.0 ? dropped : kept)++;
      }
    EXPECT_GT(dropped, 0);
    EXPECT_GT(kept, 0);
    // Backward redraws the same mask.
    c.doutput = sy::Tensor::full(x.shape(), 1.0);
    c.dinputs = {sy::Tensor(x.shape())};
    layer->call_backward(c, false);
    EXPECT_EQ(c.dinputs[0].to_doubles(), y);
  };
  sy::layers::DropoutOptions o;
  o.noise_shape = std::vector<std::optional<std::int64_t>>{std::nullopt, 1, 1, 1};
  check(sy::layers::Dropout(0.5, o), false);
  check(sy::layers::SpatialDropout2D(0.5), true);
  check(sy::layers::SpatialDropout1D(0.5), true, {12, 5});
}

}  // namespace
