// The JSON fixtures that tests/reference/*.py write under tests/fixtures: each parsed once per test program and
// kept, for the tests that compare with what real Keras (or numpy) computed.
#pragma once

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "test_util.h"

namespace systolic::testing {

// tests/fixtures/<relative>, parsed on first use, as a nlohmann::json or (keys in the file's order, for configs
// compared as Keras wrote them) a nlohmann::ordered_json.
template <class Json = nlohmann::json>
const Json& json_fixture(const std::string& relative) {
  static std::map<std::string, Json> parsed;
  auto it = parsed.find(relative);
  if (it == parsed.end()) {
    std::ifstream in(source_dir() + "/tests/fixtures/" + relative);
    it = parsed.emplace(relative, Json::parse(in)).first;
  }
  return it->second;
}

}  // namespace systolic::testing
