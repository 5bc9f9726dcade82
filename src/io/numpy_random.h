// numpy.random.RandomState's shuffle, which Keras's data loaders order their samples by (imdb, reuters,
// text_dataset_from_directory, timeseries_dataset_from_array): one generator whose draws continue from shuffle to
// shuffle, as one RandomState's do.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace systolic::datasets::detail {

class NumpyRandomState {
 public:
  explicit NumpyRandomState(std::uint32_t seed) : mt_(seed) {}
  // The order RandomState.shuffle puts arange(n) in.
  std::vector<std::int64_t> shuffled(std::int64_t n);

 private:
  std::mt19937 mt_;  // MT19937 seeded by init_genrand, as numpy's legacy seeding of an integer
};

}  // namespace systolic::datasets::detail
