#include "io/hdf5.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <systolic/error.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>

namespace systolic::hdf5 {

namespace {
std::recursive_mutex& mutex() {
  static std::recursive_mutex m;
  return m;
}

// HDF5 prints its error stack to stderr by default; systolic reports errors itself.
void silence() {
  static bool done = [] {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    return true;
  }();
  (void)done;
}

herr_t innermost(unsigned n, const H5E_error2_t* e, void* out) {
  // The stack is walked from the innermost call outward: keep the first (most specific) description.
  auto* s = static_cast<std::string*>(out);
  if (n == 0 && e->desc) *s = e->desc;
  return 0;
}

std::string join(const std::string& path, const std::string& child) {
  if (child.empty()) return path;
  return path == "/" ? "/" + child : path + "/" + child;
}

// True when the link `name` (possibly a path) exists below `loc`, checking each component as H5Lexists requires.
bool link_exists(hid_t loc, const std::string& name) {
  std::string prefix;
  std::size_t start = 0;
  while (start <= name.size()) {
    auto slash = name.find('/', start);
    auto part = name.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    prefix += (prefix.empty() ? "" : "/") + part;
    if (H5Lexists(loc, prefix.c_str(), H5P_DEFAULT) <= 0) return false;
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return true;
}

// The object's kind (H5I_GROUP, H5I_DATASET, ...); H5Oopen + H5Iget_type reads the same on HDF5 1.10 and 1.12+.
H5I_type_t object_type(hid_t loc, const std::string& name) {
  hid_t obj = H5Oopen(loc, name.c_str(), H5P_DEFAULT);
  if (obj < 0) return H5I_BADID;
  H5I_type_t t = H5Iget_type(obj);
  H5Oclose(obj);
  return t;
}

Handle string_type(std::size_t size, bool variable) {
  Handle t(H5Tcopy(H5T_C_S1), H5Tclose);
  if (variable) {
    H5Tset_size(t.get(), H5T_VARIABLE);
    H5Tset_strpad(t.get(), H5T_STR_NULLTERM);
    H5Tset_cset(t.get(), H5T_CSET_UTF8);
  } else {
    H5Tset_size(t.get(), std::max<std::size_t>(size, 1));
    H5Tset_strpad(t.get(), H5T_STR_NULLPAD);
    H5Tset_cset(t.get(), H5T_CSET_ASCII);
  }
  return t;
}
}  // namespace

Lock::Lock() : lock_(mutex()) {
  silence();
}

Handle& Handle::operator=(Handle&& o) noexcept {
  if (this != &o) {
    if (valid() && close_) close_(id_);
    id_ = o.id_;
    close_ = o.close_;
    o.id_ = H5I_INVALID_HID;
  }
  return *this;
}

Handle::~Handle() {
  if (valid() && close_) close_(id_);
}

std::string last_error() {
  std::string s;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, innermost, &s);
  return s.empty() ? "" : " (" + s + ")";
}

std::string Group::where(const std::string& child) const {
  return file_ + ": " + join(path_, child);
}

bool Group::has(const std::string& name) const {
  return link_exists(id(), name);
}
bool Group::has_group(const std::string& name) const {
  return has(name) && object_type(id(), name) == H5I_GROUP;
}
bool Group::has_dataset(const std::string& name) const {
  return has(name) && object_type(id(), name) == H5I_DATASET;
}

Group Group::group(const std::string& name) const {
  if (!has_group(name)) fail("{}: no group '{}'", where(), name);
  Handle h(H5Gopen2(id(), name.c_str(), H5P_DEFAULT), H5Gclose);
  if (!h.valid()) fail("{}: cannot open group{}", where(name), last_error());
  return Group(std::move(h), file_, join(path_, name));
}

Group Group::create_group(const std::string& name) const {
  Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  H5Pset_create_intermediate_group(lcpl.get(), 1);
  H5Pset_char_encoding(lcpl.get(), H5T_CSET_UTF8);
  Handle h(H5Gcreate2(id(), name.c_str(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  if (!h.valid()) fail("{}: cannot create group{}", where(name), last_error());
  return Group(std::move(h), file_, join(path_, name));
}

std::vector<std::string> Group::children() const {
  std::vector<std::string> names;
#if H5_VERSION_GE(1, 12, 0)
  using LinkInfo = H5L_info2_t;
#else
  using LinkInfo = H5L_info_t;
#endif
  auto collect = [](hid_t, const char* name, const LinkInfo*, void* out) -> herr_t {
    static_cast<std::vector<std::string>*>(out)->emplace_back(name);
    return 0;
  };
  if (H5Literate(id(), H5_INDEX_NAME, H5_ITER_INC, nullptr, collect, &names) < 0)
    fail("{}: cannot list the group{}", where(), last_error());
  return names;
}

bool Group::has_attribute(const std::string& name) const {
  return H5Aexists(id(), name.c_str()) > 0;
}

std::optional<std::vector<std::string>> Group::read_strings(hid_t attr, const std::string& name) const {
  Handle type(H5Aget_type(attr), H5Tclose);
  Handle space(H5Aget_space(attr), H5Sclose);
  if (!type.valid() || !space.valid()) fail("{}: unreadable attribute '{}'{}", where(), name, last_error());
  hssize_t count = H5Sget_simple_extent_npoints(space.get());
  if (count < 0) fail("{}: attribute '{}' has an invalid shape", where(), name);
  auto cls = H5Tget_class(type.get());
  if (cls != H5T_STRING) {
    // Keras writes an empty list as an empty float64 array; anything else numeric is not a string list.
    if (count == 0) return std::vector<std::string>{};
    return std::nullopt;
  }
  std::vector<std::string> out;
  if (H5Tis_variable_str(type.get()) > 0) {
    std::vector<char*> ptrs(static_cast<std::size_t>(count), nullptr);
    Handle mem = string_type(0, true);
    H5Tset_cset(mem.get(), H5Tget_cset(type.get()));
    if (count > 0 && H5Aread(attr, mem.get(), ptrs.data()) < 0)
      fail("{}: cannot read attribute '{}'{}", where(), name, last_error());
    for (auto* p : ptrs) out.emplace_back(p ? p : "");
    if (count > 0) H5Dvlen_reclaim(mem.get(), space.get(), H5P_DEFAULT, ptrs.data());
  } else {
    std::size_t size = H5Tget_size(type.get());
    if (size == 0) fail("{}: attribute '{}' has a zero-size string type", where(), name);
    std::vector<char> buf(size * static_cast<std::size_t>(count) + 1, '\0');
    if (count > 0 && H5Aread(attr, type.get(), buf.data()) < 0)
      fail("{}: cannot read attribute '{}'{}", where(), name, last_error());
    for (hssize_t i = 0; i < count; ++i) {
      const char* p = buf.data() + static_cast<std::size_t>(i) * size;
      out.emplace_back(p, strnlen(p, size));  // NULLPAD and NULLTERM both end at the first NUL
    }
  }
  return out;
}

std::vector<std::string> Group::string_list_attribute(const std::string& name) const {
  auto read_one = [&](const std::string& n) {
    Handle attr(H5Aopen(id(), n.c_str(), H5P_DEFAULT), H5Aclose);
    if (!attr.valid()) fail("{}: cannot open attribute '{}'{}", where(), n, last_error());
    auto s = read_strings(attr.get(), n);
    if (!s) fail("{}: attribute '{}' is not a list of strings", where(), n);
    return *s;
  };
  if (has_attribute(name)) return read_one(name);
  // Keras splits attributes over 64512 bytes into name0, name1, ...
  std::vector<std::string> all;
  int chunk = 0;
  while (has_attribute(name + std::to_string(chunk))) {
    auto part = read_one(name + std::to_string(chunk));
    all.insert(all.end(), part.begin(), part.end());
    ++chunk;
  }
  if (chunk == 0) fail("{}: missing attribute '{}'", where(), name);
  return all;
}

std::string Group::string_attribute(const std::string& name) const {
  auto v = string_list_attribute(name);
  if (v.size() != 1) fail("{}: attribute '{}' should hold one string, holds {}", where(), name, v.size());
  return v[0];
}

void Group::set_string_list_attribute(const std::string& name, const std::vector<std::string>& values) const {
  // Fixed-length NULLPAD strings, as Keras's save_attributes_to_hdf5_group writes them (np.bytes_ arrays).
  std::size_t size = 1;
  for (auto& v : values) size = std::max(size, v.size());
  Handle type = string_type(size, false);
  hsize_t dims[1] = {values.size()};
  Handle space(H5Screate_simple(1, dims, nullptr), H5Sclose);
  Handle attr(H5Acreate2(id(), name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (!attr.valid()) fail("{}: cannot create attribute '{}'{}", where(), name, last_error());
  std::vector<char> buf(size * values.size() + 1, '\0');
  for (std::size_t i = 0; i < values.size(); ++i)
    std::memcpy(buf.data() + i * size, values[i].data(), values[i].size());
  if (H5Awrite(attr.get(), type.get(), buf.data()) < 0)
    fail("{}: cannot write attribute '{}'{}", where(), name, last_error());
}

void Group::set_string_attribute(const std::string& name, const std::string& value) const {
  // A scalar variable-length UTF-8 string, as h5py writes a Python str.
  Handle type = string_type(0, true);
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle attr(H5Acreate2(id(), name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (!attr.valid()) fail("{}: cannot create attribute '{}'{}", where(), name, last_error());
  const char* p = value.c_str();
  if (H5Awrite(attr.get(), type.get(), &p) < 0)
    fail("{}: cannot write attribute '{}'{}", where(), name, last_error());
}

void Group::set_empty_list_attribute(const std::string& name) const {
  hsize_t dims[1] = {0};
  Handle space(H5Screate_simple(1, dims, nullptr), H5Sclose);
  Handle attr(H5Acreate2(id(), name.c_str(), H5T_IEEE_F64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT),
              H5Aclose);
  if (!attr.valid()) fail("{}: cannot create attribute '{}'{}", where(), name, last_error());
}

std::vector<std::int64_t> Group::dataset_shape(const std::string& name) const {
  if (!has_dataset(name)) fail("{}: missing dataset", where(name));
  Handle ds(H5Dopen2(id(), name.c_str(), H5P_DEFAULT), H5Dclose);
  if (!ds.valid()) fail("{}: cannot open dataset{}", where(name), last_error());
  Handle space(H5Dget_space(ds.get()), H5Sclose);
  int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 0) fail("{}: unreadable dataset shape{}", where(name), last_error());
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  return {dims.begin(), dims.end()};
}

bool Group::dataset_is_integer(const std::string& name) const {
  if (!has_dataset(name)) fail("{}: missing dataset", where(name));
  Handle ds(H5Dopen2(id(), name.c_str(), H5P_DEFAULT), H5Dclose);
  if (!ds.valid()) fail("{}: cannot open dataset{}", where(name), last_error());
  Handle type(H5Dget_type(ds.get()), H5Tclose);
  return H5Tget_class(type.get()) == H5T_INTEGER;
}

Tensor Group::read_float32(const std::string& name) const {
  auto shape = dataset_shape(name);
  Handle ds(H5Dopen2(id(), name.c_str(), H5P_DEFAULT), H5Dclose);
  Handle type(H5Dget_type(ds.get()), H5Tclose);
  auto cls = H5Tget_class(type.get());
  if (cls != H5T_FLOAT && cls != H5T_INTEGER) fail("{}: dataset is not numeric", where(name));
  Tensor t(Shape(shape), DType::float32);
  if (t.numel() > 0 &&
      H5Dread(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.data<float>()) < 0)
    fail("{}: cannot read dataset (truncated or corrupt file?){}", where(name), last_error());
  return t;
}

double Group::read_scalar(const std::string& name) const {
  auto shape = dataset_shape(name);
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  if (n != 1) fail("{}: expected one value, the dataset has shape {}", where(name), Shape(shape).str());
  Handle ds(H5Dopen2(id(), name.c_str(), H5P_DEFAULT), H5Dclose);
  double v = 0;
  if (H5Dread(ds.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, &v) < 0)
    fail("{}: cannot read dataset{}", where(name), last_error());
  return v;
}

namespace {
void write_dataset(const Group& g, const std::string& name, hid_t file_type, hid_t mem_type,
                   const std::vector<hsize_t>& dims, bool scalar, const void* data) {
  Handle space(
      scalar ? H5Screate(H5S_SCALAR) : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
      H5Sclose);
  Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  H5Pset_create_intermediate_group(lcpl.get(), 1);
  H5Pset_char_encoding(lcpl.get(), H5T_CSET_UTF8);
  Handle ds(H5Dcreate2(g.id(), name.c_str(), file_type, space.get(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT),
            H5Dclose);
  if (!ds.valid()) fail("{}: cannot create dataset{}", g.where(name), last_error());
  if (H5Dwrite(ds.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
    fail("{}: cannot write dataset{}", g.where(name), last_error());
}
}  // namespace

void Group::write_float32(const std::string& name, const Tensor& value) const {
  SYSTOLIC_CHECK(value.dtype() == DType::float32 && value.device().is_cpu(),
                 "{}: internal: datasets are written from float32 CPU tensors", where(name));
  std::vector<hsize_t> dims(value.shape().dims().begin(), value.shape().dims().end());
  static const float dummy = 0;
  write_dataset(*this, name, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, dims, dims.empty(),
                value.numel() ? value.data<float>() : &dummy);
}

void Group::write_int64_scalar(const std::string& name, std::int64_t value) const {
  write_dataset(*this, name, H5T_STD_I64LE, H5T_NATIVE_INT64, {}, true, &value);
}

void Group::write_int64(const std::string& name, const Tensor& value) const {
  SYSTOLIC_CHECK(value.dtype() == DType::float32 && value.device().is_cpu(),
                 "{}: internal: datasets are written from float32 CPU tensors", where(name));
  std::vector<hsize_t> dims(value.shape().dims().begin(), value.shape().dims().end());
  std::vector<std::int64_t> ints(std::max<std::int64_t>(value.numel(), 1), 0);
  for (std::int64_t i = 0; i < value.numel(); ++i) ints[i] = std::llround(value.data<float>()[i]);
  write_dataset(*this, name, H5T_STD_I64LE, H5T_NATIVE_INT64, dims, dims.empty(), ints.data());
}

void Group::write_float32_scalar(const std::string& name, float value) const {
  write_dataset(*this, name, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {}, true, &value);
}

namespace {
Group open_unchecked(const std::string& path) {
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  H5Pset_fclose_degree(fapl.get(), H5F_CLOSE_WEAK);  // the file stays open while its groups are
  Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()), H5Fclose);
  if (!file.valid()) fail("{}: cannot open the HDF5 file (truncated or corrupt?){}", path, last_error());
  Handle root(H5Gopen2(file.get(), "/", H5P_DEFAULT), H5Gclose);
  if (!root.valid()) fail("{}: cannot open the root group (truncated or corrupt?){}", path, last_error());
  return Group(std::move(root), path, "/");
}

// Every read the Keras readers can make of a group, made on every object below it: each attribute read as
// strings, missing attributes probed, each dataset read as float32 (and as a scalar when it holds one value).
// Failures are HDF5 reporting the damage cleanly and are ignored: the walk only has to survive.
void walk(const Group& g, int depth) {
  auto guard = [](auto&& f) {
    try {
      f();
    } catch (const std::exception&) {
    }
  };
  std::vector<std::string> attrs;
  auto collect = [](hid_t, const char* name, const H5A_info_t*, void* out) -> herr_t {
    static_cast<std::vector<std::string>*>(out)->emplace_back(name);
    return 0;
  };
  H5Aiterate2(g.id(), H5_INDEX_NAME, H5_ITER_INC, nullptr, collect, &attrs);
  for (const auto& a : attrs) guard([&] { g.string_list_attribute(a); });
  guard([&] { g.has_attribute("systolic-absent-attribute"); });
  std::vector<std::string> kids;
  guard([&] { kids = g.children(); });
  for (const auto& k : kids) {
    guard([&] {
      if (g.has_group(k)) {
        if (depth < 64) walk(g.group(k), depth + 1);  // Keras nests a few levels; a link cycle stops here
      } else if (g.has_dataset(k)) {
        Tensor t = g.read_float32(k);
        if (t.numel() == 1) g.read_scalar(k);
      }
    });
  }
}

// HDF5 1.10 can crash (segfault, abort) or loop forever on a damaged file, inside the library, before any
// check of ours runs. So an untrusted file is first read whole in a forked child: open, every group,
// attribute and dataset, the reads the readers make and more. Only when the child ends normally does this
// process open the file. A signal or the time limit in the child is reported as a corrupt file.
// `open` opens the file (a path, or an image in memory) without the check; `size` is its size in bytes.
void check_in_child(const std::string& path, std::uintmax_t size, const std::function<Group()>& open) {
  // Reading is hundreds of MB/s; the limit is generous for big trusted files and short for small corrupt ones:
  // SYSTOLIC_HDF5_CHECK_SECONDS (default 5), plus a second per 64 MiB.
  double base = 5;
  if (const char* env = std::getenv("SYSTOLIC_HDF5_CHECK_SECONDS")) {
    char* end = nullptr;
    base = std::strtod(env, &end);
    if (end == env || *end || !(base > 0 && base <= 3600))
      fail("SYSTOLIC_HDF5_CHECK_SECONDS={}: expected a number of seconds in (0, 3600]", env);
  }
  auto limit = std::chrono::milliseconds(static_cast<std::int64_t>(base * 1000)) +
               std::chrono::milliseconds(size / (64 << 10));
  // The child holds the write end of a pipe; its end (exit or signal) closes it, which wakes poll() at once.
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0)
    fail("{}: cannot start the process that checks the HDF5 file: {}", path, std::strerror(errno));
  std::fflush(nullptr);  // nothing buffered is written twice
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    fail("{}: cannot start the process that checks the HDF5 file: {}", path, std::strerror(errno));
  }
  if (pid == 0) {
    close(fds[0]);
    // What the child's crash prints (glibc's "free(): invalid pointer", HDF5's error stacks) is not the
    // user's: the parent reports the outcome in one line.
    int null = ::open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, STDERR_FILENO), dup2(null, STDOUT_FILENO);
    try {
      walk(open(), 0);
    } catch (const std::exception&) {
    }
    _exit(0);
  }
  close(fds[1]);
  auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  for (;;) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd p{fds[0], POLLIN, 0};
    int r = left.count() > 0 ? poll(&p, 1, static_cast<int>(left.count())) : 0;
    if (r < 0 && errno == EINTR) continue;
    pid_t w = waitpid(pid, &status, r > 0 ? 0 : WNOHANG);  // r > 0: the pipe closed, the child has ended
    if (w == pid) break;
    if (w < 0 && errno == EINTR) continue;
    if (r == 0 || w < 0) {
      kill(pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      close(fds[0]);
      if (w < 0) fail("{}: lost the process that checks the HDF5 file", path);
      fail("{}: corrupt HDF5 file: reading it did not finish in {:.1f} s; refused", path,
           std::chrono::duration<double>(limit).count());
    }
  }
  close(fds[0]);
  if (WIFSIGNALED(status))
    fail("{}: corrupt HDF5 file: reading it crashed the HDF5 library ({}); refused", path,
         strsignal(WTERMSIG(status)));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    fail("{}: corrupt HDF5 file: the process that checks it failed; refused", path);
}
}  // namespace

Group open_read(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) fail("{}: no such file", path);
  if (std::filesystem::is_directory(path, ec)) fail("{}: is a directory, not an HDF5 file", path);
  htri_t is = H5Fis_hdf5(path.c_str());
  if (is == 0) fail("{}: not an HDF5 file (no HDF5 signature)", path);
  if (is < 0) fail("{}: cannot read the file{}", path, last_error());
  std::error_code size_error;
  auto size = std::filesystem::file_size(path, size_error);
  check_in_child(path, size_error ? 0 : size, [&] { return open_unchecked(path); });
  return open_unchecked(path);
}

namespace {
Group open_image_unchecked(const void* data, std::size_t size, const std::string& name) {
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  H5Pset_fclose_degree(fapl.get(), H5F_CLOSE_WEAK);
  if (H5Pset_fapl_core(fapl.get(), 1 << 20, 0) < 0 ||
      H5Pset_file_image(fapl.get(), const_cast<void*>(data), size) < 0)
    fail("{}: cannot set up an in-memory HDF5 file{}", name, last_error());
  Handle file(H5Fopen(name.c_str(), H5F_ACC_RDONLY, fapl.get()), H5Fclose);
  if (!file.valid()) fail("{}: cannot open the HDF5 file (truncated or corrupt?){}", name, last_error());
  Handle root(H5Gopen2(file.get(), "/", H5P_DEFAULT), H5Gclose);
  if (!root.valid()) fail("{}: cannot open the root group (truncated or corrupt?){}", name, last_error());
  return Group(std::move(root), name, "/");
}
}  // namespace

Group open_image(const void* data, std::size_t size, const std::string& name) {
  // HDF5 looks for its signature at 0, 512, 1024, 2048, ...
  static const char kSignature[8] = {'\x89', 'H', 'D', 'F', '\r', '\n', '\x1a', '\n'};
  bool signed_ = false;
  for (std::size_t at = 0; at + 8 <= size && !signed_; at = at ? at * 2 : 512)
    signed_ = std::memcmp(static_cast<const char*>(data) + at, kSignature, 8) == 0;
  if (!signed_) fail("{}: not an HDF5 file (no HDF5 signature)", name);
  // An image from an untrusted file (a .keras zip's model.weights.h5) is contained as files are.
  check_in_child(name, size, [&] { return open_image_unchecked(data, size, name); });
  return open_image_unchecked(data, size, name);
}

Group create(const std::string& path) {
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  H5Pset_fclose_degree(fapl.get(), H5F_CLOSE_WEAK);
  Handle file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()), H5Fclose);
  if (!file.valid()) fail("{}: cannot create the file{}", path, last_error());
  Handle root(H5Gopen2(file.get(), "/", H5P_DEFAULT), H5Gclose);
  if (!root.valid()) fail("{}: cannot open the root group{}", path, last_error());
  return Group(std::move(root), path, "/");
}

}  // namespace systolic::hdf5
