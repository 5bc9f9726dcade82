#include "io/dataset_cache.h"

#include <fmt/format.h>
#include <systolic/datasets.h>
#include <systolic/error.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "io/fetch.h"
#include "io/files.h"

namespace systolic::datasets {

namespace fs = std::filesystem;

std::string cache_dir() {
  std::string home = detail::env_or("SYSTOLIC_HOME", "");
  if (home.empty()) {
    const char* h = std::getenv("HOME");
    home = std::string(h && *h ? h : ".") + "/.systolic";
  }
  return (fs::path(home) / "datasets").string();
}

namespace detail {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

void install_folder(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::create_directories(to.parent_path(), ec);
  if (std::rename(from.c_str(), to.c_str()) == 0) return;
  int err = errno;
  if ((err == ENOTEMPTY || err == EEXIST) && fs::is_directory(to)) return;
  fail("{}: cannot install the data set there ({})", to.string(), std::strerror(err));
}

std::string datasets_base_url() {
  std::string base =
      env_or("SYSTOLIC_DATASETS_URL", "https://storage.googleapis.com/tensorflow/tf-keras-datasets/");
  if (base.back() != '/') base += '/';
  return base;
}

fs::path keras_file(const std::string& fname, const std::string& algorithm, const std::string& digest,
                    const char* digest_variable, const std::string& what, const std::string& remedy) {
  fs::path cache = cache_dir(), target = cache / fname;
  if (fs::is_regular_file(target)) return target;
  const std::string address = datasets_base_url() + fname,
                    expected = digest_variable ? env_or(digest_variable, digest) : digest;
  io::TempFolder tmp(cache, fname);
  fs::path file = tmp.path() / fname;
  try {
    io::download(address, file);
  } catch (const Error& e) {
    throw Unavailable(fmt::format(
        "{} is not in {} and {}; {}", what, cache.string(), e.what(),
        !remedy.empty()
            ? remedy
            : fmt::format("place Keras's {} ({} {}) there by hand, or set SYSTOLIC_DATASETS_URL to a "
                          "mirror",
                          fname, algorithm, expected)));
  }
  const std::string got = io::file_digest(file, algorithm);
  SYSTOLIC_CHECK(got == expected,
                 "{} downloaded from {}: {} {} does not match the expected {}{}; the file was "
                 "deleted and not used",
                 fname, address, algorithm, got, expected,
                 digest_variable ? fmt::format(" (${} sets another)", digest_variable) : std::string());
  install_folder(file, target);  // a rename within the cache
  return target;
}

}  // namespace detail
}  // namespace systolic::datasets

namespace systolic::datasets {

std::vector<DatasetInfo> known() {
  fs::path cache = cache_dir();
  auto all = [](const fs::path& dir, std::vector<const char*> files) {
    std::error_code ec;
    for (auto* f : files)
      if (!fs::is_regular_file(dir / f, ec)) return false;
    return true;
  };
  std::vector<const char*> idx = {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                                  "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"};
  std::vector<DatasetInfo> out;

  DatasetInfo c{"cifar10", "CIFAR-10: 50000 + 10000 colour images 32x32, 10 classes", "", cifar10::url(),
                false};
  fs::path folder = cache / "cifar-10-batches-bin";
  if (all(folder, {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin",
                   "data_batch_5.bin", "test_batch.bin"}))
    c.location = folder.string(), c.available = true;
  else if (fs::is_regular_file(cache / "cifar-10-binary.tar.gz"))
    c.location = (cache / "cifar-10-binary.tar.gz").string(), c.available = true;
  else
    c.location = folder.string();
  out.push_back(c);

  DatasetInfo f{"fashion_mnist", "Fashion-MNIST: 60000 + 10000 grey images 28x28, 10 classes", "",
                detail::datasets_base_url(), false};
  for (fs::path d : {cache / "fashion-mnist", fs::path("/usr/share/datasets/fashion-mnist")})
    if (!f.available && all(d, idx)) f.location = d.string(), f.available = true;
  if (!f.available) f.location = (cache / "fashion-mnist").string();
  out.push_back(f);

  DatasetInfo m{"mnist", "MNIST: 60000 + 10000 grey images 28x28 of digits, 10 classes", "",
                detail::datasets_base_url() + "mnist.npz", false};
  if (all(cache / "mnist", idx))
    m.location = (cache / "mnist").string(), m.available = true;
  else if (fs::is_regular_file(cache / "mnist.npz"))
    m.location = (cache / "mnist.npz").string(), m.available = true;
  else
    m.location = (cache / "mnist.npz").string();
  out.push_back(m);

  // The word-id data sets (datasets::imdb and reuters; --dataset pads them to a length).
  for (auto [name, description] :
       {std::pair{"imdb", "IMDB: 25000 + 25000 movie reviews as word ids, 2 classes (imdb[:WORDS[:LENGTH]])"},
        std::pair{"reuters", "Reuters: 11228 newswires as word ids, 46 topics (reuters[:WORDS[:LENGTH]])"}}) {
    const std::string file = std::string(name) + ".npz";
    out.push_back({name, description, (cache / file).string(), detail::datasets_base_url() + file,
                   fs::is_regular_file(cache / file)});
  }
  return out;
}

}  // namespace systolic::datasets
