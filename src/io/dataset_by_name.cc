// datasets::load: a data set by the name the command's --dataset takes, both splits with a channel axis and
// cut to a limit; dir:PATH reads image folders (one folder for both splits, or train/ and test/).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <systolic/datasets.h>
#include <systolic/image.h>
#include <systolic/npy.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

namespace systolic::datasets {

namespace {

// Keras's Fashion-MNIST and MNIST come as (N, 28, 28); models take images with a channel axis.
Tensor with_channel(const Tensor& x) {
  return x.rank() == 3 ? x.reshape({x.dim(0), x.dim(1), x.dim(2), 1}) : x;
}

Tensor first(const Tensor& t, std::int64_t limit) {
  return limit > 0 && limit < t.dim(0) ? t.slice(0, limit) : t;
}

// A named data set's images at a model's input size (H, W, C): grey replicated to RGB (or RGB to grey) and
// resized bilinearly, as tf.image.resize would, once at load time and kept as uint8. A size that would not fit
// in half the machine's memory is refused, naming --limit.
Tensor at_shape(const std::string& name, const char* split, const Tensor& x,
                const std::optional<Shape>& shape) {
  if (!shape || x.shape().without_batch() == *shape) return x;
  SYSTOLIC_CHECK(shape->rank() == 3 && (*shape)[2] >= 1 && (*shape)[2] <= 3 && (*shape)[2] != 2,
                 "{}: cannot resize its images to {}: expected (H, W, C) with C 1 or 3", name, shape->str());
  const double bytes = double(x.dim(0)) * double(shape->numel());
  const double memory = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE));
  SYSTOLIC_CHECK(memory <= 0 || bytes <= memory / 2,
                 "{}: its {} {} images at {} would take {:.1f} GB, more than half of this machine's memory; "
                 "use fewer (--limit)",
                 name, x.dim(0), split, shape->str(), bytes / 1e9);
  return image::resize_batch(x, (*shape)[0], (*shape)[1], static_cast<int>((*shape)[2]),
                             fmt::format("{} ({})", name, split));
}

Dataset prepared(const std::string& name, const Dataset& d, const LoadOptions& o) {
  return {{at_shape(name, "train", first(with_channel(d.train.x), o.limit), o.image_shape),
           first(d.train.y, o.limit)},
          {at_shape(name, "test", first(with_channel(d.test.x), o.limit), o.image_shape),
           first(d.test.y, o.limit)},
          d.class_names};
}

Dataset image_folders(const std::string& name, const std::string& path, const LoadOptions& options) {
  namespace fs = std::filesystem;
  ImageFolderOptions o;
  if (options.image_shape) {
    const Shape& shape = *options.image_shape;
    SYSTOLIC_CHECK(shape.rank() == 3, "{}: image shape {} is not (H, W, C)", name, shape.str());
    o.height = shape[0], o.width = shape[1], o.channels = static_cast<int>(shape[2]);
  }
  o.limit = options.limit;
  if (!fs::is_directory(path)) throw InvalidName(fmt::format("{}: no such folder", name));
  Dataset d;
  if (fs::is_directory(fs::path(path) / "train") && fs::is_directory(fs::path(path) / "test")) {
    std::vector<std::string> test_names;
    d.train = image_dataset_from_directory((fs::path(path) / "train").string(), o, &d.class_names);
    o.height = d.train.x.dim(1), o.width = d.train.x.dim(2);
    d.test = image_dataset_from_directory((fs::path(path) / "test").string(), o, &test_names);
    if (d.class_names != test_names)
      throw InvalidName(fmt::format("{}: train/ and test/ have different class subfolders", name));
  } else {
    d.train = d.test = image_dataset_from_directory(path, o, &d.class_names);  // one folder: both splits
  }
  return d;
}

// npz:PATH's arrays: x becomes float32 (uint8 stays uint8, the images the pipeline converts per batch; uint8 (N, H,
// W) gets a channel axis as MNIST's does); integer labels of one column stay int32 and raise `classes` to their
// maximum + 1, float labels (regression, one-hot, multi-label) and integer columns become float32.
Tensor npz_x(const std::string& path, const std::string& key, Tensor x) {
  SYSTOLIC_CHECK(x.rank() >= 2, "{}: {} has shape {}; it must be (samples, features...)", path, key,
                 x.shape().str());
  return x.dtype() == DType::uint8 ? with_channel(x) : x.to(DType::float32);
}

Tensor npz_y(const std::string& path, const std::string& key, Tensor y, std::int64_t& classes) {
  SYSTOLIC_CHECK(y.rank() >= 1, "{}: {} is a scalar; labels must have a sample axis", path, key);
  if (y.dtype() == DType::uint8) y = y.to(DType::int32);
  if (is_floating(y.dtype())) {
    y = y.to(DType::float32);
    const float* p = y.data<float>();
    for (std::int64_t i = 0; i < y.numel(); ++i)
      SYSTOLIC_CHECK(std::isfinite(p[i]), "{}: {} holds {} (element {}); labels must be finite numbers", path,
                     key, p[i], i);
  } else if (y.numel() == y.dim(0)) {
    const std::int32_t* p = y.data<std::int32_t>();
    for (std::int64_t i = 0; i < y.numel(); ++i) {
      SYSTOLIC_CHECK(p[i] >= 0, "{}: {}[{}] is {}; class labels are integers >= 0", path, key, i, p[i]);
      classes = std::max<std::int64_t>(classes, std::int64_t(p[i]) + 1);
    }
  } else {
    y = y.to(DType::float32);  // integer columns: multi-label or one-hot targets
  }
  return y;
}

std::map<std::string, Tensor> npz_file(const std::string& name, const std::string& path) {
  if (!std::filesystem::is_regular_file(path)) throw InvalidName(fmt::format("{}: no such file", name));
  return npy::load_npz(path);
}

std::string held(const std::map<std::string, Tensor>& a) {
  std::string out;
  for (auto& [k, v] : a) out += (out.empty() ? "" : ", ") + k;
  return out.empty() ? "none" : out;
}

// npz:PATH: arrays in Keras's mnist.npz convention, x_train, y_train, x_test and y_test, of any numeric dtype and
// rank (npz_x, npz_y); integer labels of both splits name their classes "0" .. max.
Dataset arrays(const std::string& name, const std::string& path, const LoadOptions& o) {
  auto a = npz_file(name, path);
  for (const char* k : {"x_train", "y_train", "x_test", "y_test"})
    SYSTOLIC_CHECK(a.count(k),
                   "{}: no array '{}' (an npz data set holds x_train, y_train, x_test and y_test; "
                   "this one holds {})",
                   path, k, held(a));
  std::int64_t classes = 0;
  auto split = [&](const char* xs, const char* ys) {
    Tensor x = npz_x(path, xs, a[xs]), y = npz_y(path, ys, a[ys], classes);
    SYSTOLIC_CHECK(y.dim(0) == x.dim(0), "{}: {} has {} samples but {} has shape {}", path, xs, x.dim(0), ys,
                   y.shape().str());
    return Split{first(x, o.limit), first(y, o.limit)};
  };
  Dataset d;
  d.train = split("x_train", "y_train");
  d.test = split("x_test", "y_test");
  SYSTOLIC_CHECK(d.train.x.shape().without_batch() == d.test.x.shape().without_batch(),
                 "{}: x_train has samples of shape {} but x_test {}", path,
                 d.train.x.shape().without_batch().str(), d.test.x.shape().without_batch().str());
  if (d.train.y.dtype() == DType::int32 && d.test.y.dtype() == DType::int32)
    for (std::int64_t c = 0; c < classes; ++c) d.class_names.push_back(std::to_string(c));
  return d;
}

// imdb[:WORDS[:LENGTH]] and reuters[:WORDS[:LENGTH]]: Keras's loader with num_words WORDS, its sequences padded
// and cut by pad_sequences to LENGTH (Keras's defaults "pre"); x float32 ids (exact below 2^24, as a Keras
// Input's default float32 takes them), y int32 classes. The defaults: keras-io's bidirectional_lstm_imdb (20000 words,
// 200 ids) and, for Reuters, Keras's example MLP's 10000 words. An image shape (options.image_shape) is not used.
Dataset word_ids(const std::string& name, const LoadOptions& o) {
  const bool imdb = name.starts_with("imdb");
  std::int64_t words = imdb ? 20000 : 10000, length = 200;
  const std::string rest = name.substr(imdb ? 4 : 7);
  if (!rest.empty()) {
    auto number = [&](const std::string& s) {
      std::size_t used = 0;
      long long v = -1;
      try {
        v = std::stoll(s, &used);
      } catch (const std::exception&) {
      }
      if (used != s.size() || v <= 0 || v > (1 << 24))
        throw InvalidName(
            fmt::format("{}: expected {}[:WORDS[:LENGTH]] with positive numbers (WORDS at most "
                        "2^24), got '{}'",
                        name, imdb ? "imdb" : "reuters", s));
      return std::int64_t(v);
    };
    const std::size_t colon = rest.find(':', 1);
    words = number(rest.substr(1, colon == std::string::npos ? std::string::npos : colon - 1));
    if (colon != std::string::npos) length = number(rest.substr(colon + 1));
  }
  SequenceDataset d = imdb ? imdb::load_data({.num_words = words}) : reuters::load_data({.num_words = words});
  auto split = [&](const SequenceSplit& s) {
    Tensor y(Shape({std::int64_t(s.y.size())}), DType::int32);
    std::copy(s.y.begin(), s.y.end(), y.data<std::int32_t>());
    return Split{first(pad_sequences(s.x, {.maxlen = length}).to(DType::float32), o.limit),
                 first(y, o.limit)};
  };
  return Dataset{split(d.train), split(d.test), d.class_names};
}

bool names_word_ids(const std::string& name) {
  return name == "imdb" || name.starts_with("imdb:") || name == "reuters" || name.starts_with("reuters:");
}

}  // namespace

std::string names() {
  return "cifar10, fashion_mnist, mnist, imdb[:WORDS[:LENGTH]], reuters[:WORDS[:LENGTH]], dir:PATH, npz:PATH";
}

std::vector<std::string> class_names(const std::string& name) {
  if (name == "cifar10") return cifar10::class_names();
  if (name == "fashion_mnist") return fashion_mnist::class_names();
  if (name == "mnist") return mnist::class_names();
  if (names_word_ids(name))
    return name.starts_with("imdb") ? std::vector<std::string>{"negative", "positive"}
                                    : reuters::get_label_names();
  return {};
}

Dataset load(const std::string& name, const LoadOptions& options) {
  if (name == "fashion_mnist") return prepared(name, fashion_mnist::load_data(), options);
  if (name == "mnist") return prepared(name, mnist::load_data(), options);
  if (name == "cifar10") return prepared(name, cifar10::load_data(), options);
  if (names_word_ids(name)) return word_ids(name, options);
  if (name.starts_with("dir:")) {
    if (name.size() == 4) throw InvalidName("dir:PATH: the PATH is missing");
    return image_folders(name, name.substr(4), options);
  }
  if (name.starts_with("npz:")) {
    if (name.size() == 4) throw InvalidName("npz:PATH: the PATH is missing");
    return arrays(name, name.substr(4), options);
  }
  throw InvalidName(fmt::format("{}: unknown data set (known: {})", name, names()));
}

ArrayDataset load_arrays(const std::string& path, const std::vector<std::string>& inputs,
                         const std::vector<std::string>& outputs, std::int64_t limit) {
  auto a = npz_file("npz:" + path, path);
  // The array of one input or output: by its name, its position, or alone by the plain key.
  auto key = [&](const std::string& prefix, const std::vector<std::string>& names, std::size_t i) {
    std::vector<std::string> keys{prefix + "_" + names[i], prefix + "_" + std::to_string(i)};
    if (names.size() == 1) keys.push_back(prefix);
    for (const auto& k : keys)
      if (a.count(k)) return k;
    fail("{}: no array for the model's {} '{}': name it {} (this file holds {})", path,
         prefix[0] == 'x' ? "input" : "output", names[i], fmt::join(keys, " or "), held(a));
  };
  std::int64_t classes = 0;
  auto split = [&](const std::string& suffix) {
    ArraySplit s;
    std::string first_key;  // each array has as many samples as the split's first
    auto take = [&](Arrays& to, const std::string& k, const Tensor& t) {
      if (first_key.empty()) first_key = k;
      const std::int64_t n = a[first_key].dim(0);
      SYSTOLIC_CHECK(t.dim(0) == n, "{}: {} has {} samples but {} has {}", path, k, t.dim(0), first_key, n);
      to.push_back(first(t, limit));
    };
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const std::string k = key("x_" + suffix, inputs, i);
      take(s.x, k, npz_x(path, k, a[k]));
    }
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      const std::string k = key("y_" + suffix, outputs, i);
      take(s.y, k, npz_y(path, k, a[k], classes));
    }
    return s;
  };
  SYSTOLIC_CHECK(!inputs.empty() && !outputs.empty(), "{}: a model has at least one input and one output",
                 path);
  return {split("train"), split("test")};
}

}  // namespace systolic::datasets
