// Downloads (libcurl, with a progress bar on the log stream), digests (OpenSSL EVP) and safe archive
// extraction (libarchive) for the data-set loaders.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace systolic::io {

// Downloads `url` into the file `dest` (created or replaced). Throws Error "cannot download URL: <reason>"
// on any failure (no connection, HTTP error status, a transfer cut short); `dest` is then removed.
void download(const std::string& url, const std::filesystem::path& dest);

// Lower-case hex digest of a file: algorithm "md5" or "sha256".
std::string file_digest(const std::filesystem::path& path, const std::string& algorithm);

// Extracts a (possibly compressed) tar archive into the existing folder `dest`. Refuses, before writing it,
// every entry whose path is absolute or holds a `..` component, and every entry that is not a regular file or
// a folder (symbolic and hard links, devices, FIFOs); the error names the archive and the entry. Files are
// written by this code under `dest` only. A truncated or corrupt archive is an Error naming it. At most
// max_bytes are extracted in all.
void extract_archive(const std::filesystem::path& archive, const std::filesystem::path& dest,
                     std::uint64_t max_bytes = std::uint64_t(4) << 30);

}  // namespace systolic::io
