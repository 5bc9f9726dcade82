// TensorBoard event files (tfevents.h).
#include "io/tfevents.h"

#include <fmt/format.h>
#include <systolic/error.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>

namespace systolic::io {

namespace {

// Reflected CRC-32C (polynomial 0x82f63b78), one table.
const std::array<std::uint32_t, 256>& crc_table() {
  static const std::array<std::uint32_t, 256> table = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  return table;
}

// Protobuf wire format: varints, tags, fixed-width little-endian fields, length-delimited fields.
void varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out += char((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += char(v);
}
void tag(std::string& out, int field, int wire_type) {
  varint(out, std::uint64_t(field) << 3 | wire_type);
}
template <class T>
void fixed(std::string& out, int field, T value) {
  tag(out, field, sizeof(T) == 8 ? 1 : 5);
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));  // little-endian hosts (x86-64, aarch64)
  out.append(bytes, sizeof(T));
}
void bytes_field(std::string& out, int field, const std::string& data) {
  tag(out, field, 2);
  varint(out, data.size());
  out += data;
}
void packed_doubles(std::string& out, int field, const std::vector<double>& values) {
  std::string data(values.size() * 8, '\0');
  if (!values.empty()) std::memcpy(data.data(), values.data(), data.size());
  bytes_field(out, field, data);
}

double wall_time() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

std::string event(std::int64_t step, const std::string& summary) {
  std::string e;
  fixed<double>(e, 1, wall_time());
  tag(e, 2, 0);
  varint(e, std::uint64_t(step));
  bytes_field(e, 5, summary);
  return e;
}

}  // namespace

std::uint32_t crc32c(const void* data, std::size_t size) {
  auto& t = crc_table();
  std::uint32_t c = 0xffffffffu;
  auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < size; ++i) c = t[(c ^ p[i]) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

std::uint32_t masked_crc32c(const void* data, std::size_t size) {
  std::uint32_t c = crc32c(data, size);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

std::string tfrecord(const std::string& data) {
  std::string out;
  std::uint64_t n = data.size();
  char len[8];
  std::memcpy(len, &n, 8);
  out.append(len, 8);
  std::uint32_t c = masked_crc32c(len, 8);
  out.append(reinterpret_cast<const char*>(&c), 4);
  out += data;
  c = masked_crc32c(data.data(), data.size());
  out.append(reinterpret_cast<const char*>(&c), 4);
  return out;
}

Histogram make_histogram(const std::vector<double>& values, int buckets) {
  Histogram h;
  if (values.empty()) return h;
  h.min = *std::min_element(values.begin(), values.end());
  h.max = *std::max_element(values.begin(), values.end());
  h.num = double(values.size());
  for (double v : values) h.sum += v, h.sum_squares += v * v;
  double width = (h.max - h.min) / buckets;
  if (width <= 0) {
    h.bucket_limit = {h.max};
    h.bucket = {h.num};
    return h;
  }
  h.bucket.assign(buckets, 0.0);
  for (int i = 0; i < buckets; ++i) h.bucket_limit.push_back(h.min + width * (i + 1));
  for (double v : values) h.bucket[std::min(buckets - 1, int((v - h.min) / width))] += 1;
  return h;
}

EventFileWriter::EventFileWriter(const std::string& dir) {
  static std::atomic<int> counter{0};
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  SYSTOLIC_CHECK(!ec, "TensorBoard: cannot create the log folder {}: {}", dir, ec.message());
  char host[256] = "localhost";
  gethostname(host, sizeof(host) - 1);
  path_ = (std::filesystem::path(dir) / fmt::format("events.out.tfevents.{}.{}.{}.{}.v2",
                                                    std::int64_t(wall_time()), host, ::getpid(), counter++))
              .string();
  file_ = std::fopen(path_.c_str(), "wb");
  SYSTOLIC_CHECK(file_, "TensorBoard: cannot write {}", path_);
  std::string first;
  fixed<double>(first, 1, wall_time());
  bytes_field(first, 3, "brain.Event:2");
  write_event(first);
}

EventFileWriter::~EventFileWriter() {
  if (file_) std::fclose(file_);
}

void EventFileWriter::write_event(const std::string& e) {
  std::string record = tfrecord(e);
  SYSTOLIC_CHECK(
      std::fwrite(record.data(), 1, record.size(), file_) == record.size() && std::fflush(file_) == 0,
      "TensorBoard: cannot write {}", path_);
}

void EventFileWriter::add_scalar(const std::string& name, double value, std::int64_t step) {
  std::string v;
  bytes_field(v, 1, name);
  fixed<float>(v, 2, float(value));
  std::string summary;
  bytes_field(summary, 1, v);
  write_event(event(step, summary));
}

void EventFileWriter::add_histogram(const std::string& name, const Histogram& h, std::int64_t step) {
  std::string histo;
  fixed<double>(histo, 1, h.min);
  fixed<double>(histo, 2, h.max);
  fixed<double>(histo, 3, h.num);
  fixed<double>(histo, 4, h.sum);
  fixed<double>(histo, 5, h.sum_squares);
  packed_doubles(histo, 6, h.bucket_limit);
  packed_doubles(histo, 7, h.bucket);
  std::string v;
  bytes_field(v, 1, name);
  bytes_field(v, 5, histo);
  std::string summary;
  bytes_field(summary, 1, v);
  write_event(event(step, summary));
}

}  // namespace systolic::io
