#include "io/files.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <systolic/error.h>
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

void write_atomically(const std::string& path, const std::function<void(const std::string&)>& write) {
  fs::path target(path);
  fs::path dir = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  std::error_code ec;
  SYSTOLIC_CHECK(fs::is_directory(dir, ec), "{}: the folder {} does not exist", path, dir.string());
  std::string name = ".";  // built by append: GCC 12 warns falsely (-Wrestrict) on "." + std::string
  name.append(target.filename().string()).append(".tmp-XXXXXX");
  std::string tmpl = (dir / name).string();
  int fd = ::mkstemp(tmpl.data());
  SYSTOLIC_CHECK(fd >= 0, "{}: cannot write ({})", path, std::strerror(errno));
  ::fchmod(fd, 0644);
  ::close(fd);
  try {
    write(tmpl);
    // The content reaches the disk before the rename makes it the file at `path`.
    int sync_fd = ::open(tmpl.c_str(), O_RDONLY);
    bool synced = sync_fd >= 0 && ::fsync(sync_fd) == 0;
    if (sync_fd >= 0) ::close(sync_fd);
    SYSTOLIC_CHECK(synced, "{}: cannot write ({})", path, std::strerror(errno));
    SYSTOLIC_CHECK(::rename(tmpl.c_str(), path.c_str()) == 0,
                   "{}: cannot move the written file into place ({})", path, std::strerror(errno));
  } catch (...) {
    ::unlink(tmpl.c_str());
    throw;
  }
}

void write_file_atomic(const std::string& path, const void* data, std::size_t size) {
  write_atomically(path, [&](const std::string& temporary) {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
    out.close();
    SYSTOLIC_CHECK(!out.fail(), "{}: cannot write ({})", path, std::strerror(errno));
  });
}

TempFolder::TempFolder(const fs::path& parent, const std::string& prefix) {
  std::error_code ec;
  fs::create_directories(parent, ec);
  SYSTOLIC_CHECK(!ec, "{}: cannot create the folder ({})", parent.string(), ec.message());
  std::string name = ".";
  name.append(prefix).append("-XXXXXX");
  std::string tmpl = (parent / name).string();
  SYSTOLIC_CHECK(::mkdtemp(tmpl.data()) != nullptr, "{}: cannot create a temporary folder ({})",
                 parent.string(), std::strerror(errno));
  path_ = tmpl;
}

TempFolder::~TempFolder() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

}  // namespace systolic::io
