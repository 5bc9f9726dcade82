// CIFAR-10 binary batches (records of 1 label byte + 3072 pixel bytes); the seeds hold 2 records.
#include <systolic/datasets.h>

#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto path = systolic::fuzz::write_input(data, size, "data_batch_1.bin");
  systolic::fuzz::expect_clean([&] { systolic::datasets::cifar10::read_batch(path, 2); });
  return 0;
}
