// HDF5 weights in tf.keras's (legacy) layout, loaded into the model that wrote the seeds.
#include <systolic/saving.h>

#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  systolic::fuzz::short_hdf5_limit();
  static systolic::Model model =
      systolic::model_from_json_file(SYSTOLIC_SOURCE_DIR "/tests/fixtures/keras/zoo.tfkeras.json");
  auto path = systolic::fuzz::write_input(data, size, "weights.h5");
  systolic::fuzz::expect_clean([&] { model.load_weights(path); });
  return 0;
}
