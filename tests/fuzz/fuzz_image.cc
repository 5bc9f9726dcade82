// Images (PNG, JPEG, BMP, GIF) decoded from memory, to 3 and to 1 channels.
#include <systolic/image.h>

#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  systolic::fuzz::expect_clean([&] { systolic::image::decode(data, size, 3, "input"); });
  systolic::fuzz::expect_clean([&] { systolic::image::decode(data, size, 1, "input"); });
  return 0;
}
