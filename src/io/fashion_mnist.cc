// IDX files (the MNIST family's format: big-endian magic 0x0000 08 <rank>, dims, then unsigned bytes), gzip
// or plain, through zlib; and Fashion-MNIST from the cache or Debian's dataset-fashion-mnist.
#include <systolic/datasets.h>

#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <memory>

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
  SYSTOLIC_CHECK(magic[0] == 0 && magic[1] == 0, "{}: not an IDX file (bad magic {:02x}{:02x})", path, magic[0], magic[1]);
  SYSTOLIC_CHECK(magic[2] == 0x08, "{}: IDX element type 0x{:02x} is not unsigned byte (0x08)", path, magic[2]);
  int rank = magic[3];
  SYSTOLIC_CHECK(rank >= 1 && rank <= 4, "{}: IDX rank {} is not 1 to 4", path, rank);
  std::vector<std::int64_t> dims;
  std::int64_t count = 1;
  for (int i = 0; i < rank; ++i) {
    unsigned char b[4];
    read_exact(file.f, b, 4, path, "IDX dimensions");
    std::int64_t d = (std::int64_t(b[0]) << 24) | (b[1] << 16) | (b[2] << 8) | b[3];
    SYSTOLIC_CHECK(d > 0 && d <= (1 << 28), "{}: IDX dimension {} is {}", path, i, d);
    dims.push_back(d);
    count *= d;
  }
  SYSTOLIC_CHECK(count <= (std::int64_t(1) << 32), "{}: IDX data of {} bytes is too large", path, count);
  Tensor t(Shape(dims), DType::uint8);
  read_exact(file.f, t.data<std::uint8_t>(), static_cast<std::size_t>(count), path, "IDX data");
  unsigned char extra;
  SYSTOLIC_CHECK(gzread(file.f, &extra, 1) == 0, "{}: {} bytes of data expected, the file has more", path, count);
  return t;
}

namespace fashion_mnist {

std::vector<std::string> class_names() {
  return {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};
}

namespace {
const char* kFiles[] = {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
                        "t10k-labels-idx1-ubyte.gz"};

std::vector<std::string> search_dirs() {
  std::vector<std::string> dirs;
  if (const char* home = std::getenv("SYSTOLIC_HOME")) dirs.push_back(std::string(home) + "/datasets/fashion-mnist");
  else if (const char* h = std::getenv("HOME")) dirs.push_back(std::string(h) + "/.systolic/datasets/fashion-mnist");
  dirs.push_back("/usr/share/datasets/fashion-mnist");
  return dirs;
}

bool has_all(const std::string& dir) {
  for (auto* f : kFiles)
    if (!std::filesystem::exists(std::filesystem::path(dir) / f)) return false;
  return true;
}

Split read_split(const std::string& dir, const char* images, const char* labels, std::int64_t expected) {
  Tensor x = read_idx((std::filesystem::path(dir) / images).string());
  Tensor y = read_idx((std::filesystem::path(dir) / labels).string());
  SYSTOLIC_CHECK(x.rank() == 3 && x.dim(1) == 28 && x.dim(2) == 28, "{}/{}: images of shape {}, expected (N, 28, 28)",
                 dir, images, x.shape().str());
  SYSTOLIC_CHECK(y.rank() == 1 && y.dim(0) == x.dim(0), "{}/{}: {} labels for {} images", dir, labels, y.numel(),
                 x.dim(0));
  SYSTOLIC_CHECK(x.dim(0) == expected, "{}/{}: {} images, Fashion-MNIST has {}", dir, images, x.dim(0), expected);
  const std::uint8_t* yp = y.data<std::uint8_t>();
  for (std::int64_t i = 0; i < y.numel(); ++i)
    SYSTOLIC_CHECK(yp[i] < 10, "{}/{}: label {} of sample {} is not a class 0-9", dir, labels, int(yp[i]), i);
  return {x, y};
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
    if (dir.empty()) {
      std::string where;
      for (auto& d : search_dirs()) where += (where.empty() ? "" : ", ") + d;
      fail("Fashion-MNIST not found in {} (install Debian's dataset-fashion-mnist, or place {} there)", where,
           "train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz");
    }
  }
  Dataset d;
  d.train = read_split(dir, kFiles[0], kFiles[1], 60000);
  d.test = read_split(dir, kFiles[2], kFiles[3], 10000);
  d.class_names = class_names();
  return d;
}

}  // namespace fashion_mnist
}  // namespace systolic::datasets
