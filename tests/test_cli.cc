// The `systolic` command, run as a separate process (the built binary, SYSTOLIC_CLI): exit codes, what goes to
// stdout and stderr, and the spellings that docs/cli.md promises.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <systolic/systolic.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "io/hdf5.h"
#include "test_util.h"
#include "xla_test_util.h"

namespace fs = std::filesystem;

namespace {

const char* kFashionDir = systolic::testing::kFashionMnistDir;
using systolic::testing::fashion_mnist_installed;
using systolic::testing::read_text;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream ss(text);
  for (std::string line; std::getline(ss, line);) lines.push_back(line);
  return lines;
}

struct CliResult {
  int code = -1;
  std::string out, err;
  std::vector<std::string> out_lines() const { return lines_of(out); }
  std::vector<std::string> err_lines() const { return lines_of(err); }
  std::string describe() const {
    return "exit " + std::to_string(code) + "\n--- stdout:\n" + out + "--- stderr:\n" + err;
  }
};

// Runs `systolic <args>` with stdin from /dev/null and stdout and stderr captured separately.
CliResult run_cli(const std::string& args) {
  if (!fs::exists(systolic::testing::cli_path()))
    ADD_FAILURE() << systolic::testing::cli_path()
                  << " does not exist: build the systolic_cli target (make systolic_cli) first";
  static std::atomic<int> counter{0};
  fs::path dir = fs::temp_directory_path() /
                 ("systolic_test_cli_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::path out = dir / "stdout", err = dir / "stderr";
  std::string command = "'" + systolic::testing::cli_path() + "' " + args + " </dev/null >'" + out.string() +
                        "' 2>'" + err.string() + "'";
  int status = std::system(command.c_str());
  CliResult r;
  if (status != -1 && WIFEXITED(status))
    r.code = WEXITSTATUS(status);
  else
    r.code = -1000 - (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  r.out = read_text(out);
  r.err = read_text(err);
  std::error_code ec;
  fs::remove_all(dir, ec);
  return r;
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

// Usage errors: exit 2, and a line on stderr starting "systolic: error:".
void expect_usage_error(const std::string& args) {
  SCOPED_TRACE("systolic " + args);
  CliResult r = run_cli(args);
  EXPECT_EQ(r.code, 2) << r.describe();
  auto lines = r.err_lines();
  ASSERT_FALSE(lines.empty()) << r.describe();
  EXPECT_TRUE(starts_with(lines[0], "systolic: error:")) << r.describe();
  EXPECT_TRUE(r.out.empty()) << r.describe();
}

// Runtime errors: exit 1, exactly one line on stderr starting "systolic: error:" and containing `mention`.
void expect_runtime_error(const std::string& args, const std::string& mention) {
  SCOPED_TRACE("systolic " + args);
  CliResult r = run_cli(args);
  EXPECT_EQ(r.code, 1) << r.describe();
  auto lines = r.err_lines();
  ASSERT_EQ(lines.size(), 1u) << r.describe();
  EXPECT_TRUE(starts_with(lines[0], "systolic: error:")) << r.describe();
  EXPECT_NE(lines[0].find(mention), std::string::npos)
      << "expected the message to mention '" << mention << "'\n"
      << r.describe();
  EXPECT_TRUE(r.out.empty()) << r.describe();
}

}  // namespace

TEST(Cli, SummarySeedCnn) {
  CliResult r = run_cli("summary --model seed-cnn");
  ASSERT_EQ(r.code, 0) << r.describe();
  EXPECT_NE(r.out.find("Total params: 1,676,982"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Trainable params: 1,676,912"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Non-trainable params: 70"), std::string::npos) << r.out;
}

TEST(Cli, SummaryOfAKeras3File) {
  CliResult r =
      run_cli("summary --model " + systolic::testing::source_dir() + "/tests/fixtures/keras_zip/adam.keras");
  EXPECT_EQ(r.code, 0) << r.describe();
  EXPECT_NE(r.out.find("Total params"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("batch_normalization"), std::string::npos) << r.out;
}

TEST(Cli, SummaryWithInputShape) {
  CliResult r = run_cli("summary --model seed-cnn --input-shape 28,28,1");
  ASSERT_EQ(r.code, 0) << r.describe();
  EXPECT_NE(r.out.find("Total params: 1,250,414"), std::string::npos) << r.out;
  // The input BatchNormalization has 1 channel here instead of 3: 2 + 64 non-trainable statistics.
  EXPECT_NE(r.out.find("Trainable params: 1,250,348"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Non-trainable params: 66"), std::string::npos) << r.out;
}

TEST(Cli, Help) {
  CliResult r = run_cli("--help");
  EXPECT_EQ(r.code, 0) << r.describe();
  for (const char* sub : {"summary", "train", "evaluate", "predict", "info", "benchmark", "show", "datasets"})
    EXPECT_NE(r.out.find(sub), std::string::npos) << "--help does not list " << sub << "\n" << r.describe();

  CliResult t = run_cli("train --help");
  EXPECT_EQ(t.code, 0) << t.describe();
  for (const char* opt : {"--dataset", "--epochs", "--batch-size", "--seed", "--verbose"})
    EXPECT_NE(t.out.find(opt), std::string::npos) << "train --help does not list " << opt << "\n"
                                                  << t.describe();
}

TEST(Cli, UsageErrorsExitTwo) {
  expect_usage_error("summary --no-such-flag");
  expect_usage_error("train --model seed-cnn");  // --dataset is required
  expect_usage_error("train --model seed-cnn --dataset fashion_mnist --verbose 5");
  expect_usage_error("");  // a subcommand is required
}

TEST(Cli, RuntimeErrorsExitOne) {
  expect_runtime_error("summary --model no-such-model", "no-such-model");
  expect_runtime_error("summary --model seed-cnn --input-shape 32,32", "32,32");
  expect_runtime_error("train --model seed-cnn --dataset nosuch", "nosuch");
  expect_runtime_error("benchmark --model seed-cnn --batch-size 2 --steps 1 --warmup 0 --device gpu", "gpu");
  expect_runtime_error("benchmark --model seed-cnn --batch-size 2 --steps 1 --warmup 0 --device cuda:7",
                       "cuda:7");
  if (!systolic::device_available(systolic::Device::cuda(0))) {  // without a GPU, asking for one is an error
    expect_runtime_error("benchmark --model seed-cnn --batch-size 2 --steps 1 --warmup 0 --device cuda",
                         "cuda");
    expect_runtime_error("train --model seed-cnn --dataset fashion_mnist --device cuda --epochs 1 --limit 8",
                         "cuda");
  }
}

TEST(Cli, Info) {
  CliResult r = run_cli("info");
  ASSERT_EQ(r.code, 0) << r.describe();
  EXPECT_NE(r.out.find("CPU:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("oneDNN"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("GPUs:"), std::string::npos) << r.out;
  auto gpus = systolic::gpu_info();
  for (auto& g : gpus) EXPECT_NE(r.out.find(g.name), std::string::npos) << r.out;
  std::string want = "Default device: " + systolic::default_device().str();
  EXPECT_NE(r.out.find(want), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(systolic::build_info().cuda ? "CUDA on (runtime" : "CUDA off"), std::string::npos)
      << r.out;
}

TEST(Cli, InfoSaysWhetherOpsAreDeterministic) {
  // Off by default; TensorFlow's TF_DETERMINISTIC_OPS=1 and systolic's SYSTOLIC_DETERMINISTIC_OPS=1 turn it on
  // (system.h). The command inherits this process's environment.
  auto saved = [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    return v ? std::optional<std::string>(v) : std::nullopt;
  };
  auto tf = saved("TF_DETERMINISTIC_OPS"), own = saved("SYSTOLIC_DETERMINISTIC_OPS");
  ::unsetenv("TF_DETERMINISTIC_OPS");
  ::unsetenv("SYSTOLIC_DETERMINISTIC_OPS");
  CliResult off = run_cli("info");
  ::setenv("TF_DETERMINISTIC_OPS", "1", 1);
  CliResult tf_on = run_cli("info");
  ::unsetenv("TF_DETERMINISTIC_OPS");
  ::setenv("SYSTOLIC_DETERMINISTIC_OPS", "true", 1);
  CliResult own_on = run_cli("info");
  ::setenv("SYSTOLIC_DETERMINISTIC_OPS", "0", 1);
  CliResult own_off = run_cli("info");
  ::unsetenv("SYSTOLIC_DETERMINISTIC_OPS");
  if (tf) ::setenv("TF_DETERMINISTIC_OPS", tf->c_str(), 1);
  if (own) ::setenv("SYSTOLIC_DETERMINISTIC_OPS", own->c_str(), 1);
  EXPECT_NE(off.out.find("Deterministic ops: off"), std::string::npos) << off.describe();
  EXPECT_NE(tf_on.out.find("Deterministic ops: on"), std::string::npos) << tf_on.describe();
  EXPECT_NE(own_on.out.find("Deterministic ops: on"), std::string::npos) << own_on.describe();
  EXPECT_NE(own_off.out.find("Deterministic ops: off"), std::string::npos) << own_off.describe();
}

TEST(Cli, ShortTrainingRunIsRepeatable) {
  if (!fashion_mnist_installed())
    GTEST_SKIP() << "Fashion-MNIST is not installed in " << kFashionDir
                 << " (Debian package dataset-fashion-mnist); skipping the real training run";
  const std::string args =
      "train --model seed-cnn --dataset fashion_mnist --epochs 1 --batch-size 64 --limit 512 --verbose 2 "
      "--seed 1";
  CliResult a = run_cli(args);
  ASSERT_EQ(a.code, 0) << a.describe();

  // stderr: Keras's verbose-2 fit output.
  const std::regex epoch_line(R"(^8/8 - \d+s - loss: \d+\.\d{4} - accuracy: \d+\.\d{4}$)");
  auto err = a.err_lines();
  bool saw_epoch = false, saw_progress = false;
  std::string progress_a;
  for (auto& line : err) {
    if (line == "Epoch 1/1") saw_epoch = true;
    if (std::regex_match(line, epoch_line))
      saw_progress = true, progress_a = line.substr(line.find(" - loss:"));
  }
  EXPECT_TRUE(saw_epoch) << "no 'Epoch 1/1' line\n" << a.describe();
  EXPECT_TRUE(saw_progress) << "no line like '8/8 - 0s - loss: 2.3151 - accuracy: 0.2305'\n" << a.describe();

  // stdout: exactly the two test-score lines.
  auto out = a.out_lines();
  ASSERT_EQ(out.size(), 2u) << a.describe();
  EXPECT_TRUE(std::regex_match(out[0], std::regex(R"(^Test loss: \d+\.\d{4}$)"))) << out[0];
  EXPECT_TRUE(std::regex_match(out[1], std::regex(R"(^Test accuracy: \d{1,3}\.\d{2}%$)"))) << out[1];

  // The same seed gives the same results.
  CliResult b = run_cli(args);
  ASSERT_EQ(b.code, 0) << b.describe();
  EXPECT_EQ(a.out, b.out) << "two runs with --seed 1 differ";
  std::string progress_b;
  for (auto& line : b.err_lines())
    if (std::regex_match(line, epoch_line)) progress_b = line.substr(line.find(" - loss:"));
  EXPECT_EQ(progress_a, progress_b) << "the training loss and accuracy of two runs with --seed 1 differ";
}

// The issue's command line: `systolic train --device xla:cpu --replicas 8 --sync-batch-norm` trains the seed CNN on
// the CPU plugin's 8 devices as one SPMD program, and scores as 8 CPU replicas with synchronised batch norm do (the
// same shards, the same per-replica dropout masks).
TEST(Cli, TrainOnEightXlaReplicasWithSynchronisedBatchNorm) {
  SYSTOLIC_REQUIRE_XLA();
  if (!fashion_mnist_installed())
    GTEST_SKIP() << "Fashion-MNIST is not installed in " << kFashionDir
                 << " (Debian package dataset-fashion-mnist); skipping the real training run";
  const std::string args =
      "train --model seed-cnn --dataset fashion_mnist --epochs 1 --batch-size 256 --limit 1024 --verbose 2 "
      "--seed 1 --replicas 8 --sync-batch-norm --device ";
  CliResult x = run_cli(args + "xla:cpu");
  ASSERT_EQ(x.code, 0) << x.describe();
  EXPECT_NE(x.err.find("Found 8 replicas: xla:cpu:0, xla:cpu:1, xla:cpu:2, xla:cpu:3, xla:cpu:4, xla:cpu:5, "
                       "xla:cpu:6, xla:cpu:7"),
            std::string::npos)
      << x.describe();
  EXPECT_NE(
      x.err.find("gradients are summed by an all_reduce inside one XLA program over the replicas; batch "
                 "norm statistics are synchronised"),
      std::string::npos)
      << x.describe();
  EXPECT_EQ(x.err.find("op by op"), std::string::npos) << "the step did not run as one program\n"
                                                       << x.describe();
  CliResult c = run_cli(args + "cpu");
  ASSERT_EQ(c.code, 0) << c.describe();
  auto scores = [](const CliResult& r) {
    std::smatch m;
    std::vector<double> v;
    for (auto& line : r.out_lines())
      if (std::regex_match(line, m, std::regex(R"(^Test (?:loss|accuracy): (\d+\.\d+)%?$)")))
        v.push_back(std::stod(m[1]));
    return v;
  };
  auto on_xla = scores(x), on_cpu = scores(c);
  ASSERT_EQ(on_xla.size(), 2u) << x.describe();
  ASSERT_EQ(on_cpu.size(), 2u) << c.describe();
  EXPECT_NEAR(on_xla[0], on_cpu[0], 2e-4) << "test loss, xla:cpu vs CPU replicas";
  // After 4 steps many test images sit near a tie between two classes: float rounding may flip a few of 10000.
  EXPECT_NEAR(on_xla[1], on_cpu[1], 0.2) << "test accuracy (%), xla:cpu vs CPU replicas";
  std::printf(
      "8 replicas, synchronised batch norm: test loss %.4f on xla:cpu, %.4f on the CPU; accuracy %.2f%% "
      "and %.2f%%\n",
      on_xla[0], on_cpu[0], on_xla[1], on_cpu[1]);
}

TEST(Cli, BenchmarkJson) {
  CliResult r = run_cli(
      "benchmark --model seed-cnn --batch-size 8 --steps 1 --warmup 0 --device cpu --input-shape 16,16,3");
  ASSERT_EQ(r.code, 0) << r.describe();
  auto lines = r.out_lines();
  ASSERT_EQ(lines.size(), 1u) << r.describe();
  nlohmann::json j;
  ASSERT_NO_THROW(j = nlohmann::json::parse(lines[0])) << lines[0];
  ASSERT_TRUE(j.is_object()) << lines[0];
  for (const char* key : {"model", "device", "batch_size", "train_images_per_sec", "predict_ms",
                          "sec_per_epoch", "samples", "step_mode"})
    ASSERT_TRUE(j.contains(key)) << "missing key " << key << ": " << lines[0];
  EXPECT_EQ(j["model"], "seed-cnn");
  EXPECT_EQ(j["device"], "cpu");
  EXPECT_EQ(j["batch_size"], 8);
  EXPECT_EQ(j["samples"], 8);
  EXPECT_EQ(j["step_mode"], "host");
  ASSERT_TRUE(j["train_images_per_sec"].is_number()) << lines[0];
  ASSERT_TRUE(j["predict_ms"].is_number()) << lines[0];
  EXPECT_GT(j["train_images_per_sec"].get<double>(), 0.0);
  EXPECT_GT(j["predict_ms"].get<double>(), 0.0);
}

namespace {
// A private SYSTOLIC_HOME for one test (empty cache), restored afterwards.
struct PrivateHome {
  fs::path dir = fs::temp_directory_path() / ("systolic_test_cli_home_" + std::to_string(::getpid()));
  PrivateHome() {
    fs::remove_all(dir);
    fs::create_directories(dir);
    ::setenv("SYSTOLIC_HOME", dir.c_str(), 1);
  }
  ~PrivateHome() {
    ::unsetenv("SYSTOLIC_HOME");
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};
}  // namespace

TEST(Cli, DatasetsListsWhatIsKnown) {
  PrivateHome home;
  CliResult r = run_cli("datasets");
  ASSERT_EQ(r.code, 0) << r.describe();
  for (const char* name : {"cifar10", "fashion_mnist", "mnist", "dir:PATH"})
    EXPECT_NE(r.out.find(name), std::string::npos) << name << "\n" << r.out;
  // An empty cache: CIFAR-10 would be downloaded into it.
  std::regex cifar_line("cifar10 +download +" + (home.dir / "datasets" / "cifar-10-batches-bin").string());
  EXPECT_TRUE(std::regex_search(r.out, cifar_line)) << r.out;
  if (fashion_mnist_installed()) {
    EXPECT_TRUE(std::regex_search(r.out, std::regex("fashion_mnist +yes +/usr/share/datasets/fashion-mnist")))
        << r.out;
  }
}

TEST(Cli, ShowFashionMnistWritesTheScaledImage) {
  if (!fashion_mnist_installed()) GTEST_SKIP() << "Fashion-MNIST is not installed in " << kFashionDir;
  fs::path png =
      fs::temp_directory_path() / ("systolic_test_cli_show_" + std::to_string(::getpid()) + ".png");
  CliResult r =
      run_cli("show --dataset fashion_mnist --split test --index 0 --scale 3 -o '" + png.string() + "'");
  ASSERT_EQ(r.code, 0) << r.describe();
  EXPECT_NE(r.out.find("label 9 (Ankle boot)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\x1b["), std::string::npos) << "no colour codes when stdout is not a terminal";
  auto d = systolic::datasets::fashion_mnist::load_data();
  systolic::Tensor img = systolic::image::read(png.string(), 1);
  ASSERT_EQ(img.shape(), systolic::Shape({84, 84, 1}));
  auto expected = systolic::image::upscale_nearest(d.test.x.slice(0, 1).reshape({28, 28, 1}).clone(), 3);
  EXPECT_EQ(img.to_doubles(), expected.to_doubles());
  fs::remove(png);
  expect_runtime_error("show --dataset fashion_mnist --split test --index 10000 -o '" + png.string() + "'",
                       "--index 10000");
  EXPECT_FALSE(fs::exists(png));
}

namespace {
// The 200 real CIFAR-10 sample images as an image folder (one subfolder per class), or "" without ../shared.
fs::path cifar_sample_folder(const std::string& tag) {
  std::string data = systolic::testing::shared_data_dir();
  if (data.empty()) return {};
  fs::path dir = fs::temp_directory_path() / ("systolic_test_cli_" + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  std::ifstream csv(data + "/cifar10-sample/labels.csv");
  std::string line;
  std::getline(csv, line);
  while (std::getline(csv, line)) {
    auto comma = line.find(',');
    std::string file = line.substr(0, comma), label = line.substr(comma + 1);
    while (!label.empty() && (label.back() == '\r' || label.back() == ' ')) label.pop_back();
    fs::create_directories(dir / "images" / label);
    fs::copy_file(fs::path(data) / "cifar10-sample" / file, dir / "images" / label / file);
  }
  return dir;
}

std::vector<std::string> test_lines(const std::string& out) {
  std::vector<std::string> lines;
  for (auto& l : lines_of(out))
    if (starts_with(l, "Test ")) lines.push_back(l);
  return lines;
}
}  // namespace

TEST(Cli, ShowAndTrainOnImageFolders) {
  fs::path root = cifar_sample_folder("dir");
  if (root.empty()) GTEST_SKIP() << "../shared/data is absent";
  fs::path dir = root / "images";
  fs::path png = dir / "shown.png";
  CliResult s = run_cli("show --dataset dir:" + dir.string() + " --split train --index 0 -o " + png.string());
  ASSERT_EQ(s.code, 0) << s.describe();
  EXPECT_NE(s.out.find("label 0 (airplane)"), std::string::npos) << s.out;
  EXPECT_EQ(systolic::image::read(png.string()).shape(), systolic::Shape({256, 256, 3}));
  CliResult t =
      run_cli("train --model seed-cnn --dataset dir:" + dir.string() +
              " --epochs 1 --batch-size 50 --verbose 2 --seed 3 --width-shift-range 0.1 --horizontal-flip");
  ASSERT_EQ(t.code, 0) << t.describe();
  EXPECT_NE(t.err.find("4/4 - "), std::string::npos) << t.describe();
  EXPECT_NE(t.out.find("Test accuracy: "), std::string::npos) << t.describe();
  expect_runtime_error("train --model seed-cnn --dataset dir:" + (dir / "nope").string(), "nope");
  fs::remove_all(root);
}

// The issue's done-when: train, save, then evaluate and predict from the files with the seed's JSON.
// --save-for tf.keras writes the .h5 of a model holding a nested model with tf.keras's node numbering (its
// calls from 1); the default writes Keras 3's (from 0); what tf.keras cannot read is refused before training.
TEST(Cli, SaveForTfKerasNumbersNestedCallsAsTfKeras) {
  namespace L = systolic::layers;
  fs::path dir = cifar_sample_folder("save_for");
  if (dir.empty()) GTEST_SKIP() << "../shared/data is absent (the CIFAR-10 sample images)";
  auto bi = L::Input({8, 8, 3});
  systolic::Model base(bi, L::GlobalAveragePooling2D()(L::Conv2D(4, {3, 3})(bi)), "base");
  auto in = L::Input({8, 8, 3});
  systolic::Model outer(in, L::Dense(10)(base(in, false)), "outer");
  const std::string model = (dir / "nested.h5").string();
  outer.save(model);
  for (std::string target : {"keras3", "tf.keras"}) {
    const std::string out = (dir / ("out." + target + ".h5")).string();
    CliResult t = run_cli("train --model " + model + " --dataset dir:" + (dir / "images").string() +
                          " --epochs 1 --batch-size 50 --verbose 0 --optimizer adam --save-for " + target +
                          " --save " + out);
    ASSERT_EQ(t.code, 0) << t.describe();
    auto config = nlohmann::json::parse(systolic::hdf5::read_file(out).string_attribute("model_config"));
    auto& dense = config["config"]["layers"][2];
    ASSERT_EQ(dense["inbound_nodes"][0][0][0], "base") << dense.dump();
    EXPECT_EQ(dense["inbound_nodes"][0][0][1], target == "tf.keras" ? 1 : 0) << dense.dump();
  }
  CliResult bad = run_cli("train --model " + model + " --dataset dir:" + (dir / "images").string() +
                          " --save-for tf.keras --save " + (dir / "m.keras").string());
  EXPECT_EQ(bad.code, 1) << bad.describe();
  EXPECT_NE(bad.err.find("--save-for tf.keras"), std::string::npos) << bad.describe();
  fs::remove_all(dir);
}

TEST(Cli, TrainSaveEvaluatePredictWithKerasFiles) {
  fs::path dir = cifar_sample_folder("keras");
  if (dir.empty()) GTEST_SKIP() << "../shared/data is absent (the CIFAR-10 sample images)";
  std::string images = "dir:" + (dir / "images").string();
  std::string weights = (dir / "cifar10_model.h5").string(), full = (dir / "model.h5").string();
  std::string json = (dir / "seed.json").string();

  CliResult t = run_cli("train --model seed-cnn --dataset " + images +
                        " --epochs 1 --batch-size 50 --verbose 2 --seed 5" + " --save-weights " + weights +
                        " --save " + full);
  ASSERT_EQ(t.code, 0) << t.describe();
  auto trained = test_lines(t.out);
  ASSERT_EQ(trained.size(), 2u) << t.describe();

  CliResult s = run_cli("summary --model seed-cnn --to-json");
  ASSERT_EQ(s.code, 0) << s.describe();
  std::ofstream(json) << s.out;

  // Evaluating the saved weights (through the JSON) or the full model gives the numbers train printed.
  CliResult e1 = run_cli("evaluate --model " + json + " --weights " + weights + " --dataset " + images);
  ASSERT_EQ(e1.code, 0) << e1.describe();
  EXPECT_EQ(test_lines(e1.out), trained) << e1.describe();
  CliResult e2 = run_cli("evaluate --model " + full + " --dataset " + images);
  ASSERT_EQ(e2.code, 0) << e2.describe();
  EXPECT_EQ(test_lines(e2.out), trained) << e2.describe();

  std::string data = systolic::testing::shared_data_dir();
  std::string a = data + "/cifar10-sample/1.png", b = data + "/cifar10-sample/2.png";
  CliResult p = run_cli("predict --model " + json + " --weights " + weights + " --classes cifar10 --json " +
                        a + " " + b);
  ASSERT_EQ(p.code, 0) << p.describe();
  auto lines = p.out_lines();
  ASSERT_EQ(lines.size(), 2u) << p.describe();
  // The same model in-process: the command's probabilities are the library's.
  auto model = systolic::model_from_json(s.out);
  model.load_weights(weights);
  systolic::Tensor x({2, 32, 32, 3});
  for (int i = 0; i < 2; ++i) {
    auto img = systolic::image::read(i == 0 ? a : b, 3);
    for (int j = 0; j < 3072; ++j) x.data<float>()[i * 3072 + j] = img.data<std::uint8_t>()[j];
  }
  auto want = model.predict(x);
  auto names = systolic::datasets::cifar10::class_names();
  for (int i = 0; i < 2; ++i) {
    auto j = nlohmann::json::parse(lines[i]);
    EXPECT_EQ(j["file"], i == 0 ? a : b);
    ASSERT_EQ(j["probabilities"].size(), 10u);
    double sum = 0;
    int best = 0;
    for (int k = 0; k < 10; ++k) {
      double v = j["probabilities"][k];
      sum += v;
      EXPECT_NEAR(v, want.data<float>()[i * 10 + k], 1e-6);
      if (v > static_cast<double>(j["probabilities"][best])) best = k;
    }
    EXPECT_NEAR(sum, 1.0, 1e-5);
    EXPECT_EQ(j["class_index"], best);
    EXPECT_EQ(j["class"], names[best]);
  }

  // One data set sample through the full model; the table form.
  CliResult d = run_cli("predict --model " + full + " --dataset " + images + " --index 3 --json");
  ASSERT_EQ(d.code, 0) << d.describe();
  auto dj = nlohmann::json::parse(d.out_lines().at(0));
  EXPECT_EQ(dj["index"], 3);
  EXPECT_TRUE(dj.contains("label") && dj.contains("class")) << d.out;
  CliResult table = run_cli("predict --model " + full + " --top 2 " + a);
  ASSERT_EQ(table.code, 0) << table.describe();
  EXPECT_NE(table.out.find("  2. "), std::string::npos) << table.out;
  EXPECT_EQ(table.out.find("  3. "), std::string::npos) << table.out;

  // Resuming training from the full model (its optimizer state) works from the command too.
  CliResult r =
      run_cli("train --model " + full + " --dataset " + images + " --epochs 1 --batch-size 50 --verbose 0");
  ASSERT_EQ(r.code, 0) << r.describe();

  // Errors name what is wrong.
  expect_runtime_error("evaluate --model " + json + " --dataset " + images, "--weights is required");
  expect_runtime_error("predict --model " + json + " --weights " + (dir / "none.h5").string() + " " + a,
                       "none.h5");
  expect_runtime_error("predict --model " + json + " --weights " + weights, "give image files");
  expect_runtime_error("predict --model " + json + " --weights " + weights + " --classes mnist-ish " + a,
                       "mnist-ish");
  expect_runtime_error(
      "predict --model " + json + " --weights " + weights + " " + (dir / "missing.png").string(),
      "missing.png");
  expect_runtime_error("summary --model " + json + " --input-shape 8,8,3", "--input-shape");
  fs::remove_all(dir);
}

// A Keras file saved without compile (no training config) trains from the command with --optimizer / --loss /
// --lr, instead of being refused; evaluate compiles it too.
TEST(Cli, TrainsAFullModelFileWithoutTrainingConfig) {
  fs::path dir = cifar_sample_folder("uncompiled");
  if (dir.empty()) GTEST_SKIP() << "../shared/data is absent (the CIFAR-10 sample images)";
  std::string images = "dir:" + (dir / "images").string();
  std::string file = (dir / "uncompiled.h5").string();
  {
    namespace L = systolic::layers;
    auto in = L::Input({32, 32, 3});
    auto x = L::Rescaling(1.0 / 255)(in);
    x = L::Conv2D(4, {3, 3}, {.activation = "relu"})(x);
    x = L::GlobalAveragePooling2D()(x);
    auto out = L::Dense(10, {.activation = "softmax"})(x);
    systolic::Model(in, out).save(file);
  }
  CliResult t = run_cli("train --model " + file + " --dataset " + images +
                        " --epochs 1 --batch-size 50 --verbose 0 --optimizer sgd --lr 0.01"
                        " --loss sparse_categorical_crossentropy");
  ASSERT_EQ(t.code, 0) << t.describe();
  EXPECT_NE(t.out.find("Test accuracy"), std::string::npos) << t.describe();
  CliResult e = run_cli("evaluate --model " + file + " --dataset " + images);
  ASSERT_EQ(e.code, 0) << e.describe();
  fs::remove_all(dir);
}

// The real Keras 2.0.3 file through the command: the probabilities of the expected file (1e-4).
TEST(Cli, PredictWithTheRealKerasFile) {
  std::string data = systolic::testing::shared_data_dir();
  if (data.empty()) GTEST_SKIP() << "../shared/data is absent (the real Keras weights file)";
  std::string args = "predict --model " + systolic::testing::source_dir() +
                     "/tests/fixtures/keras/keras2-cifar10-cnn.json --weights " + data +
                     "/keras/keras2-cifar10-cnn.h5 --rescale 0.00392156862745098 --classes cifar10 --json";
  for (int i = 1; i <= 5; ++i) args += " " + data + "/cifar10-sample/" + std::to_string(i) + ".png";
  CliResult p = run_cli(args);
  ASSERT_EQ(p.code, 0) << p.describe();
  auto lines = p.out_lines();
  ASSERT_EQ(lines.size(), 5u);
  std::ifstream csv(data + "/keras/keras2-cifar10-cnn.expected.csv");
  std::string row;
  std::getline(csv, row);
  for (int i = 0; i < 5; ++i) {
    std::getline(csv, row);
    std::stringstream ss(row);
    std::string cell;
    std::getline(ss, cell, ',');
    auto j = nlohmann::json::parse(lines[i]);
    for (int k = 0; k < 10; ++k) {
      std::getline(ss, cell, ',');
      EXPECT_NEAR(static_cast<double>(j["probabilities"][k]), std::stod(cell), 1e-4) << lines[i];
    }
    std::getline(ss, cell, ',');
    EXPECT_EQ(j["class"], cell);
  }
}

// finetune: --rescale F of train and evaluate feeds pixel * F, as a Rescaling(F) layer in front of the model does.
TEST(Cli, TrainAndEvaluateRescale) {
  fs::path dir = cifar_sample_folder("rescale");
  if (dir.empty()) GTEST_SKIP() << "../shared/data is absent (the CIFAR-10 sample images)";
  std::string images = "dir:" + (dir / "images").string();
  std::string with_layer = (dir / "with_layer.h5").string(), without = (dir / "without.h5").string();
  {
    namespace L = systolic::layers;
    systolic::set_random_seed(7);
    auto in = L::Input({32, 32, 3});
    auto conv = L::Conv2D(4, {3, 3}, {.activation = "relu"});
    auto pool = L::GlobalAveragePooling2D();
    auto dense = L::Dense(10, {.activation = "softmax"});
    auto a_out = dense(pool(conv(L::Rescaling(1.0 / 255)(in))));
    systolic::Model a(in, a_out);
    a.compile("sgd", "sparse_categorical_crossentropy", {"accuracy"});
    a.save(with_layer);
    // The same layers (shared weights) without the Rescaling.
    auto in2 = L::Input({32, 32, 3});
    systolic::Model b(in2, dense(pool(conv(in2))));
    b.compile("sgd", "sparse_categorical_crossentropy", {"accuracy"});
    b.save(without);
  }
  const std::string rescale = " --rescale 0.00392156862745098";
  CliResult e1 = run_cli("evaluate --model " + with_layer + " --dataset " + images);
  CliResult e2 = run_cli("evaluate --model " + without + " --dataset " + images + rescale);
  CliResult e3 = run_cli("evaluate --model " + without + " --dataset " + images);
  ASSERT_EQ(e1.code, 0) << e1.describe();
  ASSERT_EQ(e2.code, 0) << e2.describe();
  ASSERT_EQ(e3.code, 0) << e3.describe();
  ASSERT_EQ(test_lines(e1.out).size(), 2u) << e1.describe();
  EXPECT_EQ(test_lines(e2.out), test_lines(e1.out)) << e2.describe();
  EXPECT_NE(test_lines(e3.out)[0], test_lines(e1.out)[0]) << "without --rescale the raw pixels go in";
  const std::string fit = " --dataset " + images + " --epochs 1 --batch-size 50 --verbose 0 --seed 3";
  CliResult t1 = run_cli("train --model " + with_layer + fit);
  CliResult t2 = run_cli("train --model " + without + fit + rescale);
  ASSERT_EQ(t1.code, 0) << t1.describe();
  ASSERT_EQ(t2.code, 0) << t2.describe();
  ASSERT_EQ(test_lines(t1.out).size(), 2u) << t1.describe();
  EXPECT_EQ(test_lines(t2.out), test_lines(t1.out)) << t2.describe();
  fs::remove_all(dir);
}

// A model file whose input is not the data set's: Fashion-MNIST (28x28x1) is brought to its 32x32x3 for train,
// evaluate and predict (before, the command refused the pair); predict --dataset gives what predict gives on
// the same image resized and written as a PNG.
TEST(Cli, NamedDataSetsResizedToTheModelsInput) {
  if (!fashion_mnist_installed()) GTEST_SKIP() << "Fashion-MNIST is not installed in " << kFashionDir;
  fs::path dir = fs::temp_directory_path() / ("systolic_test_cli_resize_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string file = (dir / "rgb32.h5").string();
  {
    namespace L = systolic::layers;
    systolic::set_random_seed(11);
    auto in = L::Input({32, 32, 3});
    auto x = L::Rescaling(1.0 / 255)(in);
    x = L::Conv2D(4, {3, 3}, {.activation = "relu"})(x);
    x = L::GlobalAveragePooling2D()(x);
    systolic::Model(in, L::Dense(10, {.activation = "softmax"})(x)).save(file);
  }
  CliResult t = run_cli("train --model " + file +
                        " --dataset fashion_mnist --limit 64 --epochs 1 --batch-size 32 --verbose 0 --save " +
                        (dir / "trained.h5").string());
  ASSERT_EQ(t.code, 0) << t.describe();
  EXPECT_NE(t.out.find("Test accuracy"), std::string::npos) << t.describe();
  CliResult e =
      run_cli("evaluate --model " + (dir / "trained.h5").string() + " --dataset fashion_mnist --limit 64");
  ASSERT_EQ(e.code, 0) << e.describe();
  EXPECT_NE(e.out.find("Test accuracy"), std::string::npos) << e.describe();

  CliResult p = run_cli("predict --model " + file + " --dataset fashion_mnist --index 7 --json");
  ASSERT_EQ(p.code, 0) << p.describe();
  auto d = systolic::datasets::fashion_mnist::load_data();
  std::string png = (dir / "seven.png").string();
  systolic::image::write_png(
      png, systolic::image::resize_batch(d.test.x.slice(7, 8).reshape({1, 28, 28, 1}), 32, 32, 3, "test")
               .reshape({32, 32, 3}));
  CliResult q = run_cli("predict --model " + file + " --json " + png);
  ASSERT_EQ(q.code, 0) << q.describe();
  auto a = nlohmann::json::parse(p.out_lines().at(0)), b = nlohmann::json::parse(q.out_lines().at(0));
  EXPECT_EQ(a["label"], static_cast<int>(d.test.y.slice(7, 8).to_doubles()[0]));
  EXPECT_EQ(a["probabilities"], b["probabilities"]);
  fs::remove_all(dir);
}

// train's Keras callbacks (--csv-log, --checkpoint, --early-stopping) in one short run whose validation loss
// stops improving (a high rate on 64 training samples): the CSV in Keras's CSVLogger format, a checkpoint per
// epoch named from the template and that epoch's logs, and a stop where EarlyStopping's rule says.
TEST(Cli, TrainCallbacksWriteCsvCheckpointsAndStopEarly) {
  if (!fashion_mnist_installed()) GTEST_SKIP() << "Fashion-MNIST is not installed in " << kFashionDir;
  fs::path dir = fs::temp_directory_path() / ("systolic_test_cli_callbacks_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::path csv = dir / "log.csv";
  std::string ckpt = (dir / "ck" / "m-{epoch:02d}-{val_loss:.2f}.h5").string();
  CliResult r = run_cli(
      "train --model seed-cnn --dataset fashion_mnist --limit 128 --epochs 20 --batch-size 32 "
      "--validation-split 0.5 --lr 0.01 --seed 1 --verbose 2 --early-stopping 1 --csv-log '" +
      csv.string() + "' --checkpoint '" + ckpt + "'");
  ASSERT_EQ(r.code, 0) << r.describe();

  auto rows = lines_of(systolic::testing::read_text(csv));
  ASSERT_GE(rows.size(), 3u);
  EXPECT_EQ(rows[0], "epoch,accuracy,loss,val_accuracy,val_loss\r");  // Python's csv ends rows with \r\n
  std::vector<double> val_loss;
  for (std::size_t i = 1; i < rows.size(); ++i) {
    std::vector<std::string> f;
    std::stringstream ss(rows[i]);
    for (std::string x; std::getline(ss, x, ',');) f.push_back(x);
    ASSERT_EQ(f.size(), 5u) << rows[i];
    EXPECT_EQ(f[0], std::to_string(i - 1));
    val_loss.push_back(std::stod(f[4]));
    // One checkpoint per epoch, named from the template and that epoch's val_loss.
    fs::path saved = dir / "ck" / fmt::format("m-{:02d}-{:.2f}.h5", i, val_loss.back());
    EXPECT_TRUE(fs::exists(saved)) << saved;
  }
  int epochs = int(val_loss.size());
  ASSERT_LT(epochs, 20) << "did not stop early\n" << r.describe();
  // EarlyStopping (patience 1): the last epoch did not improve on the best before it; every earlier one did.
  double best = val_loss[0];
  for (int e = 1; e + 1 < epochs; ++e) {
    EXPECT_LT(val_loss[e], best) << "epoch " << e << " did not improve, yet training went on";
    best = val_loss[e];
  }
  EXPECT_GE(float(val_loss.back()), float(best));
  EXPECT_NE(r.err.find("Epoch " + std::to_string(epochs) + ": early stopping"), std::string::npos)
      << r.describe();
  EXPECT_EQ(std::distance(fs::directory_iterator(dir / "ck"), fs::directory_iterator()), epochs);
  fs::remove_all(dir);
}

TEST(Cli, TrainCallbackFlagsRejectBadValues) {
  expect_usage_error("train --model seed-cnn --dataset fashion_mnist --early-stopping -1");
  expect_usage_error("train --model seed-cnn --dataset fashion_mnist --reduce-lr-on-plateau x");
  if (!fashion_mnist_installed()) GTEST_SKIP() << "Fashion-MNIST is not installed in " << kFashionDir;
  expect_runtime_error("train --model seed-cnn --dataset fashion_mnist --limit 8 --checkpoint model.txt",
                       "must end in .keras or .h5");
}

// plot: a PNG of the requested size with each panel's curves drawn in it (the train colour and the validation
// colour in both halves of a two-panel log); bad CSV logs give one clear line.
TEST(Cli, PlotDrawsEachPanel) {
  fs::path dir = fs::temp_directory_path() / ("systolic_test_cli_plot_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name) << text;
    return "'" + (dir / name).string() + "'";
  };
  std::string log =
      write("log.csv",
            "epoch,accuracy,loss,val_accuracy,val_loss\r\n0,0.2,2.7,0.28,2.2\r\n1,0.4,1.8,0.33,2.1\r\n"
            "2,0.51,1.4,0.45,1.9\r\n3,0.6,1.2,NA,NA\r\n");
  std::string png = (dir / "curves.png").string();
  CliResult r = run_cli("plot " + log + " -o '" + png + "' --width 700 --height 400");
  ASSERT_EQ(r.code, 0) << r.describe();
  systolic::Tensor img = systolic::image::read(png, 3);
  ASSERT_EQ(img.shape(), systolic::Shape({400, 700, 3}));
  // Pixels of the train (31, 119, 180) and validation (255, 127, 14) colours in each half (loss | accuracy).
  for (int half = 0; half < 2; ++half)
    for (auto colour : {std::array<int, 3>{31, 119, 180}, std::array<int, 3>{255, 127, 14}}) {
      int count = 0;
      for (int y = 0; y < 400; ++y)
        for (int x = half * 350; x < (half + 1) * 350; ++x) {
          const std::uint8_t* p = img.data<std::uint8_t>() + (y * 700 + x) * 3;
          count += p[0] == colour[0] && p[1] == colour[1] && p[2] == colour[2];
        }
      EXPECT_GT(count, 100) << "half " << half << " colour " << colour[0];
    }
  // A log without validation (Keras's CSVLogger then adds val_ columns of NA, val_learning_rate included) and a
  // constant learning_rate: no validation curve or legend entry anywhere.
  std::string no_val =
      write("noval.csv",
            "epoch,accuracy,learning_rate,loss,val_accuracy,val_learning_rate,val_loss\r\n"
            "0,0.2,0.0010000000474974513,2.7,NA,NA,NA\r\n1,0.4,0.0010000000474974513,1.8,NA,NA,NA\r\n");
  ASSERT_EQ(run_cli("plot " + no_val + " -o '" + png + "' --width 900 --height 400").code, 0);
  systolic::Tensor nv = systolic::image::read(png, 3);
  int val_pixels = 0, train_pixels = 0;
  for (std::int64_t i = 0; i < nv.numel() / 3; ++i) {
    const std::uint8_t* p = nv.data<std::uint8_t>() + i * 3;
    val_pixels += p[0] == 255 && p[1] == 127 && p[2] == 14;
    train_pixels += p[0] == 31 && p[1] == 119 && p[2] == 180;
  }
  EXPECT_EQ(val_pixels, 0);
  EXPECT_GT(train_pixels, 300);  // three panels' curves

  // Default size: at least 300x300.
  ASSERT_EQ(run_cli("plot " + log + " -o '" + png + "'").code, 0);
  systolic::Tensor d = systolic::image::read(png, 3);
  EXPECT_GE(d.dim(0), 300);
  EXPECT_GE(d.dim(1), 300);

  expect_runtime_error("plot " + write("empty.csv", "") + " -o '" + png + "'", "is empty");
  expect_runtime_error("plot " + write("nohead.csv", "loss,acc\n1,2\n") + " -o '" + png + "'",
                       "must start with the column epoch");
  expect_runtime_error("plot " + write("short.csv", "epoch,loss\n0,1\n1\n") + " -o '" + png + "'",
                       "line 3: 1 fields, but the header has 2");
  expect_runtime_error("plot " + write("text.csv", "epoch,loss\n0,abc\n") + " -o '" + png + "'",
                       "line 2: 'abc' in column loss is not a number");
  expect_runtime_error("plot " + write("norows.csv", "epoch,loss\n") + " -o '" + png + "'", "no rows");
  expect_runtime_error("plot '" + (dir / "missing.csv").string() + "' -o '" + png + "'", "cannot read");
  expect_usage_error("plot " + log + " -o '" + png + "' --width 100");
  fs::remove_all(dir);
}

// train --lr-schedule: the schedule is built from the optimizer's rate with Keras's options, --decay-steps
// defaults to the run's steps, the saved model carries it (Keras's serialized form) with the steps done, and a
// schedule missing a parameter is a one-line error.
TEST(Cli, TrainWithALearningRateSchedule) {
  if (!fashion_mnist_installed()) GTEST_SKIP() << "Fashion-MNIST is not installed in " << kFashionDir;
  systolic::testing::TempDir dir;
  CliResult r = run_cli(
      "train --model seed-cnn --dataset fashion_mnist --limit 64 --epochs 2 --batch-size 32 "
      "--verbose 0 --lr 0.01 --lr-schedule cosine --alpha 0.1 --save '" +
      dir.file("m.keras") + "'");
  ASSERT_EQ(r.code, 0) << r.describe();
  systolic::Model m = systolic::load_model(dir.file("m.keras"));
  ASSERT_TRUE(m.optimizer().learning_rate_schedule());
  nlohmann::json config = m.optimizer().learning_rate_schedule()->get_config();
  EXPECT_EQ(config["initial_learning_rate"], 0.01);
  EXPECT_EQ(config["decay_steps"], 4);  // 2 epochs of 2 batches
  EXPECT_EQ(config["alpha"], 0.1);
  EXPECT_EQ(m.optimizer().iterations(), 4);
  EXPECT_NEAR(m.optimizer().learning_rate(), 0.001, 1e-12);  // the end of the cosine: alpha * 0.01

  r = run_cli(
      "train --model seed-cnn --dataset fashion_mnist --limit 64 --epochs 1 --verbose 0 "
      "--lr-schedule piecewise --boundaries 1 --values 0.01,0.001 --save '" +
      dir.file("p.keras") + "'");
  ASSERT_EQ(r.code, 0) << r.describe();
  auto p = systolic::load_model(dir.file("p.keras")).optimizer().learning_rate_schedule();
  ASSERT_TRUE(p);
  EXPECT_EQ(p->class_name(), "PiecewiseConstantDecay");
  EXPECT_DOUBLE_EQ((*p)(1), 0.01);
  EXPECT_DOUBLE_EQ((*p)(2), 0.001);

  r = run_cli("train --model seed-cnn --dataset fashion_mnist --limit 64 --lr-schedule exponential");
  EXPECT_EQ(r.code, 1) << r.describe();
  EXPECT_EQ(r.err_lines().back(), "systolic: error: --lr-schedule exponential needs --decay-rate");
  r = run_cli(
      "train --model seed-cnn --dataset fashion_mnist --limit 64 --lr-schedule piecewise --boundaries 1 "
      "--values 0.1,x");
  EXPECT_EQ(r.code, 1) << r.describe();
  EXPECT_NE(r.err.find("--values: 'x' is not a number"), std::string::npos) << r.describe();
}

// Array data (issue 27): a Keras 3 .keras regression with its numpy .npz data, as a user of keras.io's regression
// tutorials has them: evaluate --json gives Keras's evaluate(return_dict=True) values, train goes on from the
// file's optimizer state, predict --input writes .npy or JSON lines, and bad arrays are one clear error each.
TEST(Cli, ArrayDataTrainEvaluatePredict) {
  systolic::testing::TempDir tmp;
  const std::string dir = systolic::testing::source_dir() + "/tests/fixtures/keras_training/";
  nlohmann::json keras;
  std::ifstream(dir + "expected.json") >> keras;
  for (const char* name : {"binary", "regression", "columns"}) {
    SCOPED_TRACE(name);
    CliResult r = run_cli(fmt::format(
        "evaluate --model {0}{1}.keras --dataset npz:{0}{1}.npz --batch-size 16 --json", dir, name));
    ASSERT_EQ(r.code, 0) << r.describe();
    ASSERT_EQ(r.out_lines().size(), 1u) << r.describe();
    auto got = nlohmann::json::parse(r.out);
    const auto& want = keras[name]["evaluate"];
    EXPECT_EQ(got.size(), want.size()) << r.out;
    for (auto& [k, v] : want.items()) {
      ASSERT_TRUE(got.contains(k)) << k << " missing from " << r.out;
      EXPECT_NEAR(got[k].get<double>(), v.get<double>(), 2e-3) << k;
    }
  }

  // train goes on from the file (its loss, metrics and optimizer state) and prints each metric.
  CliResult t =
      run_cli(fmt::format("train --model {0}regression.keras --dataset npz:{0}regression.npz --epochs 1 "
                          "--batch-size 16 --verbose 0 "
                          "--save {1}",
                          dir, tmp.file("r.keras")));
  ASSERT_EQ(t.code, 0) << t.describe();
  EXPECT_NE(t.out.find("Test loss: "), std::string::npos) << t.describe();
  EXPECT_NE(t.out.find("Test mae: "), std::string::npos) << t.describe();
  EXPECT_NE(t.out.find("Test root_mean_squared_error: "), std::string::npos) << t.describe();
  auto trained = systolic::load_model(tmp.file("r.keras"));
  EXPECT_EQ(trained.optimizer().name(), "Adamax");
  EXPECT_EQ(trained.optimizer().iterations(), 12);  // Keras's 8 steps, then 4 here

  // predict --input: an .npy of samples, the outputs as .npy or JSON lines.
  auto data = systolic::npy::load_npz(dir + "regression.npz");
  systolic::npy::save(tmp.file("x.npy"), data.at("x_test"));  // float64, as numpy makes it
  CliResult p = run_cli(fmt::format("predict --model {}regression.keras --input {} --output {}", dir,
                                    tmp.file("x.npy"), tmp.file("y.npy")));
  ASSERT_EQ(p.code, 0) << p.describe();
  auto model = systolic::load_model(dir + "regression.keras");
  systolic::Tensor want = model.predict(data.at("x_test").to(systolic::DType::float32));
  systolic::Tensor y = systolic::npy::load(tmp.file("y.npy"));
  EXPECT_EQ(y.shape(), systolic::Shape({16, 1}));
  EXPECT_EQ(y.to_doubles(), want.to_doubles());
  CliResult lines =
      run_cli(fmt::format("predict --model {}regression.keras --input {}", dir, tmp.file("x.npy")));
  ASSERT_EQ(lines.code, 0) << lines.describe();
  ASSERT_EQ(lines.out_lines().size(), 16u) << lines.describe();
  EXPECT_NEAR(nlohmann::json::parse(lines.out_lines()[3])[0].get<double>(), want.to_doubles()[3], 1e-6);

  // Bad arrays: one clear error each.
  const std::string npy_dir = systolic::testing::source_dir() + "/tests/fixtures/npy/";
  expect_runtime_error(
      fmt::format("predict --model {}regression.keras --input {}bad_object.npy", dir, npy_dir),
      "pickled object array");
  expect_runtime_error(fmt::format("predict --model {}regression.keras --input {}float64.npy", dir, npy_dir),
                       "the model takes samples of shape (5,)");
  expect_runtime_error(
      fmt::format("evaluate --model {}regression.keras --dataset npz:{}no_y_test.npz", dir, npy_dir),
      "no array 'y_test'");
  expect_runtime_error(
      fmt::format("train --model {0}binary.keras --dataset npz:{0}regression.npz --epochs 1", dir),
      "the model takes inputs");
}

// Models of several inputs or outputs on the command line (issue 27): their arrays in an .npz by input and output
// name (or position), as Keras's fit takes dicts or lists. evaluate --json gives Keras's evaluate(return_dict=True) of
// the Keras-saved two_outputs model on its test arrays; train fits the two-input model and saves it; predict --input
// takes an .npz of inputs and writes an .npz of outputs (or JSON objects by output name); what does not fit is named.
TEST(Cli, SeveralInputsAndOutputs) {
  systolic::testing::TempDir tmp;
  const std::string dir = systolic::testing::source_dir() + "/tests/fixtures/multi_output/";
  nlohmann::json keras;
  std::ifstream(dir + "expected.json") >> keras;
  auto two_outputs = systolic::npy::load_npz(dir + "two_outputs.npz");
  // By name: x_<split>_features; y_<split>_label and y_<split>_value.
  systolic::npy::save_npz(tmp.file("two_outputs.npz"), {{"x_train_features", two_outputs.at("x")},
                                                        {"y_train_label", two_outputs.at("y_label")},
                                                        {"y_train_value", two_outputs.at("y_value")},
                                                        {"x_test_features", two_outputs.at("xs")},
                                                        {"y_test_label", two_outputs.at("ys_label")},
                                                        {"y_test_value", two_outputs.at("ys_value")}});
  CliResult e =
      run_cli(fmt::format("evaluate --model {}two_outputs.keras --dataset npz:{} --batch-size 8 --json", dir,
                          tmp.file("two_outputs.npz")));
  ASSERT_EQ(e.code, 0) << e.describe();
  auto got = nlohmann::json::parse(e.out);
  const auto& want = keras["two_outputs"]["evaluate_saved"];
  EXPECT_EQ(got.size(), want.size()) << e.out;
  for (auto& [k, v] : want.items()) {
    ASSERT_TRUE(got.contains(k)) << k << " missing from " << e.out;
    EXPECT_NEAR(got[k].get<double>(), v.get<double>(), 2e-3) << k;
  }

  // Two inputs: a by name, b by position; the one output's labels as plain y_train / y_test.
  auto two_inputs = systolic::npy::load_npz(dir + "two_inputs.npz");
  systolic::npy::save_npz(tmp.file("two_inputs.npz"), {{"x_train_a", two_inputs.at("xa")},
                                                       {"x_train_1", two_inputs.at("xb")},
                                                       {"y_train", two_inputs.at("y")},
                                                       {"x_test_a", two_inputs.at("xas")},
                                                       {"x_test_1", two_inputs.at("xbs")},
                                                       {"y_test", two_inputs.at("ys")}});
  CliResult t = run_cli(fmt::format(
      "train --model {}two_inputs.keras --dataset npz:{} --epochs 2 --batch-size 8 --verbose 0 --save {}",
      dir, tmp.file("two_inputs.npz"), tmp.file("trained.keras")));
  ASSERT_EQ(t.code, 0) << t.describe();
  EXPECT_NE(t.out.find("Test loss: "), std::string::npos) << t.describe();
  EXPECT_NE(t.out.find("Test accuracy: "), std::string::npos) << t.describe();
  auto trained = systolic::load_model(tmp.file("trained.keras"));
  const std::int64_t rows = two_inputs.at("xa").dim(0);
  EXPECT_EQ(trained.optimizer().iterations(), 2 * ((rows + 7) / 8));

  // predict: inputs by name and position, outputs to an .npz by name, or JSON objects.
  systolic::npy::save_npz(tmp.file("in.npz"), {{"a", two_inputs.at("xas")}, {"arr_1", two_inputs.at("xbs")}});
  CliResult p = run_cli(fmt::format("predict --model {} --input {} --output {}", tmp.file("trained.keras"),
                                    tmp.file("in.npz"), tmp.file("out.npz")));
  ASSERT_EQ(p.code, 0) << p.describe();
  auto out = systolic::npy::load_npz(tmp.file("out.npz"));
  ASSERT_EQ(out.count("prob"), 1u);
  systolic::Tensor prob = trained.predict(
      {two_inputs.at("xas").to(systolic::DType::float32), two_inputs.at("xbs").to(systolic::DType::float32)});
  EXPECT_EQ(out.at("prob").to_doubles(), prob.to_doubles());
  systolic::npy::save_npz(tmp.file("features.npz"), {{"features", two_outputs.at("xs")}});
  CliResult lines =
      run_cli(fmt::format("predict --model {}two_outputs.keras --input {}", dir, tmp.file("features.npz")));
  ASSERT_EQ(lines.code, 0) << lines.describe();
  ASSERT_EQ(std::int64_t(lines.out_lines().size()), two_outputs.at("xs").dim(0)) << lines.describe();
  auto both = systolic::load_model(dir + "two_outputs.keras")
                  .predict_outputs(two_outputs.at("xs").to(systolic::DType::float32));
  auto first = nlohmann::json::parse(lines.out_lines()[0]);
  ASSERT_EQ(first["label"].size(), 3u) << lines.out_lines()[0];
  EXPECT_NEAR(first["label"][2].get<double>(), both[0].to_doubles()[2], 1e-6);
  EXPECT_NEAR(first["value"][0].get<double>(), both[1].to_doubles()[0], 1e-6);

  // What does not fit: one clear error each.
  expect_runtime_error(
      fmt::format("train --model {}two_inputs.keras --dataset fashion_mnist --limit 8", dir),
      "the model has 2 inputs (a, b) and 1 outputs (prob); give its arrays as --dataset npz:PATH");
  systolic::npy::save_npz(tmp.file("no_b.npz"), {{"x_train_a", two_inputs.at("xa")},
                                                 {"y_train", two_inputs.at("y")},
                                                 {"x_test_a", two_inputs.at("xas")},
                                                 {"y_test", two_inputs.at("ys")}});
  expect_runtime_error(
      fmt::format("evaluate --model {}two_inputs.keras --dataset npz:{}", dir, tmp.file("no_b.npz")),
      "no array for the model's input 'b': name it x_train_b or x_train_1");
  systolic::npy::save_npz(tmp.file("swapped.npz"), {{"x_train_a", two_inputs.at("xb")},
                                                    {"x_train_b", two_inputs.at("xa")},
                                                    {"y_train", two_inputs.at("y")},
                                                    {"x_test_a", two_inputs.at("xbs")},
                                                    {"x_test_b", two_inputs.at("xas")},
                                                    {"y_test", two_inputs.at("ys")}});
  expect_runtime_error(
      fmt::format("evaluate --model {}two_inputs.keras --dataset npz:{}", dir, tmp.file("swapped.npz")),
      "the model's input 'a' takes samples of shape (4,) but its arrays have (3,)");
  systolic::npy::save_npz(tmp.file("short.npz"), {{"x_train_a", two_inputs.at("xa")},
                                                  {"x_train_b", two_inputs.at("xb").slice(0, 3)},
                                                  {"y_train", two_inputs.at("y")},
                                                  {"x_test_a", two_inputs.at("xas")},
                                                  {"x_test_b", two_inputs.at("xbs")},
                                                  {"y_test", two_inputs.at("ys")}});
  expect_runtime_error(
      fmt::format("train --model {}two_inputs.keras --dataset npz:{}", dir, tmp.file("short.npz")),
      "x_train_b has 3 samples but x_train_a has");
  systolic::npy::save(tmp.file("a.npy"), two_inputs.at("xas"));
  expect_runtime_error(fmt::format("predict --model {}two_inputs.keras --input {}", dir, tmp.file("a.npy")),
                       "the model has 2 inputs (a, b); give an .npz");
  expect_runtime_error(fmt::format("predict --model {}two_outputs.keras --input {} --output {}", dir,
                                   tmp.file("features.npz"), tmp.file("y.npy")),
                       "the model has 2 outputs (label, value); give an .npz name");
  expect_runtime_error(fmt::format("train --model {}two_inputs.keras --dataset npz:{} --horizontal-flip", dir,
                                   tmp.file("two_inputs.npz")),
                       "augment the images of a model of one input");
}

// train --class-weight: Keras's class_weight. Weights of 0 for both classes leave SGD nothing to learn from (the
// weights stay Keras's), weights of 1 are a plain fit (the weights move); a malformed pair is named.
TEST(Cli, TrainWithClassWeights) {
  systolic::testing::TempDir tmp;
  const std::string dir = systolic::testing::source_dir() + "/tests/fixtures/keras_training/";
  auto train = [&](const std::string& weights, const std::string& out) {
    return run_cli(
        fmt::format("train --model {0}binary.keras --dataset npz:{0}binary.npz --epochs 1 --batch-size 16 "
                    "--verbose 0 --optimizer sgd --lr 0.5 --loss binary_crossentropy --class-weight {1} "
                    "--save {2}",
                    dir, weights, tmp.file(out)));
  };
  auto flat = [](const systolic::Model& m) {
    std::vector<double> v;
    for (const auto& w : m.get_weights())
      for (double x : w.to_doubles()) v.push_back(x);
    return v;
  };
  const auto keras = flat(systolic::load_model(dir + "binary.keras"));
  CliResult zero = train("0:0,1:0", "zero.keras");
  ASSERT_EQ(zero.code, 0) << zero.describe();
  EXPECT_NE(zero.out.find("Test loss: "), std::string::npos) << zero.describe();
  EXPECT_EQ(flat(systolic::load_model(tmp.file("zero.keras"))), keras);
  CliResult one = train("0:1,1:1", "one.keras");
  ASSERT_EQ(one.code, 0) << one.describe();
  EXPECT_NE(flat(systolic::load_model(tmp.file("one.keras"))), keras);
  CliResult bad = train("0=1", "bad.keras");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.err.find("--class-weight '0=1': expected CLASS:WEIGHT pairs"), std::string::npos)
      << bad.describe();
}
