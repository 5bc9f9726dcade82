// The small model and data set the replica tests train, shared by the in-process tests (test_replicas.cc,
// test_mpi_replicas.cc) and the program they start under mpirun (mpi_replica_program.cc), so both sides build
// the same model from the same seed.
#pragma once

#include <systolic/systolic.h>

namespace systolic::testing {

// Conv -> [BatchNorm] -> ReLU -> MaxPool -> Dense softmax on 8x8x1 images, 5 classes; no dropout (its masks
// would differ between one replica and several). SGD with momentum: its update is linear in the gradient, so
// the float rounding of summing shards in another order stays at the rounding level.
inline Model replica_test_model(bool batch_norm, std::uint64_t seed = 5) {
  set_random_seed(seed);
  clear_session();
  auto in = layers::Input({8, 8, 1});
  auto x = layers::Rescaling(1.0 / 255)(in);
  x = layers::Conv2D(4, {3, 3}, {.padding = "same"})(x);
  if (batch_norm) x = layers::BatchNormalization()(x);
  x = layers::Activation("relu")(x);
  x = layers::MaxPooling2D({2, 2})(x);
  x = layers::Flatten()(x);
  auto out = layers::Dense(5, {.activation = "softmax"})(x);
  Model m(in, out);
  m.compile(optimizers::SGD(0.05, 0.9), "sparse_categorical_crossentropy", {"accuracy"});
  return m;
}

struct ReplicaTestData {
  Tensor x, y;
};

inline ReplicaTestData replica_test_data(std::int64_t n, std::uint64_t seed = 3) {
  Generator g(seed);
  ReplicaTestData d{Tensor({n, 8, 8, 1}, DType::uint8), Tensor({n}, DType::uint8)};
  for (std::int64_t i = 0; i < d.x.numel(); ++i)
    d.x.data<std::uint8_t>()[i] = std::uint8_t(g.next_u32() & 255);
  for (std::int64_t i = 0; i < n; ++i) d.y.data<std::uint8_t>()[i] = std::uint8_t(g.next_u32() % 5);
  return d;
}

// Every weight of the model (trainable and not), in layer order.
inline std::vector<double> all_weights(Model& m) {
  std::vector<double> out;
  for (auto& l : m.layers())
    for (auto& w : l->weights()) {
      auto v = w.value.to_doubles();
      out.insert(out.end(), v.begin(), v.end());
    }
  return out;
}

}  // namespace systolic::testing
