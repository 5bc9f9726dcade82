// The `systolic` command (docs/CLI.md is the contract): summary, train, info, benchmark.
// Progress and logs go to stderr, results to stdout. Errors: one line "systolic: error: ...", exit 1 (2: usage).
#include <systolic/systolic.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <sstream>

namespace sy = systolic;

namespace {

struct Common {
  std::string model = "seed-cnn";
  std::string input_shape;
  int classes = 0;
  std::string device = "auto";
  std::uint64_t seed = 0;
  bool seed_given = false;
};

sy::Shape parse_shape(const std::string& text) {
  std::vector<std::int64_t> dims;
  std::stringstream ss(text);
  for (std::string part; std::getline(ss, part, ',');) {
    std::size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(part, &used);
    } catch (...) {
      used = 0;
    }
    SYSTOLIC_CHECK(used == part.size() && !part.empty() && v > 0, "--input-shape '{}': expected H,W,C with positive integers", text);
    dims.push_back(v);
  }
  SYSTOLIC_CHECK(dims.size() == 3, "--input-shape '{}': expected three numbers H,W,C", text);
  return sy::Shape(dims);
}

sy::Device resolve_device(const std::string& text) {
  sy::Device d = text == "auto" ? sy::default_device() : sy::Device::parse(text);
  SYSTOLIC_CHECK(sy::device_available(d), "--device {}: not available (this build of systolic has no CUDA support; use cpu)",
                 text);
  return d;
}

sy::Model make_model(const Common& c, sy::Shape default_shape, int default_classes) {
  sy::Shape shape = c.input_shape.empty() ? default_shape : parse_shape(c.input_shape);
  int classes = c.classes > 0 ? c.classes : default_classes;
  for (auto& name : sy::models::builtin_names())
    if (name == c.model) return sy::models::builtin(name, shape, classes);
  if (std::filesystem::exists(c.model))
    sy::fail("--model {}: reading Keras model files (JSON, .h5) is not supported by this version yet; built-in "
             "models: seed-cnn", c.model);
  sy::fail("--model {}: unknown model (built-in: seed-cnn)", c.model);
}

struct Data {
  sy::Tensor x_train, y_train, x_test, y_test;
  sy::Shape input_shape;
  int classes = 0;
  std::vector<std::string> class_names;
};

sy::Tensor first(const sy::Tensor& t, std::int64_t limit) {
  return limit > 0 && limit < t.dim(0) ? t.slice(0, limit) : t;
}

Data load_dataset(const std::string& name, std::int64_t limit) {
  if (name == "fashion_mnist") {
    auto d = sy::datasets::fashion_mnist::load_data();
    auto with_channel = [](const sy::Tensor& x) { return x.reshape({x.dim(0), x.dim(1), x.dim(2), 1}); };
    return {first(with_channel(d.train.x), limit), first(d.train.y, limit), first(with_channel(d.test.x), limit),
            first(d.test.y, limit), {28, 28, 1}, 10, d.class_names};
  }
  if (name == "cifar10" || name == "mnist" || name.rfind("dir:", 0) == 0)
    sy::fail("--dataset {}: not available in this version yet (available: fashion_mnist)", name);
  sy::fail("--dataset {}: unknown data set (available: fashion_mnist)", name);
}

void add_common(CLI::App* app, Common& c, bool with_model = true) {
  if (with_model)
    app->add_option("--model", c.model, "built-in model name (seed-cnn)")->capture_default_str();
  app->add_option("--input-shape", c.input_shape, "input shape H,W,C for built-in models");
  app->add_option("--classes-count", c.classes, "number of classes for built-in models")->check(CLI::PositiveNumber);
  app->add_option("--device", c.device, "auto, cpu, cuda or cuda:I")->capture_default_str();
  app->add_option_function<std::uint64_t>("--seed", [&c](std::uint64_t s) { c.seed = s, c.seed_given = true; },
                                          "random seed (repeatable runs)");
}

void apply_seed(const Common& c) {
  if (c.seed_given) sy::set_random_seed(c.seed);
}

int cmd_summary(const Common& c) {
  auto model = make_model(c, {32, 32, 3}, 10);
  std::fputs(model.summary_string().c_str(), stdout);
  return 0;
}

struct TrainArgs {
  std::string dataset;
  int epochs = 1;
  std::int64_t batch_size = 32;
  std::string optimizer = "adam";
  double lr = -1;
  double validation_split = 0;
  std::int64_t limit = 0;
  int verbose = 1;
};

int cmd_train(const Common& c, const TrainArgs& a) {
  apply_seed(c);
  resolve_device(c.device);
  Data data = load_dataset(a.dataset, a.limit);
  auto model = make_model(c, data.input_shape, data.classes);
  auto optimizer = sy::optimizers::get(a.optimizer);
  if (a.lr > 0) optimizer->set_learning_rate(a.lr);
  model.compile(*optimizer, "sparse_categorical_crossentropy", {"accuracy"});
  model.fit(data.x_train, data.y_train,
            {.batch_size = a.batch_size, .epochs = a.epochs, .verbose = a.verbose, .validation_split = a.validation_split});
  auto scores = model.evaluate(data.x_test, data.y_test, {.batch_size = a.batch_size, .verbose = 0});
  std::printf("Test loss: %.4f\nTest accuracy: %.2f%%\n", scores[0], scores[1] * 100.0);
  return 0;
}

std::string gib(std::int64_t bytes) { return fmt::format("{:.1f} GiB", double(bytes) / (1024.0 * 1024 * 1024)); }

int cmd_info() {
  auto cpu = sy::cpu_info();
  auto build = sy::build_info();
  std::printf("systolic %s\n", build.version.c_str());
  std::printf("CPU: %s, %d cores, ISA %s, %d OpenMP threads, %s memory\n", cpu.model.c_str(), cpu.cores,
              cpu.isa.c_str(), cpu.threads, gib(cpu.memory_bytes).c_str());
  std::printf("GPUs: none (this build has no CUDA support)\n");
  std::printf("Build: oneDNN %s, OpenMP, CUDA %s, MPI %s\n", build.onednn_version.c_str(), build.cuda ? "on" : "off",
              build.mpi ? "on" : "off");
  return 0;
}

struct BenchArgs {
  std::int64_t batch_size = 128;
  int steps = 10;
  int warmup = 2;
};

int cmd_benchmark(const Common& c, const BenchArgs& a) {
  apply_seed(c);
  sy::Device device = resolve_device(c.device);
  auto model = make_model(c, {32, 32, 3}, 10);
  sy::Shape shape = model.inputs()[0].shape();
  int classes = static_cast<int>(model.outputs()[0].shape()[-1]);
  // Random uint8 images and labels: the speed of a step does not depend on the values.
  sy::Generator g(7);
  sy::Tensor x(shape.with_batch(a.batch_size), sy::DType::uint8), y({a.batch_size}, sy::DType::uint8);
  for (std::int64_t i = 0; i < x.numel(); ++i) x.data<std::uint8_t>()[i] = static_cast<std::uint8_t>(g.next_u32());
  for (std::int64_t i = 0; i < a.batch_size; ++i) y.data<std::uint8_t>()[i] = static_cast<std::uint8_t>(g.next_u32() % classes);
  using clock = std::chrono::steady_clock;
  for (int i = 0; i < a.warmup; ++i) model.train_on_batch(x, y);
  auto t0 = clock::now();
  for (int i = 0; i < a.steps; ++i) model.train_on_batch(x, y);
  double train_s = std::chrono::duration<double>(clock::now() - t0).count();
  sy::Tensor one = x.slice(0, 1);
  std::vector<double> ms;
  for (int i = 0; i < 55; ++i) {
    auto s = clock::now();
    model.predict(one);
    if (i >= 5) ms.push_back(std::chrono::duration<double, std::milli>(clock::now() - s).count());
  }
  std::sort(ms.begin(), ms.end());
  nlohmann::json j = {{"model", c.model},
                      {"device", device.str()},
                      {"batch_size", a.batch_size},
                      {"train_images_per_sec", double(a.batch_size) * a.steps / train_s},
                      {"predict_ms", (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]) / 2},
                      {"steps", a.steps},
                      {"input_shape", shape.dims()},
                      {"threads", sy::cpu_info().threads}};
  std::printf("%s\n", j.dump().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  sy::set_log_stream(stderr);
  CLI::App app{"systolic: train Keras-style neural networks in C++"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string(sy::build_info().version));

  Common common;
  auto* summary = app.add_subcommand("summary", "print Keras's model.summary() table");
  add_common(summary, common);

  TrainArgs train_args;
  auto* train = app.add_subcommand("train", "train a model (Keras fit), then evaluate on the test split");
  add_common(train, common);
  train->add_option("--dataset", train_args.dataset, "fashion_mnist")->required();
  train->add_option("--epochs", train_args.epochs, "epochs")->capture_default_str()->check(CLI::PositiveNumber);
  train->add_option("--batch-size", train_args.batch_size, "batch size")->capture_default_str()->check(CLI::PositiveNumber);
  train->add_option("--optimizer", train_args.optimizer, "adam, sgd or rmsprop")->capture_default_str();
  train->add_option("--lr", train_args.lr, "learning rate (default: the optimizer's Keras default)")->check(CLI::PositiveNumber);
  train->add_option("--validation-split", train_args.validation_split, "fraction of training samples held out")
      ->check(CLI::Range(0.0, 0.999));
  train->add_option("--limit", train_args.limit, "use the first N samples of each split")->check(CLI::PositiveNumber);
  train->add_option("--verbose", train_args.verbose, "0, 1 or 2 as in Keras")->capture_default_str()->check(CLI::Range(0, 2));

  auto* info = app.add_subcommand("info", "devices found and build features");

  BenchArgs bench_args;
  auto* bench = app.add_subcommand("benchmark", "training images/s and single-image predict latency, one JSON line");
  add_common(bench, common);
  bench->add_option("--batch-size", bench_args.batch_size, "batch size")->capture_default_str()->check(CLI::PositiveNumber);
  bench->add_option("--steps", bench_args.steps, "timed training steps")->capture_default_str()->check(CLI::PositiveNumber);
  bench->add_option("--warmup", bench_args.warmup, "untimed steps first")->capture_default_str()->check(CLI::NonNegativeNumber);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "systolic: error: %s\n", e.what());
    std::fprintf(stderr, "Run with --help for usage.\n");
    return 2;
  }
  try {
    if (summary->parsed()) return cmd_summary(common);
    if (train->parsed()) return cmd_train(common, train_args);
    if (info->parsed()) return cmd_info();
    if (bench->parsed()) return cmd_benchmark(common, bench_args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "systolic: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
