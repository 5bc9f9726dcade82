// Helpers shared by the tests: random tensors, comparisons, the location of test data, temporary folders,
// error messages, whole-file reads.
#pragma once

#include <gtest/gtest.h>
#include <systolic/callbacks.h>
#include <systolic/datasets.h>
#include <systolic/device.h>
#include <systolic/error.h>
#include <systolic/random.h>
#include <systolic/tensor.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

namespace systolic::testing {

// Callback hooks take their logs by reference (a callback may add to them, as to Keras's logs dict): a
// temporary Logs for one call, e.g. cb.on_epoch_end(0, temp_logs({{"loss", 1.0}})).
inline callbacks::Logs& temp_logs(callbacks::Logs&& logs = {}) {
  return logs;
}

inline Tensor random_tensor(Shape shape, std::uint64_t seed, DType dtype = DType::float32, double lo = -1.0,
                            double hi = 1.0) {
  Generator g(seed);
  Tensor t(std::move(shape), DType::float64);
  double* p = t.data<double>();
  for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = lo + (hi - lo) * g.uniform();
  return dtype == DType::float64 ? t : t.to(dtype);
}

// Fills a tensor with NaN so a test notices outputs an op forgot to write.
inline void poison(Tensor& t) {
  t.fill(std::nan(""));
}

// max |a - b| / max(1, max |b|): the error normalised by the reference's scale.
inline double normalised_max_error(const Tensor& a, const Tensor& b) {
  auto av = a.to_doubles(), bv = b.to_doubles();
  EXPECT_EQ(av.size(), bv.size());
  double err = 0, scale = 1;
  for (std::size_t i = 0; i < av.size() && i < bv.size(); ++i) {
    if (std::isnan(av[i]) != std::isnan(bv[i])) return INFINITY;
    err = std::max(err, std::abs(av[i] - bv[i]));
    scale = std::max(scale, std::abs(bv[i]));
  }
  return err / scale;
}

// ||a - b|| / ||b|| (0 when both are zero).
inline double relative_l2_error(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

// The paths compiled in (the checkout, the built command) can be overridden from the environment, so that the
// test programs also run away from the build, as they do in the GPU bundle (scripts/gpu-bundle).
inline std::string env_or_compiled(const char* name, const char* compiled) {
  const char* env = std::getenv(name);
  return env && *env ? env : compiled;
}

// The checkout (tests/fixtures, scripts): $SYSTOLIC_SOURCE_DIR, else the one the tests were built from.
inline std::string source_dir() {
  return env_or_compiled("SYSTOLIC_SOURCE_DIR", SYSTOLIC_SOURCE_DIR);
}

// The `systolic` command: $SYSTOLIC_CLI, else the one built with the tests.
inline std::string cli_path() {
  return env_or_compiled("SYSTOLIC_CLI", SYSTOLIC_CLI);
}

// ../shared/data beside the checkout, or "" (tests that need it skip visibly).
inline std::string shared_data_dir() {
  if (const char* env = std::getenv("SYSTOLIC_SHARED_DATA")) return env;
  auto p = std::filesystem::path(source_dir()).parent_path() / "shared" / "data";
  return std::filesystem::exists(p) ? p.string() : "";
}

// Where fashion_mnist::load_data() finds Fashion-MNIST without downloading it: the cache
// ($SYSTOLIC_HOME/datasets/fashion-mnist), else Debian's dataset-fashion-mnist
// (/usr/share/datasets/fashion-mnist); Debian's folder when neither has it (tests that need it skip visibly
// then).
inline const std::string& fashion_mnist_dir() {
  static const std::string dir = [] {
    namespace fs = std::filesystem;
    for (const fs::path& d :
         {fs::path(datasets::cache_dir()) / "fashion-mnist", fs::path("/usr/share/datasets/fashion-mnist")}) {
      bool all = true;
      for (const char* f : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                            "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"})
        all = all && fs::exists(d / f);
      if (all) return d.string();
    }
    return std::string("/usr/share/datasets/fashion-mnist");
  }();
  return dir;
}
inline const char* kFashionMnistDir = fashion_mnist_dir().c_str();
inline bool fashion_mnist_installed() {
  for (const char* f : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                        "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"})
    if (!std::filesystem::exists(std::filesystem::path(kFashionMnistDir) / f)) return false;
  return true;
}

// A fresh folder under the system's temp folder, named after the test, removed with everything in it at the
// end of the scope.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = "systolic_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
    if (info) name += std::string("_") + info->test_suite_name() + "_" + info->name();
    path_ = std::filesystem::temp_directory_path() / name;
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string str() const { return path_.string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Runs fn, which must throw systolic::Error; returns its message ("" and a failure when it does not).
inline std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw a std::exception that is not systolic::Error: " << e.what();
    return e.what();
  }
  ADD_FAILURE() << "did not throw";
  return "";
}

// The whole file as bytes ("" when it cannot be read).
inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A fixture's raw little-endian float32 file as a tensor of this shape (a short file fails the test).
inline Tensor read_floats(const std::string& path, const Shape& shape) {
  Tensor t(shape);
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.read(reinterpret_cast<char*>(t.data<float>()), static_cast<std::streamsize>(t.nbytes())))
      << path;
  return t;
}

inline double max_abs_diff(const Tensor& a, const Tensor& b) {
  auto av = a.to_doubles(), bv = b.to_doubles();
  EXPECT_EQ(av.size(), bv.size());
  double m = 0;
  for (std::size_t i = 0; i < av.size() && i < bv.size(); ++i) m = std::max(m, std::abs(av[i] - bv[i]));
  return m;
}

// Same shape, dtype and bytes (wherever the tensors live).
inline bool bit_identical(const Tensor& a, const Tensor& b) {
  Tensor ha = a.to(Device::cpu()), hb = b.to(Device::cpu());
  return ha.shape() == hb.shape() && ha.dtype() == hb.dtype() &&
         std::memcmp(ha.raw_data(), hb.raw_data(), ha.nbytes()) == 0;
}

}  // namespace systolic::testing
