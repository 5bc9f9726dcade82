// Keras model JSON (model.to_json()), tf.keras and Keras 3.
#include <systolic/saving.h>

#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  systolic::fuzz::expect_clean([&] { systolic::model_from_json(text); });
  return 0;
}
