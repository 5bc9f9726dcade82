// Keras's image_dataset_from_directory (labels inferred from the folder names, label_mode "int"), loaded into
// memory as uint8 so the input pipeline converts one batch at a time.
#include <systolic/datasets.h>
#include <systolic/image.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

namespace systolic::datasets {

namespace fs = std::filesystem;

Split image_dataset_from_directory(const std::string& directory, const ImageFolderOptions& o,
                                   std::vector<std::string>* class_names_out) {
  std::error_code ec;
  SYSTOLIC_CHECK(fs::is_directory(directory, ec),
                 "{}: no such folder (expected one subfolder of images per class)", directory);
  SYSTOLIC_CHECK(o.channels == 1 || o.channels == 3,
                 "{}: {} channels requested; image folders load 1 (grayscale) or 3 "
                 "(rgb)",
                 directory, o.channels);
  SYSTOLIC_CHECK((o.height > 0) == (o.width > 0) && o.height >= 0,
                 "{}: image size {}x{} must be both positive or both "
                 "0",
                 directory, o.height, o.width);
  std::vector<std::string> classes;
  for (auto& entry : fs::directory_iterator(directory, ec))
    if (entry.is_directory()) classes.push_back(entry.path().filename().string());
  SYSTOLIC_CHECK(!ec, "{}: cannot list ({})", directory, ec.message());
  std::sort(classes.begin(), classes.end());
  SYSTOLIC_CHECK(!classes.empty(), "{}: no class subfolders (expected one subfolder of images per class)",
                 directory);
  SYSTOLIC_CHECK(classes.size() <= 256, "{}: {} classes; labels are uint8, at most 256", directory,
                 classes.size());

  std::vector<std::pair<std::string, int>> files;
  for (std::size_t c = 0; c < classes.size(); ++c) {
    std::vector<std::string> found;
    for (auto& entry : fs::recursive_directory_iterator(fs::path(directory) / classes[c], ec))
      if (entry.is_regular_file() && image::has_image_extension(entry.path().string()))
        found.push_back(entry.path().string());
    SYSTOLIC_CHECK(!ec, "{}: cannot list ({})", (fs::path(directory) / classes[c]).string(), ec.message());
    std::sort(found.begin(), found.end());
    for (auto& f : found) files.emplace_back(f, int(c));
  }
  SYSTOLIC_CHECK(!files.empty(), "{}: no images (.png, .jpg, .jpeg, .bmp, .gif) in its {} class subfolders",
                 directory, classes.size());
  if (o.limit > 0 && std::int64_t(files.size()) > o.limit) files.resize(std::size_t(o.limit));

  std::int64_t h = o.height, w = o.width, n = std::int64_t(files.size());
  Tensor x, y({n}, DType::uint8);
  for (std::int64_t i = 0; i < n; ++i) {
    Tensor img = image::read(files[i].first, o.channels);
    if (h == 0) h = img.dim(0), w = img.dim(1);
    if (img.dim(0) != h || img.dim(1) != w) img = image::resize(img, h, w);
    if (!x.defined()) x = Tensor({n, h, w, o.channels}, DType::uint8);
    std::memcpy(x.data<std::uint8_t>() + i * h * w * o.channels, img.data<std::uint8_t>(), img.nbytes());
    y.data<std::uint8_t>()[i] = static_cast<std::uint8_t>(files[i].second);
  }
  if (class_names_out) *class_names_out = classes;
  return {x, y};
}

}  // namespace systolic::datasets
