// NumPy's .npy arrays (npy::read: what predict --input and npz members go through), from bytes.
#include <systolic/npy.h>

#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  systolic::fuzz::expect_clean([&] { systolic::npy::read(data, size, "fuzz.npy"); });
  return 0;
}
