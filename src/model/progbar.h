// Keras's console output for fit/evaluate (tf.keras 2.x Progbar): verbose 1 draws a 30-wide bar, redrawn in
// place on a terminal (at most every 50 ms) and printed once at the end otherwise; verbose 2 prints one line at
// the end: "469/469 - 81s - loss: 0.4512 - accuracy: 0.8377".
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace systolic {

using LogValues = std::vector<std::pair<std::string, double>>;

// Keras's number format: %.4f, or %.4e when |v| <= 1e-3.
std::string format_log_value(double v);

class Progbar {
 public:
  Progbar(std::int64_t target, int verbose);
  void update(std::int64_t current, const LogValues& values);
  // Whether update(current, ...) would redraw now: callers whose values cost a device synchronisation ask first.
  bool wants_update(std::int64_t current) const;
  void finish(const LogValues& values);
  // The line that finish() prints, without the leading carriage return (for tests).
  std::string final_line(const LogValues& values, double elapsed_s) const;

 private:
  std::string bar(std::int64_t current) const;
  std::string values_text(const LogValues& values) const;
  std::int64_t target_;
  int verbose_;
  bool dynamic_;
  std::chrono::steady_clock::time_point start_, last_;
  std::size_t width_ = 0;
};

}  // namespace systolic
