// What every registry of Keras objects shares (optimizers, losses, metrics, regularizers, constraints): a Keras
// object's serialized form, its config read strictly, and the registry itself, which maps Keras's class names and
// the names keras.<kind>.get takes ("adam", "mse", "l2") to one entry each.
//
// An entry is whatever its kind needs (a factory, a config reader, Keras's names of its state); each kind lists its
// entries once, in its own registry.cc, and everything else (saving, the command line, layer configs, compile's
// string forms) asks the registry.
#pragma once

#include <systolic/error.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace systolic::keras_object {

using json = nlohmann::ordered_json;

// The two forms of a compiled model's settings in Keras files: Keras 3's (a .keras file's compile_config, each
// object's get_config as Keras 3 writes it) and the training_config of a full-model .h5, a form tf.keras and Keras 3
// both read.
enum class Form { keras3, h5 };

// A Keras object's config read strictly, as layer configs are: every key is read by a getter, accepted only with
// the value that means "off" (off), or ignored by name (ignore); finish() refuses the first key left over, naming
// it. Errors start with `what` ("optimizer Adam", "regularizer L2").
class StrictConfig {
 public:
  StrictConfig(const json& config, std::string what);
  const std::string& what() const { return what_; }
  // Present and not null.
  bool has(const std::string& key) const;
  // Whether the config holds the key at all (null included).
  bool present(const std::string& key) const;
  double number(const std::string& key, double fallback);
  // A whole number >= min (an integer, or a number without a fraction), `fallback` when absent or null; optional:
  // none when absent or null (Keras's class_id=None). Error naming the key otherwise.
  std::int64_t integer(const std::string& key, std::int64_t fallback, std::int64_t min);
  std::optional<std::int64_t> optional_integer(const std::string& key, std::int64_t min);
  bool boolean(const std::string& key, bool fallback);
  std::string string(const std::string& key, const std::string& fallback);
  // An integer or a list of integers (Keras's axis arguments).
  std::vector<int> ints(const std::string& key, std::vector<int> fallback);
  // The value as it is (null when absent), marked read.
  const json& raw(const std::string& key);
  // Absent, null or exactly `off_value`: an option systolic does not implement, accepted where it changes nothing.
  void off(const std::string& key, const json& off_value = nullptr);
  // A key with no effect on the computation (a name, a dtype).
  void ignore(const std::string& key);
  // Whether a getter, off() or ignore() took the key already (a class that implements an argument of its base
  // class reads it before the registry refuses it).
  bool taken(const std::string& key) const { return used_.count(key) > 0; }
  void finish() const;
  [[noreturn]] void fail(const std::string& why) const;
  // f(), an Error it throws (a constructor's or setter's check of the arguments read) made this config's: the message
  // after `what`.
  template <class F>
  auto checked(F&& f) const -> decltype(f()) {
    try {
      return f();
    } catch (const Error& e) {
      fail(e.what());
    }
  }

 private:
  const json& config_;
  std::string what_;
  std::set<std::string> used_;
};

// {"class_name", "config"} (Keras 3 adds "module" and "registered_name"; tf.keras 2.11+ writes optimizers as
// "Custom>Adam"), or a bare name as keras.<kind>.get takes it: the class (or name) and its config ({} for a name).
std::pair<std::string, json> class_and_config(const json& value, const std::string& kind);

// Keras 3's serialized object: {"module", "class_name", "config", "registered_name": null}.
json serialized(const std::string& module, const std::string& class_name, json config);

// Entries of one kind, looked up by Keras's class name or by one of their aliases (Entry has `class_name` and
// `aliases`). `kind` names it in errors: "unknown optimizer 'adamw' (known: Adam, SGD, RMSprop)".
template <class Entry>
class Registry {
 public:
  Registry(std::string kind, std::vector<Entry> entries)
      : kind_(std::move(kind)), entries_(std::move(entries)) {}
  const std::vector<Entry>& entries() const { return entries_; }
  // The entry with this class name or alias, or null.
  const Entry* find(const std::string& name) const {
    for (auto& e : entries_) {
      if (e.class_name == name) return &e;
      for (auto& a : e.aliases)
        if (a == name) return &e;
    }
    return nullptr;
  }
  // The entry, or Error naming the known ones by their first alias.
  const Entry& at(const std::string& name) const {
    if (auto* e = find(name)) return *e;
    throw Error("unknown " + kind_ + " '" + name + "' (known: " + known(true) + ")");
  }
  // The entries' names, in the registry's order: their class names, or with `by_alias` their first aliases (the
  // names users type: "adam"). An entry without a class name ("accuracy", which compile resolves) gives its first
  // alias, one without aliases its class name.
  std::vector<std::string> names(bool by_alias) const {
    std::vector<std::string> out;
    for (auto& e : entries_)
      out.push_back(e.class_name.empty() || (by_alias && !e.aliases.empty()) ? e.aliases[0] : e.class_name);
    return out;
  }
  // names(), comma-separated, for errors.
  std::string known(bool by_alias = false) const {
    std::string out;
    for (auto& n : names(by_alias)) out += (out.empty() ? "" : ", ") + n;
    return out;
  }

 private:
  std::string kind_;
  std::vector<Entry> entries_;
};

}  // namespace systolic::keras_object
