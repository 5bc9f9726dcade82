// datasets::load: a data set by the name the command's --dataset takes, both splits with a channel axis and
// cut to a limit; dir:PATH reads image folders (one folder for both splits, or train/ and test/).
#include <fmt/format.h>
#include <systolic/datasets.h>
#include <systolic/image.h>
#include <unistd.h>

#include <filesystem>

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

}  // namespace

std::string names() {
  return "cifar10, fashion_mnist, mnist, dir:PATH";
}

std::vector<std::string> class_names(const std::string& name) {
  if (name == "cifar10") return cifar10::class_names();
  if (name == "fashion_mnist") return fashion_mnist::class_names();
  if (name == "mnist") return mnist::class_names();
  return {};
}

Dataset load(const std::string& name, const LoadOptions& options) {
  if (name == "fashion_mnist") return prepared(name, fashion_mnist::load_data(), options);
  if (name == "mnist") return prepared(name, mnist::load_data(), options);
  if (name == "cifar10") return prepared(name, cifar10::load_data(), options);
  if (name.starts_with("dir:")) {
    if (name.size() == 4) throw InvalidName("dir:PATH: the PATH is missing");
    return image_folders(name, name.substr(4), options);
  }
  throw InvalidName(fmt::format("{}: unknown data set (known: {})", name, names()));
}

}  // namespace systolic::datasets
