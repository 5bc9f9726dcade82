// Keras 3 .keras files (model.save("m.keras")): the zip (config.json, metadata.json, model.weights.h5), the
// model from its config, the weights from the HDF5 image inside, the optimizer and its state.
#include "fuzz_util.h"
#include "saving/keras_io.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  systolic::fuzz::short_hdf5_limit();
  systolic::fuzz::expect_clean(
      [&] { systolic::keras_io::load_keras_archive(data, size, "fuzz.keras", {.compile = true}); });
  return 0;
}
