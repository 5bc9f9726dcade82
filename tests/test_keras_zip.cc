// Keras 3 `.keras` files: fixtures written by real Keras 3 (tests/reference/keras_zip.py, tests/fixtures/
// keras_zip) load, predict and resume training; systolic's own .keras round-trip; save picks the format from the
// name; bad archives give clear one-line errors.
#include <archive_entry.h>
#include <systolic/systolic.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/text.h"
#include "io/hdf5.h"
#include "local_http.h"
#include "saving/keras_zip.h"
#include "small_model.h"
#include "test_util.h"

namespace sy = systolic;
using systolic::testing::ArchiveEntry;
using systolic::testing::ArchiveFormat;
using systolic::testing::error_of;
using systolic::testing::make_archive;
using systolic::testing::max_abs_diff;
using systolic::testing::read_floats;
using systolic::testing::read_text;
using systolic::testing::small_model;
using systolic::testing::source_dir;
using systolic::testing::TempDir;

namespace {

std::string fixture(const std::string& name) {
  return source_dir() + "/tests/fixtures/keras_zip/" + name;
}

// A zip with the given members (a test input), written to `path`.
void write_zip(const std::string& path, const std::vector<ArchiveEntry>& members) {
  std::ofstream(path, std::ios::binary) << make_archive(members, ArchiveFormat::zip);
}

}  // namespace

TEST(KerasZip, Keras3FilesLoadAndPredict) {
  struct Case {
    const char* name;
    sy::Shape input, output;
  };
  for (auto& c : {Case{"seed", {4, 8, 8, 3}, {4, 10}}, Case{"nested", {4, 6, 6, 1}, {4, 2}},
                  Case{"adam", {4, 6, 6, 2}, {4, 3}}}) {
    SCOPED_TRACE(c.name);
    auto model = sy::load_model(fixture(std::string(c.name) + ".keras"));
    auto x = read_floats(fixture(std::string(c.name) + ".inputs.bin"), c.input);
    auto want = read_floats(fixture(std::string(c.name) + ".predictions.bin"), c.output);
    auto got = model.predict(x);
    ASSERT_EQ(got.shape(), want.shape());
    EXPECT_LE(max_abs_diff(got, want), 1e-5);
    EXPECT_TRUE(model.compiled() == (std::string(c.name) != "nested"));
  }
}

TEST(KerasZip, Keras3AdamStateResumesTrainingAsKerasDoes) {
  auto model = sy::load_model(fixture("adam.keras"));
  ASSERT_TRUE(model.compiled());
  EXPECT_EQ(model.optimizer().name(), "Adam");
  EXPECT_NEAR(model.optimizer().learning_rate(), 0.01, 1e-9);
  EXPECT_EQ(model.optimizer().iterations(), 2);
  auto x = read_floats(fixture("adam.inputs.bin"), {4, 6, 6, 2});
  auto y = read_floats(fixture("adam.labels.bin"), {4});
  auto manifest = nlohmann::json::parse(read_text(fixture("manifest.json")));
  auto loss = model.train_on_batch(x, y);
  EXPECT_NEAR(loss[0], manifest["models"]["adam"]["step_loss"].get<double>(), 1e-5);
  auto want = read_floats(fixture("adam.after_step.predictions.bin"), {4, 3});
  // Adam divides by sqrt(v), which magnifies float rounding differences in the gradients: 1e-4, not 1e-5.
  double restored = max_abs_diff(model.predict(x), want);
  EXPECT_LE(restored, 1e-4);

  // With a fresh optimizer the step lands elsewhere (so the check above can fail).
  auto fresh = sy::load_model(fixture("adam.keras"), {.compile = false});
  fresh.compile(sy::optimizers::Adam(0.01), "sparse_categorical_crossentropy");
  fresh.train_on_batch(x, y);
  EXPECT_GT(max_abs_diff(fresh.predict(x), want), 100 * std::max(restored, 1e-7));
}

TEST(KerasZip, RoundTripResumesTrainingExactly) {
  TempDir tmp;
  auto x = systolic::testing::random_tensor({8, 6, 6, 2}, 5);
  auto y = sy::Tensor::from_vector(std::vector<float>{0, 1, 2, 3, 0, 1, 2, 3}, {8});
  auto a = small_model(1);
  a.save(tmp.file("plain.keras"));  // not compiled: no compile_config, no optimizer
  auto p = sy::load_model(tmp.file("plain.keras"));
  EXPECT_FALSE(p.compiled());
  EXPECT_EQ(max_abs_diff(a.predict(x), p.predict(x)), 0.0);

  a.compile(sy::optimizers::Adam(0.01), "sparse_categorical_crossentropy", {"accuracy"});
  for (int i = 0; i < 3; ++i) a.train_on_batch(x, y);
  a.save(tmp.file("m.keras"));
  EXPECT_TRUE(sy::is_keras_zip(tmp.file("m.keras")));
  auto b = sy::load_model(tmp.file("m.keras"));
  EXPECT_EQ(b.optimizer().iterations(), 3);
  EXPECT_EQ(b.metrics_names(), a.metrics_names());
  EXPECT_EQ(max_abs_diff(a.predict(x), b.predict(x)), 0.0);
  for (int i = 0; i < 2; ++i) EXPECT_EQ(a.train_on_batch(x, y)[0], b.train_on_batch(x, y)[0]);
  EXPECT_EQ(max_abs_diff(a.trainable_parameters(), b.trainable_parameters()), 0.0);

  // The members are Keras 3's: config.json with compile_config, metadata.json with keras_version.
  auto k = sy::keras_io::read_keras_archive_file(tmp.file("m.keras"));
  EXPECT_EQ(k.config["class_name"], "Functional");
  EXPECT_EQ(k.config["compile_config"]["optimizer"]["class_name"], "Adam");
  EXPECT_EQ(k.config["compile_config"]["metrics"], nlohmann::ordered_json::array({"accuracy"}));
  EXPECT_TRUE(k.metadata.contains("keras_version"));
}

TEST(KerasZip, SaveChoosesTheFormatFromTheName) {
  TempDir tmp;
  auto x = systolic::testing::random_tensor({2, 6, 6, 2}, 3);
  auto a = small_model(1);
  a.compile("adam", "sparse_categorical_crossentropy", {"accuracy"});
  a.save(tmp.file("w.weights.h5"));  // weights only, Keras 3's layout
  auto err = error_of([&] { sy::load_model(tmp.file("w.weights.h5")); });
  EXPECT_NE(err.find("holds weights only"), std::string::npos) << err;
  auto b = small_model(2);
  b.load_weights(tmp.file("w.weights.h5"));
  EXPECT_EQ(max_abs_diff(a.predict(x), b.predict(x)), 0.0);
  a.save(tmp.file("m.h5"));
  EXPECT_FALSE(sy::is_keras_zip(tmp.file("m.h5")));
  {
    // The metric as a Keras metric object of the class "accuracy" resolved to (tf_keras reads a bare
    // "accuracy" as categorical accuracy; tests/reference/keras_zip.py check evaluates such a file in tf_keras).
    auto tc =
        nlohmann::json::parse(sy::hdf5::read_file(tmp.file("m.h5")).string_attribute("training_config"));
    EXPECT_EQ(tc["metrics"][0]["class_name"], "SparseCategoricalAccuracy") << tc["metrics"].dump();
    EXPECT_EQ(tc["metrics"][0]["config"]["name"], "accuracy");
  }
  auto reloaded = sy::load_model(tmp.file("m.h5"));
  EXPECT_EQ(reloaded.metrics_names(), a.metrics_names());
  err = error_of([&] { a.save(tmp.file("m.zip")); });
  EXPECT_NE(err.find(".keras"), std::string::npos) << err;
  err = error_of([&] { a.save_weights(tmp.file("m.keras")); });
  EXPECT_NE(err.find("whole model"), std::string::npos) << err;
}

TEST(KerasZip, BadArchivesGiveClearErrors) {
  TempDir tmp;
  auto good = sy::keras_io::read_keras_archive_file(fixture("nested.keras"));
  std::string config = good.config.dump(), metadata = good.metadata.dump();
  std::string weights(good.weights.begin(), good.weights.end());
  auto expect = [&](const std::string& file, const std::string& needle) {
    auto err = error_of([&] { sy::load_model(tmp.file(file)); });
    EXPECT_NE(err.find(needle), std::string::npos) << file << ": " << err;
    EXPECT_NE(err.find(file), std::string::npos) << err;
    EXPECT_EQ(err.find('\n'), std::string::npos) << err;
  };
  write_zip(tmp.file("ok.keras"),
            {{"config.json", config}, {"metadata.json", metadata}, {"model.weights.h5", weights}});
  EXPECT_NO_THROW(sy::load_model(tmp.file("ok.keras")));

  write_zip(tmp.file("noweights.keras"), {{"config.json", config}, {"metadata.json", metadata}});
  expect("noweights.keras", "has no model.weights.h5");
  write_zip(tmp.file("path.keras"),
            {{"config.json", config}, {"../metadata.json", metadata}, {"model.weights.h5", weights}});
  expect("path.keras", "refused zip member '../metadata.json'");
  write_zip(tmp.file("link.keras"), {{"config.json", config},
                                     {"metadata.json", "", AE_IFLNK, "/etc/passwd"},
                                     {"model.weights.h5", weights}});
  expect("link.keras", "not a regular file");
  write_zip(tmp.file("dup.keras"), {{"config.json", config},
                                    {"metadata.json", metadata},
                                    {"config.json", config},
                                    {"model.weights.h5", weights}});
  expect("dup.keras", "duplicate");
  write_zip(tmp.file("name.keras"), {{"config.json", config},
                                     {"metadata.json", metadata},
                                     {"model.weights.h5", weights},
                                     {"x\xff\x01.bin", "x"}});
  expect("name.keras", "'x\\xff\\x01.bin'");
  write_zip(tmp.file("json.keras"),
            {{"config.json", "{not json"}, {"metadata.json", metadata}, {"model.weights.h5", weights}});
  expect("json.keras", "config.json is not valid JSON");
  write_zip(tmp.file("h5.keras"),
            {{"config.json", config}, {"metadata.json", metadata}, {"model.weights.h5", "not hdf5"}});
  expect("h5.keras", "model.weights.h5: not an HDF5 file");
  write_zip(tmp.file("sharded.keras"),
            {{"config.json", config}, {"metadata.json", metadata}, {"model.weights.json", "{}"}});
  expect("sharded.keras", "sharded weights");
  // Truncated at several points: an error naming the file, never a crash.
  auto bytes = read_text(fixture("nested.keras"));
  for (double frac : {0.05, 0.5, 0.95, 0.999}) {
    std::string name = "trunc" + std::to_string(int(frac * 1000)) + ".keras";
    std::ofstream(tmp.file(name), std::ios::binary)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size() * frac));
    auto err = error_of([&] { sy::load_model(tmp.file(name)); });
    EXPECT_NE(err.find(name), std::string::npos) << name << ": " << err;
  }
  // Not a zip at all, named .keras: read as what it is.
  std::ofstream(tmp.file("text.keras")) << "hello";
  auto err = error_of([&] { sy::load_model(tmp.file("text.keras")); });
  EXPECT_NE(err.find("text.keras"), std::string::npos) << err;
}

// Keras 3 loads a .keras whose compile_config has no "optimizer" (Keras 3.15 wrote one for ResNet50 compiled with
// "adam" and saved as .h5 first) with compile's default optimizer, RMSprop with its default learning rate; the
// saved Adam state is not restored then (Keras: "Skipping variable loading for optimizer").
TEST(KerasZip, CompileConfigWithoutOptimizerCompilesWithRmspropAsKeras) {
  TempDir tmp;
  auto k = sy::keras_io::read_keras_archive_file(fixture("seed.keras"));
  k.config["compile_config"].erase("optimizer");
  write_zip(tmp.file("no_optimizer.keras"),
            {{"config.json", k.config.dump()},
             {"metadata.json", k.metadata.dump()},
             {"model.weights.h5", std::string(k.weights.begin(), k.weights.end())}});
  auto model = sy::load_model(tmp.file("no_optimizer.keras"));
  ASSERT_TRUE(model.compiled());
  EXPECT_EQ(model.optimizer().name(), "RMSprop");
  EXPECT_NEAR(model.optimizer().learning_rate(), 0.001, 1e-9);
}

TEST(KerasZip, ShapeErrorsNumberLayersAlikeInEveryFileKind) {
  TempDir tmp;
  auto a = small_model(1);  // input, conv2d, batch_normalization, max_pooling2d, flatten, dense
  a.save_weights(tmp.file("w.h5"));
  a.save_weights(tmp.file("w.weights.h5"));
  a.save(tmp.file("m.keras"));
  namespace L = sy::layers;
  auto in = L::Input({6, 6, 2});
  auto x = L::Conv2D(3, {3, 3}, {.padding = "same", .activation = "relu"})(in);
  x = L::BatchNormalization()(x);
  x = L::MaxPooling2D()(x);
  x = L::Flatten()(x);
  sy::Model b(in, L::Dense(5)(x));  // the dense kernel's shape differs
  auto index = b.layers().size() - 1;
  std::string want = "layer #" + std::to_string(index) + " 'dense";
  for (auto* f : {"w.h5", "w.weights.h5"}) {
    auto err = error_of([&] { b.load_weights(tmp.file(f)); });
    EXPECT_NE(err.find(want), std::string::npos) << f << ": " << err;
  }
}

TEST(KerasZip, NamesThatAreNotUtf8AreEscapedInErrors) {
  TempDir tmp;
  auto a = small_model(1);
  {
    sy::hdf5::Lock lock;
    auto root = sy::hdf5::create(tmp.file("bad.h5"));
    root.set_string_list_attribute("layer_names", {"conv\xff\xfe", "d\xc3\xa9nse"});
  }
  auto err = error_of([&] { a.load_weights(tmp.file("bad.h5")); });
  EXPECT_NE(err.find("conv\\xff\\xfe"), std::string::npos) << err;
  EXPECT_EQ(err.find('\xff'), std::string::npos) << err;
  EXPECT_EQ(sy::printable("d\xc3\xa9nse"), "d\xc3\xa9nse");  // valid UTF-8 is kept
  EXPECT_EQ(sy::printable("a\nb\\"), "a\\x0ab\\x5c");
  EXPECT_EQ(sy::printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate is not UTF-8
  EXPECT_EQ(sy::printable(std::string(300, 'x')).size(), 203u);
}
