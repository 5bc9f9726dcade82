// keras-io's "Timeseries classification with a Transformer" in C++: the example's model (4 encoder blocks of
// MultiHeadAttention with head_size 256, 4 heads and dropout 0.25, LayerNormalization, a feed-forward part of two
// Conv1D with kernel 1, residual adds; GlobalAveragePooling1D channels_first; Dense(128) with dropout 0.4; softmax),
// Adam(1e-4), on real data: the UCR/UEA archive's ItalyPowerDemand (a day's hourly electricity demand, 24 steps;
// October-March or April-September), committed with its provenance in tests/fixtures/series. keras-io trains on
// FordA (500 steps); any series .npz of that folder works here:
//   transformer_series [epochs] [npz file]
//   systolic train --model M.keras --dataset npz:...  (a model saved by this; Keras loads it too)
#include <systolic/systolic.h>

#include <cstdio>
#include <string>

namespace sy = systolic;
namespace layers = systolic::layers;

// keras-io's transformer_encoder.
sy::SymbolicTensor transformer_encoder(const sy::SymbolicTensor& inputs, int head_size, int num_heads,
                                       int ff_dim, double dropout) {
  auto x = layers::MultiHeadAttention(num_heads, head_size, {.dropout = dropout})({inputs, inputs});
  x = layers::Dropout(dropout)(x);
  x = layers::LayerNormalization({.epsilon = 1e-6})(x);
  auto res = layers::Add()({x, inputs});
  x = layers::Conv1D(ff_dim, 1, {.activation = "relu"})(res);
  x = layers::Dropout(dropout)(x);
  x = layers::Conv1D(int(inputs.shape()[-1]), 1)(x);
  x = layers::LayerNormalization({.epsilon = 1e-6})(x);
  return layers::Add()({x, res});
}

// keras-io's build_model with the example's settings.
sy::Model build_model(std::int64_t steps, std::int64_t channels, std::int64_t classes) {
  auto inputs = layers::Input({steps, channels}, {.name = "series"});
  auto x = inputs;
  for (int i = 0; i < 4; ++i) x = transformer_encoder(x, 256, 4, 4, 0.25);
  x = layers::GlobalAveragePooling1D({.data_format = "channels_first"})(x);
  x = layers::Dense(128, {.activation = "relu"})(x);
  x = layers::Dropout(0.4)(x);
  auto outputs = layers::Dense(int(classes), {.activation = "softmax"})(x);
  sy::Model model(inputs, outputs, "transformer_series");
  model.compile(sy::optimizers::Adam(1e-4), "sparse_categorical_crossentropy",
                {"sparse_categorical_accuracy"});
  return model;
}

int main(int argc, char** argv) try {
  const int epochs = argc > 1 ? std::stoi(argv[1]) : 30;
  const std::string path =
      argc > 2 ? argv[2] : std::string(SYSTOLIC_SOURCE_DIR) + "/tests/fixtures/series/italy_power.npz";
  sy::set_random_seed(7);
  auto data = sy::datasets::load("npz:" + path);
  const auto& x = data.train.x;
  auto model = build_model(x.dim(1), x.dim(2), std::int64_t(data.class_names.size()));
  model.summary();
  model.fit(x, data.train.y, {.batch_size = 32, .epochs = epochs, .verbose = 2});
  auto scores = model.evaluate(data.test.x, data.test.y, {.batch_size = 32, .verbose = 0});
  std::printf("Test loss: %.4f\nTest accuracy: %.2f%%\n", scores[0], scores[1] * 100);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "transformer_series: error: %s\n", e.what());
  return 1;
}
