// examples/cifar10_tpu (the seed workflow, what scripts/demo runs), run as a program:
// - its CIFAR-10 path against the local HTTP server (tests/local_http.h) serving a generated archive in the
//   real binary format: downloaded, md5 checked, installed; one epoch on 300 samples; `Test accuracy: NN.NN%`; the
//   weights file loads into models::seed_cnn and gives the probabilities the program printed; a CIFAR-10
//   class name; the PNG holds test image 111;
// - the offline fallback (nothing listens at the CIFAR-10 address, no cache): one line says so, then
//   Fashion-MNIST in every heading and file name (skips visibly without Debian's dataset-fashion-mnist);
// - bad --replicas, --device, --policy and --dataset fail at once with one clear line;
// - scripts/demo --help lists its options.
// No network is needed: the server is on 127.0.0.1 and the "unreachable" address is a closed local port.
#include <gmock/gmock.h>
#include <sys/wait.h>
#include <systolic/systolic.h>

#include <algorithm>
#include <filesystem>
#include <regex>
#include <sstream>

#include "io/fetch.h"
#include "local_http.h"
#include "test_util.h"

using namespace systolic;
using systolic::testing::LocalHttpServer;
using systolic::testing::ScopedEnv;
using systolic::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

namespace {

const std::string kExample = SYSTOLIC_CIFAR10_TPU;  // "" when the examples are not built

struct ExampleRun {
  int code;
  std::string out;  // stdout and stderr together, in the order written
  std::vector<std::string> lines;
};

ExampleRun run_example(const std::string& args, const TempDir& dir) {
  fs::path log = dir.path() / "log";
  std::string cmd = "'" + kExample + "' " + args + " </dev/null >'" + log.string() + "' 2>&1";
  int status = std::system(cmd.c_str());
  ExampleRun r{WIFEXITED(status) ? WEXITSTATUS(status) : -1, systolic::testing::read_text(log), {}};
  std::stringstream ss(r.out);
  for (std::string line; std::getline(ss, line);) r.lines.push_back(line);
  return r;
}

std::vector<std::string> lines_with(const ExampleRun& r, const std::string& text) {
  std::vector<std::string> out;
  for (auto& l : r.lines)
    if (l.find(text) != std::string::npos) out.push_back(l);
  return out;
}

// The headings ("== CIFAR-10: ... =="): every one must name the data set the run used.
std::vector<std::string> headings(const ExampleRun& r) {
  std::vector<std::string> out;
  for (auto& l : r.lines)
    if (l.rfind("== ", 0) == 0) out.push_back(l);
  return out;
}

// The probabilities line "[0.1234 0.0000 ...]".
std::vector<double> printed_probabilities(const ExampleRun& r) {
  for (auto& l : r.lines) {
    if (l.size() < 2 || l.front() != '[' || l.back() != ']') continue;
    std::stringstream ss(l.substr(1, l.size() - 2));
    std::vector<double> p;
    for (double v; ss >> v;) p.push_back(v);
    return p;
  }
  return {};
}

// "Test image 111: predicted NAME (p=0.1234), label NAME" -> {predicted, label}.
std::pair<std::string, std::string> printed_prediction(const ExampleRun& r) {
  std::regex re(R"(^Test image 111: predicted (.+) \(p=[0-9.]+\), label (.+)$)");
  for (auto& l : r.lines) {
    std::smatch m;
    if (std::regex_match(l, m, re)) return {m[1], m[2]};
  }
  return {};
}

// What the example's create_model() must be: the seed CNN, as models::seed_cnn builds it, with the names a
// fresh process gives its layers (the example's first model).
std::string seed_summary(Shape shape) {
  clear_session();
  return models::seed_cnn(shape).summary_string();
}

class Cifar10Tpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kExample.empty()) GTEST_SKIP() << "the examples are not built (SYSTOLIC_BUILD_EXAMPLES=OFF)";
    env_.set("SYSTOLIC_HOME", (dir_.path() / "home").string());
    env_.set("no_proxy", "127.0.0.1,localhost");
    env_.set("NO_PROXY", "127.0.0.1,localhost");
  }
  std::string closed_url() const {
    return "http://127.0.0.1:" + std::to_string(systolic::testing::closed_port()) + "/cifar-10-binary.tar.gz";
  }
  TempDir dir_;
  ScopedEnv env_;
};

}  // namespace

TEST_F(Cifar10Tpu, CifarPathAgainstLocalServer) {
  std::string archive = systolic::testing::make_cifar_archive();
  fs::path archive_file = dir_.path() / "archive.tar.gz";
  std::ofstream(archive_file, std::ios::binary).write(archive.data(), std::streamsize(archive.size()));
  std::string md5 = io::file_digest(archive_file, "md5");
  LocalHttpServer server;
  server.serve("/cifar-10-binary.tar.gz", archive);
  std::string url = server.url("/cifar-10-binary.tar.gz");
  env_.set("SYSTOLIC_CIFAR10_URL", url);
  env_.set("SYSTOLIC_CIFAR10_MD5", md5);

  fs::path out = dir_.path() / "out";
  ExampleRun r =
      run_example("--epochs 1 --limit 300 --device cpu --seed 3 --output '" + out.string() + "'", dir_);
  ASSERT_EQ(r.code, 0) << r.out;

  // Downloaded once, checksum checked, installed in the cache.
  EXPECT_EQ(server.requests(), 1);
  EXPECT_THAT(r.out, HasSubstr("Downloading " + url));
  EXPECT_THAT(r.out, HasSubstr("Checked cifar-10-binary.tar.gz downloaded from " + url + ": md5 " + md5 +
                               " as expected"));
  EXPECT_TRUE(
      fs::is_regular_file(dir_.path() / "home" / "datasets" / "cifar-10-batches-bin" / "test_batch.bin"));

  // CIFAR-10 in every heading, Fashion-MNIST nowhere.
  auto h = headings(r);
  EXPECT_EQ(h.size(), 7u) << r.out;
  for (auto& l : h) EXPECT_EQ(l.rfind("== CIFAR-10: ", 0), 0u) << l;
  EXPECT_THAT(r.out, Not(HasSubstr("Fashion")));
  EXPECT_THAT(r.out,
              HasSubstr("x_train (300, 32, 32, 3) uint8, y_train (300, 1) uint8 (the first 300 of 50000"));

  // create_model() is the seed CNN; the strategy logs the hardware; one epoch of 3 batches of 128 (the last
  // 44).
  EXPECT_THAT(r.out, HasSubstr(seed_summary({32, 32, 3})));
  EXPECT_THAT(r.out, HasSubstr("Total params: 1,676,982"));
  EXPECT_THAT(r.out, HasSubstr("Host: cpu: "));
  EXPECT_THAT(r.out, HasSubstr("Strategy OneDeviceStrategy: 1 replica (cpu)"));
  EXPECT_THAT(r.out, HasSubstr("== CIFAR-10: tpu_model.fit(batch_size=128, epochs=1) on cpu =="));
  EXPECT_THAT(r.out, HasSubstr("Epoch 1/1\n3/3 - "));
  EXPECT_EQ(lines_with(r, "Test accuracy: ").size(), 1u);
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(\nTest accuracy: \d{1,3}\.\d\d%\n)"))) << r.out;

  // The weights file is a Keras file that the seed CNN loads, and it gives the probabilities printed.
  fs::path weights = out / "cifar10_model.h5";
  ASSERT_TRUE(fs::is_regular_file(weights));
  EXPECT_THAT(r.out, HasSubstr("Saved the weights to " + weights.string()));
  Model cpu = models::seed_cnn({32, 32, 3});
  cpu.load_weights(weights.string());
  Tensor x({1, 32, 32, 3}, DType::uint8);
  for (int y = 0; y < 32; ++y)
    for (int xx = 0; xx < 32; ++xx)
      for (int c = 0; c < 3; ++c)
        x.data<std::uint8_t>()[(y * 32 + xx) * 3 + c] = systolic::testing::cifar_pixel(5, 111, c, y, xx);
  std::vector<double> expected = cpu.predict(x).to_doubles();
  std::vector<double> printed = printed_probabilities(r);
  ASSERT_EQ(printed.size(), 10u) << r.out;
  for (int i = 0; i < 10; ++i) EXPECT_NEAR(printed[i], expected[i], 6e-5) << "class " << i;

  // The class names are CIFAR-10's; the synthetic test record 111 has label 2 (bird).
  auto [predicted, label] = printed_prediction(r);
  auto names = datasets::cifar10::class_names();
  EXPECT_NE(std::find(names.begin(), names.end(), predicted), names.end())
      << "predicted '" << predicted << "'";
  std::size_t best = std::size_t(std::max_element(expected.begin(), expected.end()) - expected.begin());
  EXPECT_EQ(predicted, names[best]);
  EXPECT_EQ(label, "bird");

  // The PNG: test image 111 scaled 8x.
  fs::path png = out / "cifar10_test_111.png";
  ASSERT_TRUE(fs::is_regular_file(png));
  Tensor img = image::read(png.string(), 3);
  ASSERT_EQ(img.shape(), Shape({256, 256, 3}));
  for (int c = 0; c < 3; ++c)
    EXPECT_EQ(img.data<std::uint8_t>()[((5 * 8 + 3) * 256 + 7 * 8 + 5) * 3 + c],
              systolic::testing::cifar_pixel(5, 111, c, 5, 7));
  EXPECT_THAT(r.out, Not(HasSubstr("\x1b["))) << "no terminal preview when the output is not a terminal";
}

TEST_F(Cifar10Tpu, OfflineFallsBackToFashionMnistInOneLine) {
  if (!systolic::testing::fashion_mnist_installed())
    GTEST_SKIP() << "Debian's dataset-fashion-mnist is not installed (" << systolic::testing::kFashionMnistDir
                 << ")";
  std::string url = closed_url();
  env_.set("SYSTOLIC_CIFAR10_URL", url);
  fs::path out = dir_.path() / "out";
  ExampleRun r =
      run_example("--epochs 1 --limit 300 --device cpu --seed 3 --output '" + out.string() + "'", dir_);
  ASSERT_EQ(r.code, 0) << r.out;

  // One line says what happened and why; the only other mention of CIFAR is the attempted download.
  auto fallback = lines_with(r, "CIFAR-10 unavailable, running the same workflow on Fashion-MNIST instead: ");
  ASSERT_EQ(fallback.size(), 1u) << r.out;
  EXPECT_THAT(fallback[0], HasSubstr("cannot download " + url));
  EXPECT_EQ(lines_with(r, "CIFAR").size(), 1u) << r.out;
  auto cifar_lines = lines_with(r, "cifar");
  ASSERT_EQ(cifar_lines.size(), 2u) << r.out;
  EXPECT_EQ(cifar_lines[0], "Downloading " + url);

  // Fashion-MNIST in every heading, file name and class name.
  auto h = headings(r);
  EXPECT_EQ(h.size(), 7u) << r.out;
  for (auto& l : h) EXPECT_EQ(l.rfind("== Fashion-MNIST: ", 0), 0u) << l;
  EXPECT_THAT(r.out, HasSubstr("x_train (300, 28, 28, 1) uint8, y_train (300,) uint8"));
  EXPECT_THAT(r.out, HasSubstr(seed_summary({28, 28, 1})));
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(\nTest accuracy: \d{1,3}\.\d\d%\n)"))) << r.out;
  EXPECT_TRUE(fs::is_regular_file(out / "fashion_mnist_model.h5"));
  EXPECT_FALSE(fs::exists(out / "cifar10_model.h5"));
  Model cpu = models::seed_cnn({28, 28, 1});
  cpu.load_weights((out / "fashion_mnist_model.h5").string());
  auto [predicted, label] = printed_prediction(r);
  auto names = datasets::fashion_mnist::class_names();
  EXPECT_NE(std::find(names.begin(), names.end(), predicted), names.end())
      << "predicted '" << predicted << "'";
  EXPECT_NE(std::find(names.begin(), names.end(), label), names.end()) << "label '" << label << "'";
  Tensor img = image::read((out / "fashion_mnist_test_111.png").string(), 1);
  EXPECT_EQ(img.shape(), Shape({224, 224, 1}));
}

TEST_F(Cifar10Tpu, BadOptionsFailAtOnceInOneLine) {
  // Nothing listens at the CIFAR-10 address: an option error must come before any attempt to load data.
  env_.set("SYSTOLIC_CIFAR10_URL", closed_url());
  ExampleRun r = run_example("--replicas 0", dir_);  // a usage error (exit 2), named by the option parser
  EXPECT_EQ(r.code, 2) << r.out;
  ASSERT_GE(r.lines.size(), 1u) << r.out;
  EXPECT_THAT(r.lines[0], HasSubstr("cifar10_tpu: error: --replicas: Value 0 not in range"));

  r = run_example("--device cuda:7", dir_);
  EXPECT_EQ(r.code, 1) << r.out;
  ASSERT_EQ(r.lines.size(), 1u) << r.out;
  EXPECT_THAT(r.lines[0], HasSubstr("cifar10_tpu: error: --device cuda:7: not available"));

  r = run_example("--device cpu --policy mixed_bfloat16", dir_);
  EXPECT_EQ(r.code, 1) << r.out;
  ASSERT_EQ(r.lines.size(), 1u) << r.out;
  EXPECT_THAT(
      r.lines[0],
      HasSubstr("cifar10_tpu: error: --policy mixed_bfloat16 computes in bfloat16, which needs a GPU"));

  r = run_example("--device tpu", dir_);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("cifar10_tpu: error: "));
  EXPECT_THAT(r.out, HasSubstr("tpu"));

  r = run_example("--dataset mnist", dir_);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("--dataset"));

  r = run_example("--help", dir_);
  EXPECT_EQ(r.code, 0) << r.out;
  for (auto* option : {"--dataset", "--epochs", "--device", "--replicas", "--limit", "--output"})
    EXPECT_THAT(r.out, HasSubstr(option));
}

// scripts/demo (the README's first command): its options, without installing or building anything.
TEST(Demo, HelpListsItsOptionsAndUnknownOptionsFail) {
  TempDir dir;
  std::string demo = systolic::testing::source_dir() + "/scripts/demo";
  auto run = [&](const std::string& args) {
    std::string cmd = "'" + demo + "' " + args + " </dev/null >'" + dir.file("log") + "' 2>&1";
    int status = std::system(cmd.c_str());
    return std::make_pair(WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                          systolic::testing::read_text(dir.file("log")));
  };
  auto [code, out] = run("--help");
  EXPECT_EQ(code, 0) << out;
  for (auto* option : {"--dataset", "--epochs", "--device", "--replicas", "--limit", "--output",
                       "fashion_mnist", "--epochs 50"})
    EXPECT_THAT(out, HasSubstr(option));
  std::tie(code, out) = run("--frobnicate");
  EXPECT_EQ(code, 2) << out;
  EXPECT_THAT(out, HasSubstr("scripts/demo: unknown option --frobnicate"));
  std::tie(code, out) = run("--epochs");
  EXPECT_EQ(code, 2) << out;
  EXPECT_THAT(out, HasSubstr("scripts/demo: --epochs needs a value"));
}
