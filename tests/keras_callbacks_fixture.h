// tests/fixtures/callbacks/keras_callbacks.json (tests/reference/callbacks.py: Keras 3's callbacks fed fixed logs,
// and hooks recorded in real fit/evaluate/predict calls), shared by test_keras_callbacks.cc and
// test_callback_hooks.cc.
#pragma once

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_util.h"

namespace systolic::testing {

// The whole fixture, read once.
inline const nlohmann::json& keras_callbacks_fixture() {
  static nlohmann::json j = [] {
    std::ifstream in(source_dir() + "/tests/fixtures/callbacks/keras_callbacks.json");
    return nlohmann::json::parse(in);
  }();
  return j;
}

// The fixture's cases of one kind ("EarlyStopping", "HookOrder", ...).
inline std::vector<nlohmann::json> keras_callback_cases(const std::string& kind) {
  std::vector<nlohmann::json> out;
  for (auto& c : keras_callbacks_fixture()["cases"])
    if (c["kind"] == kind) out.push_back(c);
  return out;
}

}  // namespace systolic::testing
