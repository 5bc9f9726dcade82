#include "io/hdf5.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
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
#include <fstream>
#include <functional>
#include <memory>

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

Group Group::create_group(const std::string& name) const {
  Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  H5Pset_create_intermediate_group(lcpl.get(), 1);
  H5Pset_char_encoding(lcpl.get(), H5T_CSET_UTF8);
  Handle h(H5Gcreate2(id(), name.c_str(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  if (!h.valid()) fail("{}: cannot create group{}", where(name), last_error());
  return Group(std::move(h), file_, join(path_, name));
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

// ---- reading: the child's walk --------------------------------------------------------------------------------

namespace {

// What one file may make the reader hand back: a Keras file stores its values uncompressed, at most 4 bytes per
// float32 value (int8 weights widen 4 times), so 4 times the file's size (plus room) holds every value of an
// intact file; a damaged one that declares more (a shape of 10^12, a dataset linked a thousand times) is
// refused before memory runs out. The object count bounds link cycles and fan-outs.
struct Budget {
  std::uint64_t bytes;
  std::uint64_t objects = std::uint64_t(1) << 20;
  // The values of one dataset on their way to the stream: one buffer for all, not initialised (HDF5 fills it).
  std::unique_ptr<float[]> buffer;
  std::uint64_t capacity = 0;
};

// A failure of the whole file, handed back as such.
struct Refused {
  std::string message;
};

void take_object(Budget& b) {
  if (b.objects == 0) throw Refused{"corrupt HDF5 file: more than 1048576 objects; refused"};
  --b.objects;
}

// An attribute's values as strings: any HDF5 string form, or an empty numeric array (Keras's empty list).
void encode_attribute(hid_t loc, const std::string& name, TreeEncoder& out, Budget& b) {
  Handle attr(H5Aopen(loc, name.c_str(), H5P_DEFAULT), H5Aclose);
  if (!attr.valid())
    return out.attribute_error(name, fmt::format("cannot open attribute '{}'{}", name, last_error()));
  Handle type(H5Aget_type(attr.get()), H5Tclose);
  Handle space(H5Aget_space(attr.get()), H5Sclose);
  if (!type.valid() || !space.valid())
    return out.attribute_error(name, fmt::format("unreadable attribute '{}'{}", name, last_error()));
  hssize_t count = H5Sget_simple_extent_npoints(space.get());
  if (count < 0) return out.attribute_error(name, fmt::format("attribute '{}' has an invalid shape", name));
  if (H5Tget_class(type.get()) != H5T_STRING) {
    // Keras writes an empty list as an empty float64 array; anything else numeric is not a string list.
    if (count == 0) return out.attribute_strings(name, {});
    return out.attribute_not_strings(name);
  }
  std::vector<std::string> values;
  bool variable = H5Tis_variable_str(type.get()) > 0;
  std::size_t size = variable ? sizeof(char*) : H5Tget_size(type.get());
  if (size == 0)
    return out.attribute_error(name, fmt::format("attribute '{}' has a zero-size string type", name));
  if (std::uint64_t(count) > b.bytes / size)
    return out.attribute_error(name, fmt::format("attribute '{}' is larger than the file can hold", name));
  b.bytes -= std::uint64_t(count) * size;
  if (variable) {
    std::vector<char*> ptrs(static_cast<std::size_t>(count), nullptr);
    Handle mem = string_type(0, true);
    H5Tset_cset(mem.get(), H5Tget_cset(type.get()));
    if (count > 0 && H5Aread(attr.get(), mem.get(), ptrs.data()) < 0)
      return out.attribute_error(name, fmt::format("cannot read attribute '{}'{}", name, last_error()));
    for (auto* p : ptrs) values.emplace_back(p ? p : "");
    if (count > 0) H5Dvlen_reclaim(mem.get(), space.get(), H5P_DEFAULT, ptrs.data());
  } else {
    std::vector<char> buf(size * static_cast<std::size_t>(count) + 1, '\0');
    if (count > 0 && H5Aread(attr.get(), type.get(), buf.data()) < 0)
      return out.attribute_error(name, fmt::format("cannot read attribute '{}'{}", name, last_error()));
    for (hssize_t i = 0; i < count; ++i) {
      const char* p = buf.data() + static_cast<std::size_t>(i) * size;
      values.emplace_back(p, strnlen(p, size));  // NULLPAD and NULLTERM both end at the first NUL
    }
  }
  out.attribute_strings(name, values);
}

// A dataset: its shape, its values as float32 (HDF5 converts any integer or float type) and, when it holds one
// value, that value as a double (an int64 iteration count stays exact).
void encode_dataset(hid_t ds, const std::string& name, TreeEncoder& out, Budget& b) {
  Handle space(H5Dget_space(ds), H5Sclose);
  int rank = space.valid() ? H5Sget_simple_extent_ndims(space.get()) : -1;
  if (rank < 0 || rank > 32)
    return out.dataset_error(name, fmt::format("unreadable dataset shape{}", last_error()));
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  hssize_t points = H5Sget_simple_extent_npoints(space.get());
  if (H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr) < 0 || points < 0)
    return out.dataset_error(name, fmt::format("unreadable dataset shape{}", last_error()));
  // Every product of dimensions fits an int64 with room (as the parser requires).
  std::uint64_t numel = 1, nonzero = 1;
  std::vector<std::int64_t> shape;
  for (auto d : dims) {
    if (d != 0 && nonzero > (std::uint64_t(1) << 61) / d)
      return out.dataset_error(name, "invalid dataset shape (too large)");
    if (d != 0) nonzero *= d;
    numel *= d;
    shape.push_back(static_cast<std::int64_t>(d));
  }
  if (numel != std::uint64_t(points))
    return out.dataset_error(name, "invalid dataset shape (a null dataspace, or a count that disagrees)");
  std::string data_error;
  bool have = false;
  Handle type(H5Dget_type(ds), H5Tclose);
  auto cls = type.valid() ? H5Tget_class(type.get()) : H5T_NO_CLASS;
  if (cls != H5T_FLOAT && cls != H5T_INTEGER) {
    data_error = "dataset is not numeric";
  } else if (numel > b.bytes / sizeof(float)) {
    data_error = "the dataset holds more values than the file can store; refused";
  } else {
    b.bytes -= numel * sizeof(float);
    if (numel > b.capacity) {
      b.buffer.reset(new float[numel]);
      b.capacity = numel;
    }
    if (numel > 0 && H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, b.buffer.get()) < 0)
      data_error = fmt::format("cannot read dataset (truncated or corrupt file?){}", last_error());
    else
      have = true;
  }
  std::optional<double> scalar;
  std::string scalar_error;
  if (numel == 1) {
    double v = 0;
    if (H5Dread(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, &v) < 0)
      scalar_error = fmt::format("cannot read dataset{}", last_error());
    else
      scalar = v;
  }
  out.dataset(name, shape, cls == H5T_INTEGER, have ? b.buffer.get() : nullptr, data_error, scalar,
              scalar_error);
}

// A group's attributes, then its links in name order, each followed (hard links only) into a group or dataset.
void encode_group(hid_t g, TreeEncoder& out, Budget& b, int depth) {
  std::vector<std::string> attrs;
  auto collect_attr = [](hid_t, const char* name, const H5A_info_t*, void* to) -> herr_t {
    static_cast<std::vector<std::string>*>(to)->emplace_back(name);
    return 0;
  };
  if (H5Aiterate2(g, H5_INDEX_NAME, H5_ITER_INC, nullptr, collect_attr, &attrs) < 0)
    out.attributes_error(fmt::format("cannot list the attributes{}", last_error()));
  for (const auto& a : attrs) {
    take_object(b);
    encode_attribute(g, a, out, b);
  }
#if H5_VERSION_GE(1, 12, 0)
  using LinkInfo = H5L_info2_t;
#else
  using LinkInfo = H5L_info_t;
#endif
  using Links = std::vector<std::pair<std::string, H5L_type_t>>;
  Links links;
  auto collect_link = [](hid_t, const char* name, const LinkInfo* info, void* to) -> herr_t {
    static_cast<Links*>(to)->emplace_back(name, info->type);
    return 0;
  };
  if (H5Literate(g, H5_INDEX_NAME, H5_ITER_INC, nullptr, collect_link, &links) < 0)
    out.children_error(fmt::format("cannot list the group{}", last_error()));
  for (const auto& [name, link_type] : links) {
    take_object(b);
    if (link_type != H5L_TYPE_HARD) {
      // Keras writes none; an external link would make HDF5 open another file of this machine.
      out.other(name, "a soft or external link, which systolic does not follow");
      continue;
    }
    Handle obj(H5Oopen(g, name.c_str(), H5P_DEFAULT), H5Oclose);
    H5I_type_t kind = obj.valid() ? H5Iget_type(obj.get()) : H5I_BADID;
    if (kind == H5I_GROUP && depth < 64) {  // Keras nests a few levels; a link cycle stops here
      out.begin_group(name);
      encode_group(obj.get(), out, b, depth + 1);
      out.end_group();
    } else if (kind == H5I_GROUP) {
      out.other(name, "a group nested more than 64 deep");
    } else if (kind == H5I_DATASET) {
      encode_dataset(obj.get(), name, out, b);
    } else {
      out.other(name, fmt::format("neither a group nor a dataset{}", obj.valid() ? "" : last_error()));
    }
  }
}

// The child's work: opens the file (`open_file` returns its handle) and writes the whole tree to `fd`.
void write_tree(const std::function<Handle()>& open_file, std::uint64_t size, int fd) {
  TreeEncoder out(fd);
  Budget b{4 * size + (std::uint64_t(64) << 20)};
  try {
    Handle file = open_file();
    Handle root(H5Gopen2(file.get(), "/", H5P_DEFAULT), H5Gclose);
    if (!root.valid())
      throw Refused{fmt::format("cannot open the root group (truncated or corrupt?){}", last_error())};
    out.begin_group("");
    encode_group(root.get(), out, b, 0);
    out.end_group();
    out.finish();
  } catch (const Refused& r) {
    out.fail_file(r.message);
  }
}

// Opens a file for the walk: the file at `path`, or the image of `size` bytes at `image` (HDF5's core driver over
// a copy). A failure is the whole file's, with HDF5's reason read before anything else clears it.
Handle open_for_walk(const std::string& path, const void* image, std::size_t size) {
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  H5Pset_fclose_degree(fapl.get(), H5F_CLOSE_WEAK);  // the file stays open while its groups are
  if (image && (H5Pset_fapl_core(fapl.get(), 1 << 20, 0) < 0 ||
                H5Pset_file_image(fapl.get(), const_cast<void*>(image), size) < 0))
    throw Refused{fmt::format("cannot set up an in-memory HDF5 file{}", last_error())};
  // HDF5 1.10's core driver refuses an image whose name is an existing file: an image is named where no file
  // can be.
  Handle file(H5Fopen(image ? "/dev/null/systolic-hdf5-image" : path.c_str(), H5F_ACC_RDONLY, fapl.get()),
              H5Fclose);
  if (!file.valid())
    throw Refused{fmt::format("cannot open the HDF5 file (truncated or corrupt?){}", last_error())};
  return file;
}

// HDF5 looks for its signature at 0, 512, 1024, 2048, ... (`at(offset, 8 bytes)` reads the file there).
bool has_signature(std::uint64_t size, const std::function<bool(std::uint64_t, char*)>& at) {
  static const char kSignature[8] = {'\x89', 'H', 'D', 'F', '\r', '\n', '\x1a', '\n'};
  char buf[8];
  for (std::uint64_t offset = 0; offset + 8 <= size; offset = offset ? offset * 2 : 512)
    if (at(offset, buf) && std::memcmp(buf, kSignature, 8) == 0) return true;
  return false;
}

// ---- reading: the containment ---------------------------------------------------------------------------------

// In the child: a damaged file can make HDF5 allocate gigabytes (one 29 KB file asked for 2.6 GB). The child may
// map 2 GiB plus 8 times the file's size beyond what it has mapped already (the parent's memory, and under ASan its
// reserved shadow), which holds the values handed back (at most 4 times the file), one dataset's buffer and HDF5's
// own structures; beyond that an allocation fails, and HDF5 reports it or the child dies: a clean error either way.
void limit_memory(std::uint64_t file_size) {
  std::ifstream statm("/proc/self/statm");
  std::uint64_t pages = 0;
  if (!(statm >> pages) || pages == 0) return;
  std::uint64_t limit =
      pages * static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE)) + (std::uint64_t(2) << 30) + 8 * file_size;
  rlimit r{static_cast<rlim_t>(limit), static_cast<rlim_t>(limit)};
  setrlimit(RLIMIT_AS, &r);
}

// HDF5 1.10 can crash (segfault, abort) or loop forever on a damaged file, inside the library, before any check
// of ours runs. So a forked child reads the file (`work` writes the record stream to the fd it is given, a memfd)
// under a time limit; this process waits for it, then maps the memfd and parses it. A signal or the time limit
// in the child is reported as a corrupt file; nothing the child did reaches this process but the stream.
ReadGroup read_in_child(const std::string& name, std::uint64_t size, const std::function<void(int)>& work) {
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
  auto cannot_start = [&](int error) {
    fail("{}: cannot start the process that reads the HDF5 file: {}", name, std::strerror(error));
  };
  int stream = memfd_create("systolic-hdf5", MFD_CLOEXEC);
  if (stream < 0) cannot_start(errno);
  // The child holds the write end of a pipe; its end (exit or signal) closes it, which wakes poll() at once.
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    int error = errno;
    close(stream);
    cannot_start(error);
  }
  pid_t pid;
  {
    // No other thread is inside HDF5 while the child is made (the child must not take the lock: its owner is
    // the parent's thread).
    Lock lock;
    std::fflush(nullptr);  // nothing buffered is written twice
    pid = fork();
    if (pid == 0) {
      close(fds[0]);
      // What the child's crash prints (glibc's "free(): invalid pointer", HDF5's error stacks) is not the
      // user's: the parent reports the outcome in one line.
      int null = ::open("/dev/null", O_WRONLY);
      if (null >= 0) dup2(null, STDERR_FILENO), dup2(null, STDOUT_FILENO);
      limit_memory(size);
      try {
        work(stream);
      } catch (...) {
        _exit(3);  // the stream could not be written
      }
      _exit(0);
    }
  }
  if (pid < 0) {
    int error = errno;
    close(fds[0]);
    close(fds[1]);
    close(stream);
    cannot_start(error);
  }
  close(fds[1]);
  auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  auto give_up = [&](const std::string& why) {
    close(fds[0]);
    close(stream);
    fail("{}: {}", name, why);
  };
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
      if (w < 0) give_up("lost the process that reads the HDF5 file");
      give_up(fmt::format("corrupt HDF5 file: reading it did not finish in {:.1f} s; refused",
                          std::chrono::duration<double>(limit).count()));
    }
  }
  close(fds[0]);
  if (WIFSIGNALED(status))
    give_up(fmt::format("corrupt HDF5 file: reading it crashed the HDF5 library ({}); refused",
                        strsignal(WTERMSIG(status))));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    give_up(fmt::format("the process that reads the HDF5 file failed (exit status {}); refused",
                        WIFEXITED(status) ? WEXITSTATUS(status) : -1));
  struct stat st {};
  if (fstat(stream, &st) != 0 || st.st_size <= 0)
    give_up("the process that reads the HDF5 file handed back nothing");
  auto bytes = static_cast<std::size_t>(st.st_size);
  void* map = mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE | MAP_POPULATE, stream, 0);
  close(stream);  // the mapping keeps the memory
  if (map == MAP_FAILED)
    fail("{}: cannot map what the process that reads the HDF5 file handed back: {}", name,
         std::strerror(errno));
  std::shared_ptr<const void> owner(map, [bytes](const void* p) { munmap(const_cast<void*>(p), bytes); });
  return decode_tree(std::move(owner), static_cast<const char*>(map), bytes, name);
}

}  // namespace

ReadGroup read_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) fail("{}: no such file", path);
  if (std::filesystem::is_directory(path, ec)) fail("{}: is a directory, not an HDF5 file", path);
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("{}: cannot read the file: {}", path, std::strerror(errno));
  auto size = std::filesystem::file_size(path, ec);
  if (ec) fail("{}: cannot read the file: {}", path, ec.message());
  bool signed_ = has_signature(size, [&](std::uint64_t offset, char* buf) {
    in.clear();
    return bool(in.seekg(static_cast<std::streamoff>(offset)).read(buf, 8));
  });
  if (!signed_) fail("{}: not an HDF5 file (no HDF5 signature)", path);
  return read_in_child(
      path, size, [&](int fd) { write_tree([&] { return open_for_walk(path, nullptr, 0); }, size, fd); });
}

void write_tree_of_image(const void* data, std::size_t size, const std::string& name, int fd) {
  Lock lock;
  write_tree([&] { return open_for_walk(name, data, size); }, size, fd);
}

ReadGroup read_image(const void* data, std::size_t size, const std::string& name) {
  bool signed_ = has_signature(size, [&](std::uint64_t offset, char* buf) {
    std::memcpy(buf, static_cast<const char*>(data) + offset, 8);
    return true;
  });
  if (!signed_) fail("{}: not an HDF5 file (no HDF5 signature)", name);
  return read_in_child(
      name, size, [&](int fd) { write_tree([&] { return open_for_walk(name, data, size); }, size, fd); });
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
