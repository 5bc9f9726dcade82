// File helpers for the io modules: whole-file reads, atomic writes (temp file beside the target, then rename),
// and unique temporary folders removed on scope exit.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

namespace systolic::io {

// The whole file; Error naming the path when it is missing or unreadable.
std::vector<char> read_file(const std::string& path);
// Writes `size` bytes to a temp file in the same folder, flushes it, then renames it over `path`.
void write_file_atomic(const std::string& path, const void* data, std::size_t size);

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
