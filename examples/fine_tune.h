// The pieces of Keras's transfer-learning guide (keras.io/guides/transfer_learning) that the fine_tune example
// and tests/test_fine_tune.cc share: the CIFAR-10 sample folder (N.png + labels.csv) as tensors, and the new
// model around a frozen base.
#pragma once

#include <systolic/systolic.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace fine_tune {

struct Images {
  systolic::Tensor x;  // float32 (N, H, W, 3), raw 0-255 pixels
  systolic::Tensor y;  // int32 (N,), CIFAR-10 class indices
  std::vector<std::string> files;
};

// A folder of images with a labels.csv ("file,label" header, then one "N.png,frog" line per image; labels are
// CIFAR-10 class names), in the CSV's order. Throws systolic::Error naming the file at fault.
inline Images load_labelled_folder(const std::string& folder) {
  namespace fs = std::filesystem;
  auto names = systolic::datasets::cifar10::class_names();
  std::string csv_path = (fs::path(folder) / "labels.csv").string();
  std::ifstream csv(csv_path);
  if (!csv) throw systolic::Error(csv_path + ": cannot be read");
  std::string line;
  std::getline(csv, line);  // header
  std::vector<systolic::Tensor> images;
  std::vector<std::int32_t> labels;
  Images out;
  while (std::getline(csv, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (line.empty()) continue;
    auto comma = line.find(',');
    if (comma == std::string::npos) throw systolic::Error(csv_path + ": line '" + line + "' has no comma");
    std::string file = line.substr(0, comma), label = line.substr(comma + 1);
    auto it = std::find(names.begin(), names.end(), label);
    if (it == names.end()) throw systolic::Error(csv_path + ": '" + label + "' is no CIFAR-10 class");
    images.push_back(systolic::image::read_resized((fs::path(folder) / file).string(), 32, 32, 3));
    labels.push_back(static_cast<std::int32_t>(it - names.begin()));
    out.files.push_back((fs::path(folder) / file).string());
  }
  if (images.empty()) throw systolic::Error(csv_path + ": no images listed");
  out.x = systolic::image::to_float_batch(images, 1.0);
  out.y = systolic::Tensor({static_cast<std::int64_t>(labels.size())}, systolic::DType::int32);
  std::copy(labels.begin(), labels.end(), out.y.data<std::int32_t>());
  return out;
}

// The guide's new model: raw pixels -> Rescaling(1/127.5, offset -1) (MobileNetV2's [-1, 1]) -> the base, called
// with training=false (its BatchNormalization layers stay in inference mode, also once unfrozen) ->
// GlobalAveragePooling2D -> Dropout(0.2) -> Dense(classes) logits.
inline systolic::Model new_head_on(const systolic::Model& base, int classes = 10) {
  namespace L = systolic::layers;
  auto inputs = L::Input({32, 32, 3}, {.name = "pixels"});
  auto x = L::Rescaling(1.0 / 127.5, {.offset = -1.0, .name = "rescale"})(inputs);
  x = base(x, false);
  x = L::GlobalAveragePooling2D({.name = "pool"})(x);
  x = L::Dropout(0.2, {.name = "dropout"})(x);
  auto outputs = L::Dense(classes, {.name = "logits"})(x);
  return systolic::Model(inputs, outputs, "fine_tune");
}

inline void compile(systolic::Model& model, double learning_rate) {
  model.compile(systolic::optimizers::Adam(learning_rate),
                systolic::losses::SparseCategoricalCrossentropy({.from_logits = true}),
                {"sparse_categorical_accuracy"});
}

// Unfreezes the last `count` layers of the base (the rest stay frozen), as the guide's fine-tuning step does for
// the top of a large base. The caller compiles again.
inline void unfreeze_top(systolic::Model& base, int count) {
  base.set_trainable(true);
  auto layers = base.layers();
  int n = static_cast<int>(layers.size());
  for (int i = 0; i < n - count; ++i) layers[static_cast<std::size_t>(i)]->set_trainable(false);
}

}  // namespace fine_tune
