#include "io/files.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <systolic/error.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <memory>

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

void write_zip(const std::string& path, const std::vector<ZipMember>& members) {
  write_atomically(path, [&](const std::string& tmp) {
    std::unique_ptr<archive, int (*)(archive*)> a(archive_write_new(), archive_write_free);
    SYSTOLIC_CHECK(a != nullptr, "{}: cannot allocate a zip writer", path);
    auto message = [&] {
      const char* m = archive_error_string(a.get());
      return std::string(m ? m : "?");
    };
    if (archive_write_set_format_zip(a.get()) != ARCHIVE_OK ||
        archive_write_set_format_option(a.get(), "zip", "compression", "store") != ARCHIVE_OK ||
        archive_write_open_filename(a.get(), tmp.c_str()) != ARCHIVE_OK)
      fail("{}: cannot write the zip ({})", path, message());
    for (const ZipMember& m : members) {
      std::unique_ptr<archive_entry, void (*)(archive_entry*)> e(archive_entry_new(), archive_entry_free);
      archive_entry_set_pathname(e.get(), m.name.c_str());
      archive_entry_set_filetype(e.get(), AE_IFREG);
      archive_entry_set_perm(e.get(), 0644);
      archive_entry_set_size(e.get(), static_cast<la_int64_t>(m.size));
      archive_entry_set_mtime(e.get(), std::time(nullptr), 0);
      if (archive_write_header(a.get(), e.get()) != ARCHIVE_OK ||
          (m.size > 0 && archive_write_data(a.get(), m.data, m.size) != static_cast<la_ssize_t>(m.size)))
        fail("{}: cannot write {} into the zip ({})", path, m.name, message());
    }
    if (archive_write_close(a.get()) != ARCHIVE_OK) fail("{}: cannot finish the zip ({})", path, message());
  });
}

}  // namespace systolic::io
