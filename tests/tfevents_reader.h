// Reads TensorBoard event files for the tests (tests/test_keras_callbacks.cc, tests/test_callback_hooks.cc):
// every record with its CRCs checked (io::masked_crc32c), each Event's step and its summary values' tags and
// simple_value scalars (NaN for histograms), by walking the protobuf wire format.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "io/tfevents.h"
#include "test_util.h"

namespace systolic::testing {

namespace fs = std::filesystem;

struct Record {
  std::int64_t step = 0;
  std::vector<std::string> tags;
  std::vector<float> values;  // simple_value per tag (NaN: none)
};

inline std::uint64_t read_varint(const std::string& s, std::size_t& i) {
  std::uint64_t v = 0;
  for (int shift = 0; i < s.size(); shift += 7) {
    unsigned char b = s[i++];
    v |= std::uint64_t(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
  ADD_FAILURE() << "truncated varint";
  return v;
}

// Walks one protobuf message: calls fn(field, wire_type, varint value, bytes) for each field.
inline void walk(const std::string& m,
                 const std::function<void(int, int, std::uint64_t, const std::string&)>& fn) {
  for (std::size_t i = 0; i < m.size();) {
    std::uint64_t key = read_varint(m, i);
    int field = int(key >> 3), type = int(key & 7);
    if (type == 0) {
      fn(field, type, read_varint(m, i), "");
    } else if (type == 1 || type == 5) {
      std::size_t n = type == 1 ? 8 : 4;
      fn(field, type, 0, m.substr(i, n));
      i += n;
    } else if (type == 2) {
      std::size_t n = read_varint(m, i);
      fn(field, type, 0, m.substr(i, n));
      i += n;
    } else {
      ADD_FAILURE() << "unexpected wire type " << type;
      return;
    }
  }
}

// Every record of an event file, each CRC checked with io::masked_crc32c; the Events' steps and summary tags.
inline std::vector<Record> read_events(const fs::path& path) {
  std::string data = read_text(path);
  std::vector<Record> out;
  for (std::size_t i = 0; i < data.size();) {
    EXPECT_LE(i + 12, data.size()) << path;
    std::uint64_t n;
    std::uint32_t crc;
    std::memcpy(&n, data.data() + i, 8);
    std::memcpy(&crc, data.data() + i + 8, 4);
    EXPECT_EQ(crc, io::masked_crc32c(data.data() + i, 8)) << "length CRC of the record at " << i;
    std::string event = data.substr(i + 12, n);
    std::memcpy(&crc, data.data() + i + 12 + n, 4);
    EXPECT_EQ(crc, io::masked_crc32c(event.data(), event.size())) << "data CRC of the record at " << i;
    i += 12 + n + 4;
    Record r;
    walk(event, [&](int field, int, std::uint64_t v, const std::string& bytes) {
      if (field == 2) r.step = std::int64_t(v);
      if (field != 5) return;
      walk(bytes, [&](int, int, std::uint64_t, const std::string& value) {
        std::string tag;
        float simple = NAN;
        walk(value, [&](int f, int, std::uint64_t, const std::string& b) {
          if (f == 1) tag = b;
          if (f == 2) std::memcpy(&simple, b.data(), 4);
        });
        r.tags.push_back(tag);
        r.values.push_back(simple);
      });
    });
    out.push_back(r);
  }
  return out;
}

inline fs::path only_file(const fs::path& dir) {
  std::vector<fs::path> files;
  for (auto& e : fs::directory_iterator(dir)) files.push_back(e.path());
  EXPECT_EQ(files.size(), 1u) << dir;
  return files.empty() ? fs::path() : files[0];
}

}  // namespace systolic::testing
