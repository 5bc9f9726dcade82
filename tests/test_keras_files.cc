// Keras files: weights (legacy .h5 and Keras 3 .weights.h5), full models, model JSON. Fixtures written by real
// Keras (tests/reference/keras_files.py, tests/fixtures/keras) and a real Keras 2.0.3 weights file
// (../shared/data/keras); round trips of what systolic writes; and the error paths.
#include <hdf5.h>
#include <systolic/image.h>
#include <systolic/systolic.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/hdf5.h"
#include "small_model.h"
#include "test_util.h"

namespace sy = systolic;
namespace fs = std::filesystem;
using systolic::testing::error_of;
using systolic::testing::max_abs_diff;
using systolic::testing::read_floats;
using systolic::testing::read_text;
using systolic::testing::shared_data_dir;
using systolic::testing::small_model;
using systolic::testing::source_dir;
using systolic::testing::TempDir;

namespace {

std::string fixtures() {
  return source_dir() + "/tests/fixtures/keras";
}

struct Fixture {
  const char* name;
  sy::Shape input;  // with the batch
};
const Fixture kSeed{"seed", {4, 8, 8, 3}};
const Fixture kZoo{"zoo", {4, 9, 9, 2}};

sy::Tensor inputs(const Fixture& f) {
  return read_floats(fixtures() + "/" + f.name + ".inputs.bin", f.input);
}

// Puts non-trivial values in the BN moving statistics (they are not trainable, so training alone is slow).
void perturb_all_weights(sy::Model& m, std::uint64_t seed) {
  for (auto& l : m.layers())
    for (auto& w : l->weights()) {
      auto r = systolic::testing::random_tensor(w.value.shape(), seed++, sy::DType::float32, 0.5, 1.5);
      w.value.copy_from(r);
    }
}

}  // namespace

// ---- real files -----------------------------------------------------------------------------------------------

TEST(KerasFiles, RealKeras2WeightsReproduceExpectedProbabilities) {
  auto shared = shared_data_dir();
  if (shared.empty())
    GTEST_SKIP() << "../shared/data is absent: the real Keras 2.0.3 weights file is not here";
  auto model = sy::model_from_json_file(fixtures() + "/keras2-cifar10-cnn.json");
  model.load_weights(shared + "/keras/keras2-cifar10-cnn.h5");
  sy::Tensor x({200, 32, 32, 3});
  for (int i = 0; i < 200; ++i) {
    auto img = sy::image::read(shared + "/cifar10-sample/" + std::to_string(i + 1) + ".png", 3);
    ASSERT_EQ(img.shape(), (sy::Shape{32, 32, 3}));
    for (int j = 0; j < 3072; ++j) x.data<float>()[i * 3072 + j] = img.data<std::uint8_t>()[j] / 255.0f;
  }
  auto y = model.predict(x);
  std::ifstream csv(shared + "/keras/keras2-cifar10-cnn.expected.csv");
  std::string line;
  std::getline(csv, line);
  double worst = 0;
  int rows = 0, same_class = 0;
  for (int i = 0; i < 200 && std::getline(csv, line); ++i, ++rows) {
    std::stringstream ss(line);
    std::string cell;
    std::getline(ss, cell, ',');
    EXPECT_EQ(cell, std::to_string(i + 1) + ".png");
    int best = 0;
    for (int k = 0; k < 10; ++k) {
      std::getline(ss, cell, ',');
      double p = y.data<float>()[i * 10 + k];
      worst = std::max(worst, std::abs(std::stod(cell) - p));
      if (p > y.data<float>()[i * 10 + best]) best = k;
    }
    std::getline(ss, cell, ',');
    static const char* names[] = {"airplane", "automobile", "bird",  "cat",  "deer",
                                  "dog",      "frog",       "horse", "ship", "truck"};
    same_class += cell == names[best];
  }
  EXPECT_EQ(rows, 200);
  EXPECT_LT(worst, 1e-4) << "worst probability difference";
  EXPECT_EQ(same_class, 200) << "argmax classes that match the expected file";
  std::printf("real Keras 2.0.3 file: worst |p - expected| = %.3g over 200 images\n", worst);
}

// ---- fixtures written by real Keras ------------------------------------------------------------------------

TEST(KerasFiles, KerasJsonAndWeightsGiveKerasPredictions) {
  for (auto& f : {kSeed, kZoo}) {
    auto want = read_floats(fixtures() + "/" + f.name + ".predictions.bin",
                            {f.input[0], f.name == kSeed.name ? 10 : 5});
    for (const char* json : {"tfkeras", "keras3"})
      for (const char* weights : {"tfkeras.h5", "keras3.weights.h5"}) {
        SCOPED_TRACE(std::string(f.name) + "." + json + ".json + " + weights);
        auto model = sy::model_from_json_file(fixtures() + "/" + f.name + "." + json + ".json");
        model.load_weights(fixtures() + "/" + f.name + "." + weights);
        EXPECT_LT(max_abs_diff(model.predict(inputs(f)), want), 1e-5);
      }
  }
}

TEST(KerasFiles, KerasFullModelsLoadCompiledWithOptimizerState) {
  auto manifest = nlohmann::json::parse(read_text(fixtures() + "/manifest.json"));
  for (auto& f : {kSeed, kZoo}) {
    for (const char* tag : {"tfkeras", "keras3"}) {
      SCOPED_TRACE(std::string(f.name) + "." + tag + ".full.h5");
      auto model = sy::load_model(fixtures() + "/" + f.name + "." + tag + ".full.h5");
      auto want = read_floats(fixtures() + "/" + f.name + "." + tag + ".full.predictions.bin",
                              {f.input[0], f.name == kSeed.name ? 10 : 5});
      EXPECT_LT(max_abs_diff(model.predict(inputs(f)), want), 1e-5);
      ASSERT_TRUE(model.compiled());
      EXPECT_EQ(model.optimizer().name(), "Adam");
      EXPECT_NEAR(model.optimizer().learning_rate(), 0.001, 1e-9);
      EXPECT_EQ(model.optimizer().iterations(),
                static_cast<int>(manifest["models"][f.name]["optimizer_iterations"][tag]));
      ASSERT_EQ(model.optimizer().slots().size(), 2u);
      // Three Adam steps leave non-zero first and second moments.
      double m = 0;
      for (double v : model.optimizer().slots()[1].second.to_doubles()) m = std::max(m, std::abs(v));
      EXPECT_GT(m, 0.0);
      EXPECT_EQ(model.loss().name(), "sparse_categorical_crossentropy");
      EXPECT_EQ(model.metrics_names(), (std::vector<std::string>{"loss", "accuracy"}));
    }
  }
}

TEST(KerasFiles, SeedCnnJsonFromBothKerasVersionsMatchesTheBuiltin) {
  auto builtin = sy::models::seed_cnn({32, 32, 3}, 10);
  for (const char* tag : {"tfkeras", "keras3"}) {
    SCOPED_TRACE(tag);
    auto model = sy::model_from_json_file(fixtures() + "/seed32." + tag + ".json");
    EXPECT_EQ(model.count_params(), 1676982);
    ASSERT_EQ(model.layers().size(), builtin.layers().size());
    for (std::size_t i = 0; i < model.layers().size(); ++i) {
      EXPECT_EQ(model.layers()[i]->class_name(), builtin.layers()[i]->class_name());
      EXPECT_EQ(model.layers()[i]->count_params(), builtin.layers()[i]->count_params());
    }
    EXPECT_FALSE(model.is_sequential());
  }
}

TEST(KerasFiles, SequentialJsonFromBothKerasVersions) {
  for (const char* tag : {"tfkeras", "keras3"}) {
    SCOPED_TRACE(tag);
    auto model = sy::model_from_json_file(fixtures() + "/seq." + tag + ".json");
    EXPECT_TRUE(model.is_sequential());
    ASSERT_EQ(model.layers().size(), 3u);  // Sequential's layers omit the InputLayer
    EXPECT_EQ(model.layers()[0]->class_name(), "Conv2D");
    EXPECT_EQ(model.inputs()[0].shape(), (sy::Shape{6, 6, 1}));
    EXPECT_EQ(model.outputs()[0].shape(), (sy::Shape{2}));
  }
}

// ---- systolic's own files: round trips ----------------------------------------------------------------------

TEST(KerasFiles, WeightsRoundTripInBothLayouts) {
  TempDir tmp;
  auto x = systolic::testing::random_tensor({5, 6, 6, 2}, 3);
  for (const char* file : {"w.h5", "w.hdf5", "w.weights.h5"}) {
    SCOPED_TRACE(file);
    auto a = small_model(1);
    perturb_all_weights(a, 10);
    a.save_weights(tmp.file(file));
    auto b = small_model(2);  // other initial weights
    EXPECT_GT(max_abs_diff(a.predict(x), b.predict(x)), 1e-3);
    b.load_weights(tmp.file(file));
    EXPECT_EQ(max_abs_diff(a.predict(x), b.predict(x)), 0.0);
    for (std::size_t i = 0; i < a.layers().size(); ++i)
      for (std::size_t j = 0; j < a.layers()[i]->weights().size(); ++j)
        EXPECT_EQ(max_abs_diff(a.layers()[i]->weights()[j].value, b.layers()[i]->weights()[j].value), 0.0);
  }
  // Files from systolic's legacy layout: one group per layer (weightless ones too), datasets at layer/layer/w:0.
  auto root = sy::hdf5::read_file(tmp.file("w.h5"));
  auto names = root.string_list_attribute("layer_names");
  ASSERT_EQ(names.size(), 6u);  // functional: the InputLayer is listed
  EXPECT_TRUE(root.has_dataset(names[1] + "/" + names[1] + "/kernel:0"));
  EXPECT_EQ(root.group(names[3]).string_list_attribute("weight_names").size(), 0u);  // max_pooling2d
  auto k3 = sy::hdf5::read_file(tmp.file("w.weights.h5"));
  EXPECT_TRUE(k3.has_dataset("layers/batch_normalization/vars/3"));
}

TEST(KerasFiles, JsonRoundTripRebuildsTheSameModel) {
  for (bool sequential : {false, true}) {
    SCOPED_TRACE(sequential ? "Sequential" : "Functional");
    namespace L = sy::layers;
    sy::Model a = sequential
                      ? sy::Sequential({L::Input({8, 8, 3}), L::ZeroPadding2D(1),
                                        L::Conv2D(4, {3, 3}, {.strides = {2, 2}, .activation = "relu"}),
                                        L::AveragePooling2D({2, 2}, {.padding = "same"}), L::Flatten(),
                                        L::Dropout(0.3, {.seed = 7}), L::Dense(3, {.use_bias = false})})
                      : small_model(4);
    auto text = a.to_json();
    auto b = sy::model_from_json(text);
    EXPECT_EQ(b.to_json(), text);  // the rebuilt model serialises identically (names, options, graph)
    EXPECT_EQ(b.is_sequential(), sequential);
    EXPECT_EQ(b.count_params(), a.count_params());
  }
}

TEST(KerasFiles, FullModelRoundTripResumesTrainingExactly) {
  TempDir tmp;
  auto x = systolic::testing::random_tensor({8, 6, 6, 2}, 5);
  auto y = sy::Tensor::from_vector(std::vector<float>{0, 1, 2, 3, 0, 1, 2, 3}, {8});
  auto a = small_model(1);
  a.compile(sy::optimizers::Adam(0.01), "sparse_categorical_crossentropy", {"accuracy"});
  for (int i = 0; i < 3; ++i) a.train_on_batch(x, y);
  a.save(tmp.file("m.h5"));
  auto b = sy::load_model(tmp.file("m.h5"));
  EXPECT_EQ(b.optimizer().iterations(), 3);
  EXPECT_EQ(max_abs_diff(a.predict(x), b.predict(x)), 0.0);
  // The same two further steps on both: identical weights only if the optimizer state (m, v, t) was restored.
  for (int i = 0; i < 2; ++i) {
    auto la = a.train_on_batch(x, y), lb = b.train_on_batch(x, y);
    EXPECT_EQ(la[0], lb[0]);
  }
  EXPECT_EQ(max_abs_diff(a.trainable_parameters(), b.trainable_parameters()), 0.0);

  // A fresh optimizer would not give the same weights (so the check above can fail).
  auto c = sy::load_model(tmp.file("m.h5"), {.compile = false});
  c.compile(sy::optimizers::Adam(0.01), "sparse_categorical_crossentropy");
  for (int i = 0; i < 2; ++i) c.train_on_batch(x, y);
  EXPECT_GT(max_abs_diff(a.trainable_parameters(), c.trainable_parameters()), 1e-6);
}

TEST(KerasFiles, SgdAndRmspropStateRoundTrip) {
  TempDir tmp;
  auto x = systolic::testing::random_tensor({4, 6, 6, 2}, 6);
  auto y = sy::Tensor::from_vector(std::vector<float>{0, 1, 2, 3}, {4});
  for (int which = 0; which < 2; ++which) {
    auto a = small_model(1);
    if (which == 0)
      a.compile(sy::optimizers::SGD(0.05, 0.9, true), "sparse_categorical_crossentropy");
    else
      a.compile(sy::optimizers::RMSprop(0.01, 0.8, 0.5), "sparse_categorical_crossentropy");
    a.train_on_batch(x, y);
    a.save(tmp.file("m.h5"));
    auto b = sy::load_model(tmp.file("m.h5"));
    EXPECT_EQ(b.optimizer().name(), a.optimizer().name());
    a.train_on_batch(x, y);
    b.train_on_batch(x, y);
    EXPECT_EQ(max_abs_diff(a.trainable_parameters(), b.trainable_parameters()), 0.0) << a.optimizer().name();
  }
}

TEST(KerasFiles, LoadByNameAndSkipMismatch) {
  TempDir tmp;
  namespace L = sy::layers;
  auto make = [](int units, const std::string& dense_name) {
    auto in = L::Input({4});
    auto x = L::Dense(3, {.name = "shared"})(in);
    auto out = L::Dense(units, {.name = dense_name})(x);
    return sy::Model(in, out);
  };
  auto a = make(2, "head");
  perturb_all_weights(a, 1);
  a.save_weights(tmp.file("a.h5"));
  auto b = make(2, "other");  // same shapes, one name differs
  b.load_weights(tmp.file("a.h5"), {.by_name = true});
  EXPECT_EQ(
      max_abs_diff(b.get_layer("shared")->weights()[0].value, a.get_layer("shared")->weights()[0].value),
      0.0);
  EXPECT_GT(max_abs_diff(b.get_layer("other")->weights()[0].value, a.get_layer("head")->weights()[0].value),
            1e-3);
  auto c = make(5, "head");  // same names, the head's shape differs
  auto err = error_of([&] { c.load_weights(tmp.file("a.h5"), {.by_name = true}); });
  EXPECT_NE(err.find("'head'"), std::string::npos) << err;
  EXPECT_NE(err.find("(3, 5)"), std::string::npos) << err;
  EXPECT_NE(err.find("(3, 2)"), std::string::npos) << err;
  c.load_weights(tmp.file("a.h5"), {.by_name = true, .skip_mismatch = true});
  EXPECT_EQ(
      max_abs_diff(c.get_layer("shared")->weights()[0].value, a.get_layer("shared")->weights()[0].value),
      0.0);
}

TEST(KerasFiles, WritesAreAtomic) {
  TempDir tmp;
  auto a = small_model(1);
  a.save_weights(tmp.file("w.h5"));
  auto before = read_text(tmp.file("w.h5"));
  // A failed save (two layers with one name: HDF5 cannot create the second group) leaves the old file and no
  // temporary file.
  namespace L = sy::layers;
  auto in = L::Input({2});
  auto bad = sy::Model(in, L::Dense(1, {.name = "twin"})(L::Dense(2, {.name = "twin"})(in)));
  EXPECT_THROW(bad.save_weights(tmp.file("w.h5")), sy::Error);
  EXPECT_EQ(read_text(tmp.file("w.h5")), before);
  int files = 0;
  for ([[maybe_unused]] auto& e : fs::directory_iterator(tmp.path())) ++files;
  EXPECT_EQ(files, 1) << "a temporary file was left behind";
  auto err = error_of([&] { a.save_weights(tmp.file("no/such/dir/w.h5")); });
  EXPECT_NE(err.find("does not exist"), std::string::npos) << err;
  err = error_of([&] { a.save_weights(tmp.file("w.txt")); });
  EXPECT_NE(err.find(".weights.h5"), std::string::npos) << err;
}

// ---- strings in every form h5py and Keras write, and chunked attributes --------------------------------------

namespace {
// Writes an attribute with raw HDF5 calls: fixed or variable length, ASCII or UTF-8.
void write_strings(hid_t loc, const char* name, const std::vector<std::string>& values, bool variable,
                   bool utf8) {
  hid_t type = H5Tcopy(H5T_C_S1);
  std::size_t size = 1;
  for (auto& v : values) size = std::max(size, v.size());
  H5Tset_size(type, variable ? H5T_VARIABLE : size);
  H5Tset_strpad(type, variable ? H5T_STR_NULLTERM : H5T_STR_NULLPAD);
  H5Tset_cset(type, utf8 ? H5T_CSET_UTF8 : H5T_CSET_ASCII);
  hsize_t dims[1] = {values.size()};
  hid_t space = H5Screate_simple(1, dims, nullptr);
  if (H5Aexists(loc, name) > 0) H5Adelete(loc, name);
  hid_t attr = H5Acreate2(loc, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
  if (variable) {
    std::vector<const char*> p;
    for (auto& v : values) p.push_back(v.c_str());
    H5Awrite(attr, type, p.data());
  } else {
    std::vector<char> buf(size * values.size(), '\0');
    for (std::size_t i = 0; i < values.size(); ++i)
      std::copy(values[i].begin(), values[i].end(), buf.begin() + i * size);
    H5Awrite(attr, type, buf.data());
  }
  H5Aclose(attr);
  H5Sclose(space);
  H5Tclose(type);
}
}  // namespace

TEST(KerasFiles, ReadsEveryStringFormAndChunkedLayerNames) {
  TempDir tmp;
  auto a = small_model(1);
  perturb_all_weights(a, 3);
  a.save_weights(tmp.file("w.h5"));
  auto written = sy::hdf5::read_file(tmp.file("w.h5"));
  auto layer_names = written.string_list_attribute("layer_names");
  auto x = systolic::testing::random_tensor({2, 6, 6, 2}, 9);
  int form = 0;
  for (bool variable : {false, true})
    for (bool utf8 : {false, true}) {
      SCOPED_TRACE(std::string(variable ? "variable" : "fixed") + (utf8 ? " UTF-8" : " ASCII"));
      auto path = tmp.file(("f" + std::to_string(form++)) + ".h5");
      fs::copy_file(tmp.file("w.h5"), path);
      hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
      ASSERT_GE(f, 0);
      H5Adelete(f, "layer_names");
      // Chunked as Keras splits long attributes: layer_names0, layer_names1.
      std::vector<std::string> first(layer_names.begin(), layer_names.begin() + 2),
          rest(layer_names.begin() + 2, layer_names.end());
      write_strings(f, "layer_names0", first, variable, utf8);
      write_strings(f, "layer_names1", rest, variable, utf8);
      for (auto& l : layer_names) {
        hid_t g = H5Gopen2(f, l.c_str(), H5P_DEFAULT);
        auto ws = written.group(l).string_list_attribute("weight_names");
        if (!ws.empty()) write_strings(g, "weight_names", ws, variable, utf8);
        H5Gclose(g);
      }
      H5Fclose(f);
      auto b = small_model(2);
      b.load_weights(path);
      EXPECT_EQ(max_abs_diff(a.predict(x), b.predict(x)), 0.0);
    }
}

// ---- bad input ----------------------------------------------------------------------------------------------------

TEST(KerasFiles, BadFilesGiveClearErrors) {
  TempDir tmp;
  auto model = small_model(1);
  model.save_weights(tmp.file("good.h5"));

  std::ofstream(tmp.file("text.h5")) << "this is not HDF5\n";
  auto err = error_of([&] { model.load_weights(tmp.file("text.h5")); });
  EXPECT_NE(err.find("not an HDF5 file"), std::string::npos) << err;
  EXPECT_NE(err.find("text.h5"), std::string::npos) << err;

  err = error_of([&] { model.load_weights(tmp.file("missing.h5")); });
  EXPECT_NE(err.find("no such file"), std::string::npos) << err;

  // Truncated at several points: never a crash, always an error naming the file.
  auto bytes = read_text(tmp.file("good.h5"));
  for (double frac : {0.1, 0.5, 0.9}) {
    auto path = tmp.file(("trunc" + std::to_string(int(frac * 10))) + ".h5");
    std::ofstream(path, std::ios::binary)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size() * frac));
    err = error_of([&] { model.load_weights(path); });
    EXPECT_NE(err.find(path), std::string::npos) << err;
  }

  // Corrupt bytes in the middle (the data of the dense kernel, or metadata): an error or identical-shape
  // garbage values, never a crash. Flip every byte of a window well inside the file.
  auto corrupt = bytes;
  for (std::size_t i = corrupt.size() / 3; i < corrupt.size() / 3 + 512; ++i)
    corrupt[i] = static_cast<char>(~corrupt[i]);
  std::ofstream(tmp.file("corrupt.h5"), std::ios::binary)
      .write(corrupt.data(), static_cast<std::streamsize>(corrupt.size()));
  try {
    model.load_weights(tmp.file("corrupt.h5"));
  } catch (const sy::Error& e) {
    EXPECT_NE(std::string(e.what()).find("corrupt.h5"), std::string::npos) << e.what();
  }

  // Wrong layer count: the fixture's zoo weights into this model.
  err = error_of([&] { model.load_weights(fixtures() + "/zoo.tfkeras.h5"); });
  EXPECT_NE(err.find("layers with weights"), std::string::npos) << err;

  // Wrong shape: the same architecture with another input size (the dense kernel differs).
  namespace L = sy::layers;
  auto in = L::Input({8, 8, 2});
  auto x = L::Conv2D(3, {3, 3}, {.padding = "same", .activation = "relu"})(in);
  x = L::BatchNormalization()(x);
  x = L::MaxPooling2D()(x);
  x = L::Flatten()(x);
  sy::Model other(in, L::Dense(4, {.activation = "softmax"})(x));
  err = error_of([&] { other.load_weights(tmp.file("good.h5")); });
  EXPECT_NE(err.find("(48, 4)"), std::string::npos) << err;  // the model's kernel
  EXPECT_NE(err.find("(27, 4)"), std::string::npos) << err;  // the file's
  // The layer's index in model.layers, as in errors about .weights.h5 and .keras files.
  EXPECT_NE(err.find("layer #5 'dense"), std::string::npos) << err;

  // Missing dataset: delete the dense kernel from a copy.
  fs::copy_file(tmp.file("good.h5"), tmp.file("nodata.h5"));
  std::string dense = model.layers().back()->name();
  hid_t f = H5Fopen((tmp.file("nodata.h5")).c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(H5Ldelete(f, (dense + "/" + dense + "/kernel:0").c_str(), H5P_DEFAULT), 0);
  H5Fclose(f);
  err = error_of([&] { model.load_weights(tmp.file("nodata.h5")); });
  EXPECT_NE(err.find("missing dataset"), std::string::npos) << err;
  EXPECT_NE(err.find("kernel:0"), std::string::npos) << err;

  // A weights file is not a full model, and a full model without weights is refused.
  err = error_of([&] { sy::load_model(tmp.file("good.h5")); });
  EXPECT_NE(err.find("weights only"), std::string::npos) << err;

  // Keras 3 layout with a missing layer group.
  model.save_weights(tmp.file("k3.weights.h5"));
  f = H5Fopen((tmp.file("k3.weights.h5")).c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(H5Ldelete(f, "layers/dense", H5P_DEFAULT), 0);
  H5Fclose(f);
  err = error_of([&] { model.load_weights(tmp.file("k3.weights.h5")); });
  EXPECT_NE(err.find("layers/dense/vars"), std::string::npos) << err;
}

TEST(KerasFiles, BadJsonGivesClearErrors) {
  auto text = read_text(fixtures() + "/zoo.tfkeras.json");
  auto err = error_of([&] { sy::model_from_json(text.substr(0, text.size() / 2)); });
  EXPECT_NE(err.find("not valid JSON"), std::string::npos) << err;

  auto j = nlohmann::json::parse(text);
  auto with = [&](auto&& edit) {
    auto c = j;
    edit(c);
    return error_of([&] { sy::model_from_json(c.dump()); });
  };
  auto& layers = j["config"]["layers"];
  int conv = 0;
  while (layers[conv]["class_name"] != "Conv2D") ++conv;
  err = with([&](auto& c) { c["config"]["layers"][conv]["class_name"] = "ConvLSTM2D"; });
  EXPECT_NE(err.find("unknown layer class 'ConvLSTM2D'"), std::string::npos) << err;
  err = with([&](auto& c) {
    c["config"]["layers"][conv]["config"]["kernel_regularizer"] = {{"class_name", "L3"}};
  });
  EXPECT_NE(err.find("kernel_regularizer"), std::string::npos) << err;
  EXPECT_NE(err.find(static_cast<std::string>(layers[conv]["config"]["name"])), std::string::npos) << err;
  err = with([&](auto& c) { c["config"]["layers"][conv]["config"]["data_format"] = "channels_first"; });
  EXPECT_NE(err.find("data_format"), std::string::npos) << err;
  err = with([&](auto& c) { c["config"]["layers"][conv]["config"]["bogus_option"] = 1; });
  EXPECT_NE(err.find("unsupported option 'bogus_option'"), std::string::npos) << err;
  // An activation systolic does not run (sparsemax; gelu and the other Keras activations load).
  err = with([&](auto& c) { c["config"]["layers"][conv]["config"]["activation"] = "sparsemax"; });
  EXPECT_NE(err.find("unknown activation 'sparsemax' (known: linear, relu"), std::string::npos) << err;
  // trainable=false loads (a frozen layer, tests/test_transfer.cc); a value that is not a boolean does not.
  err = with([&](auto& c) { c["config"]["layers"][conv]["config"]["trainable"] = "no"; });
  EXPECT_NE(err.find("option 'trainable': expected true or false"), std::string::npos) << err;
  err = with([&](auto& c) { c["config"]["layers"][conv]["inbound_nodes"][0][0][0] = "nowhere"; });
  EXPECT_NE(err.find("'nowhere'"), std::string::npos) << err;
  err = with([&](auto& c) { c["class_name"] = "Subclassed"; });
  EXPECT_NE(err.find("'Subclassed'"), std::string::npos) << err;
  err = with([&](auto& c) { c["config"]["layers"][conv]["config"]["filters"] = "many"; });
  EXPECT_NE(err.find("filters"), std::string::npos) << err;
}
