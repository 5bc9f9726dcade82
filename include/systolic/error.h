// Errors: every failure that user input can cause (files, shapes, flags, data) raises systolic::Error with a
// message naming what is at fault. Nothing aborts the process.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace systolic {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

template <class... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace systolic

// SYSTOLIC_CHECK(cond, "format {}", args...): throws systolic::Error with the formatted message.
#define SYSTOLIC_CHECK(cond, ...)               \
  do {                                          \
    if (!(cond)) ::systolic::fail(__VA_ARGS__); \
  } while (0)
