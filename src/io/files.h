// File helpers for the io modules: whole-file reads, atomic writes (temp file beside the target, then rename),
// and unique temporary folders removed on scope exit.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace systolic::io {

// The whole file; Error naming the path when it is missing or unreadable.
std::vector<char> read_file(const std::string& path);
// Writes `path` atomically: write(temporary) fills a fresh file beside it (mkstemp), which is then synced to disk
// and renamed over `path`. On any failure the temporary file is removed and `path` is left as it was.
void write_atomically(const std::string& path,
                      const std::function<void(const std::string& temporary)>& write);
// write_atomically with `size` bytes as the content.
void write_file_atomic(const std::string& path, const void* data, std::size_t size);

// A member of a zip to write: its name and bytes.
struct ZipMember {
  std::string name;
  const void* data;
  std::size_t size;
};
// Writes a zip of `members` in order, stored (uncompressed, as Keras's .keras and numpy.savez's files are),
// atomically (libarchive).
void write_zip(const std::string& path, const std::vector<ZipMember>& members);

// A fresh folder `parent/.<prefix>-XXXXXX` (mkdtemp), removed with its contents when the object dies unless
// release()d. parent is created when missing.
class TempFolder {
 public:
  TempFolder(const std::filesystem::path& parent, const std::string& prefix);
  ~TempFolder();
  TempFolder(const TempFolder&) = delete;
  TempFolder& operator=(const TempFolder&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace systolic::io
