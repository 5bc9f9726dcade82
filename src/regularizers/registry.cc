// The registries of Keras's regularizers and constraints: the one list of each (a line per class; the class's
// file defines its entry), and keras.regularizers / keras.constraints get, serialize and deserialize through them.
#include "regularizers/registry.h"

namespace systolic {

using keras_object::json;

// ---- the lists: X(name) is the entry `const Entry& name_entry()` defined in the class's file -------------------

#define SYSTOLIC_REGULARIZER_CLASSES(X) \
  X(l1)                                 \
  X(l2)                                 \
  X(l1_l2)                              \
  X(orthogonal_regularizer)

#define SYSTOLIC_CONSTRAINT_CLASSES(X) \
  X(max_norm)                          \
  X(non_neg)                           \
  X(unit_norm)                         \
  X(min_max_norm)

#define SYSTOLIC_DECLARE_ENTRY(name) const Entry& name##_entry();
#define SYSTOLIC_LIST_ENTRY(name) name##_entry(),

namespace regularizers {
SYSTOLIC_REGULARIZER_CLASSES(SYSTOLIC_DECLARE_ENTRY)
namespace {
const keras_object::Registry<Entry>& registry() {
  static const keras_object::Registry<Entry> r("regularizer",
                                               {SYSTOLIC_REGULARIZER_CLASSES(SYSTOLIC_LIST_ENTRY)});
  return r;
}
}  // namespace
}  // namespace regularizers

namespace constraints {
SYSTOLIC_CONSTRAINT_CLASSES(SYSTOLIC_DECLARE_ENTRY)
namespace {
const keras_object::Registry<Entry>& registry() {
  static const keras_object::Registry<Entry> r("constraint",
                                               {SYSTOLIC_CONSTRAINT_CLASSES(SYSTOLIC_LIST_ENTRY)});
  return r;
}
}  // namespace
}  // namespace constraints

// ---- values -----------------------------------------------------------------------------------------------------

bool Regularizer::operator==(const Regularizer& other) const {
  if (!object_ || !other.object_) return !object_ && !other.object_;
  return object_->class_name() == other.object_->class_name() &&
         object_->get_config() == other.object_->get_config();
}

bool Constraint::operator==(const Constraint& other) const {
  if (!object_ || !other.object_) return !object_ && !other.object_;
  return object_->class_name() == other.object_->class_name() &&
         object_->get_config() == other.object_->get_config();
}

namespace {
// A class's object from its serialized form or name, through its kind's registry.
template <class Value, class Registry>
Value deserialize_with(const Registry& registry, const json& value, const std::string& kind) {
  if (value.is_null()) return {};
  auto [cls, config] = keras_object::class_and_config(value, kind);
  auto* entry = registry.find(cls);
  if (!entry) fail("{} class '{}' is not supported ({})", kind, cls, registry.known());
  keras_object::StrictConfig c(config, kind + " " + cls);
  Value v = entry->from_config(c);
  c.finish();
  return v;
}
}  // namespace

namespace regularizers {

void apply(const Regularizer& r, const Tensor& x, Tensor& total, Tensor& dx, double total_scale,
           double grad_scale) {
  if (r) r->apply(x, total, dx, total_scale, grad_scale);
}

double penalty(const Regularizer& r, const Tensor& x) {
  Tensor total = Tensor::zeros({1}, DType::float64, x.device()), none;
  apply(r, x, total, none, 1.0, 0.0);
  return total.to_doubles()[0];
}

Regularizer deserialize(const json& value) {
  return deserialize_with<Regularizer>(registry(), value, "regularizer");
}

json serialize(const Regularizer& r) {
  if (!r) return nullptr;
  return keras_object::serialized("keras.regularizers", r->class_name(), r->get_config());
}

std::vector<std::string> names() {
  return registry().names(/*by_alias=*/false);
}

}  // namespace regularizers

namespace constraints {

void apply(const Constraint& c, Tensor& w) {
  if (c) c->apply(w);
}

Constraint deserialize(const json& value) {
  return deserialize_with<Constraint>(registry(), value, "constraint");
}

json serialize(const Constraint& c) {
  if (!c) return nullptr;
  return keras_object::serialized("keras.constraints", c->class_name(), c->get_config());
}

std::vector<std::string> names() {
  return registry().names(/*by_alias=*/false);
}

}  // namespace constraints

}  // namespace systolic
