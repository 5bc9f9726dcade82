// Downloads with libcurl, digests with OpenSSL's EVP interface, tar extraction with libarchive (reading only:
// every file is written by this code, so an entry can never place anything outside the destination).
#include "io/fetch.h"

#include <archive.h>
#include <archive_entry.h>
#include <curl/curl.h>
#include <fmt/format.h>
#include <openssl/evp.h>
#include <systolic/error.h>
#include <systolic/log.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <vector>

namespace systolic::io {

namespace fs = std::filesystem;

namespace {

std::string mib(double bytes) {
  return fmt::format("{:.1f} MiB", bytes / (1024.0 * 1024.0));
}

struct Transfer {
  std::FILE* file = nullptr;
  std::string name;
  bool terminal = false;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now(), last;
  bool write_failed = false;
  bool drew = false;  // a progress line is on the terminal and needs its newline
};

std::size_t on_data(char* data, std::size_t size, std::size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::size_t n = size * count;
  if (std::fwrite(data, 1, n, t->file) != n) {
    t->write_failed = true;
    return 0;  // makes curl stop with CURLE_WRITE_ERROR
  }
  return n;
}

// A Keras-like progress line on a terminal, redrawn at most 10 times a second.
int on_progress(void* user, curl_off_t total, curl_off_t now, curl_off_t, curl_off_t) {
  auto* t = static_cast<Transfer*>(user);
  if (!t->terminal) return 0;
  auto clock = std::chrono::steady_clock::now();
  if (clock - t->last < std::chrono::milliseconds(100) && !(total > 0 && now == total)) return 0;
  t->last = clock;
  double seconds = std::chrono::duration<double>(clock - t->start).count();
  double rate = seconds > 0 ? double(now) / seconds : 0;
  std::string line;
  if (total > 0) {
    int width = 30, done = int(double(width) * double(now) / double(total));
    std::string bar(std::size_t(std::max(0, done)), '=');
    if (done < width) bar += '>', bar += std::string(std::size_t(width - done - 1), '.');
    line = fmt::format("\r{} [{}] {} / {} - {}/s   ", t->name, bar, mib(double(now)), mib(double(total)),
                       mib(rate));
  } else {
    line = fmt::format("\r{} {} - {}/s   ", t->name, mib(double(now)), mib(rate));
  }
  log_write(line);
  t->drew = true;
  return 0;
}

void init_curl() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

}  // namespace

void download(const std::string& url, const fs::path& dest) {
  init_curl();
  Transfer t;
  t.name = fs::path(url).filename().string();
  t.terminal = log_is_terminal();
  t.file = std::fopen(dest.c_str(), "wb");
  SYSTOLIC_CHECK(t.file, "{}: cannot write the download", dest.string());
  std::unique_ptr<CURL, void (*)(CURL*)> curl(curl_easy_init(), curl_easy_cleanup);
  char errbuf[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(curl.get(), CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl.get(), CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(curl.get(), CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(curl.get(), CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(curl.get(), CURLOPT_FAILONERROR, 1L);  // an HTTP error status is a failure, not a file
  curl_easy_setopt(curl.get(), CURLOPT_CONNECTTIMEOUT, 30L);
  curl_easy_setopt(curl.get(), CURLOPT_LOW_SPEED_LIMIT, 1L);  // a stalled transfer ends after a minute
  curl_easy_setopt(curl.get(), CURLOPT_LOW_SPEED_TIME, 60L);
  curl_easy_setopt(curl.get(), CURLOPT_USERAGENT, "systolic");
  curl_easy_setopt(curl.get(), CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(curl.get(), CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(curl.get(), CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(curl.get(), CURLOPT_XFERINFODATA, &t);
  curl_easy_setopt(curl.get(), CURLOPT_NOPROGRESS, 0L);
  log_line(fmt::format("Downloading {}", url));
  CURLcode rc = curl_easy_perform(curl.get());
  if (t.drew) log_write("\n");  // only after a progress line: a failed connection leaves no blank line
  bool closed = std::fclose(t.file) == 0;
  if (rc != CURLE_OK || !closed || t.write_failed) {
    std::error_code ec;
    fs::remove(dest, ec);  // a partial file is never left where it could be used
    if (t.write_failed || !closed)
      fail("cannot download {}: writing {} failed (disk full?)", url, dest.string());
    std::string reason = errbuf[0] ? errbuf : curl_easy_strerror(rc);
    while (!reason.empty() && (reason.back() == '\n' || reason.back() == '\r')) reason.pop_back();
    fail("cannot download {}: {}", url, reason);
  }
}

std::string file_digest(const fs::path& path, const std::string& algorithm) {
  const EVP_MD* md = algorithm == "md5" ? EVP_md5() : algorithm == "sha256" ? EVP_sha256() : nullptr;
  SYSTOLIC_CHECK(md, "file_digest: unknown algorithm {}", algorithm);
  std::ifstream in(path, std::ios::binary);
  SYSTOLIC_CHECK(in.good(), "{}: cannot open", path.string());
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  SYSTOLIC_CHECK(ctx && EVP_DigestInit_ex(ctx.get(), md, nullptr) == 1, "{}: cannot start the {} digest",
                 path.string(), algorithm);
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), std::streamsize(buf.size()));
    if (in.gcount() > 0) EVP_DigestUpdate(ctx.get(), buf.data(), std::size_t(in.gcount()));
  }
  SYSTOLIC_CHECK(!in.bad(), "{}: read error", path.string());
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  EVP_DigestFinal_ex(ctx.get(), out, &len);
  std::string hex;
  for (unsigned i = 0; i < len; ++i) hex += fmt::format("{:02x}", out[i]);
  return hex;
}

namespace {

// The entry's path as safe relative components, or the reason it is refused.
std::string check_entry_path(const char* raw, fs::path& rel) {
  if (!raw || !*raw) return "an empty path";
  std::string p = raw;
  if (p[0] == '/') return "an absolute path";
  if (p.find('\\') != std::string::npos) return "a backslash in the path";
  std::stringstream ss(p);
  rel.clear();
  for (std::string part; std::getline(ss, part, '/');) {
    if (part.empty() || part == ".") continue;
    if (part == "..") return "a '..' component";
    rel /= part;
  }
  if (rel.empty()) return "an empty path";
  return "";
}

const char* refused_type(archive_entry* e) {
  if (archive_entry_hardlink(e)) return "a hard link";
  switch (archive_entry_filetype(e)) {
    case AE_IFREG:
      return nullptr;
    case AE_IFDIR:
      return nullptr;
    case AE_IFLNK:
      return "a symbolic link";
    case AE_IFCHR:
      return "a character device";
    case AE_IFBLK:
      return "a block device";
    case AE_IFIFO:
      return "a FIFO";
    case AE_IFSOCK:
      return "a socket";
    default:
      return "not a regular file or folder";
  }
}

}  // namespace

void extract_archive(const fs::path& archive_path, const fs::path& dest, std::uint64_t max_bytes) {
  std::string name = archive_path.string();
  std::unique_ptr<archive, int (*)(archive*)> a(archive_read_new(), archive_read_free);
  archive_read_support_filter_all(a.get());
  archive_read_support_format_tar(a.get());
  if (archive_read_open_filename(a.get(), archive_path.c_str(), 1 << 16) != ARCHIVE_OK)
    fail("{}: cannot open the archive ({})", name,
         archive_error_string(a.get()) ? archive_error_string(a.get()) : "?");
  std::uint64_t total = 0;
  std::vector<char> buf(1 << 16);
  for (int count = 0;; ++count) {
    archive_entry* e = nullptr;
    int r = archive_read_next_header(a.get(), &e);
    if (r == ARCHIVE_EOF) {
      SYSTOLIC_CHECK(count > 0, "{}: not a tar archive or empty", name);
      break;
    }
    if (r < ARCHIVE_WARN)
      fail("{}: truncated or corrupt archive ({})", name,
           archive_error_string(a.get()) ? archive_error_string(a.get()) : "?");
    const char* raw = archive_entry_pathname(e);
    std::string shown = raw ? raw : "";
    fs::path rel;
    std::string why = check_entry_path(raw, rel);
    if (!why.empty()) fail("{}: refused archive entry '{}' ({})", name, shown, why);
    if (const char* t = refused_type(e)) fail("{}: refused archive entry '{}' ({})", name, shown, t);
    fs::path out = dest / rel;
    std::error_code ec;
    if (archive_entry_filetype(e) == AE_IFDIR) {
      fs::create_directories(out, ec);
      SYSTOLIC_CHECK(!ec, "{}: cannot create {} ({})", name, out.string(), ec.message());
      continue;
    }
    fs::create_directories(out.parent_path(), ec);
    SYSTOLIC_CHECK(!ec, "{}: cannot create {} ({})", name, out.parent_path().string(), ec.message());
    // A regular file: refuse to write through anything already there (two entries of one name, say).
    SYSTOLIC_CHECK(!fs::exists(fs::symlink_status(out)), "{}: refused archive entry '{}' (a duplicate path)",
                   name, shown);
    std::ofstream f(out, std::ios::binary);
    SYSTOLIC_CHECK(f.good(), "{}: cannot write {}", name, out.string());
    for (;;) {
      la_ssize_t n = archive_read_data(a.get(), buf.data(), buf.size());
      if (n == 0) break;
      if (n < 0)
        fail("{}: truncated or corrupt archive while reading '{}' ({})", name, shown,
             archive_error_string(a.get()) ? archive_error_string(a.get()) : "?");
      total += std::uint64_t(n);
      SYSTOLIC_CHECK(total <= max_bytes, "{}: more than {} bytes when extracted; refused", name, max_bytes);
      f.write(buf.data(), n);
    }
    f.close();
    SYSTOLIC_CHECK(f.good(), "{}: cannot write {} (disk full?)", name, out.string());
  }
}

}  // namespace systolic::io
