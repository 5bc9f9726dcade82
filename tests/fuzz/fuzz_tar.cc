// Archives (tar, tar.gz) through the safe extraction the CIFAR-10 installer uses.
#include "fuzz_util.h"
#include "io/fetch.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto path = systolic::fuzz::write_input(data, size, "archive.tar.gz");
  auto dest = systolic::fuzz::scratch() / "extract";
  std::filesystem::remove_all(dest);
  std::filesystem::create_directories(dest);
  systolic::fuzz::expect_clean([&] { systolic::io::extract_archive(path, dest, 64 << 20); });
  return 0;
}
