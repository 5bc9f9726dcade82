// IDX files (the MNIST family's format: big-endian magic 0x0000 08 <rank>, dims, then unsigned bytes), gzip
// or plain, through zlib; Fashion-MNIST from the cache, Debian's dataset-fashion-mnist or Keras's address; MNIST
// from IDX files in the cache or Keras's mnist.npz (npy arrays in a zip, read by npy::load_npz).
#include <systolic/datasets.h>
#include <systolic/log.h>
#include <systolic/npy.h>
#include <zlib.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <sstream>

#include "io/dataset_cache.h"
#include "io/fetch.h"
#include "io/files.h"

namespace systolic::datasets {

namespace {
struct GzFile {
  gzFile f;
  ~GzFile() {
    if (f) gzclose(f);
  }
};

// Reads exactly n bytes or reports how many were there.
void read_exact(gzFile f, void* dst, std::size_t n, const std::string& path, const char* what) {
  std::size_t got = 0;
  while (got < n) {
    unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(n - got, 1u << 30));
    int r = gzread(f, static_cast<char*>(dst) + got, chunk);
    if (r < 0) {
      int err = 0;
      const char* msg = gzerror(f, &err);
      fail("{}: corrupt gzip data while reading the {} ({})", path, what, msg ? msg : "unknown error");
    }
    if (r == 0) fail("{}: truncated: the {} needs {} bytes, the file has {}", path, what, n, got);
    got += static_cast<std::size_t>(r);
  }
}
}  // namespace

Tensor read_idx(const std::string& path) {
  SYSTOLIC_CHECK(std::filesystem::is_regular_file(path), "{}: no such file", path);
  GzFile file{gzopen(path.c_str(), "rb")};  // zlib reads plain files transparently
  SYSTOLIC_CHECK(file.f, "{}: cannot open", path);
  unsigned char magic[4];
  read_exact(file.f, magic, 4, path, "IDX header");
  SYSTOLIC_CHECK(magic[0] == 0 && magic[1] == 0, "{}: not an IDX file (bad magic {:02x}{:02x})", path,
                 magic[0], magic[1]);
  SYSTOLIC_CHECK(magic[2] == 0x08, "{}: IDX element type 0x{:02x} is not unsigned byte (0x08)", path,
                 magic[2]);
  int rank = magic[3];
  SYSTOLIC_CHECK(rank >= 1 && rank <= 4, "{}: IDX rank {} is not 1 to 4", path, rank);
  std::vector<std::int64_t> dims;
  std::int64_t count = 1;
  for (int i = 0; i < rank; ++i) {
    unsigned char b[4];
    read_exact(file.f, b, 4, path, "IDX dimensions");
    std::int64_t d = (std::int64_t(b[0]) << 24) | (b[1] << 16) | (b[2] << 8) | b[3];
    SYSTOLIC_CHECK(d > 0 && d <= (1 << 28), "{}: IDX dimension {} is {}", path, i, d);
    // Checked before multiplying: four dimensions of up to 2^28 overflow an int64.
    SYSTOLIC_CHECK(count <= (std::int64_t(1) << 32) / d, "{}: IDX data of more than {} bytes is too large",
                   path, std::int64_t(1) << 32);
    dims.push_back(d);
    count *= d;
  }
  Tensor t(Shape(dims), DType::uint8);
  read_exact(file.f, t.data<std::uint8_t>(), static_cast<std::size_t>(count), path, "IDX data");
  unsigned char extra;
  SYSTOLIC_CHECK(gzread(file.f, &extra, 1) == 0, "{}: {} bytes of data expected, the file has more", path,
                 count);
  return t;
}

namespace {

const char* kFiles[] = {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                        "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"};
const char* kFileList =
    "train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz, "
    "t10k-labels-idx1-ubyte.gz";

bool has_all(const std::string& dir) {
  for (auto* f : kFiles)
    if (!std::filesystem::exists(std::filesystem::path(dir) / f)) return false;
  return true;
}

Split read_split(const std::string& dir, const char* images, const char* labels, std::int64_t expected,
                 const char* dataset) {
  Tensor x = read_idx((std::filesystem::path(dir) / images).string());
  Tensor y = read_idx((std::filesystem::path(dir) / labels).string());
  SYSTOLIC_CHECK(x.rank() == 3 && x.dim(1) == 28 && x.dim(2) == 28,
                 "{}/{}: images of shape {}, expected (N, 28, 28)", dir, images, x.shape().str());
  SYSTOLIC_CHECK(y.rank() == 1 && y.dim(0) == x.dim(0), "{}/{}: {} labels for {} images", dir, labels,
                 y.numel(), x.dim(0));
  SYSTOLIC_CHECK(x.dim(0) == expected, "{}/{}: {} images, {} has {}", dir, images, x.dim(0), dataset,
                 expected);
  const std::uint8_t* yp = y.data<std::uint8_t>();
  for (std::int64_t i = 0; i < y.numel(); ++i)
    SYSTOLIC_CHECK(yp[i] < 10, "{}/{}: label {} of sample {} is not a class 0-9", dir, labels, int(yp[i]), i);
  return {x, y};
}

Dataset read_idx_folder(const std::string& dir, const char* dataset, std::vector<std::string> names) {
  Dataset d;
  d.train = read_split(dir, kFiles[0], kFiles[1], 60000, dataset);
  d.test = read_split(dir, kFiles[2], kFiles[3], 10000, dataset);
  d.class_names = std::move(names);
  return d;
}

}  // namespace

namespace fashion_mnist {

std::vector<std::string> class_names() {
  return {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
          "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
}

namespace {
std::vector<std::string> search_dirs() {
  return {(std::filesystem::path(cache_dir()) / "fashion-mnist").string(),
          "/usr/share/datasets/fashion-mnist"};
}

// Downloads the four files into a temporary folder in the cache, checks them, then renames it into place.
Dataset download(const std::filesystem::path& target) {
  std::string base = detail::datasets_base_url();
  io::TempFolder tmp(target.parent_path(), "fashion-mnist");
  for (auto* f : kFiles) {
    try {
      io::download(base + f, tmp.path() / f);
    } catch (const Error& e) {
      std::string where;
      for (auto& d : search_dirs()) where += (where.empty() ? "" : ", ") + d;
      throw Unavailable(
          fmt::format("Fashion-MNIST is not in {} and {}; install Debian's dataset-fashion-mnist, or place "
                      "{} in {}, or set "
                      "SYSTOLIC_DATASETS_URL to a mirror",
                      where, e.what(), kFileList, target.string()));
    }
  }
  Dataset d = read_idx_folder(tmp.path().string(), "Fashion-MNIST", class_names());
  detail::install_folder(tmp.path(), target);
  log_line(fmt::format("Fashion-MNIST installed in {}", target.string()));
  return d;
}
}  // namespace

Dataset load_data(const std::string& directory) {
  std::string dir = directory;
  if (dir.empty()) {
    for (auto& d : search_dirs())
      if (has_all(d)) {
        dir = d;
        break;
      }
    if (dir.empty()) return download(search_dirs().front());
  }
  return read_idx_folder(dir, "Fashion-MNIST", class_names());
}

}  // namespace fashion_mnist

namespace mnist {

namespace {
constexpr const char* kSha256 = "731c5ac602752760c8e48fbffcf8c3b850d9dc2a2aedcf2cc48468fc17b673d1";

// Keras's mnist.npz: a zip of x_train.npy, y_train.npy, x_test.npy, y_test.npy (uint8), read by npy::load_npz.
Dataset read_npz(const std::filesystem::path& path, const std::string& origin) {
  std::map<std::string, Tensor> arrays;
  try {
    for (auto& [name, t] : npy::load_npz(path.string())) arrays[name + ".npy"] = t;
  } catch (const Error& e) {
    fail("{}: {}", origin, e.what());
  }
  for (const char* k : {"x_train.npy", "y_train.npy", "x_test.npy", "y_test.npy"})
    SYSTOLIC_CHECK(arrays.count(k), "{}: no {} inside", origin, k);
  auto split = [&](const char* xs, const char* ys, std::int64_t n) {
    Tensor x = arrays[xs], y = arrays[ys];
    SYSTOLIC_CHECK(x.dtype() == DType::uint8 && y.dtype() == DType::uint8, "{}: {} and {} must be uint8",
                   origin, xs, ys);
    SYSTOLIC_CHECK(x.shape() == Shape({n, 28, 28}), "{}: {} has shape {}, expected ({}, 28, 28)", origin, xs,
                   x.shape().str(), n);
    SYSTOLIC_CHECK(y.shape() == Shape({n}), "{}: {} has shape {}, expected ({},)", origin, ys,
                   y.shape().str(), n);
    for (std::int64_t i = 0; i < n; ++i)
      SYSTOLIC_CHECK(y.data<std::uint8_t>()[i] < 10, "{}: {}[{}] is not a class 0-9", origin, ys, i);
    return Split{x, y};
  };
  Dataset d;
  d.train = split("x_train.npy", "y_train.npy", 60000);
  d.test = split("x_test.npy", "y_test.npy", 10000);
  d.class_names = class_names();
  return d;
}
}  // namespace

std::vector<std::string> class_names() {
  return {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};
}

Dataset load_data(const std::string& directory) {
  if (!directory.empty()) return read_idx_folder(directory, "MNIST", class_names());
  std::filesystem::path cache = cache_dir();
  if (has_all((cache / "mnist").string()))
    return read_idx_folder((cache / "mnist").string(), "MNIST", class_names());
  // Keras's mnist.npz, from the cache or downloaded.
  std::filesystem::path file = detail::keras_file(
      "mnist.npz", "sha256", kSha256, nullptr, "MNIST",
      fmt::format("place Keras's mnist.npz (sha256 {}) or the four IDX files ({}) in {} by hand, or set "
                  "SYSTOLIC_DATASETS_URL to a mirror; Fashion-MNIST works offline (--dataset fashion_mnist)",
                  kSha256, kFileList, (cache / "mnist").string()));
  return read_npz(file, file.string());
}

}  // namespace mnist

Tensor read_npy(const void* data, std::size_t size, const std::string& name) {
  Tensor t = npy::read(data, size, name);
  SYSTOLIC_CHECK(t.dtype() == DType::uint8, "{}: npy dtype {} is not uint8", name, dtype_name(t.dtype()));
  return t;
}

}  // namespace systolic::datasets
