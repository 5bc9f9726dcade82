#include "io/files.h"

#include <systolic/error.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

namespace systolic::io {

namespace fs = std::filesystem;

std::vector<char> read_file(const std::string& path) {
  std::error_code ec;
  SYSTOLIC_CHECK(fs::is_regular_file(path, ec), "{}: no such file", path);
  std::ifstream in(path, std::ios::binary);
  SYSTOLIC_CHECK(in.good(), "{}: cannot open ({})", path, std::strerror(errno));
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  SYSTOLIC_CHECK(!in.bad(), "{}: read error", path);
  return bytes;
}

void write_file_atomic(const std::string& path, const void* data, std::size_t size) {
  fs::path target(path);
  fs::path dir = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  std::string name = ".";  // built by append: GCC 12 warns falsely (-Wrestrict) on "." + std::string
  name.append(target.filename().string()).append(".tmp-XXXXXX");
  std::string tmpl = (dir / name).string();
  int fd = ::mkstemp(tmpl.data());
  SYSTOLIC_CHECK(fd >= 0, "{}: cannot write ({})", path, std::strerror(errno));
  const char* p = static_cast<const char*>(data);
  std::size_t done = 0;
  bool ok = true;
  while (done < size) {
    ssize_t w = ::write(fd, p + done, size - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      ok = false;
      break;
    }
    done += static_cast<std::size_t>(w);
  }
  int saved = errno;
  ok = ok && ::fsync(fd) == 0;
  ::fchmod(fd, 0644);
  ok = (::close(fd) == 0) && ok;
  if (!ok || ::rename(tmpl.c_str(), path.c_str()) != 0) {
    if (ok) saved = errno;
    ::unlink(tmpl.c_str());
    fail("{}: cannot write ({})", path, std::strerror(saved));
  }
}

TempFolder::TempFolder(const fs::path& parent, const std::string& prefix) {
  std::error_code ec;
  fs::create_directories(parent, ec);
  SYSTOLIC_CHECK(!ec, "{}: cannot create the folder ({})", parent.string(), ec.message());
  std::string name = ".";
  name.append(prefix).append("-XXXXXX");
  std::string tmpl = (parent / name).string();
  SYSTOLIC_CHECK(::mkdtemp(tmpl.data()) != nullptr, "{}: cannot create a temporary folder ({})", parent.string(),
                 std::strerror(errno));
  path_ = tmpl;
}

TempFolder::~TempFolder() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

}  // namespace systolic::io
