// The registry of Keras's metrics: the one list of them (a line per entry; the class's file defines it), and
// compile's metric names, the metrics of Keras files, through it.
#include "metrics/registry.h"

namespace systolic::metrics {

using keras_object::json;

// X(name): the entry `const Entry& name_entry()` defined in src/metrics/*.cc.
#define SYSTOLIC_METRIC_CLASSES(X)     \
  X(accuracy)                          \
  X(sparse_categorical_accuracy)       \
  X(categorical_accuracy)              \
  X(sparse_top_k_categorical_accuracy) \
  X(top_k_categorical_accuracy)        \
  X(binary_accuracy)                   \
  X(binary_crossentropy)               \
  X(categorical_crossentropy)          \
  X(sparse_categorical_crossentropy)   \
  X(mean_squared_error)                \
  X(root_mean_squared_error)           \
  X(mean_absolute_error)               \
  X(mean_absolute_percentage_error)    \
  X(mean_squared_logarithmic_error)    \
  X(log_cosh)                          \
  X(poisson)                           \
  X(kl_divergence)                     \
  X(hinge)                             \
  X(squared_hinge)                     \
  X(categorical_hinge)                 \
  X(cosine_similarity)                 \
  X(auc)                               \
  X(precision)                         \
  X(recall)                            \
  X(precision_at_recall)               \
  X(recall_at_precision)               \
  X(sensitivity_at_specificity)        \
  X(specificity_at_sensitivity)        \
  X(r2_score)                          \
  X(io_u)                              \
  X(mean_io_u)                         \
  X(one_hot_io_u)                      \
  X(one_hot_mean_io_u)                 \
  X(binary_io_u)                       \
  X(f1_score)                          \
  X(fbeta_score)

#define SYSTOLIC_DECLARE_ENTRY(name) const Entry& name##_entry();
#define SYSTOLIC_LIST_ENTRY(name) name##_entry(),
SYSTOLIC_METRIC_CLASSES(SYSTOLIC_DECLARE_ENTRY)

namespace {

const keras_object::Registry<Entry>& registry() {
  static const keras_object::Registry<Entry> r("metric", {SYSTOLIC_METRIC_CLASSES(SYSTOLIC_LIST_ENTRY)});
  return r;
}

}  // namespace

void Metric::update_weighted(const Tensor&, const Tensor&, const Tensor&, Tensor&) const {
  fail(
      "metric {} ({}) takes no sample weights in systolic: give it in metrics, not weighted_metrics (the "
      "accuracies, the loss-like and confusion-count metrics and the F-scores take them; R2Score does not)",
      name(), class_name());
}

std::unique_ptr<Metric> get(const std::string& name, bool loss_has_sparse_labels, bool binary_output) {
  auto m = registry().at(name).make(name, loss_has_sparse_labels, binary_output);
  SYSTOLIC_CHECK(m->takes_labels(loss_has_sparse_labels),
                 "metric '{}' reads {} labels but the loss takes {} labels", name,
                 m->sparse_labels() ? "integer" : "dense", loss_has_sparse_labels ? "integer" : "dense");
  return m;
}

std::unique_ptr<Metric> make(const MetricArg& metric, bool loss_has_sparse_labels, bool binary_output) {
  if (!metric.metric()) return get(metric.name(), loss_has_sparse_labels, binary_output);
  auto m = metric.metric()->clone();
  SYSTOLIC_CHECK(m->takes_labels(loss_has_sparse_labels),
                 "metric '{}' reads {} labels but the loss takes {} labels", m->name(),
                 m->sparse_labels() ? "integer" : "dense", loss_has_sparse_labels ? "integer" : "dense");
  return m;
}

std::unique_ptr<Metric> needs_arguments(const std::string& name, bool, bool) {
  fail("metric '{}' ({}) needs its arguments: pass the metric object, not its name", name,
       registry().at(name).class_name);
}

std::vector<std::string> names() {
  return registry().names(/*by_alias=*/true);
}

MetricArg from_config(const json& value) {
  if (value.is_string()) return value.get<std::string>();
  auto [cls, config] = keras_object::class_and_config(value, "metric");
  keras_object::StrictConfig c(config, "metric " + cls);
  c.ignore("dtype");
  const Entry* entry = registry().find(cls);
  if (cls == "MeanMetricWrapper") {  // tf.keras 2.11+: the function it wraps, by name
    auto fn = c.string("fn", "");
    if (!registry().find(fn)) c.fail("fn '" + fn + "' is not supported (" + registry().known(true) + ")");
    entry = nullptr;
  } else if (!entry || cls.empty()) {
    fail("metric class '{}' is not supported ({})", cls, registry().known());
  }
  auto name = c.string("name", cls);
  if (entry && entry->from_config) {
    auto metric = entry->from_config(c, name);
    c.finish();
    return *metric;
  }
  c.finish();
  return name;
}

json serialize(const Metric& metric, keras_object::Form form) {
  json config = {{"name", metric.name()}, {"dtype", "float32"}};
  const json own = metric.get_config();
  for (auto& [k, v] : own.items()) config[k] = v;
  // Keras 3's compile_config holds a metric by the name compile took, which keras.metrics.get reads back; but a
  // metric with arguments of its own (AUC) is held as the serialized object, and so is LogCoshError, named
  // "logcosh", which keras.metrics.get does not take (Keras 3.15).
  if (form == keras_object::Form::keras3 && (!own.empty() || metric.name() == "logcosh"))
    return keras_object::serialized("keras.metrics", metric.class_name(), config);
  if (form == keras_object::Form::keras3) return metric.name();
  return {{"class_name", metric.class_name()}, {"config", config}};
}

}  // namespace systolic::metrics
