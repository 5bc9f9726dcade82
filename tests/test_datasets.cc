// Data sets: the real Fashion-MNIST (when Debian's dataset-fashion-mnist is installed), the IDX reader on
// good and bad files (plain and gzip), fashion_mnist::load_data on directories holding wrong files, and
// load() by name (image folders, the channel axis, limits, names that are no data set).
#include <gmock/gmock.h>
#include <systolic/systolic.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "test_util.h"

using namespace systolic;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

namespace {

const char* kFashionDir = systolic::testing::kFashionMnistDir;
using systolic::testing::error_of;
using systolic::testing::fashion_mnist_installed;
using systolic::testing::TempDir;

using Bytes = std::vector<std::uint8_t>;

// An IDX file: magic 00 00 <type> <rank>, big-endian 32-bit dims, then the payload as given.
Bytes idx_bytes(std::uint8_t type, const std::vector<std::uint32_t>& dims, const Bytes& payload) {
  Bytes b = {0, 0, type, static_cast<std::uint8_t>(dims.size())};
  for (auto d : dims) {
    b.push_back(static_cast<std::uint8_t>(d >> 24));
    b.push_back(static_cast<std::uint8_t>(d >> 16));
    b.push_back(static_cast<std::uint8_t>(d >> 8));
    b.push_back(static_cast<std::uint8_t>(d));
  }
  b.insert(b.end(), payload.begin(), payload.end());
  return b;
}

Bytes iota_bytes(std::size_t n, std::uint8_t start = 0) {
  Bytes b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<std::uint8_t>(start + i * 7);
  return b;
}

void write_plain(const std::string& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

void write_gzip(const std::string& path, const Bytes& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr) << "cannot open " << path;
  std::size_t done = 0;
  while (done < bytes.size()) {
    unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(bytes.size() - done, 1u << 24));
    int w = gzwrite(f, bytes.data() + done, chunk);
    ASSERT_GT(w, 0) << "gzwrite failed on " << path;
    done += static_cast<std::size_t>(w);
  }
  ASSERT_EQ(gzclose(f), Z_OK);
}

Bytes read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string idx_error(const std::string& path) {
  return error_of([&] { datasets::read_idx(path); });
}

Bytes tensor_bytes(const Tensor& t) {
  const std::uint8_t* p = t.data<std::uint8_t>();
  return Bytes(p, p + t.numel());
}

}  // namespace

// -----------------------------------------------------------------------------------------------------------
// The real Fashion-MNIST.

TEST(FashionMnist, RealDataShapesClassesAndPixels) {
  if (!fashion_mnist_installed())
    GTEST_SKIP() << kFashionDir << " is absent (install Debian's dataset-fashion-mnist to run this test)";
  auto d = datasets::fashion_mnist::load_data();
  ASSERT_EQ(d.train.x.dtype(), DType::uint8);
  ASSERT_EQ(d.train.y.dtype(), DType::uint8);
  ASSERT_EQ(d.test.x.dtype(), DType::uint8);
  ASSERT_EQ(d.test.y.dtype(), DType::uint8);
  ASSERT_EQ(d.train.x.shape(), Shape({60000, 28, 28}));
  ASSERT_EQ(d.train.y.shape(), Shape({60000}));
  ASSERT_EQ(d.test.x.shape(), Shape({10000, 28, 28}));
  ASSERT_EQ(d.test.y.shape(), Shape({10000}));

  auto count_classes = [](const Tensor& y) {
    std::vector<std::int64_t> counts(10, 0);
    const std::uint8_t* p = y.data<std::uint8_t>();
    for (std::int64_t i = 0; i < y.numel(); ++i) {
      EXPECT_LT(p[i], 10) << "label of sample " << i;
      if (p[i] < 10) ++counts[p[i]];
    }
    return counts;
  };
  EXPECT_EQ(count_classes(d.train.y), std::vector<std::int64_t>(10, 6000));
  EXPECT_EQ(count_classes(d.test.y), std::vector<std::int64_t>(10, 1000));

  auto min_max = [](const Tensor& x) {
    const std::uint8_t* p = x.data<std::uint8_t>();
    std::uint8_t lo = 255, hi = 0;
    for (std::int64_t i = 0; i < x.numel(); ++i) lo = std::min(lo, p[i]), hi = std::max(hi, p[i]);
    return std::pair<int, int>(lo, hi);
  };
  EXPECT_EQ(min_max(d.train.x), std::make_pair(0, 255));
  EXPECT_EQ(min_max(d.test.x), std::make_pair(0, 255));

  // Known contents: the first labels of each split and the pixel sum of the first training image.
  const std::uint8_t* ytr = d.train.y.data<std::uint8_t>();
  const std::uint8_t* yte = d.test.y.data<std::uint8_t>();
  EXPECT_EQ(Bytes(ytr, ytr + 5), (Bytes{9, 0, 0, 3, 0}));
  EXPECT_EQ(Bytes(yte, yte + 5), (Bytes{9, 2, 1, 1, 6}));
  const std::uint8_t* x0 = d.train.x.data<std::uint8_t>();
  std::int64_t sum = 0;
  for (int i = 0; i < 28 * 28; ++i) sum += x0[i];
  EXPECT_EQ(sum, 76247);

  ASSERT_EQ(d.class_names.size(), 10u);
  EXPECT_EQ(d.class_names.front(), "T-shirt/top");
  EXPECT_EQ(d.class_names.back(), "Ankle boot");
  EXPECT_EQ(d.class_names, datasets::fashion_mnist::class_names());
}

TEST(FashionMnist, ExplicitDirectoryMatchesDefault) {
  if (!fashion_mnist_installed())
    GTEST_SKIP() << kFashionDir << " is absent (install Debian's dataset-fashion-mnist to run this test)";
  // read_idx on one real file directly.
  Tensor y = datasets::read_idx(std::string(kFashionDir) + "/t10k-labels-idx1-ubyte.gz");
  EXPECT_EQ(y.shape(), Shape({10000}));
  auto d = datasets::fashion_mnist::load_data(kFashionDir);
  EXPECT_EQ(tensor_bytes(d.test.y), tensor_bytes(y));
}

// -----------------------------------------------------------------------------------------------------------
// The IDX reader: valid files.

TEST(ReadIdx, PlainRoundTrip) {
  TempDir dir;
  Bytes payload = iota_bytes(2 * 3 * 4, 5);
  std::string path = dir.file("small-idx3-ubyte");
  write_plain(path, idx_bytes(0x08, {2, 3, 4}, payload));
  Tensor t = datasets::read_idx(path);
  EXPECT_EQ(t.dtype(), DType::uint8);
  EXPECT_EQ(t.shape(), Shape({2, 3, 4}));
  EXPECT_EQ(tensor_bytes(t), payload);
}

TEST(ReadIdx, GzipRoundTrip) {
  TempDir dir;
  Bytes payload = iota_bytes(5 * 7, 200);
  std::string path = dir.file("small-idx2-ubyte.gz");
  write_gzip(path, idx_bytes(0x08, {5, 7}, payload));
  // It really is gzip (magic 1f 8b), not a plain file.
  Bytes raw = read_file_bytes(path);
  ASSERT_GE(raw.size(), 2u);
  EXPECT_EQ(raw[0], 0x1f);
  EXPECT_EQ(raw[1], 0x8b);
  Tensor t = datasets::read_idx(path);
  EXPECT_EQ(t.dtype(), DType::uint8);
  EXPECT_EQ(t.shape(), Shape({5, 7}));
  EXPECT_EQ(tensor_bytes(t), payload);
}

TEST(ReadIdx, RankOneAndRankFour) {
  TempDir dir;
  Bytes labels = {3, 1, 4, 1, 5, 9};
  write_gzip(dir.file("labels.gz"), idx_bytes(0x08, {6}, labels));
  Tensor y = datasets::read_idx(dir.file("labels.gz"));
  EXPECT_EQ(y.shape(), Shape({6}));
  EXPECT_EQ(tensor_bytes(y), labels);

  Bytes images = iota_bytes(2 * 2 * 2 * 3);
  write_plain(dir.file("images4"), idx_bytes(0x08, {2, 2, 2, 3}, images));
  Tensor x = datasets::read_idx(dir.file("images4"));
  EXPECT_EQ(x.shape(), Shape({2, 2, 2, 3}));
  EXPECT_EQ(tensor_bytes(x), images);
}

// -----------------------------------------------------------------------------------------------------------
// The IDX reader: bad files. Each error is a systolic::Error naming the file and what is wrong with it.

TEST(ReadIdx, WrongMagicIsNotIdx) {
  TempDir dir;
  std::string path = dir.file("not-idx.txt");
  std::string text = "P5\n28 28\n255\nthis is not an IDX file at all";
  write_plain(path, Bytes(text.begin(), text.end()));
  std::string msg = idx_error(path);
  EXPECT_THAT(msg, HasSubstr(path));
  EXPECT_THAT(msg, HasSubstr("not an IDX file"));
}

TEST(ReadIdx, ElementTypeOtherThanUnsignedByte) {
  TempDir dir;
  std::string path = dir.file("float-idx1");
  write_plain(path, idx_bytes(0x0D, {2}, Bytes(8, 0)));  // 0x0D: float32
  std::string msg = idx_error(path);
  EXPECT_THAT(msg, HasSubstr(path));
  EXPECT_THAT(msg, HasSubstr("element type 0x0d"));
  EXPECT_THAT(msg, HasSubstr("unsigned byte"));
}

TEST(ReadIdx, HeaderTruncatedMidDimensions) {
  TempDir dir;
  std::string path = dir.file("short-header-idx3");
  Bytes b = idx_bytes(0x08, {10, 28, 28}, {});
  b.resize(4 + 4 + 2);  // magic, the first dimension, then half of the second
  write_plain(path, b);
  std::string msg = idx_error(path);
  EXPECT_THAT(msg, HasSubstr(path));
  EXPECT_THAT(msg, HasSubstr("truncated"));
  EXPECT_THAT(msg, HasSubstr("dimensions"));
}

TEST(ReadIdx, HeaderTruncatedInMagic) {
  TempDir dir;
  std::string path = dir.file("two-bytes");
  write_plain(path, Bytes{0, 0});
  std::string msg = idx_error(path);
  EXPECT_THAT(msg, HasSubstr(path));
  EXPECT_THAT(msg, HasSubstr("truncated"));
}

TEST(ReadIdx, DataTruncated) {
  TempDir dir;
  std::string path = dir.file("short-data-idx2");
  write_plain(path, idx_bytes(0x08, {4, 5}, iota_bytes(17)));  // 20 bytes promised, 17 there
  std::string msg = idx_error(path);
  EXPECT_THAT(msg, HasSubstr(path));
  EXPECT_THAT(msg, HasSubstr("truncated"));
  EXPECT_THAT(msg, HasSubstr("20 bytes"));
  EXPECT_THAT(msg, HasSubstr("17"));
}

TEST(ReadIdx, DataTruncatedInGzip) {
  TempDir dir;
  std::string path = dir.file("short-data-idx2.gz");
  write_gzip(path, idx_bytes(0x08, {4, 5}, iota_bytes(17)));  // a complete gzip stream of too few bytes
  std::string msg = idx_error(path);
  EXPECT_THAT(msg, HasSubstr(path));
  EXPECT_THAT(msg, HasSubstr("truncated"));
}

TEST(ReadIdx, ExtraTrailingBytes) {
  TempDir dir;
  std::string path = dir.file("long-data-idx2");
  write_plain(path, idx_bytes(0x08, {4, 5}, iota_bytes(23)));  // 20 bytes promised, 23 there
  std::string msg = idx_error(path);
  EXPECT_THAT(msg, HasSubstr(path));
  EXPECT_THAT(msg, HasSubstr("20 bytes"));
  EXPECT_THAT(msg, HasSubstr("has more"));
}

TEST(ReadIdx, CorruptGzipStream) {
  TempDir dir;
  std::string path = dir.file("corrupt-idx3-ubyte.gz");
  // Pseudo-random payload so the deflate stream is long (incompressible) and the corruption lands in its
  // middle.
  Bytes payload(64 * 28 * 28);
  std::uint32_t s = 12345;
  for (auto& v : payload) s = s * 1664525u + 1013904223u, v = static_cast<std::uint8_t>(s >> 24);
  write_gzip(path, idx_bytes(0x08, {64, 28, 28}, payload));
  Bytes raw = read_file_bytes(path);
  ASSERT_GT(raw.size(), 1000u);
  ASSERT_EQ(raw[0], 0x1f);  // a valid gzip header stays in front
  ASSERT_EQ(raw[1], 0x8b);
  for (std::size_t i = raw.size() / 2; i < raw.size() / 2 + 64; ++i) raw[i] = 0xff;
  write_plain(path, raw);
  std::string msg = idx_error(path);
  EXPECT_THAT(msg, HasSubstr(path));
  EXPECT_THAT(msg, HasSubstr("corrupt gzip"));
}

TEST(ReadIdx, CorruptGzipChecksum) {
  // A gzip stream whose deflate data is intact but whose CRC-32 trailer is wrong: the data cannot be trusted.
  TempDir dir;
  std::string path = dir.file("bad-crc-idx1-ubyte.gz");
  write_gzip(path, idx_bytes(0x08, {100}, iota_bytes(100)));
  Bytes raw = read_file_bytes(path);
  ASSERT_GT(raw.size(), 8u);
  raw[raw.size() - 8] ^= 0xff;  // first byte of the CRC-32
  write_plain(path, raw);
  std::string msg = idx_error(path);
  EXPECT_THAT(msg, HasSubstr(path));
  EXPECT_THAT(msg, HasSubstr("corrupt gzip"));
}

TEST(ReadIdx, MissingFile) {
  TempDir dir;
  std::string path = dir.file("does-not-exist-idx3-ubyte.gz");
  std::string msg = idx_error(path);
  EXPECT_THAT(msg, HasSubstr(path));
  EXPECT_THAT(msg, HasSubstr("no such file"));
}

TEST(ReadIdx, ZeroDimension) {
  TempDir dir;
  std::string path = dir.file("zero-dim-idx3");
  write_plain(path, idx_bytes(0x08, {3, 0, 28}, {}));
  std::string msg = idx_error(path);
  EXPECT_THAT(msg, HasSubstr(path));
  EXPECT_THAT(msg, HasSubstr("dimension 1 is 0"));
}

TEST(ReadIdx, RankZero) {
  TempDir dir;
  std::string path = dir.file("rank0");
  write_plain(path, Bytes{0, 0, 8, 0});
  std::string msg = idx_error(path);
  EXPECT_THAT(msg, HasSubstr(path));
  EXPECT_THAT(msg, HasSubstr("rank 0"));
}

// -----------------------------------------------------------------------------------------------------------
// fashion_mnist::load_data on directories with wrong contents.

namespace {

// Writes the four Fashion-MNIST files into dir: train (n_train images of h x w, n_train_labels labels) and a
// valid-looking test split of 10000; labels are i % 10 unless bad_label_at >= 0 (that one gets 10).
void write_fashion_dir(const TempDir& dir, std::uint32_t n_train, std::uint32_t h, std::uint32_t w,
                       std::uint32_t n_train_labels, std::int64_t bad_label_at = -1) {
  auto labels = [](std::uint32_t n, std::int64_t bad) {
    Bytes b(n);
    for (std::uint32_t i = 0; i < n; ++i) b[i] = static_cast<std::uint8_t>(i % 10);
    if (bad >= 0 && bad < n) b[bad] = 10;
    return b;
  };
  write_gzip(dir.file("train-images-idx3-ubyte.gz"),
             idx_bytes(0x08, {n_train, h, w}, Bytes(std::size_t(n_train) * h * w, 0)));
  write_gzip(dir.file("train-labels-idx1-ubyte.gz"),
             idx_bytes(0x08, {n_train_labels}, labels(n_train_labels, bad_label_at)));
  write_gzip(dir.file("t10k-images-idx3-ubyte.gz"),
             idx_bytes(0x08, {10000, 28, 28}, Bytes(10000 * 28 * 28, 0)));
  write_gzip(dir.file("t10k-labels-idx1-ubyte.gz"), idx_bytes(0x08, {10000}, labels(10000, -1)));
}

std::string load_error(const TempDir& dir) {
  return error_of([&] { datasets::fashion_mnist::load_data(dir.str()); });
}

}  // namespace

TEST(FashionMnistDir, WrongImageSize) {
  TempDir dir;
  write_fashion_dir(dir, 10, 27, 27, 10);
  std::string msg = load_error(dir);
  EXPECT_THAT(msg, HasSubstr(dir.str()));
  EXPECT_THAT(msg, HasSubstr("train-images-idx3-ubyte.gz"));
  EXPECT_THAT(msg, HasSubstr("(10, 27, 27)"));
  EXPECT_THAT(msg, HasSubstr("28, 28"));
}

TEST(FashionMnistDir, MismatchedLabelCount) {
  TempDir dir;
  write_fashion_dir(dir, 10, 28, 28, 9);
  std::string msg = load_error(dir);
  EXPECT_THAT(msg, HasSubstr(dir.str()));
  EXPECT_THAT(msg, HasSubstr("train-labels-idx1-ubyte.gz"));
  EXPECT_THAT(msg, HasSubstr("9 labels for 10 images"));
}

TEST(FashionMnistDir, WrongSampleCount) {
  TempDir dir;
  write_fashion_dir(dir, 10, 28, 28, 10);
  std::string msg = load_error(dir);
  EXPECT_THAT(msg, HasSubstr(dir.str()));
  EXPECT_THAT(msg, HasSubstr("train-images-idx3-ubyte.gz"));
  EXPECT_THAT(msg, HasSubstr("60000"));
}

TEST(FashionMnistDir, LabelOutOfRange) {
  TempDir dir;
  write_fashion_dir(dir, 60000, 28, 28, 60000, /*bad_label_at=*/12345);
  std::string msg = load_error(dir);
  EXPECT_THAT(msg, HasSubstr(dir.str()));
  EXPECT_THAT(msg, HasSubstr("train-labels-idx1-ubyte.gz"));
  EXPECT_THAT(msg, HasSubstr("label 10"));
  EXPECT_THAT(msg, HasSubstr("12345"));
}

TEST(FashionMnistDir, MissingFiles) {
  TempDir dir;  // empty
  std::string msg = load_error(dir);
  EXPECT_THAT(msg, HasSubstr(dir.str()));
  EXPECT_THAT(msg, HasSubstr("train-images-idx3-ubyte.gz"));
  EXPECT_THAT(msg, HasSubstr("no such file"));
}

TEST(FashionMnistDir, MissingLabelFileOnly) {
  TempDir dir;
  write_fashion_dir(dir, 10, 28, 28, 10);
  fs::remove(dir.file("train-labels-idx1-ubyte.gz"));
  std::string msg = load_error(dir);
  EXPECT_THAT(msg, HasSubstr(dir.file("train-labels-idx1-ubyte.gz")));
  EXPECT_THAT(msg, HasSubstr("no such file"));
}

// -----------------------------------------------------------------------------------------------------------
// MNIST: Keras's mnist.npz (npy arrays in a zip), from the cache or downloaded (sha256 checked); npy errors.

#include "local_http.h"

namespace {

using systolic::testing::ArchiveFormat;
using systolic::testing::make_archive;

std::string npy_bytes(const std::vector<std::uint32_t>& shape, const std::string& data) {
  std::string dims;
  for (auto d : shape) dims += std::to_string(d) + ", ";
  std::string header = "{'descr': '|u1', 'fortran_order': False, 'shape': (" + dims + "), }";
  while ((10 + header.size() + 1) % 64) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += char(1), out += char(0), out += char(header.size() & 255), out += char(header.size() >> 8);
  return out + header + data;
}

std::string mnist_npz() {
  auto labels = [](std::size_t n) {
    std::string s(n, '\0');
    for (std::size_t i = 0; i < n; ++i) s[i] = char((i * 3) % 10);
    return s;
  };
  return make_archive({{"x_train.npy", npy_bytes({60000, 28, 28}, std::string(60000 * 784, '\x05'))},
                       {"y_train.npy", npy_bytes({60000}, labels(60000))},
                       {"x_test.npy", npy_bytes({10000, 28, 28}, std::string(10000 * 784, '\x07'))},
                       {"y_test.npy", npy_bytes({10000}, labels(10000))}},
                      ArchiveFormat::zip);
}

}  // namespace

TEST(Mnist, NpzInTheCacheAndDownloadWithWrongSha256) {
  TempDir home;
  systolic::testing::ScopedEnv env;
  env.set("SYSTOLIC_HOME", home.str());
  env.set("no_proxy", "127.0.0.1,localhost");
  std::string npz = mnist_npz();

  // A synthetic npz downloaded from a mirror does not have Keras's sha256: refused, deleted, never used.
  systolic::testing::LocalHttpServer server;
  server.serve("/mirror/mnist.npz", npz);
  env.set("SYSTOLIC_DATASETS_URL", server.url("/mirror"));
  std::string msg = error_of([] { datasets::mnist::load_data(); });
  EXPECT_THAT(msg, HasSubstr(server.url("/mirror/mnist.npz")));
  EXPECT_THAT(msg, HasSubstr("sha256"));
  EXPECT_THAT(msg, HasSubstr("deleted"));
  EXPECT_EQ(server.requests(), 1);
  EXPECT_TRUE(fs::is_empty(home.str() + "/datasets")) << "nothing may stay in the cache";

  // The same file placed by hand in the cache loads.
  write_plain(home.file("datasets/mnist.npz"), Bytes(npz.begin(), npz.end()));
  auto d = datasets::mnist::load_data();
  EXPECT_EQ(d.train.x.shape(), Shape({60000, 28, 28}));
  EXPECT_EQ(d.train.y.shape(), Shape({60000}));
  EXPECT_EQ(d.test.x.shape(), Shape({10000, 28, 28}));
  EXPECT_EQ(d.test.x.data<std::uint8_t>()[123], 7);
  EXPECT_EQ(d.train.y.data<std::uint8_t>()[7], 1);
  EXPECT_EQ(d.class_names.size(), 10u);
  EXPECT_EQ(server.requests(), 1);
}

TEST(Mnist, NpyErrors) {
  std::string good = npy_bytes({2, 3}, "abcdef");
  EXPECT_EQ(datasets::read_npy(good.data(), good.size(), "g").shape(), Shape({2, 3}));
  std::string bad_magic = "NUMPY" + good;
  EXPECT_THAT(error_of([&] { datasets::read_npy(bad_magic.data(), bad_magic.size(), "f.npy"); }),
              HasSubstr("f.npy"));
  std::string shortd = good.substr(0, good.size() - 2);
  EXPECT_THAT(error_of([&] { datasets::read_npy(shortd.data(), shortd.size(), "f.npy"); }),
              HasSubstr("truncated"));
  std::string f4 = npy_bytes({2, 3}, std::string(24, '\0'));
  f4.replace(f4.find("|u1"), 3, "<f4");
  EXPECT_THAT(error_of([&] { datasets::read_npy(f4.data(), f4.size(), "f.npy"); }), HasSubstr("not uint8"));
}

namespace {

// root/<class>/<i>.png: `per_class` images of h x w for every class.
void write_image_folder(const fs::path& root, const std::vector<std::string>& classes, int per_class,
                        std::int64_t h, std::int64_t w) {
  int k = 0;
  for (auto& c : classes) {
    fs::create_directories(root / c);
    for (int i = 0; i < per_class; ++i, ++k) {
      Tensor img({h, w, 3}, DType::uint8);
      for (std::int64_t p = 0; p < img.numel(); ++p)
        img.data<std::uint8_t>()[p] = std::uint8_t((p * 7 + k * 31) % 256);
      image::write_png((root / c / (std::to_string(i) + ".png")).string(), img);
    }
  }
}

}  // namespace

TEST(LoadByName, NamesThatAreNoDataSetAreInvalidNames) {
  TempDir dir;
  auto invalid = [](const std::string& name) {
    try {
      datasets::load(name);
    } catch (const datasets::InvalidName& e) {
      return std::string(e.what());
    }
    return std::string("no InvalidName");
  };
  EXPECT_EQ(invalid("nosuch"),
            "nosuch: unknown data set (known: cifar10, fashion_mnist, mnist, imdb[:WORDS[:LENGTH]], "
            "reuters[:WORDS[:LENGTH]], dir:PATH, npz:PATH)");
  EXPECT_EQ(invalid("dir:"), "dir:PATH: the PATH is missing");
  EXPECT_EQ(invalid("npz:"), "npz:PATH: the PATH is missing");
  EXPECT_EQ(invalid("npz:" + dir.file("nope.npz")), "npz:" + dir.file("nope.npz") + ": no such file");
  EXPECT_EQ(invalid("dir:" + dir.file("nope")), "dir:" + dir.file("nope") + ": no such folder");
  write_image_folder(dir.path() / "train", {"a", "b"}, 1, 4, 4);
  write_image_folder(dir.path() / "test", {"a", "c"}, 1, 4, 4);
  EXPECT_EQ(invalid("dir:" + dir.str()),
            "dir:" + dir.str() + ": train/ and test/ have different class subfolders");
  EXPECT_EQ(
      datasets::names(),
      "cifar10, fashion_mnist, mnist, imdb[:WORDS[:LENGTH]], reuters[:WORDS[:LENGTH]], dir:PATH, npz:PATH");
  EXPECT_EQ(datasets::class_names("cifar10")[6], "frog");
  EXPECT_EQ(datasets::class_names("mnist").size(), 10u);
  EXPECT_TRUE(datasets::class_names("dir:x").empty());
}

TEST(LoadByName, ImageFolders) {
  TempDir dir;
  // One folder: both splits, the first image's size, 3 channels; a limit; a shape resizes and converts.
  write_image_folder(dir.path() / "one", {"cat", "dog"}, 3, 6, 5);
  auto d = datasets::load("dir:" + (dir.path() / "one").string());
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"cat", "dog"}));
  EXPECT_EQ(d.train.x.shape(), Shape({6, 6, 5, 3}));
  EXPECT_EQ(d.train.y.to_doubles(), (std::vector<double>{0, 0, 0, 1, 1, 1}));
  EXPECT_TRUE(d.test.x.shares_storage_with(d.train.x));
  auto small =
      datasets::load("dir:" + (dir.path() / "one").string(), {.limit = 4, .image_shape = Shape{4, 4, 1}});
  EXPECT_EQ(small.train.x.shape(), Shape({4, 4, 4, 1}));
  EXPECT_EQ(small.test.y.shape(), Shape({4}));
  // train/ and test/: the test images take the training images' size.
  write_image_folder(dir.path() / "two" / "train", {"x", "y"}, 2, 8, 8);
  write_image_folder(dir.path() / "two" / "test", {"x", "y"}, 1, 5, 7);
  auto t = datasets::load("dir:" + (dir.path() / "two").string());
  EXPECT_EQ(t.train.x.shape(), Shape({4, 8, 8, 3}));
  EXPECT_EQ(t.test.x.shape(), Shape({2, 8, 8, 3}));
  EXPECT_EQ(t.class_names, (std::vector<std::string>{"x", "y"}));
}

TEST(LoadByName, FashionMnistGetsAChannelAxisAndALimit) {
  if (!fashion_mnist_installed()) GTEST_SKIP() << "Fashion-MNIST is not installed in " << kFashionDir;
  auto full = datasets::fashion_mnist::load_data();
  auto d = datasets::load("fashion_mnist", {.limit = 100});
  EXPECT_EQ(d.train.x.shape(), Shape({100, 28, 28, 1}));
  EXPECT_EQ(d.train.y.shape(), Shape({100}));
  EXPECT_EQ(d.test.x.shape(), Shape({100, 28, 28, 1}));
  EXPECT_EQ(d.class_names, datasets::fashion_mnist::class_names());
  EXPECT_EQ(d.test.x.slice(99, 100).to_doubles(), full.test.x.slice(99, 100).to_doubles());
  EXPECT_EQ(datasets::load("fashion_mnist").train.x.dim(0), 60000);
}

// A named data set at a model's input: grey to RGB and resized, image by image as image::resize_batch does;
// refused clearly when the shape is no image or the set would not fit in memory.
TEST(LoadByName, FashionMnistAtAModelsInputShape) {
  if (!fashion_mnist_installed()) GTEST_SKIP() << "Fashion-MNIST is not installed in " << kFashionDir;
  auto full = datasets::load("fashion_mnist", {.limit = 3});
  auto d = datasets::load("fashion_mnist", {.limit = 3, .image_shape = Shape{40, 36, 3}});
  EXPECT_EQ(d.train.x.shape(), Shape({3, 40, 36, 3}));
  EXPECT_EQ(d.test.x.shape(), Shape({3, 40, 36, 3}));
  EXPECT_EQ(d.train.y.to_doubles(), full.train.y.to_doubles());
  Tensor want = image::resize(image::to_channels(full.test.x.slice(2, 3).reshape({28, 28, 1}), 3), 40, 36);
  EXPECT_EQ(d.test.x.slice(2, 3).to_doubles(), want.to_doubles());
  // The same shape: nothing converted.
  auto same = datasets::load("fashion_mnist", {.limit = 3, .image_shape = Shape{28, 28, 1}});
  EXPECT_EQ(same.train.x.to_doubles(), full.train.x.to_doubles());
  EXPECT_THAT(error_of([] {
                datasets::load("fashion_mnist", {.limit = 3, .image_shape = Shape{8, 8, 2}});
              }),
              HasSubstr("C 1 or 3"));
  EXPECT_THAT(error_of([] {
                datasets::load("fashion_mnist", {.image_shape = Shape{30000, 30000, 3}});
              }),
              HasSubstr("--limit"));
}
