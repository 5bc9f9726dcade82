// The record stream between the HDF5 reading child and this process, and the tree parsed from it.
//
// Stream: the 8 bytes "SYH5TRE" + version 1, then records, each a tag byte and its fields. Integers are 8-byte
// little-endian (the child is this machine); a string is its length then its bytes; floats are IEEE.
//   'G' name                        a group begins (the root first, named ""); its records follow until 'E'
//   'E'                             the group ends
//   'A' name kind [...]             an attribute: kind 0 count + count strings; 1 not strings; 2 message
//   'a' message / 'c' message       the group's attributes / links could not be listed
//   'D' name rank dims... integer ok [...]
//                                   a dataset: integer 1 when its type is an integer type; ok 1 then numel
//                                   float32 values, ok 0 then a message; when it holds one value, ok 1 + a
//                                   double or ok 0 + a message
//   'd' name message                a dataset whose shape could not be read
//   'O' name message                a link to neither a group nor a dataset (or one not followed)
//   'Z' 0 | 'Z' 1 message           the end: success (after the root's 'E'), or a failure of the whole file
// The parser trusts nothing in it: every length is checked against the bytes left, nesting is bounded, and
// anything else is refused as malformed.
#include "io/hdf5_tree.h"

#include <systolic/error.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>

#include "core/text.h"

namespace systolic::hdf5 {

namespace {
constexpr char kMagic[8] = {'S', 'Y', 'H', '5', 'T', 'R', 'E', 1};
// The child stops at 64 nested groups below the root; a deeper stream is malformed.
constexpr int kMaxDepth = 66;
}  // namespace

struct Attribute {
  enum Kind : std::uint8_t { strings = 0, not_strings = 1, error = 2 } kind = strings;
  std::vector<std::string> values;
  std::string message;
};

struct Node {
  enum Kind { group, dataset, unreadable_dataset, other } kind = group;
  std::string name;
  // A group.
  std::vector<std::unique_ptr<Node>> children;
  std::map<std::string, const Node*, std::less<>> by_name;  // the first of equal names
  std::map<std::string, Attribute, std::less<>> attributes;
  std::string attributes_error, children_error;
  // A dataset.
  std::vector<std::int64_t> dims;
  bool integer = false;        // stored as an integer type (Keras's int64 variables)
  const char* data = nullptr;  // numel float32 values (unaligned) in the stream, or nullptr with data_error
  std::string data_error;
  std::optional<double> scalar;
  std::string scalar_error;
  // unreadable_dataset, other: what a reader that asks for it is told.
  std::string message;
};

struct Tree {
  std::shared_ptr<const void> owner;
  std::string file;
  Node root;
};

// ---- parsing --------------------------------------------------------------------------------------------------

namespace {

class Parser {
 public:
  Parser(const char* data, std::size_t size, const std::string& file)
      : p_(data), end_(data + size), file_(file) {}

  void parse(Node& root) {
    if (left() < sizeof kMagic || std::memcmp(p_, kMagic, sizeof kMagic) != 0) malformed("no header");
    p_ += sizeof kMagic;
    std::uint8_t tag = u8();
    if (tag == 'Z') return end(false);
    if (tag != 'G') malformed("no root group");
    group(root, 0);
    if (u8() != 'Z') malformed("no end record after the root group");
    end(true);
  }

 private:
  [[noreturn]] void malformed(const char* what) const {
    fail("{}: the process that read the HDF5 file handed back malformed data ({}); refused", file_, what);
  }
  std::size_t left() const { return static_cast<std::size_t>(end_ - p_); }
  const char* take(std::size_t n) {
    if (n > left()) malformed("a record runs past the end");
    const char* at = p_;
    p_ += n;
    return at;
  }
  std::uint8_t u8() { return static_cast<std::uint8_t>(*take(1)); }
  std::uint64_t u64() {
    std::uint64_t v;
    std::memcpy(&v, take(sizeof v), sizeof v);
    return v;
  }
  double f64() {
    double v;
    std::memcpy(&v, take(sizeof v), sizeof v);
    return v;
  }
  std::string string() {
    std::uint64_t n = u64();
    if (n > left()) malformed("a string runs past the end");
    const char* at = take(static_cast<std::size_t>(n));
    return std::string(at, static_cast<std::size_t>(n));
  }

  // The end record: `after_root` says whether the root group was complete (success is allowed only then).
  void end(bool after_root) {
    std::uint8_t status = u8();
    if (status == 1) {
      std::string message = string();
      fail("{}: {}", file_, printable(message, 400));
    }
    if (status != 0 || !after_root) malformed("a bad end record");
    if (left() != 0) malformed("bytes after the end record");
  }

  Node& add_child(Node& g, std::unique_ptr<Node> n) {
    g.by_name.try_emplace(n->name, n.get());
    g.children.push_back(std::move(n));
    return *g.children.back();
  }
  Node& add_child(Node& g, std::string name, Node::Kind kind) {
    auto n = std::make_unique<Node>();
    n->kind = kind;
    n->name = std::move(name);
    return add_child(g, std::move(n));
  }

  void group(Node& g, int depth) {
    if (depth > kMaxDepth) malformed("groups nested too deeply");
    g.kind = Node::group;
    g.name = string();
    for (;;) {
      std::uint8_t tag = u8();
      switch (tag) {
        case 'E':
          return;
        case 'Z':
          return end(false);  // a failure in the middle of the file (success here is malformed)
        case 'G': {
          auto child = std::make_unique<Node>();
          group(*child, depth + 1);
          add_child(g, std::move(child));
          break;
        }
        case 'A': {
          std::string name = string();
          Attribute a;
          std::uint8_t kind = u8();
          if (kind == Attribute::strings) {
            std::uint64_t count = u64();
            if (count > left() / sizeof(std::uint64_t)) malformed("more strings than bytes");
            a.values.reserve(static_cast<std::size_t>(count));
            for (std::uint64_t i = 0; i < count; ++i) a.values.push_back(string());
          } else if (kind == Attribute::error) {
            a.message = string();
          } else if (kind != Attribute::not_strings) {
            malformed("an unknown attribute kind");
          }
          a.kind = static_cast<Attribute::Kind>(kind);
          g.attributes.try_emplace(std::move(name), std::move(a));
          break;
        }
        case 'a':
          g.attributes_error = string();
          break;
        case 'c':
          g.children_error = string();
          break;
        case 'D':
          dataset(add_child(g, string(), Node::dataset));
          break;
        case 'd': {
          std::string name = string();
          add_child(g, std::move(name), Node::unreadable_dataset).message = string();
          break;
        }
        case 'O': {
          std::string name = string();
          add_child(g, std::move(name), Node::other).message = string();
          break;
        }
        default:
          malformed("an unknown record");
      }
    }
  }

  void dataset(Node& d) {
    std::uint64_t rank = u64();
    if (rank > 64) malformed("a dataset of rank over 64");
    // Every product of dimensions fits an int64 with room (Shape multiplies them).
    std::uint64_t numel = 1, nonzero = 1;
    for (std::uint64_t i = 0; i < rank; ++i) {
      std::uint64_t dim = u64();
      if (dim != 0 && nonzero > (std::uint64_t(1) << 61) / dim) malformed("a dataset shape too large");
      if (dim != 0) nonzero *= dim;
      numel *= dim;
      d.dims.push_back(static_cast<std::int64_t>(dim));
    }
    d.integer = u8() == 1;
    if (u8() == 1) {
      if (numel > left() / sizeof(float)) malformed("a dataset larger than the stream");
      d.data = take(static_cast<std::size_t>(numel) * sizeof(float));
    } else {
      d.data_error = string();
    }
    if (numel == 1) {
      if (u8() == 1)
        d.scalar = f64();
      else
        d.scalar_error = string();
    }
  }

  const char* p_;
  const char* end_;
  const std::string& file_;
};

std::string join(const std::string& path, const std::string& child) {
  if (child.empty()) return path;
  return path == "/" ? "/" + child : path + "/" + child;
}

std::int64_t numel_of(const std::vector<std::int64_t>& dims) {
  std::int64_t n = 1;
  for (auto d : dims) n *= d;  // the parser checked that the values are there
  return n;
}

}  // namespace

ReadGroup decode_tree(std::shared_ptr<const void> owner, const char* data, std::size_t size,
                      const std::string& file) {
  auto tree = std::make_shared<Tree>();
  tree->owner = std::move(owner);
  tree->file = file;
  Parser(data, size, file).parse(tree->root);
  const Node* root = &tree->root;
  return ReadGroup(std::move(tree), root, "/");
}

// ---- ReadGroup ------------------------------------------------------------------------------------------------

ReadGroup::ReadGroup(std::shared_ptr<const Tree> tree, const Node* node, std::string path)
    : tree_(std::move(tree)), node_(node), path_(std::move(path)) {}

const std::string& ReadGroup::file() const {
  return tree_->file;
}

std::string ReadGroup::where(const std::string& child) const {
  return file() + ": " + printable(join(path_, child), 400);  // names from the file, escaped
}

const Node* ReadGroup::find(const std::string& name) const {
  const Node* n = node_;
  std::string at = path_;  // n's path, for the message below
  bool any = false;
  for (std::size_t start = 0; start <= name.size();) {
    auto slash = name.find('/', start);
    if (slash == std::string::npos) slash = name.size();
    std::string_view part(name.data() + start, slash - start);
    start = slash + 1;
    if (part.empty()) continue;
    if (n->kind != Node::group) return nullptr;
    auto it = n->by_name.find(part);
    if (it == n->by_name.end()) {
      // A group HDF5 could not list: whether the child exists is unknown, and the reader says why.
      if (!n->children_error.empty())
        fail("{}: {}: {}", file(), printable(at, 400), printable(n->children_error, 400));
      return nullptr;
    }
    n = it->second;
    at = join(at, std::string(part));
    any = true;
  }
  return any ? n : nullptr;
}

bool ReadGroup::has(const std::string& name) const {
  return find(name) != nullptr;
}
bool ReadGroup::has_group(const std::string& name) const {
  auto* n = find(name);
  return n && n->kind == Node::group;
}
bool ReadGroup::has_dataset(const std::string& name) const {
  auto* n = find(name);
  return n && (n->kind == Node::dataset || n->kind == Node::unreadable_dataset);
}

ReadGroup ReadGroup::group(const std::string& name) const {
  auto* n = find(name);
  if (!n || n->kind != Node::group) fail("{}: no group '{}'", where(), printable(name));
  return ReadGroup(tree_, n, join(path_, name));
}

std::vector<std::string> ReadGroup::children() const {
  if (!node_->children_error.empty()) fail("{}: {}", where(), printable(node_->children_error, 400));
  std::vector<std::string> names;
  for (auto& c : node_->children) names.push_back(c->name);
  return names;
}

bool ReadGroup::has_attribute(const std::string& name) const {
  return node_->attributes.count(name) > 0;
}

std::vector<std::string> ReadGroup::string_list_attribute(const std::string& name) const {
  auto read_one = [&](const Attribute& a, const std::string& n) {
    if (a.kind == Attribute::error) fail("{}: {}", where(), printable(a.message, 400));
    if (a.kind == Attribute::not_strings)
      fail("{}: attribute '{}' is not a list of strings", where(), printable(n));
    return a.values;
  };
  const auto& attrs = node_->attributes;
  if (auto it = attrs.find(name); it != attrs.end()) return read_one(it->second, name);
  // Keras splits attributes over 64512 bytes into name0, name1, ...
  std::vector<std::string> all;
  int chunk = 0;
  for (;; ++chunk) {
    auto it = attrs.find(name + std::to_string(chunk));
    if (it == attrs.end()) break;
    auto part = read_one(it->second, it->first);
    all.insert(all.end(), part.begin(), part.end());
  }
  if (chunk == 0) {
    if (!node_->attributes_error.empty()) fail("{}: {}", where(), printable(node_->attributes_error, 400));
    fail("{}: missing attribute '{}'", where(), printable(name));
  }
  return all;
}

std::string ReadGroup::string_attribute(const std::string& name) const {
  auto v = string_list_attribute(name);
  if (v.size() != 1)
    fail("{}: attribute '{}' should hold one string, holds {}", where(), printable(name), v.size());
  return v[0];
}

const Node& ReadGroup::dataset(const std::string& name) const {
  auto* n = find(name);
  if (!n || (n->kind != Node::dataset && n->kind != Node::unreadable_dataset))
    fail("{}: missing dataset", where(name));
  if (n->kind == Node::unreadable_dataset) fail("{}: {}", where(name), printable(n->message, 400));
  return *n;
}

std::vector<std::int64_t> ReadGroup::dataset_shape(const std::string& name) const {
  return dataset(name).dims;
}

bool ReadGroup::dataset_is_integer(const std::string& name) const {
  return dataset(name).integer;
}

Tensor ReadGroup::read_float32(const std::string& name) const {
  const Node& d = dataset(name);
  if (!d.data) fail("{}: {}", where(name), printable(d.data_error, 400));
  Tensor t(Shape(d.dims), DType::float32);
  if (t.numel() > 0)
    std::memcpy(t.data<float>(), d.data, static_cast<std::size_t>(t.numel()) * sizeof(float));
  return t;
}

double ReadGroup::read_scalar(const std::string& name) const {
  const Node& d = dataset(name);
  if (numel_of(d.dims) != 1)
    fail("{}: expected one value, the dataset has shape {}", where(name), Shape(d.dims).str());
  if (!d.scalar) fail("{}: {}", where(name), printable(d.scalar_error, 400));
  return *d.scalar;
}

// ---- encoding ---------------------------------------------------------------------------------------------------

TreeEncoder::TreeEncoder(int fd) : fd_(fd) {
  buffer_.reserve(1 << 20);
  put(kMagic, sizeof kMagic);
}

TreeEncoder::~TreeEncoder() = default;

namespace {
void write_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) fail("cannot hand back what was read: {}", std::strerror(errno));
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}
}  // namespace

void TreeEncoder::flush() {
  write_all(fd_, buffer_.data(), buffer_.size());
  buffer_.clear();
}

void TreeEncoder::put(const void* data, std::size_t size) {
  const char* p = static_cast<const char*>(data);
  if (buffer_.size() + size > buffer_.capacity()) {
    flush();
    if (size > buffer_.capacity()) return write_all(fd_, p, size);  // a large dataset, as it is
  }
  buffer_.insert(buffer_.end(), p, p + size);
}

void TreeEncoder::put_string(std::string_view s) {
  put_u64(s.size());
  put(s.data(), s.size());
}

void TreeEncoder::begin_group(std::string_view name) {
  put_u8('G');
  put_string(name);
}

void TreeEncoder::end_group() {
  put_u8('E');
}

void TreeEncoder::attribute_strings(std::string_view name, const std::vector<std::string>& values) {
  put_u8('A');
  put_string(name);
  put_u8(Attribute::strings);
  put_u64(values.size());
  for (auto& v : values) put_string(v);
}

void TreeEncoder::attribute_not_strings(std::string_view name) {
  put_u8('A');
  put_string(name);
  put_u8(Attribute::not_strings);
}

void TreeEncoder::attribute_error(std::string_view name, std::string_view message) {
  put_u8('A');
  put_string(name);
  put_u8(Attribute::error);
  put_string(message);
}

void TreeEncoder::attributes_error(std::string_view message) {
  put_u8('a');
  put_string(message);
}

void TreeEncoder::children_error(std::string_view message) {
  put_u8('c');
  put_string(message);
}

void TreeEncoder::dataset(std::string_view name, const std::vector<std::int64_t>& dims, bool integer,
                          const float* data, std::string_view data_error, std::optional<double> scalar,
                          std::string_view scalar_error) {
  put_u8('D');
  put_string(name);
  put_u64(dims.size());
  std::size_t numel = 1;
  for (auto d : dims) {
    put_u64(static_cast<std::uint64_t>(d));
    numel *= static_cast<std::size_t>(d);
  }
  put_u8(integer ? 1 : 0);
  if (data) {
    put_u8(1);
    put(data, numel * sizeof(float));
  } else {
    put_u8(0);
    put_string(data_error);
  }
  if (numel == 1) {
    if (scalar) {
      put_u8(1);
      put(&*scalar, sizeof(double));
    } else {
      put_u8(0);
      put_string(scalar_error);
    }
  }
}

void TreeEncoder::dataset_error(std::string_view name, std::string_view message) {
  put_u8('d');
  put_string(name);
  put_string(message);
}

void TreeEncoder::other(std::string_view name, std::string_view message) {
  put_u8('O');
  put_string(name);
  put_string(message);
}

void TreeEncoder::finish() {
  put_u8('Z');
  put_u8(0);
  flush();
}

void TreeEncoder::fail_file(std::string_view message) {
  put_u8('Z');
  put_u8(1);
  put_string(message);
  flush();
}

}  // namespace systolic::hdf5
