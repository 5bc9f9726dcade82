// A thin RAII layer over the HDF5 C library, just what Keras files need. Writing: groups, string attributes as
// Keras writes them, float32 / int64 datasets. Reading: a contained child process reads a whole file, string
// attributes in all the forms h5py and Keras write (fixed- and variable-length, ASCII and UTF-8, scalar or
// array) and every dataset as float32, and hands it back as plain data (hdf5_tree.h). Every failure throws
// systolic::Error naming the file and the object; HDF5's own error stack is silenced and its innermost message
// appended.
//
// The serial HDF5 library is not thread-safe: writers hold hdf5::Lock for the whole of a file operation;
// read_file and read_image take it themselves.
#pragma once

#include <hdf5.h>
#include <systolic/tensor.h>

#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "io/hdf5_tree.h"

namespace systolic::hdf5 {

class Lock {
 public:
  Lock();

 private:
  std::unique_lock<std::recursive_mutex> lock_;
};

// An owned hid_t, closed with the right H5*close.
class Handle {
 public:
  Handle() = default;
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  Handle(Handle&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = H5I_INVALID_HID; }
  Handle& operator=(Handle&& o) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle();
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }

 private:
  hid_t id_ = H5I_INVALID_HID;
  herr_t (*close_)(hid_t) = nullptr;
};

// A group of a file being written. (Files are read through read_file / read_image, as plain data.)
class Group {
 public:
  Group(Handle handle, std::string file, std::string path)
      : handle_(std::move(handle)), file_(std::move(file)), path_(std::move(path)) {}
  const std::string& path() const { return path_; }
  const std::string& file() const { return file_; }
  hid_t id() const { return handle_.get(); }

  Group create_group(const std::string& name) const;  // creates intermediate groups

  // Attributes.
  void set_string_list_attribute(const std::string& name, const std::vector<std::string>& values) const;
  void set_string_attribute(const std::string& name, const std::string& value) const;
  void set_empty_list_attribute(const std::string& name) const;  // an empty float64 array, as Keras writes

  // Datasets.
  void write_float32(const std::string& name, const Tensor& value) const;  // value: float32 on the CPU
  void write_int64_scalar(const std::string& name, std::int64_t value) const;
  // value: float32 on the CPU holding integers, written as an int64 dataset of its shape (rounded to nearest).
  void write_int64(const std::string& name, const Tensor& value) const;
  void write_float32_scalar(const std::string& name, float value) const;

  std::string where(const std::string& child = "") const;  // "file.h5: /a/b/child" for messages

 private:
  Handle handle_;
  std::string file_, path_;
};

// Reads an HDF5 file (an untrusted one: any file from outside) as plain data. A forked child process reads
// all of it with HDF5, under a time limit (SYSTOLIC_HDF5_CHECK_SECONDS, default 5 s, plus 1 s per 64 MiB), and
// hands back every group, attribute and dataset (hdf5_tree.h); this process parses that and never calls HDF5
// on the file, so a crash or hang of the HDF5 library on a damaged file is a clean error here
// (docs/security.md). The error says whether the file is missing, not HDF5, unreadable, or crashed or hung
// the library.
ReadGroup read_file(const std::string& path);
// The same for an HDF5 file held in memory (the bytes of a .keras zip's model.weights.h5); `name` names it in
// errors, e.g. "m.keras: model.weights.h5".
ReadGroup read_image(const void* data, std::size_t size, const std::string& name);
// What the child of read_image does, in this process: reads the image with HDF5 and writes the record stream
// to `fd`. Not contained: for the fuzz harness of the reader itself (tests/fuzz/fuzz_hdf5_reader.cc).
void write_tree_of_image(const void* data, std::size_t size, const std::string& name, int fd);

// Creates (truncates) a file for writing.
Group create(const std::string& path);

// "…: <innermost HDF5 message>" for the current error stack, or "" when there is none.
std::string last_error();

}  // namespace systolic::hdf5
