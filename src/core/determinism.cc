// The process-wide op-determinism switch (system.h): read once from the environment, then set by the API.
#include <systolic/system.h>

#include <atomic>
#include <cstdlib>
#include <string_view>

namespace systolic {

namespace {

bool env_on(const char* name) {
  const char* v = std::getenv(name);
  if (!v) return false;
  std::string_view s(v);
  return s == "1" || s == "true" || s == "True" || s == "TRUE";
}

std::atomic<bool>& determinism() {
  static std::atomic<bool> on{env_on("SYSTOLIC_DETERMINISTIC_OPS") || env_on("TF_DETERMINISTIC_OPS")};
  return on;
}

}  // namespace

void enable_op_determinism(bool enabled) {
  determinism().store(enabled);
}
bool op_determinism_enabled() {
  return determinism().load();
}

}  // namespace systolic
