// IDX files (MNIST, Fashion-MNIST), gzip or plain.
#include <systolic/datasets.h>

#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto path = systolic::fuzz::write_input(data, size, "images-idx3-ubyte.gz");
  systolic::fuzz::expect_clean([&] { systolic::datasets::read_idx(path); });
  return 0;
}
