// Helpers of the XLA tests (label cpu: they run here on the CPU plugin, which scripts/setup fetches): they skip
// visibly, naming why, where the plugin cannot be loaded.
#pragma once

#include <systolic/device.h>

#include <string>

#include "core/xla/pjrt.h"
#include "test_util.h"

namespace systolic::testing {

inline Device xla_cpu(int index = 0) {
  return Device::xla(XlaPlatform::cpu, index);
}

// Why the XLA CPU plugin cannot be used here, or "" when it can.
inline std::string xla_unavailable() {
  std::string why;
  return ::systolic::xla::Runtime::available(XlaPlatform::cpu, &why) ? std::string() : why;
}

// Skips the test (GoogleTest's SKIPPED, which CTest reports as "Not Run (Skipped)") without the XLA CPU plugin.
#define SYSTOLIC_REQUIRE_XLA()                                             \
  do {                                                                     \
    std::string why_not = ::systolic::testing::xla_unavailable();          \
    if (!why_not.empty()) GTEST_SKIP() << "XLA test not run: " << why_not; \
  } while (0)

}  // namespace systolic::testing
