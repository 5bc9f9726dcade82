// Test helpers for the data-set downloads: a tiny HTTP/1.1 server on 127.0.0.1 (port chosen by the system) that
// serves byte strings, and generated archives in the exact CIFAR-10 binary format.
#pragma once

#include <archive.h>
#include <archive_entry.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace systolic::testing {

class LocalHttpServer {
 public:
  LocalHttpServer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd_ < 0) throw std::runtime_error("socket failed");
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd_, 8) != 0)
      throw std::runtime_error("bind/listen on 127.0.0.1 failed");
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { loop(); });
  }
  ~LocalHttpServer() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  // GET path answers 200 with body; with `send_only` < body.size(), it announces the full length but sends only
  // that many bytes, then closes the connection (an interrupted download).
  void serve(const std::string& path, std::string body, std::size_t send_only = std::string::npos) {
    std::lock_guard lock(mutex_);
    routes_[path] = {std::move(body), send_only};
  }
  std::string url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + path;
  }
  int requests() const { return requests_; }

 private:
  struct Route {
    std::string body;
    std::size_t send_only;
  };
  void loop() {
    while (!stop_) {
      int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) {
        if (stop_) return;
        continue;
      }
      handle(c);
      ::close(c);
    }
  }
  void handle(int c) {
    std::string request;
    char buf[4096];
    while (request.find("\r\n\r\n") == std::string::npos) {
      ssize_t n = ::recv(c, buf, sizeof buf, 0);
      if (n <= 0) return;
      request.append(buf, std::size_t(n));
    }
    ++requests_;
    std::string path;
    if (request.rfind("GET ", 0) == 0) path = request.substr(4, request.find(' ', 4) - 4);
    Route route;
    bool found = false;
    {
      std::lock_guard lock(mutex_);
      auto it = routes_.find(path);
      if (it != routes_.end()) route = it->second, found = true;
    }
    if (!found) {
      send_all(c, "HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\nConnection: close\r\n\r\nnot found");
      return;
    }
    send_all(c, "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: " +
                    std::to_string(route.body.size()) + "\r\nConnection: close\r\n\r\n");
    std::size_t n = std::min(route.send_only, route.body.size());
    send_all(c, std::string_view(route.body).substr(0, n));
  }
  static void send_all(int c, std::string_view data) {
    while (!data.empty()) {
      ssize_t n = ::send(c, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return;
      data.remove_prefix(std::size_t(n));
    }
  }

  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
  std::mutex mutex_;
  std::map<std::string, Route> routes_;
  std::thread thread_;
};

// A port on 127.0.0.1 where nothing listens (bound, then closed).
inline int closed_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// Synthetic CIFAR-10 content: file k (0-4: data_batch_1..5, 5: test_batch), record r.
inline std::uint8_t cifar_label(int k, std::int64_t r) {
  return static_cast<std::uint8_t>((r * 7 + k) % 10);
}
inline std::uint8_t cifar_pixel(int k, std::int64_t r, int c, int y, int x) {
  return static_cast<std::uint8_t>((r + 3 * k + c * 85 + y * 32 + x) & 255);
}
inline std::string cifar_batch(int k, std::int64_t records) {
  std::string b(std::size_t(records) * 3073, '\0');
  for (std::int64_t r = 0; r < records; ++r) {
    char* rec = b.data() + r * 3073;
    rec[0] = char(cifar_label(k, r));
    for (int c = 0; c < 3; ++c)
      for (int p = 0; p < 1024; ++p) rec[1 + c * 1024 + p] = char(cifar_pixel(k, r, c, p / 32, p % 32));
  }
  return b;
}

struct ArchiveEntry {
  std::string path, data;
  int type = 0100000;  // AE_IFREG; AE_IFDIR 0040000, AE_IFLNK 0120000
  std::string link;    // symlink target
};

enum class ArchiveFormat { tar_gz, zip };

// An archive in memory: a .tar.gz (pax, gzip level 1) or a zip (deflate), entries in the order given.
inline std::string make_archive(const std::vector<ArchiveEntry>& entries, ArchiveFormat format) {
  std::string out;
  archive* a = archive_write_new();
  if (format == ArchiveFormat::zip) {
    archive_write_set_format_zip(a);
  } else {
    archive_write_add_filter_gzip(a);
    archive_write_set_filter_option(a, "gzip", "compression-level", "1");
    archive_write_set_format_pax_restricted(a);
    archive_write_set_bytes_in_last_block(a, 1);
  }
  auto open_cb = [](archive*, void*) { return ARCHIVE_OK; };
  auto write_cb = [](archive*, void* user, const void* buf, size_t n) -> la_ssize_t {
    static_cast<std::string*>(user)->append(static_cast<const char*>(buf), n);
    return la_ssize_t(n);
  };
  auto close_cb = [](archive*, void*) { return ARCHIVE_OK; };
  archive_write_open(a, &out, open_cb, write_cb, close_cb);
  for (auto& e : entries) {
    archive_entry* en = archive_entry_new();
    archive_entry_set_pathname(en, e.path.c_str());
    archive_entry_set_filetype(en, static_cast<unsigned>(e.type));
    archive_entry_set_perm(en, e.type == 0040000 ? 0755 : 0644);
    if (!e.link.empty()) archive_entry_set_symlink(en, e.link.c_str());
    archive_entry_set_size(en, e.type == 0100000 ? la_int64_t(e.data.size()) : 0);
    archive_write_header(a, en);
    if (e.type == 0100000 && !e.data.empty()) archive_write_data(a, e.data.data(), e.data.size());
    archive_entry_free(en);
  }
  archive_write_close(a);
  archive_write_free(a);
  return out;
}

inline std::string make_tar_gz(const std::vector<ArchiveEntry>& entries) {
  return make_archive(entries, ArchiveFormat::tar_gz);
}

// cifar-10-binary.tar.gz in the real layout; test_batch.bin cut short by `truncate_test` bytes.
inline std::string make_cifar_archive(std::size_t truncate_test = 0) {
  std::vector<ArchiveEntry> e;
  e.push_back({"cifar-10-batches-bin/", "", 0040000, ""});
  e.push_back({"cifar-10-batches-bin/batches.meta.txt",
               "airplane\nautomobile\nbird\ncat\ndeer\ndog\nfrog\nhorse\nship\ntruck\n\n", 0100000, ""});
  for (int k = 0; k < 5; ++k)
    e.push_back({"cifar-10-batches-bin/data_batch_" + std::to_string(k + 1) + ".bin", cifar_batch(k, 10000),
                 0100000, ""});
  std::string test = cifar_batch(5, 10000);
  test.resize(test.size() - truncate_test);
  e.push_back({"cifar-10-batches-bin/test_batch.bin", test, 0100000, ""});
  e.push_back({"cifar-10-batches-bin/readme.html", "<html>synthetic</html>\n", 0100000, ""});
  return make_tar_gz(e);
}

// Sets environment variables for one scope, restoring the previous values.
class ScopedEnv {
 public:
  void set(const std::string& name, const std::string& value) {
    if (!saved_.count(name)) {
      const char* v = std::getenv(name.c_str());
      saved_[name] = v ? std::optional<std::string>(v) : std::nullopt;
    }
    ::setenv(name.c_str(), value.c_str(), 1);
  }
  ~ScopedEnv() {
    for (auto& [k, v] : saved_) {
      if (v)
        ::setenv(k.c_str(), v->c_str(), 1);
      else
        ::unsetenv(k.c_str());
    }
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

}  // namespace systolic::testing
