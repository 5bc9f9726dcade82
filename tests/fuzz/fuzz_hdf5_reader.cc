// The HDF5 reader itself, in this process: what the contained child does (hdf5::write_tree_of_image: HDF5 reads
// the whole file, the walk encodes it), then the parse of its stream and every read a loader makes. The other
// HDF5 harnesses run the reader in a forked child, where a sanitizer's report is lost with the child's stderr and
// the fuzzer sees no coverage; this one is how the walk's own code is fuzzed under ASan and UBSan.
// Crashes inside Debian's HDF5 stop it as they would stop the child (which the other harnesses contain): so it
// runs under libFuzzer only (scripts/fuzz, with -fork and -ignore_crashes), not in the CI short run, and a
// crash is ours only when our code is on its stack (docs/security.md says how they were told apart).
#include <sys/mman.h>
#include <unistd.h>

#include <memory>
#include <vector>

#include "fuzz_util.h"
#include "io/hdf5.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace sy = systolic;
  static int fd = memfd_create("fuzz-hdf5-reader", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, 0) != 0 || lseek(fd, 0, SEEK_SET) != 0) return 0;
  sy::fuzz::expect_clean([&] {
    sy::hdf5::write_tree_of_image(data, size, "fuzz.h5", fd);
    auto stream = std::make_shared<std::vector<char>>(static_cast<std::size_t>(lseek(fd, 0, SEEK_CUR)));
    if (pread(fd, stream->data(), stream->size(), 0) != static_cast<ssize_t>(stream->size())) return;
    sy::fuzz::exercise(sy::hdf5::decode_tree(stream, stream->data(), stream->size(), "fuzz.h5"));
  });
  return 0;
}
