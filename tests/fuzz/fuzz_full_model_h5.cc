// Full-model HDF5 files (model.save("m.h5")), tf.keras and Keras 3: architecture, weights, optimizer state.
#include <systolic/saving.h>

#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  systolic::fuzz::short_hdf5_limit();
  auto path = systolic::fuzz::write_input(data, size, "model.h5");
  systolic::fuzz::expect_clean([&] { systolic::load_model(path); });
  return 0;
}
