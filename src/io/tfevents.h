// TensorBoard event files (what tf.summary writes): TFRecord framing of Event protobufs.
//
//   record: uint64 length (little-endian), uint32 masked_crc32c(length bytes), data, uint32 masked_crc32c(data)
//   masked_crc32c(x) = ((crc >> 15) | (crc << 17)) + 0xa282ead8, crc32c being the Castagnoli CRC
//   Event  { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   Summary { repeated Value value = 1; }  Value { string tag = 1; float simple_value = 2; HistogramProto histo = 5; }
//
// The few protobuf fields are written by hand (no .proto compiler needed). The first record of a file is the
// Event with file_version "brain.Event:2", as TensorFlow writes it.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace systolic::io {

std::uint32_t crc32c(const void* data, std::size_t size);
std::uint32_t masked_crc32c(const void* data, std::size_t size);

// One TFRecord: the framing around `data`.
std::string tfrecord(const std::string& data);

// A histogram summary's buckets (TensorFlow's HistogramProto).
struct Histogram {
  double min = 0, max = 0, num = 0, sum = 0, sum_squares = 0;
  std::vector<double> bucket_limit, bucket;
};
// TensorFlow's histogram of `values` with `buckets` equal-width buckets between min and max.
Histogram make_histogram(const std::vector<double>& values, int buckets = 30);

// Appends events to DIR/events.out.tfevents.<seconds>.<host>.<pid>.<n>.v2 (DIR is created), flushing each one.
class EventFileWriter {
 public:
  explicit EventFileWriter(const std::string& dir);
  ~EventFileWriter();
  EventFileWriter(const EventFileWriter&) = delete;
  EventFileWriter& operator=(const EventFileWriter&) = delete;
  void add_scalar(const std::string& tag, double value, std::int64_t step);
  void add_histogram(const std::string& tag, const Histogram& histogram, std::int64_t step);
  const std::string& path() const { return path_; }

 private:
  void write_event(const std::string& event);
  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace systolic::io
