// Built-in models, known to the command line by name.
#pragma once

#include <systolic/model.h>

namespace systolic::models {

struct SeedCnnOptions {
  bool dropout = true;  // false: the Dropout layers are kept with rate 0 (identity), e.g. for parity tests
};
// The seed CNN of the original notebook (a Keras CNN trained on a TPU), compiled with Adam(0.001), sparse
// categorical crossentropy and sparse_categorical_accuracy. 1,676,982 parameters for a 32x32x3 input.
Model seed_cnn(Shape input_shape = {32, 32, 3}, int classes = 10, const SeedCnnOptions& options = {});

// Names the command line accepts for built-in models.
std::vector<std::string> builtin_names();
Model builtin(const std::string& name, Shape input_shape, int classes);

}  // namespace systolic::models
