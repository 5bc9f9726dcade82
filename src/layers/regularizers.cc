// Keras's regularizers and constraints (include/systolic/regularizers.h): their values, their Keras configs
// (read as Keras 3 and tf.keras write them, written as Keras 3 does), and their application through ops.
#include <systolic/regularizers.h>

#include "layers/config.h"

namespace systolic {

namespace regularizers {

Regularizer L1(double l1) {
  SYSTOLIC_CHECK(l1 >= 0 && std::isfinite(l1), "L1: l1 must be a non-negative float, got {}", l1);
  return {.kind = Regularizer::Kind::l1, .l1 = l1};
}
Regularizer L2(double l2) {
  SYSTOLIC_CHECK(l2 >= 0 && std::isfinite(l2), "L2: l2 must be a non-negative float, got {}", l2);
  return {.kind = Regularizer::Kind::l2, .l2 = l2};
}
Regularizer L1L2(double l1, double l2) {
  SYSTOLIC_CHECK(l1 >= 0 && l2 >= 0 && std::isfinite(l1) && std::isfinite(l2),
                 "L1L2: l1 and l2 must be non-negative floats, got {} and {}", l1, l2);
  return {.kind = Regularizer::Kind::l1_l2, .l1 = l1, .l2 = l2};
}
Regularizer OrthogonalRegularizer(double factor, const std::string& mode) {
  SYSTOLIC_CHECK(factor >= 0 && std::isfinite(factor),
                 "OrthogonalRegularizer: factor must be a non-negative float, got {}", factor);
  SYSTOLIC_CHECK(mode == "rows" || mode == "columns",
                 "OrthogonalRegularizer: mode must be \"rows\" or \"columns\", got \"{}\"", mode);
  return {.kind = Regularizer::Kind::orthogonal, .factor = factor, .mode = mode};
}

void apply(const Regularizer& r, const Tensor& x, Tensor& total, Tensor& dx, double total_scale,
           double grad_scale) {
  switch (r.kind) {
    case Regularizer::Kind::none:
      return;
    case Regularizer::Kind::orthogonal:
      ops::orthogonal_regularize(x, total, dx, r.factor, r.mode == "columns", total_scale, grad_scale);
      return;
    default:
      ops::regularize(x, total, dx, r.l1, r.l2, total_scale, grad_scale);
  }
}

double penalty(const Regularizer& r, const Tensor& x) {
  Tensor total = Tensor::zeros({1}, DType::float64, x.device()), none;
  apply(r, x, total, none, 1.0, 0.0);
  return total.to_doubles()[0];
}

}  // namespace regularizers

namespace constraints {

namespace {
void check_axis(const char* what, const std::vector<int>& axis) {
  SYSTOLIC_CHECK(!axis.empty(), "{}: axis must name at least one axis", what);
}
}  // namespace

Constraint MaxNorm(double max_value, std::vector<int> axis) {
  check_axis("MaxNorm", axis);
  SYSTOLIC_CHECK(max_value >= 0, "MaxNorm: max_value must be >= 0, got {}", max_value);
  return {.kind = Constraint::max_norm, .max_value = max_value, .axis = std::move(axis)};
}
Constraint NonNeg() {
  return {.kind = Constraint::non_neg};
}
Constraint UnitNorm(std::vector<int> axis) {
  check_axis("UnitNorm", axis);
  return {.kind = Constraint::unit_norm, .axis = std::move(axis)};
}
Constraint MinMaxNorm(double min_value, double max_value, double rate, std::vector<int> axis) {
  check_axis("MinMaxNorm", axis);
  SYSTOLIC_CHECK(min_value >= 0 && max_value >= min_value && rate >= 0 && rate <= 1,
                 "MinMaxNorm: needs 0 <= min_value <= max_value and rate in [0, 1], got {}, {}, {}",
                 min_value, max_value, rate);
  return {.kind = Constraint::min_max_norm,
          .min_value = min_value,
          .max_value = max_value,
          .rate = rate,
          .axis = std::move(axis)};
}

void apply(const Constraint& c, Tensor& w) {
  if (!c) return;
  ops::ConstraintParams p{.min_value = c.min_value, .max_value = c.max_value, .rate = c.rate, .axes = 0};
  switch (c.kind) {
    case Constraint::max_norm:
      p.kind = ops::ConstraintParams::max_norm;
      break;
    case Constraint::non_neg:
      p.kind = ops::ConstraintParams::non_neg;
      break;
    case Constraint::unit_norm:
      p.kind = ops::ConstraintParams::unit_norm;
      break;
    default:
      p.kind = ops::ConstraintParams::min_max_norm;
  }
  if (c.kind != Constraint::non_neg)
    for (int a : c.axis) {
      int at = a < 0 ? a + w.rank() : a;
      SYSTOLIC_CHECK(at >= 0 && at < w.rank(), "constraint: axis {} is not an axis of a weight of shape {}",
                     a, w.shape().str());
      p.axes |= 1u << at;
    }
  ops::constrain(w, p);
}

}  // namespace constraints

namespace layers {

namespace {
double number(const json& c, const char* key, double fallback, const std::string& what) {
  if (!c.contains(key) || c[key].is_null()) return fallback;
  if (!c[key].is_number()) fail("{}: '{}' must be a number, got {}", what, key, c[key].dump());
  return c[key].get<double>();
}
std::vector<int> axes(const json& c, const std::string& what) {
  if (!c.contains("axis")) return {0};
  auto& a = c["axis"];
  if (a.is_number_integer()) return {a.get<int>()};
  if (a.is_array() && !a.empty()) {
    std::vector<int> out;
    for (auto& v : a) {
      if (!v.is_number_integer())
        fail("{}: axis must be an integer or a list of integers, got {}", what, a.dump());
      out.push_back(v.get<int>());
    }
    return out;
  }
  fail("{}: axis must be an integer or a list of integers, got {}", what, a.dump());
}
// {"class_name", "config"} (Keras 3 adds "module" and "registered_name") or a name: the class and its arguments.
std::pair<std::string, json> class_and_config(const json& v, const char* what) {
  if (v.is_string()) return {v.get<std::string>(), json::object()};
  if (!v.is_object() || !v.contains("class_name") || !v["class_name"].is_string())
    fail("expected a {} (a name or {{\"class_name\", \"config\"}}), got {}", what, v.dump());
  json c = v.contains("config") && !v["config"].is_null() ? v["config"] : json::object();
  if (!c.is_object()) fail("{} config must be an object, got {}", what, c.dump());
  return {v["class_name"].get<std::string>(), c};
}
void only_keys(const json& c, std::initializer_list<const char*> keys, const std::string& what) {
  for (auto& [k, v] : c.items()) {
    bool known = false;
    for (auto* key : keys) known = known || k == key;
    if (!known) fail("{}: unsupported argument '{}' (value {})", what, k, v.dump());
  }
}
json keras_object(const char* module, const std::string& cls, json config) {
  return {
      {"module", module}, {"class_name", cls}, {"config", std::move(config)}, {"registered_name", nullptr}};
}
json axis_json(const std::vector<int>& axis) {
  return axis.size() == 1 ? json(axis[0]) : json(axis);
}
}  // namespace

Regularizer regularizer_from_config(const json& v) {
  if (v.is_null()) return {};
  auto [cls, c] = class_and_config(v, "regularizer");
  const std::string what = "regularizer " + cls;
  if (cls == "L1" || cls == "l1") {
    only_keys(c, {"l1"}, what);
    return regularizers::L1(number(c, "l1", 0.01, what));
  }
  if (cls == "L2" || cls == "l2") {
    only_keys(c, {"l2"}, what);
    return regularizers::L2(number(c, "l2", 0.01, what));
  }
  if (cls == "L1L2" || cls == "l1l2" || cls == "l1_l2") {
    only_keys(c, {"l1", "l2"}, what);
    return regularizers::L1L2(number(c, "l1", 0.0, what), number(c, "l2", 0.0, what));
  }
  if (cls == "OrthogonalRegularizer" || cls == "orthogonal_regularizer") {
    only_keys(c, {"factor", "mode"}, what);
    std::string mode = c.contains("mode") && c["mode"].is_string() ? c["mode"].get<std::string>() : "rows";
    return regularizers::OrthogonalRegularizer(number(c, "factor", 0.01, what), mode);
  }
  fail("regularizer class '{}' is not supported (L1, L2, L1L2, OrthogonalRegularizer)", cls);
}

json regularizer_config(const Regularizer& r) {
  switch (r.kind) {
    case Regularizer::Kind::none:
      return nullptr;
    case Regularizer::Kind::l1:
      return keras_object("keras.regularizers", "L1", {{"l1", r.l1}});
    case Regularizer::Kind::l2:
      return keras_object("keras.regularizers", "L2", {{"l2", r.l2}});
    case Regularizer::Kind::l1_l2:
      return keras_object("keras.regularizers", "L1L2", {{"l1", r.l1}, {"l2", r.l2}});
    case Regularizer::Kind::orthogonal:
      return keras_object("keras.regularizers", "OrthogonalRegularizer",
                          {{"factor", r.factor}, {"mode", r.mode}});
  }
  return nullptr;
}

Constraint constraint_from_config(const json& v) {
  if (v.is_null()) return {};
  auto [cls, c] = class_and_config(v, "constraint");
  const std::string what = "constraint " + cls;
  if (cls == "MaxNorm" || cls == "max_norm") {
    only_keys(c, {"max_value", "axis"}, what);
    return constraints::MaxNorm(number(c, "max_value", 2.0, what), axes(c, what));
  }
  if (cls == "NonNeg" || cls == "non_neg") {
    only_keys(c, {}, what);
    return constraints::NonNeg();
  }
  if (cls == "UnitNorm" || cls == "unit_norm") {
    only_keys(c, {"axis"}, what);
    return constraints::UnitNorm(axes(c, what));
  }
  if (cls == "MinMaxNorm" || cls == "min_max_norm") {
    only_keys(c, {"min_value", "max_value", "rate", "axis"}, what);
    return constraints::MinMaxNorm(number(c, "min_value", 0.0, what), number(c, "max_value", 1.0, what),
                                   number(c, "rate", 1.0, what), axes(c, what));
  }
  fail("constraint class '{}' is not supported (MaxNorm, NonNeg, UnitNorm, MinMaxNorm)", cls);
}

json constraint_config(const Constraint& c) {
  switch (c.kind) {
    case Constraint::none:
      return nullptr;
    case Constraint::max_norm:
      return keras_object("keras.constraints", "MaxNorm",
                          {{"max_value", c.max_value}, {"axis", axis_json(c.axis)}});
    case Constraint::non_neg:
      return keras_object("keras.constraints", "NonNeg", json::object());
    case Constraint::unit_norm:
      return keras_object("keras.constraints", "UnitNorm", {{"axis", axis_json(c.axis)}});
    case Constraint::min_max_norm:
      return keras_object("keras.constraints", "MinMaxNorm",
                          {{"min_value", c.min_value},
                           {"max_value", c.max_value},
                           {"rate", c.rate},
                           {"axis", axis_json(c.axis)}});
  }
  return nullptr;
}

Regularizer ConfigReader::get_regularizer(const std::string& key) {
  if (!has(key)) return {};
  auto& v = at(key);
  try {
    return regularizer_from_config(v);
  } catch (const Error& e) {
    fail_option(key, e.what());
  }
}

Constraint ConfigReader::get_constraint(const std::string& key) {
  if (!has(key)) return {};
  auto& v = at(key);
  try {
    return constraint_from_config(v);
  } catch (const Error& e) {
    fail_option(key, e.what());
  }
}

WeightOptions ConfigReader::get_weight_options(const std::string& prefix) {
  WeightOptions o;
  o.regularizer = get_regularizer(prefix + "_regularizer");
  o.constraint = get_constraint(prefix + "_constraint");
  return o;
}

void write_regularizers(json& config,
                        std::initializer_list<std::pair<const char*, const WeightOptions*>> weights) {
  for (auto& [prefix, o] : weights)
    config[std::string(prefix) + "_regularizer"] = regularizer_config(o->regularizer);
  for (auto& [prefix, o] : weights)
    config[std::string(prefix) + "_constraint"] = constraint_config(o->constraint);
}

}  // namespace layers
}  // namespace systolic
