// The convolution-family layers against Keras 3 (tests/reference/conv_layers.py, tests/fixtures/conv_layers):
// Conv2D groups, DepthwiseConv2D, SeparableConv2D, Cropping2D, pooling with every padding and stride,
// GlobalMaxPooling2D and keepdims, Conv2DTranspose, UpSampling2D, and the 1-D layers (Conv1D with causal padding,
// dilation and groups, MaxPooling1D, AveragePooling1D, the global 1-D poolings, ZeroPadding1D, Cropping1D,
// UpSampling1D), Embedding (ids given as floats, some fractional), and SimpleRNN, LSTM and GRU (the last output or
// every step's, go_backwards, other activations, no bias) and Bidirectional (every merge mode, a backward_layer of
// its own). Each case is a one-layer model that Keras
// saved (.h5 full model and .weights.h5), with its inputs and Keras's outputs: systolic loads both files and
// predicts the same values (1e-5 relative), builds the same weights, and writes the layer's config as Keras does;
// and the same layers saved by tf.keras.
#include <gmock/gmock.h>
#include <systolic/systolic.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/hdf5.h"
#include "layers/config.h"
#include "layers/conv_geometry.h"
#include "test_util.h"

namespace sy = systolic;
using systolic::testing::read_floats;
using systolic::testing::read_text;
using systolic::testing::source_dir;

namespace {

std::string fixtures() {
  return source_dir() + "/tests/fixtures/conv_layers";
}

sy::Shape shape_of(const nlohmann::json& j) {
  std::vector<std::int64_t> d;
  for (auto& v : j) d.push_back(v.get<std::int64_t>());
  return sy::Shape(d);
}

// max |a - b| / max(1, max |b|)
double relative_error(const sy::Tensor& a, const sy::Tensor& b) {
  return systolic::testing::normalised_max_error(a, b);
}

const nlohmann::json& manifest() {
  static const nlohmann::json m = nlohmann::json::parse(read_text(fixtures() + "/manifest.json"));
  return m;
}

// Every key of Keras's config but the dtype, which systolic writes as its name (and a nested layer's build_config,
// which Keras 3 adds to the layers a Bidirectional serialises), with the same value; a nested serialised layer
// key by key.
void expect_config_as_keras(const nlohmann::ordered_json& ours, const nlohmann::ordered_json& keras,
                            const std::string& where) {
  for (auto& [key, value] : keras.items()) {
    if (key == "dtype" || key == "build_config") continue;
    // Keras 3.15's Dense and EinsumDense write quantization_config (null); systolic leaves it out, which Keras
    // versions before it (which refuse the key) and 3.15 (null is its default) both read.
    if (key == "quantization_config" && value.is_null()) continue;
    ASSERT_TRUE(ours.contains(key)) << "systolic does not write '" << where << key << "'";
    // Initializers: the same class (Keras 3.15 adds input_axes and output_axes, null, to the config that
    // initializer_config writes for every layer).
    if (key.ends_with("_initializer")) {
      EXPECT_EQ(ours[key]["class_name"], value["class_name"]) << where << key;
      continue;
    }
    if (value.is_object() && value.contains("config") && value.contains("class_name") &&
        value.contains("module")) {
      EXPECT_EQ(ours[key]["class_name"], value["class_name"]) << where << key;
      expect_config_as_keras(ours[key]["config"], value["config"], where + key + ".");
      continue;
    }
    EXPECT_EQ(nlohmann::json(ours[key]), nlohmann::json(value)) << where << key;
  }
  for (auto& [key, value] : ours.items()) {
    // systolic's Dense writes activity_regularizer null, as tf.keras did; Keras 3 leaves it out when there is none.
    if (key == "activity_regularizer" && value.is_null()) continue;
    EXPECT_TRUE(keras.contains(key)) << "systolic writes '" << where << key << "', Keras does not";
  }
}

}  // namespace

TEST(ConvLayersKeras, FullModelH5PredictsAsKeras) {
  ASSERT_GE(manifest()["cases"].size(), 30u);
  double worst = 0;
  for (auto& c : manifest()["cases"]) {
    std::string name = c["name"];
    SCOPED_TRACE(name);
    sy::Tensor x = read_floats(fixtures() + "/" + name + ".inputs.bin", shape_of(c["input_shape"]));
    sy::Tensor want = read_floats(fixtures() + "/" + name + ".outputs.bin", shape_of(c["output_shape"]));
    auto model = sy::load_model(fixtures() + "/" + name + ".h5", {.compile = false});
    sy::Tensor got = model.predict(x);
    ASSERT_EQ(got.shape(), want.shape());
    double e = relative_error(got, want);
    EXPECT_LT(e, 1e-5);
    worst = std::max(worst, e);
  }
  std::printf("%zu cases, worst relative error %.3g\n", manifest()["cases"].size(), worst);
}

TEST(ConvLayersKeras, JsonAndKeras3WeightsPredictAsKeras) {
  double worst = 0;
  for (auto& c : manifest()["cases"]) {
    std::string name = c["name"];
    SCOPED_TRACE(name);
    sy::Tensor x = read_floats(fixtures() + "/" + name + ".inputs.bin", shape_of(c["input_shape"]));
    sy::Tensor want = read_floats(fixtures() + "/" + name + ".outputs.bin", shape_of(c["output_shape"]));
    auto model = sy::model_from_json(c["model_json"].dump());
    model.load_weights(fixtures() + "/" + name + ".weights.h5");
    double e = relative_error(model.predict(x), want);
    EXPECT_LT(e, 1e-5);
    worst = std::max(worst, e);
  }
  std::printf("%zu cases, worst relative error %.3g\n", manifest()["cases"].size(), worst);
}

// The same layers saved by tf.keras (tf.keras's configs and weight names), whose predictions equal Keras 3's.
TEST(ConvLayersKeras, TfKerasFullModelH5PredictsAsKeras) {
  double worst = 0;
  for (auto& c : manifest()["cases"]) {
    std::string name = c["name"];
    SCOPED_TRACE(name);
    sy::Tensor x = read_floats(fixtures() + "/" + name + ".inputs.bin", shape_of(c["input_shape"]));
    sy::Tensor want = read_floats(fixtures() + "/" + name + ".outputs.bin", shape_of(c["output_shape"]));
    auto model = sy::load_model(fixtures() + "/" + name + ".tfkeras.h5", {.compile = false});
    double e = relative_error(model.predict(x), want);
    EXPECT_LT(e, 1e-5);
    worst = std::max(worst, e);
  }
  std::printf("%zu cases, worst relative error %.3g\n", manifest()["cases"].size(), worst);
}

// The weights Keras made (names and shapes, in order) and the config Keras wrote (every key but the dtype,
// which systolic writes as its name), read and written back.
TEST(ConvLayersKeras, WeightsAndConfigAsKeras) {
  for (auto& c : manifest()["cases"]) {
    std::string name = c["name"];
    SCOPED_TRACE(name);
    nlohmann::ordered_json keras = nlohmann::ordered_json::parse(c["config"].dump());
    auto layer = sy::layers::layer_from_config(c["class_name"], keras);
    auto in = sy::layers::Input(shape_of(c["input_shape"]).without_batch());
    (*layer)(in);
    ASSERT_EQ(layer->weights().size(), c["weights"].size());
    for (std::size_t i = 0; i < c["weights"].size(); ++i) {
      // Keras 3 names DepthwiseConv2D's kernel variable "kernel" (so does its legacy .h5); tf.keras, whose
      // legacy layout systolic writes, names it depthwise_kernel (LegacyWeightNamesAsTfKeras).
      // The path after the layer's name: "kernel", or an RNN's "lstm_cell/kernel".
      std::string path = c["weights"][i][0], keras_name = path.substr(path.find('/') + 1);
      if ((c["class_name"] == "DepthwiseConv2D" || c["class_name"] == "DepthwiseConv1D") &&
          keras_name == "kernel")
        keras_name = "depthwise_kernel";
      // A Bidirectional's backward_layer of its own keeps its name in Keras 3's paths; tf.keras prefixes it with
      // "backward_" (as systolic names the weights).
      if (c["class_name"] == "Bidirectional" && !keras_name.starts_with("forward_") &&
          !keras_name.starts_with("backward_"))
        keras_name = "backward_" + keras_name;
      // TimeDistributed: Keras 3's paths hold the wrapped layer's name ("time_distributed/dense/kernel"), tf.keras's
      // names and systolic's do not ("time_distributed/kernel:0").
      if (c["class_name"] == "TimeDistributed") keras_name = keras_name.substr(keras_name.find('/') + 1);
      EXPECT_EQ(layer->weights()[i].name, keras_name);
      EXPECT_EQ(layer->weights()[i].value.shape(), shape_of(c["weights"][i][1])) << path;
    }
    nlohmann::ordered_json ours;
    layer->get_config(ours);
    expect_config_as_keras(ours, keras, "");
  }
}

// The legacy .h5 systolic writes is tf.keras's layout, with tf.keras's weight names: for every case, the
// weight_names of the layer's group equal those in the file tf.keras saved (DepthwiseConv2D's kernel is
// "depthwise_kernel:0" there, where Keras 3's own .h5 says "kernel"). The Keras 3 formats (.weights.h5, .keras)
// store weights by index, without names.
TEST(ConvLayersKeras, LegacyWeightNamesAsTfKeras) {
  systolic::testing::TempDir dir;
  int depthwise = 0;
  for (auto& c : manifest()["cases"]) {
    std::string name = c["name"];
    SCOPED_TRACE(name);
    // The names after the layer's own "<layer>/".
    auto names = [](const std::string& file) {
      auto g = sy::hdf5::read_file(file).group("model_weights");
      auto layer = g.string_list_attribute("layer_names").back();
      std::vector<std::string> out;
      for (auto& n : g.group(layer).string_list_attribute("weight_names"))
        out.push_back(n.substr(n.find('/') + 1));
      return out;
    };
    auto model = sy::load_model(fixtures() + "/" + name + ".h5", {.compile = false});
    const std::string mine = dir.file(name + ".h5");
    model.save(mine);
    EXPECT_EQ(names(mine), names(fixtures() + "/" + name + ".tfkeras.h5"));
    if (c["class_name"] == "DepthwiseConv2D" || c["class_name"] == "DepthwiseConv1D") {
      ++depthwise;
      EXPECT_EQ(names(mine)[0], "depthwise_kernel:0");
      EXPECT_EQ(names(fixtures() + "/" + name + ".h5")[0], "kernel");  // Keras 3's own legacy file
    }
  }
  EXPECT_GT(depthwise, 0);
}

// The geometry every convolution and pooling layer takes its padding from (layers/conv_geometry.h): TensorFlow's
// rule per axis, and a 1-D geometry running as the W axis of the 2-D ops. The values are tf.nn.conv1d's and
// conv2d's (and Keras's causal padding: k_eff - 1 zeros before).
TEST(ConvGeometry, PadsAsTensorFlow) {
  using sy::layers::pad_axis;
  using sy::layers::WindowAxis;
  auto same = pad_axis(10, WindowAxis{3, 2, 1}, "same");  // out 5, pad (5-1)*2 + 3 - 10 = 1
  EXPECT_EQ(same.out, 5);
  EXPECT_EQ(same.before, 0);
  EXPECT_EQ(same.after, 1);
  auto dilated = pad_axis(7, WindowAxis{3, 1, 2}, "same");  // k_eff 5: pad 4
  EXPECT_EQ(dilated.out, 7);
  EXPECT_EQ(dilated.before, 2);
  EXPECT_EQ(dilated.after, 2);
  EXPECT_EQ(pad_axis(10, WindowAxis{3, 2, 1}, "valid").out, 4);
  EXPECT_EQ(pad_axis(2, WindowAxis{3, 1, 1}, "valid").out, 0);  // the kernel does not fit
  auto causal = pad_axis(10, WindowAxis{3, 1, 2}, "causal");
  EXPECT_EQ(causal.out, 10);
  EXPECT_EQ(causal.before, 4);
  EXPECT_EQ(causal.after, 0);

  sy::layers::ConvGeometry g1(3, 2, 1, "same");  // a 1-D convolution over (N, L, C): (N, 1, L, C)
  auto p = g1.conv2d_params(sy::Shape{4, 10, 8}, 1, sy::Activation::relu);
  EXPECT_EQ(p.stride_h, 1);
  EXPECT_EQ(p.stride_w, 2);
  EXPECT_EQ(p.pad_top + p.pad_bottom, 0);
  EXPECT_EQ(p.pad_left, 0);
  EXPECT_EQ(p.pad_right, 1);
  EXPECT_EQ(p.activation, sy::Activation::relu);
  EXPECT_EQ(g1.output_extents(sy::Shape{10, 8})[0], 5);

  sy::layers::ConvGeometry g2({3, 1}, {1, 1}, {1, 1}, "causal");
  EXPECT_THAT(sy::testing::error_of([&] { g2.check("c"); }),
              ::testing::HasSubstr("is not 'valid' or 'same'"));
  g2.check("c", {.causal = true});
  sy::layers::ConvGeometry g3({3, 3}, {2, 2}, {2, 1}, "valid");
  EXPECT_THAT(sy::testing::error_of([&] { g3.check("c"); }),
              ::testing::HasSubstr("together with dilation_rate"));
  g3.check("c", {.strides_with_dilation = true});
}

// The 1-D layers' configs as Keras 3 writes them (SpatialDropout1D's own keys; the others are in the fixtures), and
// what they refuse, by option.
TEST(Conv1DLayers, ConfigsAndRefusals) {
  auto error_of = [](auto&& f) { return systolic::testing::error_of(f); };
  using ::testing::HasSubstr;
  nlohmann::ordered_json c = {{"rate", 0.2}, {"seed", nullptr}, {"name", "drop"}};
  auto drop = sy::layers::layer_from_config("SpatialDropout1D", c);
  (*drop)(sy::layers::Input({6, 3}));
  nlohmann::ordered_json ours;
  drop->get_config(ours);
  ours.erase("dtype");
  EXPECT_EQ(nlohmann::json(ours), nlohmann::json(c));
  EXPECT_THAT(error_of([&] {
                (*drop)(sy::layers::Input({6, 3, 2}));
              }),
              HasSubstr("expects input (steps, channels)"));
  c = {{"name", "c"}, {"filters", 2}, {"kernel_size", {3, 3}}};
  EXPECT_THAT(error_of([&] { sy::layers::layer_from_config("Conv1D", c); }),
              HasSubstr("option 'kernel_size': expected an int or a list of one int"));
  c = {{"name", "c"}, {"filters", 2}, {"kernel_size", 3}, {"padding", "full"}};
  EXPECT_THAT(error_of([&] { sy::layers::layer_from_config("Conv1D", c); }),
              HasSubstr("padding 'full' is not 'valid', 'same' or 'causal'"));
  c = {{"name", "c"}, {"filters", 2}, {"kernel_size", 3}, {"data_format", "channels_first"}};
  EXPECT_THAT(error_of([&] { sy::layers::layer_from_config("Conv1D", c); }), HasSubstr("data_format"));
  c = {{"name", "p"}, {"pool_size", 2}, {"padding", "causal"}};
  EXPECT_THAT(error_of([&] { sy::layers::layer_from_config("MaxPooling1D", c); }),
              HasSubstr("padding 'causal' is not 'valid' or 'same'"));
  c = {{"name", "g"}, {"data_format", "channels_middle"}, {"keepdims", false}};
  EXPECT_THAT(error_of([&] { sy::layers::layer_from_config("GlobalAveragePooling1D", c); }),
              HasSubstr("option 'data_format': unsupported value 'channels_middle'"));
  c = {{"name", "g"}, {"data_format", "channels_first"}, {"keepdims", false}};
  EXPECT_THAT(error_of([&] { sy::layers::layer_from_config("GlobalAveragePooling2D", c); }),
              HasSubstr("data_format"));
  EXPECT_THAT(error_of([] { sy::layers::MaxPooling1D(2, {.data_format = "NCW"}); }),
              HasSubstr("data_format must be channels_last or channels_first, got 'NCW'"));
  EXPECT_THAT(error_of([] { sy::layers::GlobalMaxPooling2D({.data_format = "channels_first"}); }),
              HasSubstr("channels_first is supported by the 1-D layers only"));
  EXPECT_THAT(error_of([] { sy::layers::Conv1DTranspose(2, 3, {.strides = 2, .output_padding = 2}); }),
              HasSubstr("output_padding 2 must be at least 0 and less than the stride 2"));
  EXPECT_THAT(
      error_of([&] {
        sy::layers::GlobalAveragePooling1D({.data_format = "channels_first"})(sy::layers::Input({5, 4, 2}));
      }),
      HasSubstr("expects input (channels, steps)"));
  auto seq = sy::layers::Input({5, 2});
  EXPECT_THAT(error_of([&] {
                sy::layers::Conv1D(3, 3)(sy::layers::Input({5, 4, 2}));
              }),
              HasSubstr("expects input (steps, channels)"));
  EXPECT_THAT(error_of([&] { sy::layers::Conv1D(3, 7)(seq); }), HasSubstr("does not fit"));
  EXPECT_THAT(error_of([&] { sy::layers::Cropping1D({3, 2})(seq); }), HasSubstr("leaves no steps"));
  EXPECT_THAT(error_of([&] { sy::layers::MaxPooling1D(6)(seq); }), HasSubstr("does not fit"));
  EXPECT_THAT(error_of([] { sy::layers::Conv1D(3, 3, {.strides = 2, .dilation_rate = 2}); }),
              HasSubstr("strides > 1 together with dilation_rate > 1"));
  EXPECT_THAT(error_of([] { sy::layers::UpSampling1D(0); }), HasSubstr("size must be positive"));
}

// A sequence classifier of the 1-D layers (Conv1D causal, pooling, global pooling) trains: its loss falls on a task
// of which shape a pulse has, wherever it sits in the sequence, and a .keras round trip predicts the same.
TEST(Conv1DLayers, ASequenceClassifierTrainsAndRoundTrips) {
  sy::set_random_seed(31);
  auto in = sy::layers::Input({16, 1});
  auto x = sy::layers::Conv1D(8, 3, {.padding = "causal", .activation = "relu"})(in);
  x = sy::layers::MaxPooling1D(2)(x);
  x = sy::layers::Conv1D(8, 3, {.padding = "same", .activation = "relu"})(x);
  x = sy::layers::GlobalMaxPooling1D()(x);
  sy::Model model(in, sy::layers::Dense(2, {.activation = "softmax"})(x));
  model.compile("adam", "sparse_categorical_crossentropy", {"accuracy"});
  // Class 0: a spike (1); class 1: a spike and its opposite (1, -1); at any of 14 places.
  const std::int64_t n = 128;
  std::vector<float> xs(n * 16, 0.f);
  std::vector<std::int32_t> ys(n);
  for (std::int64_t i = 0; i < n; ++i) {
    ys[i] = std::int32_t(i % 2);
    const std::int64_t at = i * 16 + (i / 2) % 14;
    xs[at] = 1.f;
    if (ys[i] == 1) xs[at + 1] = -1.f;
  }
  sy::Tensor X = sy::Tensor::from_vector(xs, {n, 16, 1}), Y = sy::Tensor::from_vector(ys, {n});
  auto history = model.fit(X, Y, {.batch_size = 16, .epochs = 30, .verbose = 0});
  const auto& loss = history.history.at("loss");
  EXPECT_LT(loss.back(), 0.5 * loss.front());
  EXPECT_GT(history.history.at("accuracy").back(), 0.9);
  systolic::testing::TempDir dir;
  model.save(dir.file("seq.keras"));
  auto back = sy::load_model(dir.file("seq.keras"));
  EXPECT_EQ(back.predict(X).to_doubles(), model.predict(X).to_doubles());
}
