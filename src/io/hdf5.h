// A thin RAII layer over the HDF5 C library, just what Keras files need: groups, string attributes in all the
// forms h5py and Keras write (fixed- and variable-length, ASCII and UTF-8, scalar or array, chunked as name0,
// name1, ...), and float32 / int64 datasets. Every failure throws systolic::Error naming the file and the
// object; HDF5's own error stack is silenced and its innermost message appended.
//
// The serial HDF5 library is not thread-safe: callers hold hdf5::Lock for the whole of a file operation.
#pragma once

#include <hdf5.h>
#include <systolic/tensor.h>

#include <mutex>
#include <optional>
#include <string>
#include <vector>

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

class Group {
 public:
  Group(Handle handle, std::string file, std::string path)
      : handle_(std::move(handle)), file_(std::move(file)), path_(std::move(path)) {}
  const std::string& path() const { return path_; }
  const std::string& file() const { return file_; }
  hid_t id() const { return handle_.get(); }

  // Children. `name` may contain '/' (a path below this group).
  bool has(const std::string& name) const;
  bool has_group(const std::string& name) const;
  bool has_dataset(const std::string& name) const;
  Group group(const std::string& name) const;         // throws naming the path when absent
  Group create_group(const std::string& name) const;  // creates intermediate groups
  std::vector<std::string> children() const;          // names of the direct children, in name order

  // Attributes.
  bool has_attribute(const std::string& name) const;
  // A string or an array of strings (any HDF5 string form), or an empty numeric array (Keras's empty list).
  // Chunked attributes: when `name` is absent and name0, name1, ... exist, their contents are concatenated.
  std::vector<std::string> string_list_attribute(const std::string& name) const;
  std::string string_attribute(const std::string& name) const;  // a scalar string (or a one-element array)
  void set_string_list_attribute(const std::string& name, const std::vector<std::string>& values) const;
  void set_string_attribute(const std::string& name, const std::string& value) const;
  void set_empty_list_attribute(const std::string& name) const;  // an empty float64 array, as Keras writes

  // Datasets.
  std::vector<std::int64_t> dataset_shape(const std::string& name) const;
  bool dataset_is_integer(const std::string& name) const;  // an integer dataset (else float, or other)
  // Reads any integer or float dataset, converted to float32 (HDF5 converts), into a tensor of its shape.
  Tensor read_float32(const std::string& name) const;
  double read_scalar(const std::string& name) const;                       // a one-element numeric dataset
  void write_float32(const std::string& name, const Tensor& value) const;  // value: float32 on the CPU
  void write_int64_scalar(const std::string& name, std::int64_t value) const;
  // value: float32 on the CPU holding integers, written as an int64 dataset of its shape (rounded to nearest).
  void write_int64(const std::string& name, const Tensor& value) const;
  void write_float32_scalar(const std::string& name, float value) const;

  std::string where(const std::string& child = "") const;  // "file.h5: /a/b/child" for messages

 private:
  std::optional<std::vector<std::string>> read_strings(hid_t attr, const std::string& name) const;
  Handle handle_;
  std::string file_, path_;
};

// Opens an existing file for reading; the error says whether it is missing, not HDF5, or unreadable.
// The file is untrusted: a forked child reads all of it first, so that a crash or hang of the HDF5 library on
// a damaged file becomes a clean error here (docs/security.md).
Group open_read(const std::string& path);
// Opens an HDF5 file held in memory (HDF5's core driver over a copy of the bytes) for reading; `name` names it in
// errors, e.g. "m.keras: model.weights.h5".
Group open_image(const void* data, std::size_t size, const std::string& name);
// Creates (truncates) a file for writing.
Group create(const std::string& path);

// "…: <innermost HDF5 message>" for the current error stack, or "" when there is none.
std::string last_error();

}  // namespace systolic::hdf5
