// Built-in models. seed-cnn is the CNN of the original notebook, layer for layer.
#include <systolic/layers.h>
#include <systolic/models.h>

namespace systolic::models {

Model seed_cnn(Shape input_shape, int classes, const SeedCnnOptions& options) {
  namespace L = layers;
  double d = options.dropout ? 1.0 : 0.0;
  auto input = L::Input(input_shape, {.name = "Input"});
  auto x = L::BatchNormalization()(input);
  x = L::Conv2D(32, {3, 3}, {.padding = "same", .activation = "relu"})(x);
  x = L::Conv2D(32, {3, 3}, {.padding = "same", .activation = "relu"})(x);
  x = L::MaxPooling2D({2, 2})(x);
  x = L::Dropout(0.25 * d)(x);
  x = L::BatchNormalization()(x);
  x = L::Conv2D(64, {3, 3}, {.padding = "same", .activation = "relu"})(x);
  x = L::Conv2D(64, {3, 3}, {.activation = "relu"})(x);
  x = L::MaxPooling2D({2, 2})(x);
  x = L::Dropout(0.25 * d)(x);
  x = L::Flatten()(x);
  x = L::Dense(512, {.activation = "relu"})(x);
  x = L::Dropout(0.5 * d)(x);
  auto output = L::Dense(classes, {.activation = "softmax"})(x);
  Model model(input, output);
  model.compile(optimizers::Adam(0.001), "sparse_categorical_crossentropy", {"sparse_categorical_accuracy"});
  return model;
}

std::vector<std::string> builtin_names() {
  return {"seed-cnn"};
}

Model builtin(const std::string& name, Shape input_shape, int classes) {
  if (name == "seed-cnn") return seed_cnn(std::move(input_shape), classes);
  fail("unknown built-in model '{}' (known: seed-cnn)", name);
}

}  // namespace systolic::models
