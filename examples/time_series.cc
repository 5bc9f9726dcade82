// A recurrent time-series classifier on real data: the UCR/UEA archive's BasicMotions (a smart watch's accelerometer
// and gyroscope, 6 channels of 100 steps; standing, running, walking, badminton), committed with its provenance in
// tests/fixtures/series (README.md there; GunPoint and ItalyPowerDemand beside it). A Conv1D, an LSTM over its
// sequence into a GRU, a softmax; Adam. The same file trains from the command line:
//   time_series [epochs] [npz file]
//   systolic train --model M.keras --dataset npz:tests/fixtures/series/basic_motions.npz  (a model saved by this)
#include <systolic/systolic.h>

#include <cstdio>
#include <string>

namespace sy = systolic;

sy::Model create_model(std::int64_t steps, std::int64_t channels, std::int64_t classes) {
  auto input = sy::layers::Input({steps, channels}, {.name = "series"});
  auto x = sy::layers::Conv1D(32, 5, {.strides = 2, .padding = "same", .activation = "relu"})(input);
  x = sy::layers::LSTM(32, {.return_sequences = true})(x);
  x = sy::layers::GRU(32)(x);
  auto output = sy::layers::Dense(int(classes), {.activation = "softmax"})(x);
  sy::Model model(input, output, "time_series");
  model.compile(sy::optimizers::Adam(0.003), "sparse_categorical_crossentropy", {"accuracy"});
  return model;
}

int main(int argc, char** argv) try {
  const int epochs = argc > 1 ? std::stoi(argv[1]) : 60;
  const std::string path =
      argc > 2 ? argv[2] : std::string(SYSTOLIC_SOURCE_DIR) + "/tests/fixtures/series/basic_motions.npz";
  sy::set_random_seed(7);
  auto data = sy::datasets::load("npz:" + path);
  const auto& x = data.train.x;
  auto model = create_model(x.dim(1), x.dim(2), std::int64_t(data.class_names.size()));
  model.summary();
  model.fit(x, data.train.y, {.batch_size = 8, .epochs = epochs, .verbose = 2});
  auto scores = model.evaluate(data.test.x, data.test.y, {.batch_size = 32, .verbose = 0});
  std::printf("Test loss: %.4f\nTest accuracy: %.2f%%\n", scores[0], scores[1] * 100);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "time_series: error: %s\n", e.what());
  return 1;
}
