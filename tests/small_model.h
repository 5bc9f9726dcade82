// A small model with every kind of weight the Keras file tests need (conv, BN with moving statistics, dense),
// randomly initialised from `seed`: input (6, 6, 2), layers input, conv2d, batch_normalization,
// max_pooling2d, flatten, dense (4, softmax).
#pragma once

#include <systolic/systolic.h>

#include <cstdint>

namespace systolic::testing {

inline Model small_model(std::uint64_t seed = 1) {
  namespace L = layers;
  set_random_seed(seed);
  auto in = L::Input({6, 6, 2});
  auto x = L::Conv2D(3, {3, 3}, {.padding = "same", .activation = "relu"})(in);
  x = L::BatchNormalization()(x);
  x = L::MaxPooling2D()(x);
  x = L::Flatten()(x);
  auto out = L::Dense(4, {.activation = "softmax"})(x);
  return Model(in, out);
}

}  // namespace systolic::testing
