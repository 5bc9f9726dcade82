// Keras's metrics of confusion counts: AUC (ROC or PR, Keras's three summation methods, multi_label), Precision and
// Recall at one threshold (class_id, top_k), and PrecisionAtRecall, RecallAtPrecision, SensitivityAtSpecificity and
// SpecificityAtSensitivity. ops::confusion_counts adds each batch's true/false positives/negatives per threshold to the
// metric's state; the value is Keras 3.15's result() of those sums (keras/src/metrics/confusion_metrics.py),
// computed in double.
#include <systolic/ops.h>

#include <cmath>

#include "metrics/registry.h"

namespace systolic::metrics {

using keras_object::json;

namespace {

double divide_no_nan(double a, double b) {
  return b == 0 ? 0.0 : a / b;
}

// The four rows of a state of `n` thresholds.
struct Counts {
  const double *tp, *fp, *tn, *fn;
  Counts(const double* state, std::int64_t n)
      : tp(state), fp(state + n), tn(state + 2 * n), fn(state + 3 * n) {}
};

}  // namespace

AUC::AUC(const AUCOptions& options) : options_(options) {
  SYSTOLIC_CHECK(options_.num_thresholds > 1, "AUC: num_thresholds must be an integer > 1, got {}",
                 options_.num_thresholds);
  SYSTOLIC_CHECK(options_.curve == "ROC" || options_.curve == "PR",
                 "AUC: curve '{}' is not supported (ROC, PR; PRGAIN is not)", options_.curve);
  SYSTOLIC_CHECK(options_.summation_method == "interpolation" || options_.summation_method == "minoring" ||
                     options_.summation_method == "majoring",
                 "AUC: summation_method '{}' is not one of interpolation, minoring, majoring",
                 options_.summation_method);
}

void AUC::build(const Shape& output) {
  labels_ = 1;
  if (!options_.multi_label) return;
  SYSTOLIC_CHECK(output.rank() == 1,
                 "{}: multi_label takes an output of shape (batch, labels), not (None, {})", options_.name,
                 output.str());
  labels_ = output[0];
  SYSTOLIC_CHECK(options_.label_weights.empty() || std::int64_t(options_.label_weights.size()) == labels_,
                 "{}: {} label_weights for {} labels", options_.name, options_.label_weights.size(), labels_);
}

void AUC::update_weighted(const Tensor& output, const Tensor& labels, const Tensor& weights,
                          Tensor& state) const {
  // num_thresholds = 2 is Keras's [-epsilon, 1 + epsilon]: what ConfusionParams spaces evenly for 2 too.
  ops::ConfusionParams p{
      .thresholds = options_.num_thresholds, .from_logits = options_.from_logits, .clip = true};
  if (!options_.multi_label) return ops::confusion_counts(output, labels, weights, state, p);
  const std::int64_t size = 4 * options_.num_thresholds;
  for (std::int64_t label = 0; label < labels_; ++label) {  // each label's counts, as its column's
    Tensor counts = state.view(label * size, Shape{size});
    p.class_id = label;
    ops::confusion_counts(output, labels, weights, counts, p);
  }
}

double AUC::value(const double* state, double) const {
  if (!options_.multi_label) return area(state);
  // Keras: the labels' mean, or their mean weighted by label_weights.
  const std::int64_t size = 4 * options_.num_thresholds;
  double sum = 0, weights = 0;
  for (std::int64_t label = 0; label < labels_; ++label) {
    const double w = options_.label_weights.empty() ? 1.0 : options_.label_weights[label];
    sum += w * area(state + label * size);
    weights += w;
  }
  return options_.label_weights.empty() ? sum / double(labels_) : divide_no_nan(sum, weights);
}

double AUC::area(const double* state) const {
  const std::int64_t n = options_.num_thresholds;
  Counts c(state, n);
  double area = 0;
  if (options_.curve == "PR" && options_.summation_method == "interpolation") {
    // Keras's interpolate_pr_auc (Davis & Goadrich 2006): tp and predicted positives linear between thresholds.
    for (std::int64_t i = 0; i + 1 < n; ++i) {
      const double dtp = c.tp[i] - c.tp[i + 1];
      const double p0 = c.tp[i] + c.fp[i], p1 = c.tp[i + 1] + c.fp[i + 1];
      const double slope = divide_no_nan(dtp, std::max(p0 - p1, 0.0));
      const double intercept = c.tp[i + 1] - slope * p1;
      const double ratio = p0 > 0 && p1 > 0 ? divide_no_nan(p0, std::max(p1, 0.0)) : 1.0;
      area += divide_no_nan(slope * (dtp + intercept * std::log(ratio)),
                            std::max(c.tp[i + 1] + c.fn[i + 1], 0.0));
    }
    return area;
  }
  auto x = [&](std::int64_t i) {  // ROC: the false positive rate; PR: recall
    return options_.curve == "ROC" ? divide_no_nan(c.fp[i], c.fp[i] + c.tn[i])
                                   : divide_no_nan(c.tp[i], c.tp[i] + c.fn[i]);
  };
  auto y = [&](std::int64_t i) {  // ROC: recall; PR: precision
    return options_.curve == "ROC" ? divide_no_nan(c.tp[i], c.tp[i] + c.fn[i])
                                   : divide_no_nan(c.tp[i], c.tp[i] + c.fp[i]);
  };
  for (std::int64_t i = 0; i + 1 < n; ++i) {
    const double a = y(i), b = y(i + 1);
    const double height = options_.summation_method == "interpolation" ? (a + b) / 2
                          : options_.summation_method == "minoring"    ? std::min(a, b)
                                                                       : std::max(a, b);
    area += (x(i) - x(i + 1)) * height;
  }
  return area;
}

nlohmann::ordered_json AUC::get_config() const {
  return {
      {"num_thresholds", options_.num_thresholds},
      {"curve", options_.curve},
      {"summation_method", options_.summation_method},
      {"multi_label", options_.multi_label},
      {"num_labels", nullptr},
      // Keras keeps label_weights as a float32 tensor, which its files hold as a __tensor__ object.
      {"label_weights",
       options_.label_weights.empty()
           ? nlohmann::ordered_json(nullptr)
           : nlohmann::ordered_json{{"class_name", "__tensor__"},
                                    {"config", {{"value", options_.label_weights}, {"dtype", "float32"}}}}},
      {"from_logits", options_.from_logits}};
}

ThresholdMetric::ThresholdMetric(const ThresholdOptions& options, const char* default_name)
    : options_(options), name_(options.name.empty() ? default_name : options.name) {
  SYSTOLIC_CHECK(!options_.threshold || std::isfinite(*options_.threshold), "{}: threshold {} is not finite",
                 name_, options_.threshold.value_or(0.5));
  SYSTOLIC_CHECK(options_.class_id >= -1, "{}: class_id {} is negative", name_, options_.class_id);
  SYSTOLIC_CHECK(options_.top_k >= 0, "{}: top_k {} is negative", name_, options_.top_k);
}

void ThresholdMetric::update_weighted(const Tensor& output, const Tensor& labels, const Tensor& weights,
                                      Tensor& state) const {
  // Keras's default threshold: 0.5, or with top_k NEG_INF (every prediction of the top k).
  const double threshold = options_.threshold.value_or(options_.top_k > 0 ? -1e10 : 0.5);
  ops::confusion_counts(output, labels, weights, state,
                        {.threshold = threshold, .class_id = options_.class_id, .top_k = options_.top_k});
}

nlohmann::ordered_json ThresholdMetric::get_config() const {
  using ojson = nlohmann::ordered_json;
  auto or_null = [](bool set, const ojson& v) { return set ? v : ojson(nullptr); };
  return {{"thresholds", or_null(options_.threshold.has_value(), options_.threshold.value_or(0.5))},
          {"top_k", or_null(options_.top_k > 0, options_.top_k)},
          {"class_id", or_null(options_.class_id >= 0, options_.class_id)}};
}

namespace {
// Each kind's argument: the rate to reach.
const char* const kRateAtValues[] = {"recall", "precision", "specificity", "sensitivity"};
}  // namespace

RateAtMetric::RateAtMetric(RateAt kind, const RateAtOptions& options)
    : kind_(kind), options_(options), name_(options.name) {
  static const char* const names[] = {"precision_at_recall", "recall_at_precision",
                                      "sensitivity_at_specificity", "specificity_at_sensitivity"};
  if (name_.empty()) name_ = names[static_cast<int>(kind)];
  SYSTOLIC_CHECK(options_.value >= 0 && options_.value <= 1, "{}: {} {} is not in [0, 1]", name_,
                 kRateAtValues[static_cast<int>(kind)], options_.value);
  SYSTOLIC_CHECK(options_.num_thresholds > 0, "{}: num_thresholds must be an integer > 0, got {}", name_,
                 options_.num_thresholds);
  SYSTOLIC_CHECK(options_.class_id >= -1, "{}: class_id {} is negative", name_, options_.class_id);
}

std::string RateAtMetric::class_name() const {
  static const char* const classes[] = {"PrecisionAtRecall", "RecallAtPrecision", "SensitivityAtSpecificity",
                                        "SpecificityAtSensitivity"};
  return classes[static_cast<int>(kind_)];
}

void RateAtMetric::update_weighted(const Tensor& output, const Tensor& labels, const Tensor& weights,
                                   Tensor& state) const {
  // Keras's thresholds: [0, 1/(T-1), ..., 1] (predictions clipped to [0, 1]), or [0.5] for one.
  ops::confusion_counts(output, labels, weights, state,
                        {.thresholds = options_.num_thresholds,
                         .class_id = options_.class_id,
                         .clip = options_.num_thresholds > 1,
                         .exact_ends = true});
}

double RateAtMetric::value(const double* state, double) const {
  const std::int64_t n = options_.num_thresholds;
  Counts c(state, n);
  // Keras's _find_max_under_constraint: the largest `dependent` where `constrained` >= value, or 0.
  double best = 0;
  for (std::int64_t t = 0; t < n; ++t) {
    const double recall = divide_no_nan(c.tp[t], c.tp[t] + c.fn[t]);  // the sensitivity
    const double precision = divide_no_nan(c.tp[t], c.tp[t] + c.fp[t]);
    const double specificity = divide_no_nan(c.tn[t], c.tn[t] + c.fp[t]);
    double constrained = 0, dependent = 0;
    switch (kind_) {
      case RateAt::precision_at_recall:
        constrained = recall, dependent = precision;
        break;
      case RateAt::recall_at_precision:
        constrained = precision, dependent = recall;
        break;
      case RateAt::sensitivity_at_specificity:
        constrained = specificity, dependent = recall;
        break;
      case RateAt::specificity_at_sensitivity:
        constrained = recall, dependent = specificity;
        break;
    }
    if (constrained >= options_.value) best = std::max(best, dependent);
  }
  return best;
}

nlohmann::ordered_json RateAtMetric::get_config() const {
  using ojson = nlohmann::ordered_json;
  return {{"class_id", options_.class_id >= 0 ? ojson(options_.class_id) : ojson(nullptr)},
          {"num_thresholds", options_.num_thresholds},
          {kRateAtValues[static_cast<int>(kind_)], options_.value}};
}

double Precision::value(const double* state, double) const {
  return divide_no_nan(state[0], state[0] + state[1]);
}

double Recall::value(const double* state, double) const {
  return divide_no_nan(state[0], state[0] + state[3]);
}

namespace {

// AUC's config: Keras's arguments, refusing what systolic does not compute (label_weights without multi_label,
// thresholds of its own).
std::unique_ptr<Metric> auc_from_config(keras_object::StrictConfig& c, const std::string& name) {
  AUCOptions o{.name = name};
  o.num_thresholds = c.integer("num_thresholds", 200, 2);
  o.curve = c.string("curve", "ROC");
  o.summation_method = c.string("summation_method", "interpolation");
  o.from_logits = c.boolean("from_logits", false);
  o.multi_label = c.boolean("multi_label", false);
  // The output's labels, which build() reads from the output.
  if (c.optional_integer("num_labels", 1) && !o.multi_label)
    c.fail("num_labels is needed only when multi_label is True");
  json weights = c.raw("label_weights");
  if (weights.is_object() && weights.value("class_name", "") == "__tensor__")  // Keras's float32 tensor
    weights = weights.contains("config") ? weights["config"].value("value", json()) : json();
  if (!weights.is_null()) {
    if (!o.multi_label) c.fail("label_weights without multi_label is not supported");
    if (!weights.is_array()) c.fail("label_weights " + weights.dump() + " is not a list of numbers");
    for (const json& w : weights) {
      if (!w.is_number() || !(w.get<double>() >= 0))
        c.fail("label_weights " + weights.dump() + " must be non-negative numbers");
      o.label_weights.push_back(w.get<double>());
    }
  }
  c.off("thresholds");
  return c.checked([&]() -> std::unique_ptr<Metric> { return std::make_unique<AUC>(o); });
}

// Precision's and Recall's thresholds: null (0.5), a number or a list of one (a list of several makes Keras's
// result a list, which logs cannot show).
ThresholdOptions threshold_options(keras_object::StrictConfig& c, const std::string& name) {
  ThresholdOptions o{.name = name};
  const json& t = c.raw("thresholds");
  if (t.is_number()) {
    o.threshold = t.get<double>();
  } else if (t.is_array() && t.size() == 1 && t[0].is_number()) {
    o.threshold = t[0].get<double>();
  } else if (!t.is_null()) {
    c.fail("thresholds " + t.dump() + " is not supported (one threshold, or null for 0.5)");
  }
  o.top_k = c.integer("top_k", 0, 1);
  o.class_id = c.integer("class_id", -1, 0);
  return o;
}

}  // namespace

const Entry& auc_entry() {
  static const Entry e{"AUC",
                       {"auc"},
                       [](const std::string& name, bool, bool) -> std::unique_ptr<Metric> {
                         return std::make_unique<AUC>(AUCOptions{.name = name == "AUC" ? "auc" : name});
                       },
                       auc_from_config};
  return e;
}

const Entry& precision_entry() {
  static const Entry e{
      "Precision",
      {"precision"},
      [](const std::string& name, bool, bool) -> std::unique_ptr<Metric> {
        return std::make_unique<Precision>(ThresholdOptions{.name = name == "Precision" ? "" : name});
      },
      [](keras_object::StrictConfig& c, const std::string& name) -> std::unique_ptr<Metric> {
        return std::make_unique<Precision>(threshold_options(c, name));
      }};
  return e;
}

const Entry& recall_entry() {
  static const Entry e{
      "Recall",
      {"recall"},
      [](const std::string& name, bool, bool) -> std::unique_ptr<Metric> {
        return std::make_unique<Recall>(ThresholdOptions{.name = name == "Recall" ? "" : name});
      },
      [](keras_object::StrictConfig& c, const std::string& name) -> std::unique_ptr<Metric> {
        return std::make_unique<Recall>(threshold_options(c, name));
      }};
  return e;
}

namespace {
// PrecisionAtRecall's kin: the rate to reach (required), num_thresholds, class_id.
template <RateAt kind>
std::unique_ptr<Metric> rate_at_from_config(keras_object::StrictConfig& c, const std::string& name) {
  RateAtOptions o{.name = name};
  const char* key = kind == RateAt::precision_at_recall          ? "recall"
                    : kind == RateAt::recall_at_precision        ? "precision"
                    : kind == RateAt::sensitivity_at_specificity ? "specificity"
                                                                 : "sensitivity";
  const json& value = c.raw(key);
  if (!value.is_number()) c.fail(std::string(key) + " " + value.dump() + " must be a number in [0, 1]");
  o.value = value.get<double>();
  o.num_thresholds = c.integer("num_thresholds", 200, 1);
  o.class_id = c.integer("class_id", -1, 0);
  return c.checked([&]() -> std::unique_ptr<Metric> { return std::make_unique<RateAtMetric>(kind, o); });
}
}  // namespace

SYSTOLIC_METRIC_NEEDING_ARGUMENTS(precision_at_recall, PrecisionAtRecall,
                                  rate_at_from_config<RateAt::precision_at_recall>)
SYSTOLIC_METRIC_NEEDING_ARGUMENTS(recall_at_precision, RecallAtPrecision,
                                  rate_at_from_config<RateAt::recall_at_precision>)
SYSTOLIC_METRIC_NEEDING_ARGUMENTS(sensitivity_at_specificity, SensitivityAtSpecificity,
                                  rate_at_from_config<RateAt::sensitivity_at_specificity>)
SYSTOLIC_METRIC_NEEDING_ARGUMENTS(specificity_at_sensitivity, SpecificityAtSensitivity,
                                  rate_at_from_config<RateAt::specificity_at_sensitivity>)

}  // namespace systolic::metrics
