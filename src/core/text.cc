#include "core/text.h"

#include <fmt/format.h>

namespace systolic {

namespace {

// The length of the valid UTF-8 sequence at s[i] (no overlongs, surrogates or code points past U+10FFFF), or 0.
std::size_t utf8_length(std::string_view s, std::size_t i) {
  auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  auto cont = [&](std::size_t k) { return i + k < s.size() && (b(k) & 0xC0) == 0x80; };
  unsigned c = b(0);
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (!cont(1) || !cont(2)) return 0;
    if ((c == 0xE0 && b(1) < 0xA0) || (c == 0xED && b(1) >= 0xA0)) return 0;
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    if ((c == 0xF0 && b(1) < 0x90) || (c == 0xF4 && b(1) >= 0x90)) return 0;
    return 4;
  }
  return 0;
}

}  // namespace

std::string printable(std::string_view s, std::size_t max) {
  std::string out;
  std::size_t i = 0;
  while (i < s.size() && i < max) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
      ++i;
    } else if (std::size_t n = c >= 0x80 ? utf8_length(s, i) : 0; n > 0) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += fmt::format("\\x{:02x}", c);
      ++i;
    }
  }
  if (i < s.size()) out += "...";
  return out;
}

}  // namespace systolic
