// Helpers for the libFuzzer harnesses (tests/fuzz/fuzz_*.cc): parsers that read from a path get the input
// written to a file in a per-process scratch folder. A harness expects systolic::Error (a clean, reported
// failure); anything else that escapes, and every sanitizer report, is a finding.
#pragma once

#include <stdlib.h>
#include <systolic/error.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace systolic::fuzz {

inline std::filesystem::path scratch() {
  static std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("systolic-fuzz-" + std::to_string(getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

// The input as the file `scratch()/name`; returns its path.
inline std::string write_input(const std::uint8_t* data, std::size_t size, const std::string& name) {
  auto path = (scratch() / name).string();
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path;
}

// HDF5 files are checked in a child with a time limit (5 s by default); a fuzzer meets many inputs that hang
// HDF5, so its harnesses use 1 s to keep the executions per second up.
inline void short_hdf5_limit() {
  static bool done = [] { return setenv("SYSTOLIC_HDF5_CHECK_SECONDS", "1", 1) == 0; }();
  (void)done;
}

// Runs f, swallowing the clean failures systolic reports (systolic::Error).
template <class F>
void expect_clean(F&& f) {
  try {
    f();
  } catch (const systolic::Error&) {
  }
}

}  // namespace systolic::fuzz
