// Writes the record stream the HDF5 reading child hands back for each file given to OUT/<file name>.tree: the
// seed corpus of fuzz_hdf5_tree (tests/reference/fuzz_corpus.py --tree-seeds runs it).
//   hdf5_tree_seeds OUT FILE.h5...
#include <fcntl.h>
#include <systolic/error.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "io/hdf5.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s OUT FILE.h5...\n", argv[0]);
    return 2;
  }
  try {
    for (int i = 2; i < argc; ++i) {
      std::ifstream in(argv[i], std::ios::binary);
      std::vector<char> bytes(std::istreambuf_iterator<char>(in), {});
      auto out =
          (std::filesystem::path(argv[1]) / std::filesystem::path(argv[i]).filename()).string() + ".tree";
      int fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd < 0) systolic::fail("{}: cannot create it", out);
      systolic::hdf5::write_tree_of_image(bytes.data(), bytes.size(), argv[i], fd);
      close(fd);
    }
  } catch (const systolic::Error& e) {
    std::fprintf(stderr, "hdf5_tree_seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
