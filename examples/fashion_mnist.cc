// The seed CNN on Fashion-MNIST, on the CPU: load, build, fit, evaluate, predict one test image.
//   fashion_mnist [epochs] [train samples]
#include <systolic/systolic.h>

#include <cstdio>
#include <string>

namespace sy = systolic;

sy::Model create_model() {
  auto input = sy::layers::Input({28, 28, 1}, {.name = "Input"});
  auto x = sy::layers::BatchNormalization()(input);
  x = sy::layers::Conv2D(32, {3, 3}, {.padding = "same", .activation = "relu"})(x);
  x = sy::layers::Conv2D(32, {3, 3}, {.padding = "same", .activation = "relu"})(x);
  x = sy::layers::MaxPooling2D({2, 2})(x);
  x = sy::layers::Dropout(0.25)(x);
  x = sy::layers::BatchNormalization()(x);
  x = sy::layers::Conv2D(64, {3, 3}, {.padding = "same", .activation = "relu"})(x);
  x = sy::layers::Conv2D(64, {3, 3}, {.activation = "relu"})(x);
  x = sy::layers::MaxPooling2D({2, 2})(x);
  x = sy::layers::Dropout(0.25)(x);
  x = sy::layers::Flatten()(x);
  x = sy::layers::Dense(512, {.activation = "relu"})(x);
  x = sy::layers::Dropout(0.5)(x);
  auto output = sy::layers::Dense(10, {.activation = "softmax"})(x);
  sy::Model model(input, output);
  model.compile(sy::optimizers::Adam(0.001), "sparse_categorical_crossentropy",
                {"sparse_categorical_accuracy"});
  return model;
}

int main(int argc, char** argv) try {
  int epochs = argc > 1 ? std::stoi(argv[1]) : 1;
  std::int64_t limit = argc > 2 ? std::stoll(argv[2]) : 60000;
  sy::set_random_seed(42);
  auto data = sy::datasets::fashion_mnist::load_data();
  // Keras gives (N, 28, 28); the model takes (28, 28, 1).
  auto x_train = data.train.x.slice(0, limit).reshape({limit, 28, 28, 1});
  auto y_train = data.train.y.slice(0, limit);
  auto x_test = data.test.x.reshape({10000, 28, 28, 1});

  auto model = create_model();
  model.summary();
  model.fit(x_train, y_train, {.batch_size = 128, .epochs = epochs, .verbose = 2});
  auto scores = model.evaluate(x_test, data.test.y, {.batch_size = 128, .verbose = 0});
  std::printf("Test loss: %.4f\nTest accuracy: %.2f%%\n", scores[0], scores[1] * 100);

  auto probs = model.predict(x_test.slice(0, 1));
  auto p = probs.to_doubles();
  std::size_t best = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    std::printf("%s%.4f", i ? " " : "[", p[i]);
    if (p[i] > p[best]) best = i;
  }
  std::printf("]\nTest image 0: predicted %s, label %s\n", data.class_names[best].c_str(),
              data.class_names[data.test.y.data<std::uint8_t>()[0]].c_str());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "fashion_mnist: error: %s\n", e.what());
  return 1;
}
