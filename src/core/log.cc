#include <systolic/log.h>
#include <unistd.h>

namespace systolic {

namespace {
std::FILE*& stream() {
  static std::FILE* s = stdout;
  return s;
}
}  // namespace

void set_log_stream(std::FILE* s) {
  stream() = s;
}
std::FILE* log_stream() {
  return stream();
}

void log_write(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stream());
  std::fflush(stream());
}

void log_line(const std::string& text) {
  log_write(text + "\n");
}

bool log_is_terminal() {
  return isatty(fileno(stream())) != 0;
}

}  // namespace systolic
