// .npy object arrays of integer sequences (npy::read_sequences: the pickles of Keras's imdb.npz and reuters.npz
// members, read as data by io/pickle.cc), from bytes.
#include <systolic/npy.h>

#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  systolic::fuzz::expect_clean([&] { systolic::npy::read_sequences(data, size, "fuzz.npy"); });
  return 0;
}
