#include "model/progbar.h"

#include <fmt/format.h>
#include <systolic/log.h>

#include <cmath>

namespace systolic {

std::string format_log_value(double v) {
  return std::abs(v) > 1e-3 ? fmt::format("{:.4f}", v) : fmt::format("{:.4e}", v);
}

Progbar::Progbar(std::int64_t target, int verbose)
    : target_(target),
      verbose_(verbose),
      dynamic_(log_is_terminal()),
      start_(std::chrono::steady_clock::now()),
      last_(start_) {}

std::string Progbar::bar(std::int64_t current) const {
  int digits = target_ > 0 ? static_cast<int>(std::log10(double(target_))) + 1 : 1;
  std::string s = fmt::format("{:>{}}/{} [", current, digits, target_);
  int width = target_ > 0 ? static_cast<int>(30.0 * double(current) / double(target_)) : 30;
  if (width > 0) s += std::string(width - 1, '=') + (current < target_ ? ">" : "=");
  s += std::string(30 - width, '.') + "]";
  return s;
}

std::string Progbar::values_text(const LogValues& values) const {
  std::string s;
  for (auto& [k, v] : values) s += " - " + k + ": " + format_log_value(v);
  return s;
}

bool Progbar::wants_update(std::int64_t current) const {
  return verbose_ == 1 && dynamic_ && current < target_ &&
         std::chrono::steady_clock::now() - last_ >= std::chrono::milliseconds(50);
}

void Progbar::update(std::int64_t current, const LogValues& values) {
  if (verbose_ != 1 || !dynamic_ || current >= target_) return;
  auto now = std::chrono::steady_clock::now();
  if (now - last_ < std::chrono::milliseconds(50)) return;
  last_ = now;
  double elapsed = std::chrono::duration<double>(now - start_).count();
  double eta = current > 0 ? elapsed / double(current) * double(target_ - current) : 0;
  std::string eta_text =
      eta > 3600 ? fmt::format("{}:{:02}:{:02}", int(eta) / 3600, int(eta) % 3600 / 60, int(eta) % 60)
      : eta > 60 ? fmt::format("{}:{:02}", int(eta) / 60, int(eta) % 60)
                 : fmt::format("{}s", int(eta));
  std::string line = bar(current) + " - ETA: " + eta_text + values_text(values);
  std::string pad = line.size() < width_ ? std::string(width_ - line.size(), ' ') : "";
  width_ = line.size();
  log_write("\r" + line + pad);
}

std::string Progbar::final_line(const LogValues& values, double elapsed) const {
  if (verbose_ == 2) {
    int digits = target_ > 0 ? static_cast<int>(std::log10(double(target_))) + 1 : 1;
    return fmt::format("{:>{}}/{} - {:.0f}s", target_, digits, target_, elapsed) + values_text(values);
  }
  double per_step = target_ > 0 ? elapsed / double(target_) : 0;
  std::string step = per_step >= 1 || per_step == 0 ? fmt::format("{:.0f}s/step", per_step)
                     : per_step >= 1e-3             ? fmt::format("{:.0f}ms/step", per_step * 1e3)
                                                    : fmt::format("{:.0f}us/step", per_step * 1e6);
  return bar(target_) + fmt::format(" - {:.0f}s ", elapsed) + step + values_text(values);
}

void Progbar::finish(const LogValues& values) {
  if (verbose_ != 1 && verbose_ != 2) return;
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::string line = final_line(values, elapsed);
  std::string pad = line.size() < width_ ? std::string(width_ - line.size(), ' ') : "";
  log_write((verbose_ == 1 && dynamic_ ? "\r" : "") + line + pad + "\n");
}

}  // namespace systolic
