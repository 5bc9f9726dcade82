// Data sets, returned as Keras returns them: x uint8 (N, H, W) or (N, H, W, C), y uint8 (N,).
#pragma once

#include <systolic/tensor.h>

#include <string>
#include <utility>
#include <vector>

namespace systolic::datasets {

struct Split {
  Tensor x, y;
};
struct Dataset {
  Split train, test;
  std::vector<std::string> class_names;
};

namespace fashion_mnist {
// Reads the four IDX gzip files from `directory`, or when it is empty from the first of
// $SYSTOLIC_HOME/datasets/fashion-mnist and /usr/share/datasets/fashion-mnist (Debian's dataset-fashion-mnist)
// that holds them. x uint8 (60000, 28, 28), y uint8 (60000,); test 10000.
Dataset load_data(const std::string& directory = "");
std::vector<std::string> class_names();
}  // namespace fashion_mnist

// One IDX file (gzip or plain): checks magic, dtype (unsigned byte), rank and sizes; errors name the file.
Tensor read_idx(const std::string& path);

}  // namespace systolic::datasets
