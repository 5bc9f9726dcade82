// The registry of Keras's optimizers: the one list of them (a line per class; the class's file defines its entry),
// and keras.optimizers get, deserialize and serialize through it, with the base class's arguments.
#include "optimizers/registry.h"

#include <cctype>

namespace systolic::optimizers {

using keras_object::json;

// X(name): the entry `const Entry& name_entry()` defined in src/optimizers/<name>.cc.
#define SYSTOLIC_OPTIMIZER_CLASSES(X) \
  X(adam)                             \
  X(adamw)                            \
  X(sgd)                              \
  X(rmsprop)                          \
  X(adamax)                           \
  X(nadam)                            \
  X(adagrad)                          \
  X(adadelta)                         \
  X(lion)                             \
  X(ftrl)                             \
  X(lamb)                             \
  X(adafactor)                        \
  X(muon)

#define SYSTOLIC_DECLARE_ENTRY(name) const Entry& name##_entry();
#define SYSTOLIC_LIST_ENTRY(name) name##_entry(),
SYSTOLIC_OPTIMIZER_CLASSES(SYSTOLIC_DECLARE_ENTRY)

namespace {

const keras_object::Registry<Entry>& registry() {
  static const keras_object::Registry<Entry> r("optimizer",
                                               {SYSTOLIC_OPTIMIZER_CLASSES(SYSTOLIC_LIST_ENTRY)});
  return r;
}

// Keras 3 matches optimizer names in any case (keras.optimizers.deserialize lowercases the class name).
const Entry* find(const std::string& name) {
  if (auto* e = registry().find(name)) return e;
  std::string lower = name;
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return registry().find(lower);
}

json or_null(std::optional<double> v) {
  return v ? json(*v) : json(nullptr);
}

const Entry& entry_of(const Optimizer& optimizer) {
  auto* e = registry().find(optimizer.name());
  if (!e) fail("optimizer '{}' is not in the registry (src/optimizers/registry.cc)", optimizer.name());
  return *e;
}

}  // namespace

std::unique_ptr<Optimizer> get(const std::string& name) {
  if (!find(name)) registry().at(name);  // Error naming the known ones
  return deserialize(json(name));
}

std::vector<std::string> names() {
  return registry().names(/*by_alias=*/true);
}

std::unique_ptr<Optimizer> deserialize(const json& value) {
  auto [cls, config] = keras_object::class_and_config(value, "optimizer");
  const Entry* entry = find(cls);
  if (!entry) fail("optimizer '{}' is not supported ({})", cls, registry().known());
  keras_object::StrictConfig c(config, "optimizer " + entry->class_name);
  Schedule schedule;
  std::optional<double> lr;
  if (c.has("learning_rate") && c.raw("learning_rate").is_object()) {
    schedule = schedules::from_config(c.raw("learning_rate"), c.what());
    lr = (*schedule)(0);
  } else if (c.has("learning_rate")) {
    lr = c.number("learning_rate", 0.0);
  } else if (c.has("lr")) {
    lr = c.number("lr", 0.0);  // Keras 2.0 wrote "lr"
  }
  c.ignore("learning_rate");
  c.ignore("lr");
  auto opt = entry->from_config(c, lr);
  // Keras's weight_decay (the base class's): a number, or null (None; AdamW refuses it, as Keras's does); absent,
  // the class's default.
  if (c.present("weight_decay")) {
    const bool adamw = opt->name() == "AdamW";
    const json& wd = c.raw("weight_decay");
    if (wd.is_number())
      opt->set_weight_decay(wd.get<double>());
    else if (wd.is_null() && !adamw)
      opt->set_weight_decay(std::nullopt);
    else
      c.fail("weight_decay " + wd.dump() + " is not supported (a number" +
             (adamw ? std::string(": AdamW needs one)") : std::string(" or null)")));
  }
  // The base class's other arguments (Keras 3's Optimizer, tf.keras 2.11+'s, the legacy optimizers'), unless the
  // class took them: those with no effect here, and those systolic does not implement, accepted when off.
  for (auto* k : {"name", "jit_compile", "is_legacy_optimizer"}) c.ignore(k);
  // Keras's use_ema, ema_momentum, ema_overwrite_frequency (a whole number or null).
  if (c.present("use_ema") || c.present("ema_momentum") || c.present("ema_overwrite_frequency")) {
    const json use = c.present("use_ema") ? c.raw("use_ema") : json(false);
    const json momentum = c.present("ema_momentum") ? c.raw("ema_momentum") : json(0.99);
    const std::optional<std::int64_t> every = c.optional_integer("ema_overwrite_frequency", 1);
    if (!use.is_boolean()) c.fail("use_ema " + use.dump() + " is not supported (true or false)");
    if (!momentum.is_number()) c.fail("ema_momentum " + momentum.dump() + " is not supported (a number)");
    c.checked([&] { opt->set_ema(use.get<bool>(), momentum.get<double>(), every); });
  }
  // Keras's gradient clipping: a number or null each, at most one set.
  std::optional<double> clip[3];
  const char* clip_keys[3] = {"clipnorm", "global_clipnorm", "clipvalue"};
  for (int k = 0; k < 3; ++k) {
    if (!c.present(clip_keys[k])) continue;
    const json& v = c.raw(clip_keys[k]);
    if (v.is_number())
      clip[k] = v.get<double>();
    else if (!v.is_null())
      c.fail(std::string(clip_keys[k]) + " " + v.dump() + " is not supported (a number or null)");
  }
  opt->set_clipping(clip[0], clip[1], clip[2]);
  if (c.present("loss_scale_factor") && !c.taken("loss_scale_factor")) {
    const json& f = c.raw("loss_scale_factor");
    if (!f.is_null() && !f.is_number())
      c.fail("loss_scale_factor " + f.dump() + " is not supported (a number or null)");
    c.checked([&] {
      opt->set_loss_scale_factor(f.is_null() ? std::nullopt : std::optional<double>(f.get<double>()));
    });
  }
  if (c.present("gradient_accumulation_steps")) {
    const std::optional<std::int64_t> steps = c.optional_integer("gradient_accumulation_steps", 2);
    opt->set_gradient_accumulation_steps(steps);
  }
  if (!c.taken("decay")) c.off("decay", 0.0);
  c.finish();
  opt->set_learning_rate_schedule(schedule);
  return opt;
}

json serialize(const Optimizer& optimizer, keras_object::Form form) {
  const Entry& e = entry_of(optimizer);
  json lr = optimizer.learning_rate_schedule() ? schedules::serialize(*optimizer.learning_rate_schedule())
                                               : json(optimizer.learning_rate());
  json own = optimizer.get_config();
  if (form == keras_object::Form::h5) {
    // The legacy form both tf.keras (its optimizer of this class) and Keras 3 read from a full-model .h5.
    json config = {{"name", e.class_name}, {"learning_rate", lr}};
    if (optimizer.weight_decay()) config["weight_decay"] = *optimizer.weight_decay();
    if (optimizer.clipnorm()) config["clipnorm"] = *optimizer.clipnorm();
    if (optimizer.global_clipnorm()) config["global_clipnorm"] = *optimizer.global_clipnorm();
    if (optimizer.clipvalue()) config["clipvalue"] = *optimizer.clipvalue();
    if (optimizer.loss_scale_factor()) config["loss_scale_factor"] = *optimizer.loss_scale_factor();
    if (optimizer.gradient_accumulation_steps())
      config["gradient_accumulation_steps"] = *optimizer.gradient_accumulation_steps();
    if (optimizer.use_ema()) {
      config["use_ema"] = true;
      config["ema_momentum"] = optimizer.ema_momentum();
      config["ema_overwrite_frequency"] =
          optimizer.ema_overwrite_frequency() ? json(*optimizer.ema_overwrite_frequency()) : json(nullptr);
    }
    config.update(own);
    return {{"class_name", e.class_name}, {"config", config}};
  }
  // Keras 3's Optimizer.get_config: the base class's arguments, then the class's.
  json config = {
      {"name", e.keras3_name},
      {"learning_rate", lr},
      {"weight_decay", or_null(optimizer.weight_decay())},
      {"clipnorm", or_null(optimizer.clipnorm())},
      {"global_clipnorm", or_null(optimizer.global_clipnorm())},
      {"clipvalue", or_null(optimizer.clipvalue())},
      {"use_ema", optimizer.use_ema()},
      {"ema_momentum", optimizer.ema_momentum()},
      {"ema_overwrite_frequency",
       optimizer.ema_overwrite_frequency() ? json(*optimizer.ema_overwrite_frequency()) : json(nullptr)},
      {"loss_scale_factor", or_null(optimizer.loss_scale_factor())},
      {"gradient_accumulation_steps", optimizer.gradient_accumulation_steps()
                                          ? json(*optimizer.gradient_accumulation_steps())
                                          : json(nullptr)}};
  config.update(own);
  return keras_object::serialized("keras.optimizers", e.class_name, config);
}

}  // namespace systolic::optimizers
