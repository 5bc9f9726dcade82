// NumPy's .npy and .npz files (include/systolic/npy.h): the .npy header (a Python dict literal) parsed strictly,
// the body converted to systolic's dtypes; .npz members read with libarchive.
#include <archive.h>
#include <archive_entry.h>
#include <systolic/error.h>
#include <systolic/npy.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <set>
#include <string_view>
#include <vector>

#include "io/files.h"
#include "io/pickle.h"

namespace systolic::npy {

namespace pickle = io::pickle;

namespace {

// The dict of an .npy header: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
struct Header {
  std::string descr;
  bool fortran_order = false;
  std::vector<std::int64_t> shape;
};

class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& name) : s_(text), name_(name) {}

  Header parse() {
    Header h;
    bool descr = false, order = false, shape = false;
    expect('{');
    for (;;) {
      skip();
      if (peek() == '}') break;
      std::string key = quoted();
      expect(':');
      skip();
      if (key == "descr") {
        if (peek() == '[') fail("{}: structured arrays (dtype {}) are not supported", name_, rest());
        h.descr = quoted();
        descr = true;
      } else if (key == "fortran_order") {
        h.fortran_order = boolean();
        order = true;
      } else if (key == "shape") {
        h.shape = tuple();
        shape = true;
      } else {
        fail("{}: unknown key '{}' in the npy header", name_, key);
      }
      skip();
      if (peek() == ',') ++i_;
    }
    ++i_;
    if (!descr || !order || !shape)
      fail("{}: the npy header lacks '{}'", name_, !descr ? "descr" : !order ? "fortran_order" : "shape");
    return h;
  }

 private:
  char peek() {
    if (i_ >= s_.size()) fail("{}: malformed npy header (it ends early)", name_);
    return s_[i_];
  }
  void skip() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t')) ++i_;
  }
  void expect(char c) {
    skip();
    if (peek() != c) fail("{}: malformed npy header (expected '{}' at byte {})", name_, c, i_);
    ++i_;
  }
  std::string quoted() {
    skip();
    char q = peek();
    if (q != '\'' && q != '"') fail("{}: malformed npy header (expected a string at byte {})", name_, i_);
    auto end = s_.find(q, i_ + 1);
    if (end == std::string_view::npos) fail("{}: malformed npy header (an unterminated string)", name_);
    std::string out(s_.substr(i_ + 1, end - i_ - 1));
    i_ = end + 1;
    return out;
  }
  bool boolean() {
    if (s_.substr(i_, 4) == "True") return i_ += 4, true;
    if (s_.substr(i_, 5) == "False") return i_ += 5, false;
    fail("{}: malformed npy header (fortran_order is not True or False)", name_);
  }
  std::vector<std::int64_t> tuple() {
    expect('(');
    std::vector<std::int64_t> dims;
    for (;;) {
      skip();
      if (peek() == ')') break;
      std::int64_t v = 0;
      int digits = 0;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
        if (++digits > 15) fail("{}: an npy dimension is too large", name_);
        v = v * 10 + (s_[i_++] - '0');
      }
      if (digits == 0) fail("{}: malformed npy shape (expected a dimension at byte {})", name_, i_);
      if (i_ < s_.size() && s_[i_] == 'L') ++i_;  // Python 2's long
      dims.push_back(v);
      skip();
      if (peek() == ',') ++i_;
    }
    ++i_;
    return dims;
  }
  std::string rest() const { return std::string(s_.substr(i_, std::min<std::size_t>(40, s_.size() - i_))); }

  std::string_view s_;
  const std::string& name_;
  std::size_t i_ = 0;
};

float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t(h >> 15) << 31;
  const int exponent = (h >> 10) & 31;
  const std::uint32_t mantissa = h & 1023;
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));  // inf, nan
  if (exponent == 0) {                                                                     // zero, subnormal
    float v = std::ldexp(float(mantissa), -24);
    return sign ? -v : v;
  }
  return std::bit_cast<float>(sign | (std::uint32_t(exponent - 15 + 127) << 23) | (mantissa << 13));
}

// The value of element i (itemsize bytes at p + i * itemsize, byte-swapped when big-endian) as T.
template <class Raw>
Raw load_raw(const unsigned char* p, bool swap) {
  unsigned char b[sizeof(Raw)];
  std::memcpy(b, p, sizeof(Raw));
  if (swap)
    for (std::size_t k = 0; k < sizeof(Raw) / 2; ++k) std::swap(b[k], b[sizeof(Raw) - 1 - k]);
  Raw v;
  std::memcpy(&v, b, sizeof(Raw));
  return v;
}

// C-order offsets of the elements stored in Fortran order: element f of the file goes to out[offset(f)].
std::vector<std::int64_t> fortran_to_c(const std::vector<std::int64_t>& dims, std::int64_t count) {
  std::vector<std::int64_t> out(static_cast<std::size_t>(count));
  std::vector<std::int64_t> stride(dims.size(), 1), index(dims.size(), 0);
  for (int a = int(dims.size()) - 2; a >= 0; --a) stride[a] = stride[a + 1] * dims[a + 1];
  for (std::int64_t f = 0; f < count; ++f) {
    std::int64_t c = 0;
    for (std::size_t a = 0; a < dims.size(); ++a) c += index[a] * stride[a];
    out[static_cast<std::size_t>(f)] = c;
    for (std::size_t a = 0; a < dims.size(); ++a) {  // the first axis varies fastest
      if (++index[a] < dims[a]) break;
      index[a] = 0;
    }
  }
  return out;
}

// The header of the .npy file in `data`, and where its body starts.
Header read_header(const unsigned char* p, std::size_t size, const std::string& name, std::size_t* offset) {
  if (size < 10 || std::memcmp(p, "\x93NUMPY", 6) != 0) fail("{}: not an npy array (bad magic)", name);
  const int major = p[6];
  std::size_t header_len = 0, start = 0;
  if (major == 1) {
    header_len = std::size_t(p[8]) | std::size_t(p[9]) << 8;
    start = 10;
  } else if ((major == 2 || major == 3) && size >= 12) {
    for (int i = 0; i < 4; ++i) header_len |= std::size_t(p[8 + i]) << (8 * i);
    start = 12;
  } else {
    fail("{}: npy version {} is not supported (1, 2 and 3 are)", name, major);
  }
  if (header_len > size - start) fail("{}: truncated npy header", name);
  *offset = start + header_len;
  return HeaderParser(std::string_view(reinterpret_cast<const char*>(p + start), header_len), name).parse();
}

}  // namespace

Tensor read(const void* data, std::size_t size, const std::string& name) {
  const auto* p = static_cast<const unsigned char*>(data);
  std::size_t offset = 0;
  Header h = read_header(p, size, name, &offset);

  // descr: a byte order (< > | =) and a kind with its size.
  const std::string& d = h.descr;
  if (d.find('O') != std::string::npos)
    fail(
        "{}: a pickled object array (dtype '{}') is not supported: save numeric arrays (numpy.save(..., "
        "allow_pickle=False) refuses object arrays too); object arrays of integer sequences, as Keras's "
        "imdb.npz "
        "holds, are read by npy::read_sequences",
        name, d);
  if (d.size() < 3 || std::string_view("<>|=").find(d[0]) == std::string_view::npos)
    fail("{}: npy dtype '{}' is not supported", name, d);
  const char kind = d[1];
  int itemsize = 0;
  try {
    std::size_t used = 0;
    itemsize = std::stoi(d.substr(2), &used);
    if (used != d.size() - 2) itemsize = 0;
  } catch (const std::exception&) {
  }
  const bool swap = d[0] == '>' && itemsize > 1;
  const bool known = (kind == 'b' && itemsize == 1) ||
                     (kind == 'u' && (itemsize == 1 || itemsize == 2 || itemsize == 4 || itemsize == 8)) ||
                     (kind == 'i' && (itemsize == 1 || itemsize == 2 || itemsize == 4 || itemsize == 8)) ||
                     (kind == 'f' && (itemsize == 2 || itemsize == 4 || itemsize == 8));
  if (!known)
    fail("{}: npy dtype '{}' is not supported (bool, integers of 1 to 8 bytes and float16/32/64 are)", name,
         d);

  std::int64_t count = 1;
  for (std::int64_t v : h.shape) {
    if (v != 0 && count > std::numeric_limits<std::int64_t>::max() / 16 / v)
      fail("{}: the npy shape is too large", name);
    count *= v;
  }
  const std::size_t body = size - offset;
  if (std::uint64_t(count) * std::uint64_t(itemsize) != body)
    fail("{}: npy data of {} bytes, its shape ({} elements of {} bytes) needs {}: truncated or corrupt", name,
         body, count, itemsize, std::uint64_t(count) * std::uint64_t(itemsize));

  const DType out = (kind == 'b' || (kind == 'u' && itemsize == 1)) ? DType::uint8
                    : kind == 'f' ? (itemsize == 8 ? DType::float64 : DType::float32)
                                  : DType::int32;
  Tensor t(Shape(h.shape), out);
  std::vector<std::int64_t> where;
  if (h.fortran_order && h.shape.size() > 1) where = fortran_to_c(h.shape, count);
  auto at = [&](std::int64_t i) { return where.empty() ? i : where[static_cast<std::size_t>(i)]; };
  const unsigned char* src = p + offset;
  auto convert = [&](auto store) {
    for (std::int64_t i = 0; i < count; ++i) store(at(i), src + i * itemsize);
  };
  if (out == DType::uint8) {
    auto* o = t.data<std::uint8_t>();
    convert([&](std::int64_t j, const unsigned char* e) { o[j] = kind == 'b' ? (*e != 0) : *e; });
  } else if (out == DType::float64) {
    auto* o = t.data<double>();
    convert([&](std::int64_t j, const unsigned char* e) { o[j] = load_raw<double>(e, swap); });
  } else if (out == DType::float32) {
    auto* o = t.data<float>();
    convert([&](std::int64_t j, const unsigned char* e) {
      o[j] = itemsize == 4 ? load_raw<float>(e, swap) : half_to_float(load_raw<std::uint16_t>(e, swap));
    });
  } else {
    auto* o = t.data<std::int32_t>();
    convert([&](std::int64_t j, const unsigned char* e) {
      // Each branch converts on its own: a conditional of a signed and an unsigned type would be unsigned.
      const bool is_signed = kind == 'i';
      long double v = 0;
      if (itemsize == 1)
        v = is_signed ? (long double)load_raw<std::int8_t>(e, false)
                      : (long double)load_raw<std::uint8_t>(e, false);
      else if (itemsize == 2)
        v = is_signed ? (long double)load_raw<std::int16_t>(e, swap)
                      : (long double)load_raw<std::uint16_t>(e, swap);
      else if (itemsize == 4)
        v = is_signed ? (long double)load_raw<std::int32_t>(e, swap)
                      : (long double)load_raw<std::uint32_t>(e, swap);
      else
        v = is_signed ? (long double)load_raw<std::int64_t>(e, swap)
                      : (long double)load_raw<std::uint64_t>(e, swap);
      if (v < std::numeric_limits<std::int32_t>::min() || v > std::numeric_limits<std::int32_t>::max())
        fail("{}: value {} (element {}) does not fit the int32 systolic reads integers as", name, double(v),
             j);
      o[j] = static_cast<std::int32_t>(v);
    });
  }
  return t;
}

Tensor load(const std::string& path) {
  auto bytes = io::read_file(path);
  return read(bytes.data(), bytes.size(), path);
}

namespace {

// Calls visit(member, bytes) for every .npy member of the .npz at `path` (numpy.load reads only those).
void for_each_member(const std::string& path,
                     const std::function<void(const std::string&, const std::vector<char>&)>& visit) {
  std::unique_ptr<archive, int (*)(archive*)> a(archive_read_new(), archive_read_free);
  archive_read_support_format_zip(a.get());
  auto why = [&] { return archive_error_string(a.get()) ? archive_error_string(a.get()) : "?"; };
  if (archive_read_open_filename(a.get(), path.c_str(), 1 << 16) != ARCHIVE_OK)
    fail("{}: cannot open as a zip (npz) file ({})", path, why());
  constexpr std::size_t kMaxMember = std::size_t(1) << 34;  // 16 GiB
  std::set<std::string> seen;
  for (;;) {
    archive_entry* e = nullptr;
    int r = archive_read_next_header(a.get(), &e);
    if (r == ARCHIVE_EOF) break;
    if (r < ARCHIVE_WARN) fail("{}: truncated or corrupt npz ({})", path, why());
    std::string member = archive_entry_pathname(e) ? archive_entry_pathname(e) : "";
    if (!member.ends_with(".npy")) continue;
    std::vector<char> bytes;
    if (archive_entry_size_is_set(e) && archive_entry_size(e) > 0 &&
        std::size_t(archive_entry_size(e)) <= kMaxMember)
      bytes.reserve(std::size_t(archive_entry_size(e)));
    char buf[1 << 16];
    for (la_ssize_t n; (n = archive_read_data(a.get(), buf, sizeof buf)) != 0;) {
      if (n < 0) fail("{}: truncated or corrupt npz while reading {} ({})", path, member, why());
      bytes.insert(bytes.end(), buf, buf + n);
      if (bytes.size() > kMaxMember) fail("{}: member {} is larger than 16 GiB", path, member);
    }
    if (!seen.insert(member).second) fail("{}: two members named {}", path, member);
    visit(member, bytes);
  }
}

using pickle::Value;

// The integers of one element of an object array: a list or tuple of integers, or an integer ndarray.
std::vector<std::int32_t> sequence_of(const pickle::Pickle& pk, std::uint32_t index,
                                      const std::string& where);

// A numpy array's pickle: _reconstruct(...) with BUILD state (version, shape, dtype, fortran_order, data).
struct ArrayState {
  std::vector<std::int64_t> shape;
  std::string dtype;      // numpy.dtype's first argument: 'O8', 'i8', 'u4', ...
  char byte_order = '|';  // the dtype's state: '<', '>', '|' or '='
  bool fortran = false;
  std::uint32_t data = 0;  // a list (object arrays) or the raw bytes
};

ArrayState array_state(const pickle::Pickle& pk, std::uint32_t index, const std::string& where) {
  auto is = [&](std::uint32_t i, Value::Kind k) { return pk.at(i).kind == k; };
  const Value& root = pk.at(index);
  if (root.kind != Value::Kind::call || !pk.at(root.items[0]).text.ends_with("._reconstruct") ||
      root.items.size() != 3)
    fail("{}: the pickle is not a numpy array (no multiarray._reconstruct with a state)", where);
  const Value& state = pk.at(root.items[2]);
  if (state.kind != Value::Kind::tuple || state.items.size() != 5 || !is(state.items[1], Value::Kind::tuple))
    fail("{}: the numpy array's pickled state is not (version, shape, dtype, fortran_order, data)", where);
  ArrayState out;
  for (std::uint32_t d : pk.at(state.items[1]).items) {
    if (!is(d, Value::Kind::integer) || pk.at(d).integer < 0)
      fail("{}: the numpy array's pickled shape holds something that is not a size", where);
    out.shape.push_back(pk.at(d).integer);
  }
  const Value& dtype = pk.at(state.items[2]);
  if (dtype.kind != Value::Kind::call || pk.at(dtype.items[0]).text != "numpy.dtype" ||
      pk.at(dtype.items[1]).items.empty() || !is(pk.at(dtype.items[1]).items[0], Value::Kind::string))
    fail("{}: the numpy array's pickled dtype is not numpy.dtype('...')", where);
  out.dtype = pk.at(pk.at(dtype.items[1]).items[0]).text;
  if (dtype.items.size() == 3) {
    const Value& ds = pk.at(dtype.items[2]);
    if (ds.kind == Value::Kind::tuple && ds.items.size() >= 2 && is(ds.items[1], Value::Kind::string) &&
        pk.at(ds.items[1]).text.size() == 1)
      out.byte_order = pk.at(ds.items[1]).text[0];
  }
  out.fortran = pk.at(state.items[3]).integer != 0;
  out.data = state.items[4];
  return out;
}

std::int32_t to_int32(std::int64_t v, const std::string& where) {
  if (v < std::numeric_limits<std::int32_t>::min() || v > std::numeric_limits<std::int32_t>::max())
    fail("{}: the integer {} does not fit the int32 systolic reads ids as", where, v);
  return std::int32_t(v);
}

std::vector<std::int32_t> sequence_of(const pickle::Pickle& pk, std::uint32_t index,
                                      const std::string& where) {
  const Value& v = pk.at(index);
  std::vector<std::int32_t> out;
  if (v.kind == Value::Kind::list || v.kind == Value::Kind::tuple) {
    out.reserve(v.items.size());
    for (std::uint32_t i : v.items) {
      const Value& e = pk.at(i);
      if (e.kind != Value::Kind::integer && e.kind != Value::Kind::boolean)
        fail("{}: holds something that is not an integer", where);
      out.push_back(to_int32(e.integer, where));
    }
    return out;
  }
  if (v.kind != Value::Kind::call) fail("{}: is not a list, a tuple or an integer array", where);
  ArrayState a = array_state(pk, index, where);
  const Value& raw = pk.at(a.data);
  const char kind = a.dtype.empty() ? '?' : a.dtype[0];
  int size = 0;
  if (a.dtype.size() == 2 && a.dtype[1] >= '1' && a.dtype[1] <= '8') size = a.dtype[1] - '0';
  if ((kind != 'i' && kind != 'u') || (size != 1 && size != 2 && size != 4 && size != 8) ||
      a.shape.size() != 1 || (raw.kind != Value::Kind::bytes && raw.kind != Value::Kind::string))
    fail("{}: a numpy array of dtype '{}' and rank {}, not a 1-D integer array", where, a.dtype,
         a.shape.size());
  if (std::uint64_t(a.shape[0]) * std::uint64_t(size) != raw.text.size())
    fail("{}: an array of {} elements of {} bytes with {} bytes of data", where, a.shape[0], size,
         raw.text.size());
  const bool swap = a.byte_order == '>' && size > 1;
  const auto* b = reinterpret_cast<const unsigned char*>(raw.text.data());
  for (std::int64_t i = 0; i < a.shape[0]; ++i) {
    const unsigned char* e = b + i * size;
    std::int64_t x = 0;
    if (size == 1) x = kind == 'i' ? std::int64_t(std::int8_t(*e)) : std::int64_t(*e);
    if (size == 2) x = kind == 'i' ? load_raw<std::int16_t>(e, swap) : load_raw<std::uint16_t>(e, swap);
    if (size == 4) x = kind == 'i' ? load_raw<std::int32_t>(e, swap) : load_raw<std::uint32_t>(e, swap);
    if (size == 8) {
      std::uint64_t u = load_raw<std::uint64_t>(e, swap);
      if (kind == 'u' && u > std::uint64_t(std::numeric_limits<std::int64_t>::max()))
        fail("{}: the integer {} does not fit the int32 systolic reads ids as", where, u);
      x = std::int64_t(u);
    }
    out.push_back(to_int32(x, where));
  }
  return out;
}

}  // namespace

Sequences read_sequences(const void* data, std::size_t size, const std::string& name) {
  const auto* p = static_cast<const unsigned char*>(data);
  std::size_t offset = 0;
  Header h = read_header(p, size, name, &offset);
  if (h.descr != "|O" && h.descr != "O")
    fail("{}: npy dtype '{}' is not an object array of sequences", name, h.descr);
  if (h.shape.size() != 1)
    fail("{}: an object array of rank {}, not a 1-D array of sequences", name, h.shape.size());
  pickle::Pickle pk = pickle::parse(p + offset, size - offset, name);
  ArrayState a = array_state(pk, pk.root, name);
  if (a.dtype.empty() || a.dtype[0] != 'O')
    fail("{}: the pickled array has dtype '{}', not object", name, a.dtype);
  if (a.shape != h.shape)
    fail("{}: the pickled array has {} dimensions of which the first is {}, the header says ({},)", name,
         a.shape.size(), a.shape.empty() ? 0 : a.shape[0], h.shape[0]);
  const Value& list = pk.at(a.data);
  if (list.kind != Value::Kind::list || std::int64_t(list.items.size()) != h.shape[0])
    fail("{}: the pickled array holds {} elements, its shape says {}", name,
         list.kind == Value::Kind::list ? std::to_string(list.items.size()) : "no list of", h.shape[0]);
  Sequences out;
  out.reserve(list.items.size());
  for (std::size_t i = 0; i < list.items.size(); ++i)
    out.push_back(sequence_of(pk, list.items[i], fmt::format("{}: element {}", name, i)));
  return out;
}

std::map<std::string, Tensor> load_npz(const std::string& path) {
  std::map<std::string, Tensor> arrays;
  for_each_member(path, [&](const std::string& member, const std::vector<char>& bytes) {
    arrays[member.substr(0, member.size() - 4)] = read(bytes.data(), bytes.size(), path + ": " + member);
  });
  return arrays;
}

NpzContents load_npz_with_sequences(const std::string& path) {
  NpzContents out;
  for_each_member(path, [&](const std::string& member, const std::vector<char>& bytes) {
    std::string key = member.substr(0, member.size() - 4), name = path + ": " + member;
    std::size_t offset = 0;
    Header h = read_header(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), name, &offset);
    if (h.descr.find('O') != std::string::npos)
      out.sequences[key] = read_sequences(bytes.data(), bytes.size(), name);
    else
      out.arrays[key] = read(bytes.data(), bytes.size(), name);
  });
  return out;
}

std::string serialize(const Tensor& t) {
  Tensor host = t.to(Device::cpu());
  if (host.dtype() == DType::bfloat16) host = host.to(DType::float32);
  const char* descr = host.dtype() == DType::float32   ? "<f4"
                      : host.dtype() == DType::float64 ? "<f8"
                      : host.dtype() == DType::int32   ? "<i4"
                                                       : "|u1";
  std::string dims;
  for (std::int64_t v : host.shape().dims()) dims += std::to_string(v) + ", ";
  if (host.shape().dims().size() > 1)
    dims.resize(dims.size() - 2);  // (2, 3); a 1-tuple keeps its comma: (5,)
  else if (!dims.empty())
    dims.resize(dims.size() - 1);
  std::string header =
      std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  while ((10 + header.size() + 1) % 64) header += ' ';  // numpy aligns the data to 64 bytes
  header += '\n';
  std::string out = "\x93NUMPY";
  out += char(1);
  out += char(0);
  out += char(header.size() & 255);
  out += char(header.size() >> 8);
  out += header;
  out.append(static_cast<const char*>(host.raw_data()), host.nbytes());
  return out;
}

void save(const std::string& path, const Tensor& t) {
  std::string bytes = serialize(t);
  io::write_file_atomic(path, bytes.data(), bytes.size());
}

void save_npz(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& arrays) {
  std::vector<std::string> bytes;
  std::vector<io::ZipMember> members;
  bytes.reserve(arrays.size());
  for (const auto& [name, t] : arrays) {
    SYSTOLIC_CHECK(!name.empty() && name.find('/') == std::string::npos,
                   "{}: array name '{}' is not a plain name", path, name);
    bytes.push_back(serialize(t));
    members.push_back({name + ".npy", bytes.back().data(), bytes.back().size()});
  }
  io::write_zip(path, members);
}

}  // namespace systolic::npy
