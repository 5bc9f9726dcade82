// Keras objects' configs read strictly, and their serialized form (src/core/keras_object.h).
#include "core/keras_object.h"

#include <fmt/format.h>

#include <cmath>

namespace systolic::keras_object {

StrictConfig::StrictConfig(const json& config, std::string what) : config_(config), what_(std::move(what)) {
  if (!config_.is_object()) fail("its config must be an object, got " + config_.dump());
}

bool StrictConfig::has(const std::string& key) const {
  return config_.contains(key) && !config_[key].is_null();
}

bool StrictConfig::present(const std::string& key) const {
  return config_.contains(key);
}

void StrictConfig::fail(const std::string& why) const {
  throw Error(what_ + ": " + why);
}

const json& StrictConfig::raw(const std::string& key) {
  used_.insert(key);
  static const json null;
  return config_.contains(key) ? config_[key] : null;
}

double StrictConfig::number(const std::string& key, double fallback) {
  auto& v = raw(key);
  if (v.is_null()) return fallback;
  if (!v.is_number()) fail("'" + key + "' must be a number, got " + v.dump());
  return v.get<double>();
}

std::optional<std::int64_t> StrictConfig::optional_integer(const std::string& key, std::int64_t min) {
  auto& v = raw(key);
  if (v.is_null()) return std::nullopt;
  const bool whole =
      v.is_number_integer() || (v.is_number_float() && v.get<double>() == std::floor(v.get<double>()) &&
                                std::abs(v.get<double>()) < 9e15);
  const std::int64_t n =
      whole ? (v.is_number_integer() ? v.get<std::int64_t>() : std::int64_t(v.get<double>())) : 0;
  if (!whole || n < min) fail(fmt::format("{} must be a whole number >= {}, not {}", key, min, v.dump()));
  return n;
}

std::int64_t StrictConfig::integer(const std::string& key, std::int64_t fallback, std::int64_t min) {
  return optional_integer(key, min).value_or(fallback);
}

bool StrictConfig::boolean(const std::string& key, bool fallback) {
  auto& v = raw(key);
  if (v.is_null()) return fallback;
  if (!v.is_boolean()) fail("'" + key + "' must be true or false, got " + v.dump());
  return v.get<bool>();
}

std::string StrictConfig::string(const std::string& key, const std::string& fallback) {
  auto& v = raw(key);
  if (v.is_null()) return fallback;
  if (!v.is_string()) fail("'" + key + "' must be a string, got " + v.dump());
  return v.get<std::string>();
}

std::vector<int> StrictConfig::ints(const std::string& key, std::vector<int> fallback) {
  auto& v = raw(key);
  if (v.is_null()) return fallback;
  if (v.is_number_integer()) return {v.get<int>()};
  std::vector<int> out;
  if (v.is_array() && !v.empty())
    for (auto& x : v) {
      if (!x.is_number_integer()) break;
      out.push_back(x.get<int>());
    }
  if (out.empty() || out.size() != v.size())
    fail("'" + key + "' must be an integer or a list of integers, got " + v.dump());
  return out;
}

void StrictConfig::off(const std::string& key, const json& off_value) {
  auto& v = raw(key);
  if (!v.is_null() && v != off_value) fail("'" + key + "'=" + v.dump() + " is not supported");
}

void StrictConfig::ignore(const std::string& key) {
  used_.insert(key);
}

void StrictConfig::finish() const {
  for (auto& [k, v] : config_.items())
    if (!used_.count(k)) fail("unsupported argument '" + k + "' (value " + v.dump() + ")");
}

std::pair<std::string, json> class_and_config(const json& value, const std::string& kind) {
  if (value.is_string()) return {value.get<std::string>(), json::object()};
  if (!value.is_object() || !value.contains("class_name") || !value["class_name"].is_string())
    throw Error("expected a " + kind + " (a name or {\"class_name\", \"config\"}), got " +
                value.dump().substr(0, 200));
  std::string cls = value["class_name"].get<std::string>();
  if (cls.rfind("Custom>", 0) == 0) cls = cls.substr(7);  // tf.keras 2.11+'s optimizers: "Custom>Adam"
  json c = value.contains("config") && !value["config"].is_null() ? value["config"] : json::object();
  if (!c.is_object()) throw Error(kind + " " + cls + ": its config must be an object, got " + c.dump());
  return {cls, c};
}

json serialized(const std::string& module, const std::string& class_name, json config) {
  return {{"module", module},
          {"class_name", class_name},
          {"config", std::move(config)},
          {"registered_name", nullptr}};
}

}  // namespace systolic::keras_object
