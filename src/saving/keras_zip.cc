// Keras 3 `.keras` zips through libarchive (see keras_zip.h for the rules).
#include "saving/keras_zip.h"

#include <archive.h>
#include <archive_entry.h>
#include <systolic/error.h>

#include <cstring>
#include <fstream>
#include <memory>

#include "core/text.h"
#include "io/files.h"

namespace systolic::keras_io {

namespace {

constexpr const char* kConfig = "config.json";
constexpr const char* kMetadata = "metadata.json";
constexpr const char* kWeights = "model.weights.h5";

std::string shown_name(const char* raw) {
  return raw ? printable(raw) : "";
}

const char* archive_message(archive* a) {
  const char* m = archive_error_string(a);
  return m ? m : "?";
}

json parse_member(const std::vector<char>& bytes, const std::string& source, const char* member) {
  try {
    return json::parse(bytes.begin(), bytes.end());
  } catch (const json::exception& e) {
    fail("{}: {} is not valid JSON: {}", source, member, printable(e.what(), 400));
  }
}

}  // namespace

bool is_zip_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::memcmp(magic, "PK\x03\x04", 4) == 0;
}

KerasArchive read_keras_archive(const void* data, std::size_t size, const std::string& source) {
  std::unique_ptr<archive, int (*)(archive*)> a(archive_read_new(), archive_read_free);
  SYSTOLIC_CHECK(a != nullptr, "{}: cannot allocate a zip reader", source);
  // The seekable reader follows the central directory (as Python's zipfile, which Keras uses, does).
  archive_read_support_format_zip_seekable(a.get());
  if (archive_read_open_memory(a.get(), data, size) != ARCHIVE_OK)
    fail("{}: not a .keras file (not a zip archive: {})", source, archive_message(a.get()));
  std::vector<char> members[3];
  bool seen[3] = {false, false, false};
  const char* names[3] = {kConfig, kMetadata, kWeights};
  const std::size_t limits[3] = {kMaxKerasJsonBytes, kMaxKerasJsonBytes, kMaxKerasWeightsBytes};
  for (int count = 0;; ++count) {
    archive_entry* e = nullptr;
    int r = archive_read_next_header(a.get(), &e);
    if (r == ARCHIVE_EOF) {
      SYSTOLIC_CHECK(count > 0, "{}: an empty zip archive, not a .keras file", source);
      break;
    }
    if (r < ARCHIVE_WARN) fail("{}: truncated or corrupt zip archive ({})", source, archive_message(a.get()));
    std::string shown = shown_name(archive_entry_pathname(e));
    const char* raw = archive_entry_pathname(e);
    int which = -1;
    for (int i = 0; i < 3; ++i)
      if (raw && std::strcmp(raw, names[i]) == 0) which = i;
    if (which < 0) {
      if (raw && std::strcmp(raw, "model.weights.npz") == 0)
        fail("{}: weights stored as model.weights.npz; systolic reads model.weights.h5", source);
      if (raw && std::strstr(raw, ".weights.json"))
        fail("{}: sharded weights ('{}') are not supported; save the model unsharded", source, shown);
      fail(
          "{}: refused zip member '{}' (a .keras holds only config.json, metadata.json and model.weights.h5)",
          source, shown);
    }
    if (archive_entry_hardlink(e) || archive_entry_symlink(e) || archive_entry_filetype(e) != AE_IFREG)
      fail("{}: refused zip member '{}' (not a regular file)", source, shown);
    if (seen[which]) fail("{}: refused zip member '{}' (a duplicate)", source, shown);
    seen[which] = true;
    auto& out = members[which];
    if (archive_entry_size_is_set(e) && archive_entry_size(e) >= 0 &&
        std::uint64_t(archive_entry_size(e)) <= limits[which])
      out.reserve(std::size_t(archive_entry_size(e)));
    char buf[1 << 16];
    for (;;) {
      la_ssize_t n = archive_read_data(a.get(), buf, sizeof buf);
      if (n == 0) break;
      if (n < 0)
        fail("{}: truncated or corrupt zip archive while reading '{}' ({})", source, shown,
             archive_message(a.get()));
      if (out.size() + std::size_t(n) > limits[which])
        fail("{}: zip member '{}' is larger than {} bytes when inflated; refused", source, shown,
             limits[which]);
      out.insert(out.end(), buf, buf + n);
    }
  }
  for (int i = 0; i < 3; ++i)
    if (!seen[i]) fail("{}: not a .keras file: the zip has no {}", source, names[i]);
  KerasArchive k;
  k.config = parse_member(members[0], source, kConfig);
  k.metadata = parse_member(members[1], source, kMetadata);
  if (!k.config.is_object()) fail("{}: config.json is not a JSON object", source);
  if (!k.metadata.is_object()) fail("{}: metadata.json is not a JSON object", source);
  k.weights = std::move(members[2]);
  return k;
}

KerasArchive read_keras_archive_file(const std::string& path) {
  auto bytes = io::read_file(path);
  return read_keras_archive(bytes.data(), bytes.size(), path);
}

void write_keras_archive(const std::string& path, const std::string& config, const std::string& metadata,
                         const std::vector<char>& weights) {
  io::write_zip(path, {{kMetadata, metadata.data(), metadata.size()},
                       {kConfig, config.data(), config.size()},
                       {kWeights, weights.data(), weights.size()}});
}

}  // namespace systolic::keras_io

bool systolic::is_keras_zip(const std::string& path) {
  return keras_io::is_zip_file(path);
}
