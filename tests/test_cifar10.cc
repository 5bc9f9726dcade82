// CIFAR-10 download, verification, safe extraction and cache, against a local HTTP server on 127.0.0.1 serving
// archives generated here in the exact binary format (no network needed): the happy path and a second load
// without requests, a wrong md5, refused entries (../, absolute paths, links), a truncated test_batch.bin, an
// interrupted download, no server at all, HTTP errors, a hand-placed archive; and `systolic show` on it.
#include <gmock/gmock.h>
#include <sys/wait.h>
#include <systolic/systolic.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "io/fetch.h"
#include "local_http.h"
#include "test_util.h"

using namespace systolic;
using systolic::testing::ArchiveEntry;
using systolic::testing::LocalHttpServer;
using systolic::testing::ScopedEnv;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

namespace {

std::string md5_of(const std::string& bytes) {
  fs::path p = fs::temp_directory_path() / ("systolic_md5_" + std::to_string(::getpid()));
  std::ofstream(p, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
  std::string d = io::file_digest(p, "md5");
  fs::remove(p);
  return d;
}

// The full-size archives, generated once per run (each about 184 MB of records before compression).
const std::string& good_archive() {
  static const std::string a = systolic::testing::make_cifar_archive();
  return a;
}
const std::string& good_md5() {
  static const std::string m = md5_of(good_archive());
  return m;
}

// A fresh SYSTOLIC_HOME (under a parent folder, so a test can see anything written beside the cache) and the
// CIFAR-10 variables pointing at a local server.
class Cifar10Download : public ::testing::Test {
 protected:
  void SetUp() override {
    parent_ = fs::temp_directory_path() / ("systolic_test_cifar10_" + std::to_string(::getpid()) + "_" +
                                           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(parent_);
    home_ = parent_ / "home";
    fs::create_directories(home_);
    env_.set("SYSTOLIC_HOME", home_.string());
    env_.set("no_proxy", "127.0.0.1,localhost");
    env_.set("NO_PROXY", "127.0.0.1,localhost");
    log_stream_ = log_stream();
    set_log_stream(stderr);
  }
  void TearDown() override {
    set_log_stream(log_stream_);
    std::error_code ec;
    fs::remove_all(parent_, ec);
  }
  void point_at(const std::string& url, const std::string& md5) {
    env_.set("SYSTOLIC_CIFAR10_URL", url);
    env_.set("SYSTOLIC_CIFAR10_MD5", md5);
  }
  fs::path cache() const { return home_ / "datasets"; }
  // Every file and folder under the test's parent folder except the cached data set itself.
  std::vector<std::string> stray_files() const {
    std::vector<std::string> out;
    for (auto& e : fs::recursive_directory_iterator(parent_)) {
      std::string p = fs::relative(e.path(), parent_).string();
      if (p == "home" || p == "home/datasets") continue;
      out.push_back(p);
    }
    return out;
  }
  std::string load_error() {
    try {
      datasets::cifar10::load_data();
    } catch (const Error& e) {
      return e.what();
    }
    ADD_FAILURE() << "cifar10::load_data did not throw";
    return "";
  }

  fs::path parent_, home_;
  ScopedEnv env_;
  std::FILE* log_stream_ = nullptr;
};

void expect_synthetic(const datasets::Dataset& d) {
  ASSERT_EQ(d.train.x.shape(), Shape({50000, 32, 32, 3}));
  ASSERT_EQ(d.train.y.shape(), Shape({50000, 1}));
  ASSERT_EQ(d.test.x.shape(), Shape({10000, 32, 32, 3}));
  ASSERT_EQ(d.test.y.shape(), Shape({10000, 1}));
  ASSERT_EQ(d.train.x.dtype(), DType::uint8);
  ASSERT_EQ(d.train.y.dtype(), DType::uint8);
  using systolic::testing::cifar_label;
  using systolic::testing::cifar_pixel;
  // Samples across every batch file: labels, and all 3072 pixels in channels_last order.
  for (std::int64_t n : {0L, 1L, 9999L, 10000L, 23456L, 49999L}) {
    int k = int(n / 10000);
    std::int64_t r = n % 10000;
    EXPECT_EQ(d.train.y.data<std::uint8_t>()[n], cifar_label(k, r)) << "train label " << n;
    const std::uint8_t* img = d.train.x.data<std::uint8_t>() + n * 3072;
    int bad = 0;
    for (int y = 0; y < 32; ++y)
      for (int x = 0; x < 32; ++x)
        for (int c = 0; c < 3; ++c) bad += img[(y * 32 + x) * 3 + c] != cifar_pixel(k, r, c, y, x);
    EXPECT_EQ(bad, 0) << "train image " << n;
  }
  for (std::int64_t n : {0L, 111L, 9999L}) {
    EXPECT_EQ(d.test.y.data<std::uint8_t>()[n], cifar_label(5, n)) << "test label " << n;
    const std::uint8_t* img = d.test.x.data<std::uint8_t>() + n * 3072;
    EXPECT_EQ(img[(5 * 32 + 7) * 3 + 2], cifar_pixel(5, n, 2, 5, 7)) << "test image " << n;
  }
  EXPECT_EQ(d.class_names, datasets::cifar10::class_names());
}

}  // namespace

TEST_F(Cifar10Download, DownloadVerifyExtractLoadThenCacheOnly) {
  LocalHttpServer server;
  server.serve("/cifar-10-binary.tar.gz", good_archive());
  point_at(server.url("/cifar-10-binary.tar.gz"), good_md5());
  auto d = datasets::cifar10::load_data();
  EXPECT_EQ(server.requests(), 1);
  expect_synthetic(d);
  // Installed in the cache; the download and the temporary folder are gone.
  EXPECT_TRUE(fs::is_regular_file(cache() / "cifar-10-batches-bin" / "test_batch.bin"));
  auto files = stray_files();
  EXPECT_NE(std::find(files.begin(), files.end(), "home/datasets/cifar-10-batches-bin"), files.end());
  for (auto& f : stray_files()) {
    EXPECT_EQ(f.rfind("home/datasets/cifar-10-batches-bin", 0), 0u) << "left behind: " << f;
    EXPECT_EQ(f.find("tar.gz"), std::string::npos) << "left behind: " << f;
  }
  // The second load reads the cache and makes no request, even with the server gone.
  auto d2 = datasets::cifar10::load_data();
  EXPECT_EQ(server.requests(), 1);
  point_at("http://127.0.0.1:" + std::to_string(systolic::testing::closed_port()) + "/x.tar.gz", good_md5());
  auto d3 = datasets::cifar10::load_data();
  EXPECT_EQ(server.requests(), 1);
  expect_synthetic(d3);
}

TEST_F(Cifar10Download, WrongMd5IsRefusedAndDeleted) {
  LocalHttpServer server;
  server.serve("/c.tar.gz", good_archive());
  point_at(server.url("/c.tar.gz"), "0123456789abcdef0123456789abcdef");
  std::string msg = load_error();
  EXPECT_THAT(msg, HasSubstr("md5 " + good_md5()));
  EXPECT_THAT(msg, HasSubstr("0123456789abcdef0123456789abcdef"));
  EXPECT_THAT(msg, HasSubstr("deleted"));
  EXPECT_EQ(stray_files(), std::vector<std::string>{}) << "the bad download must not stay anywhere";
  // A download that arrived but is wrong is not "unavailable": no program should quietly use another data set.
  try {
    datasets::cifar10::load_data();
    ADD_FAILURE() << "no error";
  } catch (const datasets::Unavailable& e) {
    ADD_FAILURE() << "a wrong md5 raised Unavailable: " << e.what();
  } catch (const Error&) {
  }
}

TEST_F(Cifar10Download, DotDotEntryIsRefusedAndNothingWrittenOutside) {
  std::string archive = systolic::testing::make_tar_gz({
      {"cifar-10-batches-bin/", "", 0040000, ""},
      {"cifar-10-batches-bin/batches.meta.txt", "airplane\n", 0100000, ""},
      {"cifar-10-batches-bin/../../../../evil.txt", "owned\n", 0100000, ""},
  });
  LocalHttpServer server;
  server.serve("/c.tar.gz", archive);
  point_at(server.url("/c.tar.gz"), md5_of(archive));
  std::string msg = load_error();
  EXPECT_THAT(msg, HasSubstr("refused archive entry 'cifar-10-batches-bin/../../../../evil.txt'"));
  EXPECT_THAT(msg, HasSubstr(".."));
  EXPECT_EQ(stray_files(), std::vector<std::string>{});
  EXPECT_FALSE(fs::exists(parent_.parent_path() / "evil.txt"));
  EXPECT_FALSE(fs::exists(parent_ / "evil.txt"));
}

TEST_F(Cifar10Download, AbsolutePathsLinksAndDevicesAreRefused) {
  struct Case {
    ArchiveEntry entry;
    const char* why;
  };
  std::vector<Case> cases = {
      {{"/tmp/systolic_absolute_evil.txt", "x", 0100000, ""}, "absolute path"},
      {{"cifar-10-batches-bin/link", "", 0120000, "/etc/passwd"}, "symbolic link"},
      {{"cifar-10-batches-bin/fifo", "", 0010000, ""}, "FIFO"},
      {{"cifar-10-batches-bin/chr", "", 0020000, ""}, "character device"},
  };
  for (auto& c : cases) {
    SCOPED_TRACE(c.entry.path);
    std::string archive =
        systolic::testing::make_tar_gz({{"cifar-10-batches-bin/", "", 0040000, ""}, c.entry});
    LocalHttpServer server;
    server.serve("/c.tar.gz", archive);
    point_at(server.url("/c.tar.gz"), md5_of(archive));
    std::string msg = load_error();
    EXPECT_THAT(msg, HasSubstr("refused archive entry '" + c.entry.path + "'"));
    EXPECT_THAT(msg, HasSubstr(c.why));
    EXPECT_EQ(stray_files(), std::vector<std::string>{});
  }
  EXPECT_FALSE(fs::exists("/tmp/systolic_absolute_evil.txt"));
}

TEST_F(Cifar10Download, TruncatedTestBatchIsRefusedByName) {
  std::string archive = systolic::testing::make_cifar_archive(/*truncate_test=*/1000);
  LocalHttpServer server;
  server.serve("/c.tar.gz", archive);
  point_at(server.url("/c.tar.gz"), md5_of(archive));
  std::string msg = load_error();
  EXPECT_THAT(msg, HasSubstr("test_batch.bin"));
  EXPECT_THAT(msg, HasSubstr("30729000 bytes"));
  EXPECT_THAT(msg, HasSubstr("expected 30730000"));
  EXPECT_THAT(msg, HasSubstr("nothing was installed"));
  EXPECT_EQ(stray_files(), std::vector<std::string>{});
}

TEST_F(Cifar10Download, CorruptArchiveIsRefused) {
  std::string archive = systolic::testing::make_tar_gz(
      {{"cifar-10-batches-bin/data_batch_1.bin", systolic::testing::cifar_batch(0, 300), 0100000, ""}});
  archive.resize(archive.size() / 2);  // cut in the middle of the gzip stream
  LocalHttpServer server;
  server.serve("/c.tar.gz", archive);
  point_at(server.url("/c.tar.gz"), md5_of(archive));
  std::string msg = load_error();
  EXPECT_THAT(msg, HasSubstr("cifar-10-binary.tar.gz"));
  EXPECT_THAT(msg, HasSubstr("truncated or corrupt"));
  EXPECT_EQ(stray_files(), std::vector<std::string>{});
}

TEST_F(Cifar10Download, InterruptedDownloadLeavesNoUsableFile) {
  LocalHttpServer server;
  server.serve("/c.tar.gz", good_archive(), good_archive().size() / 2);
  point_at(server.url("/c.tar.gz"), good_md5());
  std::string msg = load_error();
  EXPECT_THAT(msg, HasSubstr("cannot download " + server.url("/c.tar.gz")));
  EXPECT_EQ(stray_files(), std::vector<std::string>{});
  // The next attempt starts from scratch and succeeds.
  server.serve("/c.tar.gz", good_archive());
  expect_synthetic(datasets::cifar10::load_data());
  EXPECT_EQ(server.requests(), 2);
}

TEST_F(Cifar10Download, NoServerExplainsItself) {
  std::string url =
      "http://127.0.0.1:" + std::to_string(systolic::testing::closed_port()) + "/cifar-10-binary.tar.gz";
  point_at(url, good_md5());
  std::string msg = load_error();
  EXPECT_THAT(msg, HasSubstr("cannot download " + url));
  EXPECT_THAT(msg, HasSubstr("place cifar-10-binary.tar.gz"));
  EXPECT_THAT(msg, HasSubstr(cache().string()));
  EXPECT_THAT(msg, HasSubstr("Fashion-MNIST works offline"));
  EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line";
  // The type a program catches to fall back to another data set (examples/cifar10_tpu.cc does).
  EXPECT_THROW(datasets::cifar10::load_data(), datasets::Unavailable);
  EXPECT_EQ(stray_files(), std::vector<std::string>{});
}

TEST_F(Cifar10Download, HttpErrorStatus) {
  LocalHttpServer server;  // serves nothing: 404
  point_at(server.url("/missing.tar.gz"), good_md5());
  std::string msg = load_error();
  EXPECT_THAT(msg, HasSubstr("cannot download " + server.url("/missing.tar.gz")));
  EXPECT_THAT(msg, HasSubstr("404"));
  EXPECT_EQ(stray_files(), std::vector<std::string>{});
}

TEST_F(Cifar10Download, HandPlacedArchiveNeedsNoNetwork) {
  fs::create_directories(cache());
  std::ofstream(cache() / "cifar-10-binary.tar.gz", std::ios::binary)
      .write(good_archive().data(), std::streamsize(good_archive().size()));
  point_at("http://127.0.0.1:" + std::to_string(systolic::testing::closed_port()) + "/x.tar.gz", good_md5());
  expect_synthetic(datasets::cifar10::load_data());
  EXPECT_TRUE(fs::is_directory(cache() / "cifar-10-batches-bin"));

  // A hand-placed archive with the wrong md5 is refused and left in place (it is the user's file).
  fs::remove_all(cache() / "cifar-10-batches-bin");
  env_.set("SYSTOLIC_CIFAR10_MD5", "ffffffffffffffffffffffffffffffff");
  std::string msg = load_error();
  EXPECT_THAT(msg, HasSubstr((cache() / "cifar-10-binary.tar.gz").string()));
  EXPECT_THAT(msg, HasSubstr("left in place"));
  EXPECT_TRUE(fs::exists(cache() / "cifar-10-binary.tar.gz"));
}

// ---------------------------------------------------------------------------------------------------------------
// Batch files read directly.

TEST(Cifar10Batch, CorruptLabelAndWrongSize) {
  fs::path dir = fs::temp_directory_path() / ("systolic_test_cifar_batch_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string b = systolic::testing::cifar_batch(0, 3);
  std::ofstream((dir / "good.bin").string(), std::ios::binary).write(b.data(), std::streamsize(b.size()));
  auto s = datasets::cifar10::read_batch((dir / "good.bin").string(), 3);
  EXPECT_EQ(s.x.shape(), Shape({3, 32, 32, 3}));
  EXPECT_EQ(s.y.data<std::uint8_t>()[2], systolic::testing::cifar_label(0, 2));
  b[3073] = 10;  // record 1's label
  std::ofstream((dir / "bad.bin").string(), std::ios::binary).write(b.data(), std::streamsize(b.size()));
  try {
    datasets::cifar10::read_batch((dir / "bad.bin").string(), 3);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("bad.bin"));
    EXPECT_THAT(e.what(), HasSubstr("record 1 has label 10"));
  }
  try {
    datasets::cifar10::read_batch((dir / "good.bin").string(), 4);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("good.bin"));
    EXPECT_THAT(e.what(), HasSubstr("9219 bytes, expected 12292"));
  }
  fs::remove_all(dir);
}

// ---------------------------------------------------------------------------------------------------------------
// The command: `systolic show --dataset cifar10 --split test --index 111 -o plane.png` against a server.

namespace {
struct CliRun {
  int code;
  std::string out, err;
};
CliRun run_cli(const std::string& args, const fs::path& dir) {
  std::string cmd = "'" + systolic::testing::cli_path() + "' " + args + " </dev/null >'" +
                    (dir / "out").string() + "' 2>'" + (dir / "err").string() + "'";
  int status = std::system(cmd.c_str());
  auto slurp = [](const fs::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(dir / "out"), slurp(dir / "err")};
}
}  // namespace

TEST_F(Cifar10Download, ShowCommandAgainstServerAndWithout) {
  LocalHttpServer server;
  server.serve("/cifar-10-binary.tar.gz", good_archive());
  point_at(server.url("/cifar-10-binary.tar.gz"), good_md5());
  fs::path png = parent_ / "plane.png";
  CliRun r = run_cli("show --dataset cifar10 --split test --index 111 -o '" + png.string() + "'", parent_);
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("label 2 (bird)"));  // the synthetic label of test record 111
  Tensor img = image::read(png.string(), 3);
  ASSERT_EQ(img.shape(), Shape({256, 256, 3}));
  for (int c = 0; c < 3; ++c)
    EXPECT_EQ(img.data<std::uint8_t>()[((5 * 8 + 3) * 256 + 7 * 8 + 5) * 3 + c],
              systolic::testing::cifar_pixel(5, 111, c, 5, 7));

  // Without a cache and without a server: exit 1, the last line one clear error.
  fs::remove_all(cache());
  point_at("http://127.0.0.1:" + std::to_string(systolic::testing::closed_port()) + "/cifar-10-binary.tar.gz",
           good_md5());
  CliRun e = run_cli("show --dataset cifar10 --split test --index 111 -o '" + png.string() + "'", parent_);
  EXPECT_EQ(e.code, 1) << e.err;
  std::string last = e.err.substr(
      e.err.rfind("systolic: error:") == std::string::npos ? 0 : e.err.rfind("systolic: error:"));
  EXPECT_THAT(last, HasSubstr("systolic: error: CIFAR-10 is not in"));
  EXPECT_THAT(last, HasSubstr("Fashion-MNIST works offline"));
  EXPECT_EQ(std::count(last.begin(), last.end(), '\n'), 1) << last;
}
