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
#include <vector>

#include "io/hdf5_tree.h"

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

// Every read a Keras loader makes, on every object below `g` (a file read as plain data, io/hdf5_tree.h): the
// attributes Keras files carry, each child as a group or a dataset, each dataset's values and scalar.
inline void exercise(const systolic::hdf5::ReadGroup& g, int depth = 0) {
  for (const char* a :
       {"layer_names", "weight_names", "model_config", "training_config", "keras_version", "backend"})
    expect_clean(
        [&] { g.has_attribute(a) ? (void)g.string_list_attribute(a) : (void)g.string_attribute(a); });
  std::vector<std::string> names;
  expect_clean([&] { names = g.children(); });
  for (const auto& n : names)
    expect_clean([&] {
      if (g.has_group(n)) {
        if (depth < 70) exercise(g.group(n), depth + 1);
      } else if (g.has_dataset(n)) {
        g.dataset_shape(n);
        g.read_float32(n);
        g.read_scalar(n);
      } else {
        g.group(n);
      }
    });
}

}  // namespace systolic::fuzz
