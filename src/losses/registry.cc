// The registry of Keras's losses: the one list of them (a line per class; the class's file defines its entry), and
// keras.losses get, deserialize and serialize through it, with the base class's arguments.
#include "losses/registry.h"

namespace systolic::losses {

using keras_object::json;

// X(name): the entry `const Entry& name_entry()` defined in src/losses/*.cc.
#define SYSTOLIC_LOSS_CLASSES(X)     \
  X(sparse_categorical_crossentropy) \
  X(categorical_crossentropy)        \
  X(binary_crossentropy)             \
  X(binary_focal_crossentropy)       \
  X(mean_squared_error)              \
  X(mean_absolute_error)             \
  X(mean_absolute_percentage_error)  \
  X(mean_squared_logarithmic_error)  \
  X(huber)                           \
  X(log_cosh)                        \
  X(poisson)                         \
  X(kl_divergence)                   \
  X(hinge)                           \
  X(squared_hinge)                   \
  X(categorical_hinge)               \
  X(cosine_similarity)               \
  X(categorical_focal_crossentropy)

#define SYSTOLIC_DECLARE_ENTRY(name) const Entry& name##_entry();
#define SYSTOLIC_LIST_ENTRY(name) name##_entry(),
SYSTOLIC_LOSS_CLASSES(SYSTOLIC_DECLARE_ENTRY)

namespace {

const keras_object::Registry<Entry>& registry() {
  static const keras_object::Registry<Entry> r("loss", {SYSTOLIC_LOSS_CLASSES(SYSTOLIC_LIST_ENTRY)});
  return r;
}

std::unique_ptr<Loss> with_defaults(const Entry& e) {
  json none = json::object();
  keras_object::StrictConfig c(none, "loss " + e.class_name);
  return e.from_config(c);
}

}  // namespace

std::unique_ptr<Loss> get(const std::string& name) {
  return with_defaults(registry().at(name));
}

std::vector<std::string> names() {
  return registry().names(/*by_alias=*/true);
}

std::unique_ptr<Loss> deserialize(const json& value) {
  if (value.is_string()) return get(value.get<std::string>());
  auto [cls, config] = keras_object::class_and_config(value, "loss");
  const Entry* entry = registry().find(cls);
  if (!entry) fail("loss class '{}' is not supported ({})", cls, registry().known());
  keras_object::StrictConfig c(config, "loss " + cls);
  auto loss = entry->from_config(c);
  // The base class's arguments the class did not take: Keras 3's Loss (name, reduction, dtype) and
  // LossFunctionWrapper (fn), tf.keras's.
  for (auto* k : {"name", "dtype", "fn"}) c.ignore(k);
  if (!c.taken("reduction")) {
    auto reduction = c.raw("reduction");
    if (!reduction.is_null() && reduction != "auto" && reduction != "sum_over_batch_size")
      c.fail("reduction " + reduction.dump() + " is not supported (sum_over_batch_size)");
  }
  c.finish();
  return loss;
}

json serialize(const Loss& loss, keras_object::Form form) {
  const Entry& e = registry().at(loss.class_name());
  json own = loss.get_config(), defaults = with_defaults(e)->get_config();
  if (own == defaults) return loss.name();
  if (form == keras_object::Form::h5) {
    json changed = json::object();
    for (auto& [k, v] : own.items())
      if (!defaults.contains(k) || defaults[k] != v) changed[k] = v;
    return {{"class_name", e.class_name}, {"config", changed}};
  }
  json config = {{"name", loss.config_name()}, {"reduction", "sum_over_batch_size"}};
  config.update(own);
  return keras_object::serialized("keras.losses", e.class_name, config);
}

}  // namespace systolic::losses
