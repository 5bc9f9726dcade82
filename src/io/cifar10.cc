// CIFAR-10, binary version: cifar-10-binary.tar.gz holds cifar-10-batches-bin/{data_batch_1..5,test_batch}.bin,
// 10000 records each of 1 label byte + 3072 pixel bytes (1024 R, 1024 G, 1024 B, row-major 32x32). Returned as
// Keras returns it: x uint8 (N, 32, 32, 3) channels_last, y uint8 (N, 1).
//
// Install: download (or a hand-placed archive) -> md5 check -> safe extraction into a temporary folder in the
// cache -> every batch read and checked -> rename into the cache. A failure at any step leaves the cache as it
// was; the temporary folder (and a bad download with it) is deleted.
#include <systolic/datasets.h>
#include <systolic/log.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "io/dataset_cache.h"
#include "io/fetch.h"
#include "io/files.h"

namespace systolic::datasets::cifar10 {

namespace fs = std::filesystem;

namespace {

constexpr const char* kArchive = "cifar-10-binary.tar.gz";
constexpr const char* kFolder = "cifar-10-batches-bin";
constexpr const char* kUrl = "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz";
constexpr const char* kMd5 = "c32a1d4ab5d03f1284b67883e8d87530";
constexpr std::int64_t kRecord = 1 + 3072;
constexpr std::int64_t kPerBatch = 10000;
const char* kTrainFiles[] = {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin",
                             "data_batch_5.bin"};
constexpr const char* kTestFile = "test_batch.bin";

bool has_all(const fs::path& dir) {
  std::error_code ec;
  for (auto* f : kTrainFiles)
    if (!fs::is_regular_file(dir / f, ec)) return false;
  return fs::is_regular_file(dir / kTestFile, ec);
}

Split concat(const std::vector<Split>& parts) {
  std::int64_t n = 0;
  for (auto& p : parts) n += p.x.dim(0);
  Split s{Tensor({n, 32, 32, 3}, DType::uint8), Tensor({n, 1}, DType::uint8)};
  std::int64_t at = 0;
  for (auto& p : parts) {
    std::int64_t k = p.x.dim(0);
    std::memcpy(s.x.data<std::uint8_t>() + at * 3072, p.x.data<std::uint8_t>(), std::size_t(k) * 3072);
    std::memcpy(s.y.data<std::uint8_t>() + at, p.y.data<std::uint8_t>(), std::size_t(k));
    at += k;
  }
  return s;
}

// Reads the six batches from dir; `origin` (how the folder came to be) goes into error messages.
Dataset read_folder(const fs::path& dir, const std::string& origin) {
  auto name = [&](const char* f) {
    return origin.empty() ? (dir / f).string() : fmt::format("{} ({})", f, origin);
  };
  std::vector<Split> train;
  for (auto* f : kTrainFiles) train.push_back(read_batch((dir / f).string(), kPerBatch, name(f)));
  Dataset d;
  d.test = read_batch((dir / kTestFile).string(), kPerBatch, name(kTestFile));
  d.train = concat(train);
  d.class_names = class_names();
  return d;
}

std::string hand_install_hint(const fs::path& cache) {
  return fmt::format(
      "to install it by hand, place {} (md5 {}, from https://www.cs.toronto.edu/~kriz/cifar.html) or its "
      "extracted "
      "folder {} in {}, or set SYSTOLIC_CIFAR10_URL to a mirror; Fashion-MNIST works offline (--dataset "
      "fashion_mnist)",
      kArchive, md5(), kFolder, cache.string());
}

// md5 check, safe extraction, verification, install. `origin` describes the archive for messages.
Dataset install_from_archive(const fs::path& archive, const fs::path& cache, const io::TempFolder& tmp,
                             const std::string& origin) {
  std::string got = io::file_digest(archive, "md5");
  if (got != md5())
    fail("{}: md5 {} does not match the expected {}; the file was {} and not used", origin, got, md5(),
         archive.parent_path() == tmp.path() ? "deleted" : "left in place");
  // Said aloud so a log shows the archive was checked before anything in it was trusted.
  log_line(fmt::format("Checked {}: md5 {} as expected", origin, got));
  fs::path extract = tmp.path() / "extract";
  fs::create_directories(extract);
  io::extract_archive(archive, extract);
  fs::path batches = extract / kFolder;
  SYSTOLIC_CHECK(fs::is_directory(batches), "{}: the archive has no folder {}; nothing was installed", origin,
                 kFolder);
  for (auto* f : kTrainFiles)
    SYSTOLIC_CHECK(fs::is_regular_file(batches / f), "{}: the archive has no {}/{}; nothing was installed",
                   origin, kFolder, f);
  SYSTOLIC_CHECK(fs::is_regular_file(batches / kTestFile),
                 "{}: the archive has no {}/{}; nothing was installed", origin, kFolder, kTestFile);
  Dataset d = read_folder(batches, "from " + origin + "; nothing was installed");
  detail::install_folder(batches, cache / kFolder);
  log_line(fmt::format("CIFAR-10 installed in {}", (cache / kFolder).string()));
  return d;
}

}  // namespace

std::vector<std::string> class_names() {
  return {"airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"};
}

std::string url() {
  return detail::env_or("SYSTOLIC_CIFAR10_URL", kUrl);
}

std::string md5() {
  std::string m = detail::env_or("SYSTOLIC_CIFAR10_MD5", kMd5);
  for (auto& c : m) c = char(std::tolower(static_cast<unsigned char>(c)));
  return m;
}

Split read_batch(const std::string& path, std::int64_t records, const std::string& display_name) {
  std::string name = display_name.empty() ? path : display_name;
  std::error_code ec;
  SYSTOLIC_CHECK(fs::is_regular_file(path, ec), "{}: no such file", name);
  auto size = static_cast<std::int64_t>(fs::file_size(path, ec));
  SYSTOLIC_CHECK(!ec, "{}: cannot read its size ({})", name, ec.message());
  SYSTOLIC_CHECK(
      size == records * kRecord,
      "{}: {} bytes, expected {} ({} records of 1 label byte + 3072 pixel bytes): truncated or corrupt", name,
      size, records * kRecord, records);
  std::vector<char> bytes = io::read_file(path);
  SYSTOLIC_CHECK(std::int64_t(bytes.size()) == size, "{}: read {} bytes of {}", name, bytes.size(), size);
  Split s{Tensor({records, 32, 32, 3}, DType::uint8), Tensor({records, 1}, DType::uint8)};
  std::uint8_t* x = s.x.data<std::uint8_t>();
  std::uint8_t* y = s.y.data<std::uint8_t>();
  for (std::int64_t r = 0; r < records; ++r) {
    const auto* rec = reinterpret_cast<const std::uint8_t*>(bytes.data()) + r * kRecord;
    SYSTOLIC_CHECK(rec[0] < 10, "{}: record {} has label {}, CIFAR-10 labels are 0-9: corrupt", name, r,
                   int(rec[0]));
    y[r] = rec[0];
    std::uint8_t* img = x + r * 3072;
    for (int c = 0; c < 3; ++c)
      for (int p = 0; p < 1024; ++p) img[p * 3 + c] = rec[1 + c * 1024 + p];  // CHW planes -> HWC
  }
  return s;
}

Dataset load_data(const std::string& directory) {
  if (!directory.empty()) {
    SYSTOLIC_CHECK(has_all(directory),
                   "{}: expected the CIFAR-10 batch files data_batch_1.bin .. data_batch_5.bin and "
                   "test_batch.bin there",
                   directory);
    return read_folder(directory, "");
  }
  fs::path cache = cache_dir();
  if (has_all(cache / kFolder)) return read_folder(cache / kFolder, "");

  fs::path placed = cache / kArchive;
  if (fs::is_regular_file(placed)) {
    io::TempFolder tmp(cache, "cifar10");
    log_line(fmt::format("Installing CIFAR-10 from {}", placed.string()));
    return install_from_archive(placed, cache, tmp, placed.string());
  }

  io::TempFolder tmp(cache, "cifar10");
  fs::path archive = tmp.path() / kArchive;
  std::string address = url();
  try {
    io::download(address, archive);
  } catch (const Error& e) {
    throw Unavailable(fmt::format("CIFAR-10 is not in {} and {}; {}", (cache / kFolder).string(), e.what(),
                                  hand_install_hint(cache)));
  }
  return install_from_archive(archive, cache, tmp, fmt::format("{} downloaded from {}", kArchive, address));
}

}  // namespace systolic::datasets::cifar10
