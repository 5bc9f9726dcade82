// An HDF5 file's content as plain data: what the Keras readers see of a file, with no HDF5 library below it.
//
// A file from outside is untrusted, and Debian's HDF5 1.10 can crash or hang on damaged bytes. So a time-limited
// child process reads the whole file with HDF5 (hdf5.h: read_file, read_image) and hands back what it read as a
// stream of records (TreeEncoder); this process parses that stream, checking every length, into a tree of groups,
// attributes decoded to strings and datasets as float32 arrays (decode_tree), and never calls HDF5 on the file.
// ReadGroup answers the questions the readers ask (has_group, string_list_attribute, read_float32, ...); what
// HDF5 could not read in the child (a damaged attribute, an unreadable dataset) is recorded and raised as a
// systolic::Error when a reader asks for it, so a damaged object the readers never use does not fail a load.
// docs/security.md says why.
#pragma once

#include <systolic/tensor.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace systolic::hdf5 {

struct Node;
struct Tree;

// A group of a file read into memory. Copies share the tree.
class ReadGroup {
 public:
  ReadGroup(std::shared_ptr<const Tree> tree, const Node* node, std::string path);
  const std::string& path() const { return path_; }
  const std::string& file() const;

  // Children. `name` may be a path below this group ("a/b"; empty components are skipped). Asking for a child
  // that is absent from a group HDF5 could not list raises that failure.
  bool has(const std::string& name) const;
  bool has_group(const std::string& name) const;
  bool has_dataset(const std::string& name) const;
  ReadGroup group(const std::string& name) const;  // throws naming the path when absent
  std::vector<std::string> children() const;       // names of the direct children, in name order

  // Attributes.
  bool has_attribute(const std::string& name) const;
  // A string or an array of strings (any HDF5 string form), or an empty numeric array (Keras's empty list).
  // Chunked attributes: when `name` is absent and name0, name1, ... exist, their contents are concatenated.
  std::vector<std::string> string_list_attribute(const std::string& name) const;
  std::string string_attribute(const std::string& name) const;  // a scalar string (or a one-element array)

  // Datasets (any integer or float type, converted to float32 by HDF5 in the reading process).
  std::vector<std::int64_t> dataset_shape(const std::string& name) const;
  bool dataset_is_integer(const std::string& name) const;  // stored as an integer type (else float, or other)
  Tensor read_float32(const std::string& name) const;
  double read_scalar(const std::string& name) const;  // a one-element numeric dataset

  // "file.h5: /a/b/child" for messages, the names from the file escaped (printable).
  std::string where(const std::string& child = "") const;

 private:
  const Node* find(const std::string& name) const;  // nullptr when absent
  const Node& dataset(const std::string& name) const;
  std::shared_ptr<const Tree> tree_;
  const Node* node_;
  std::string path_;
};

// Parses a stream TreeEncoder wrote (`size` bytes at `data`, kept alive by `owner`) into the root group of the
// file `file`. A stream that ends early, claims more than it holds, or is otherwise malformed is refused with an
// Error naming the file; a stream that reports a file-level failure (the child's) raises that failure.
ReadGroup decode_tree(std::shared_ptr<const void> owner, const char* data, std::size_t size,
                      const std::string& file);

// Writes the record stream to a file descriptor (the reading child's memfd), buffered. Calls nest as the file
// does: begin_group (the root first), its attributes and children, end_group. Strings are raw bytes, lengths
// are checked by the parser; the messages are what a reader raises when it asks for that object.
class TreeEncoder {
 public:
  explicit TreeEncoder(int fd);
  ~TreeEncoder();
  TreeEncoder(const TreeEncoder&) = delete;
  TreeEncoder& operator=(const TreeEncoder&) = delete;

  void begin_group(std::string_view name);
  void end_group();
  void attribute_strings(std::string_view name, const std::vector<std::string>& values);
  void attribute_not_strings(std::string_view name);  // numeric, non-empty: not a list of strings
  void attribute_error(std::string_view name, std::string_view message);
  void attributes_error(std::string_view message);  // the group's attributes could not be listed
  void children_error(std::string_view message);    // the group's links could not be listed
  // A dataset: its shape, whether its type is an integer type, its values as float32 (nullptr with data_error
  // when they could not be read) and, for one value, that value as a double (scalar_error when it could not be
  // read).
  void dataset(std::string_view name, const std::vector<std::int64_t>& dims, bool integer, const float* data,
               std::string_view data_error, std::optional<double> scalar, std::string_view scalar_error);
  void dataset_error(std::string_view name, std::string_view message);  // not even its shape was read
  void other(std::string_view name, std::string_view message);  // a link to neither a group nor a dataset
  // The last record: success, or a failure of the whole file (`message`, raised as is after the file name).
  void finish();
  void fail_file(std::string_view message);

 private:
  void put(const void* data, std::size_t size);
  void put_u8(std::uint8_t v) { put(&v, 1); }
  void put_u64(std::uint64_t v) { put(&v, sizeof v); }
  void put_string(std::string_view s);
  void flush();
  int fd_;
  std::vector<char> buffer_;
};

}  // namespace systolic::hdf5
