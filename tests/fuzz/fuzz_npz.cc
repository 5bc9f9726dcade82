// Keras's mnist.npz (a zip of .npy arrays), read as `mnist` finds it in the data-set cache, and the same bytes as
// an npz:PATH data set (any arrays, datasets::load).
#include <stdlib.h>
#include <systolic/datasets.h>

#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static bool home = [] {
    std::filesystem::create_directories(systolic::fuzz::scratch() / "datasets");
    setenv("SYSTOLIC_HOME", systolic::fuzz::scratch().c_str(), 1);
    setenv("SYSTOLIC_DATASETS_URL", "http://127.0.0.1:9/", 1);  // never downloads
    return true;
  }();
  (void)home;
  std::string path = systolic::fuzz::write_input(data, size, "datasets/mnist.npz");
  systolic::fuzz::expect_clean([&] { systolic::datasets::mnist::load_data(); });
  systolic::fuzz::expect_clean([&] { systolic::datasets::load("npz:" + path); });
  return 0;
}
