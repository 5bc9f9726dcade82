// Writes systolic's own Keras files for the models in tests/fixtures/keras, for tests/reference/keras_files.py
// (`check`) to load into real Keras. Usage: keras_export FIXTURE_DIR OUT_DIR
//
// For each model (seed, zoo): systolic builds it from the tf.keras JSON, loads the tf.keras weights, and writes
// <name>.systolic.json (to_json), .h5 (legacy save_weights), .weights.h5 (Keras 3 save_weights),
// .predictions.bin (its predictions on the fixture inputs), and, after 3 Adam steps, .full.h5 (save) with
// .full.predictions.bin, .keras (save as a Keras 3 zip) and .save.weights.h5 (save with a weights-only name).
// With --nested, the nested models for tests/reference/nested_models.py (`check`) instead; with --multi-output,
// the models of several inputs and outputs for tests/reference/multi_output.py (`check`).
#include <systolic/systolic.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "multi_output_fixture.h"

namespace sy = systolic;

static sy::Tensor read_floats(const std::string& path, sy::Shape shape) {
  sy::Tensor t(shape);
  std::ifstream in(path, std::ios::binary);
  if (!in.read(reinterpret_cast<char*>(t.data<float>()), static_cast<std::streamsize>(t.nbytes())))
    sy::fail("{}: cannot read {} floats", path, t.numel());
  return t;
}

static void write_floats(const std::string& path, const sy::Tensor& t) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(t.data<float>()), static_cast<std::streamsize>(t.nbytes()));
  if (!out) sy::fail("{}: cannot write", path);
}

// --nested: the nested models of tests/fixtures (nested/multi.keras: several outputs, a model called twice;
// transfer/nested.keras3.h5: a Functional holding a Sequential), each written as <name>.systolic.keras3.h5 (save's
// default, for Keras 3), .tfkeras.h5 and .tfkeras.json (for tf.keras), .keras, .weights.legacy.h5 (save_weights,
// tf.keras's layout), with .predictions.bin.
static int export_nested(const std::string& fixtures, const std::string& out) {
  struct Case {
    const char *name, *file, *inputs;
    sy::Shape shape;
  };
  for (auto& c : {Case{"multi", "/nested/multi.keras", "/nested/multi.inputs.bin", {4, 6, 6, 2}},
                  Case{"nested", "/transfer/nested.keras3.h5", "/transfer/inputs.bin", {4, 8, 8, 3}}}) {
    auto model = sy::load_model(fixtures + c.file, {.compile = false});
    std::string dst = out + "/" + c.name + ".systolic.";
    write_floats(dst + "predictions.bin", model.predict(read_floats(fixtures + c.inputs, c.shape)));
    model.save(dst + "keras3.h5");
    model.save(dst + "tfkeras.h5", {.keras = sy::KerasTarget::tf_keras});
    std::ofstream(dst + "tfkeras.json") << model.to_json(-1, sy::KerasTarget::tf_keras);
    model.save(dst + "keras");
    model.save_weights(dst + "weights.legacy.h5");
    std::printf("%s: wrote %s{keras3.h5,tfkeras.h5,tfkeras.json,keras,weights.legacy.h5,predictions.bin}\n",
                c.name, dst.c_str());
  }
  return 0;
}

// --multi-output: each case of tests/fixtures/multi_output loaded, fitted as its fixture records Keras's fit, saved
// as <case>.keras, and its evaluate on the case's test arrays (a dict by log name) in results.json; two_outputs
// also evaluated with the sample weights ws (as two_outputs_weighted, the same file).
static int export_multi_output(const std::string& fixtures, const std::string& out) {
  std::ifstream in(fixtures + "/expected.json");
  const auto expected = nlohmann::json::parse(in);
  nlohmann::json results = nlohmann::json::object();
  for (const char* name : {"two_outputs", "two_inputs", "list_losses", "shared_loss", "more_of_keras"}) {
    const auto& want = expected[name];
    auto a = sy::npy::load_npz(fixtures + "/" + name + ".npz");
    auto arrays = [&](const nlohmann::json& names) { return sy::testing::npz_arrays(a, names); };
    sy::Model m = sy::load_model(fixtures + "/" + name + ".keras");
    sy::testing::fit_as_keras(m, a, want["fit"]);
    m.save(out + "/" + name + ".keras");
    const sy::Arrays xs = arrays(want["test"]["x"]), ys = arrays(want["test"]["y"]);
    auto dict = [&](const std::vector<double>& values) {
      nlohmann::json d = nlohmann::json::object();
      const auto names = m.metrics_names();
      for (std::size_t i = 0; i < names.size(); ++i) d[names[i]] = values[i];
      return d;
    };
    results[name] = {{"data", name}, {"evaluate", dict(m.evaluate(xs, ys, {.batch_size = 8, .verbose = 0}))}};
    if (a.count("ws"))
      results[std::string(name) + "_weighted"] = {
          {"data", name},
          {"file", name},
          {"sample_weight", "ws"},
          {"evaluate",
           dict(m.evaluate(xs, ys, {.batch_size = 8, .verbose = 0, .sample_weight = a.at("ws")}))}};
    std::printf("%s: wrote %s/%s.keras\n", name, out.c_str(), name);
  }
  std::ofstream(out + "/results.json") << results.dump(1) << "\n";
  return 0;
}

int main(int argc, char** argv) try {
  if (argc == 4 && std::string(argv[1]) == "--nested") return export_nested(argv[2], argv[3]);
  if (argc == 4 && std::string(argv[1]) == "--multi-output") return export_multi_output(argv[2], argv[3]);
  if (argc != 3) {
    std::fprintf(stderr,
                 "usage: keras_export FIXTURE_DIR OUT_DIR | keras_export --nested FIXTURES_ROOT OUT_DIR | "
                 "keras_export --multi-output MULTI_OUTPUT_FIXTURES OUT_DIR\n");
    return 2;
  }
  std::string in = argv[1], out = argv[2];
  struct Case {
    const char* name;
    sy::Shape shape;
  };
  for (auto& c : {Case{"seed", {4, 8, 8, 3}}, Case{"zoo", {4, 9, 9, 2}}}) {
    std::string base = in + "/" + c.name, dst = out + "/" + c.name + ".systolic.";
    auto model = sy::model_from_json_file(base + ".tfkeras.json");
    model.load_weights(base + ".tfkeras.h5");
    auto x = read_floats(base + ".inputs.bin", c.shape);
    write_floats(dst + "predictions.bin", model.predict(x));
    std::ofstream(dst + "json") << model.to_json();
    model.save_weights(dst + "h5");
    model.save_weights(dst + "weights.h5");
    model.compile("adam", "sparse_categorical_crossentropy", {"accuracy"});
    std::vector<float> labels = {0, 1, 2, 3};
    auto y = sy::Tensor::from_vector(labels, {4});
    for (int i = 0; i < 3; ++i) model.train_on_batch(x, y);
    model.save(dst + "full.h5");
    model.save(dst + "keras");
    model.save(dst +
               "save.weights.h5");  // save() with a .weights.h5 name: the weights alone (the CLI's --save)
    write_floats(dst + "full.predictions.bin", model.predict(x));
    std::printf("%s: wrote %s{json,h5,weights.h5,full.h5,keras,save.weights.h5}\n", c.name, dst.c_str());
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "keras_export: error: %s\n", e.what());
  return 1;
}
