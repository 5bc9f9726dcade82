// Keras's metrics of confusion counts: AUC (ROC or PR, Keras's three summation methods, multi_label, thresholds of
// its own), Precision and Recall at one threshold or several (class_id, top_k), and PrecisionAtRecall, RecallAtPrecision, SensitivityAtSpecificity and
// SpecificityAtSensitivity. ops::confusion_counts adds each batch's true/false positives/negatives per threshold to the
// metric's state; the value is Keras 3.15's result() of those sums (keras/src/metrics/confusion_metrics.py),
// computed in double.
#include <systolic/ops.h>

#include <algorithm>
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

// Keras's assert_thresholds_range: every threshold given in [0, 1].
void check_range(const std::string& name, const std::vector<double>& thresholds) {
  for (double t : thresholds)
    SYSTOLIC_CHECK(t >= 0 && t <= 1, "{}: threshold values must be in [0, 1], got {}", name, t);
}

// Keras's is_evenly_distributed_thresholds: 3 or more, each within np.allclose's tolerances (atol epsilon, rtol
// 1e-5) of i / (n - 1) in float32.
bool evenly_distributed(const std::vector<double>& thresholds) {
  const std::size_t n = thresholds.size();
  if (n < 3) return false;
  for (std::size_t i = 0; i < n; ++i) {
    const double even = double(float(i) / float(n - 1));
    if (!(std::abs(thresholds[i] - even) <= 1e-7 + 1e-5 * std::abs(even))) return false;
  }
  return true;
}

constexpr double kEpsilon = 1e-7;  // keras.backend.epsilon()

}  // namespace

AUC::AUC(const AUCOptions& options) : options_(options) {
  if (!options_.thresholds.empty()) {
    // Keras: the thresholds sorted, between -epsilon and 1 + epsilon; as its own evenly spaced ones when they are.
    check_range("AUC", options_.thresholds);
    std::sort(options_.thresholds.begin(), options_.thresholds.end());
    options_.num_thresholds = std::int64_t(options_.thresholds.size()) + 2;
    std::vector<double> ends{0.0};
    ends.insert(ends.end(), options_.thresholds.begin(), options_.thresholds.end());
    ends.push_back(1.0);
    if (!evenly_distributed(ends)) {
      values_ = {0.0 - kEpsilon};
      values_.insert(values_.end(), options_.thresholds.begin(), options_.thresholds.end());
      values_.push_back(1.0 + kEpsilon);
    }
  }
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
  // num_thresholds = 2 is Keras's [-epsilon, 1 + epsilon]: what ConfusionParams spaces evenly for 2 too. Thresholds
  // given, not evenly spaced: Keras compares the predictions as they are.
  ops::ConfusionParams p{.thresholds = options_.num_thresholds,
                         .from_logits = options_.from_logits,
                         .clip = values_.empty(),
                         .values = values_};
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
  nlohmann::ordered_json config{
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
  // Keras writes the thresholds it was given (sorted), after its other arguments.
  if (!options_.thresholds.empty()) config["thresholds"] = options_.thresholds;
  return config;
}

ThresholdMetric::ThresholdMetric(const ThresholdOptions& options, const char* default_name)
    : options_(options), name_(options.name.empty() ? default_name : options.name) {
  SYSTOLIC_CHECK(!options_.threshold || options_.thresholds.empty(),
                 "{}: give one threshold or a list of thresholds, not both", name_);
  if (options_.threshold) check_range(name_, {*options_.threshold});
  check_range(name_, options_.thresholds);
  count_ = options_.thresholds.empty() ? 1 : std::int64_t(options_.thresholds.size());
  even_ = evenly_distributed(options_.thresholds);
  SYSTOLIC_CHECK(options_.class_id >= -1, "{}: class_id {} is negative", name_, options_.class_id);
  SYSTOLIC_CHECK(options_.top_k >= 0, "{}: top_k {} is negative", name_, options_.top_k);
}

void ThresholdMetric::update_weighted(const Tensor& output, const Tensor& labels, const Tensor& weights,
                                      Tensor& state) const {
  ops::ConfusionParams p{.class_id = options_.class_id, .top_k = options_.top_k};
  if (options_.thresholds.empty()) {
    // Keras's default threshold: 0.5, or with top_k NEG_INF (every prediction of the top k).
    p.threshold = options_.threshold.value_or(options_.top_k > 0 ? -1e10 : 0.5);
  } else if (even_) {
    // Keras's evenly spaced thresholds: 0, 1/(n-1), ..., 1, predictions clipped to [0, 1].
    p.thresholds = count_, p.clip = true, p.exact_ends = true;
  } else {
    p.thresholds = count_, p.values = options_.thresholds;
  }
  ops::confusion_counts(output, labels, weights, state, p);
}

std::vector<double> ThresholdMetric::values(const double* state) const {
  std::vector<double> v(static_cast<std::size_t>(count_));
  for (std::int64_t t = 0; t < count_; ++t) v[t] = rate(state, count_, t);
  return v;
}

double ThresholdMetric::value(const double* state, double) const {
  double sum = 0;
  for (double v : values(state)) sum += v;
  return sum / double(count_);
}

nlohmann::ordered_json ThresholdMetric::get_config() const {
  using ojson = nlohmann::ordered_json;
  auto or_null = [](bool set, const ojson& v) { return set ? v : ojson(nullptr); };
  // Keras writes the thresholds as given: none, a number or a list.
  const ojson thresholds = !options_.thresholds.empty() ? ojson(options_.thresholds)
                           : options_.threshold         ? ojson(*options_.threshold)
                                                        : ojson(nullptr);
  return {{"thresholds", thresholds},
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

double Precision::rate(const double* state, std::int64_t count, std::int64_t t) const {
  Counts c(state, count);
  return divide_no_nan(c.tp[t], c.tp[t] + c.fp[t]);
}

double Recall::rate(const double* state, std::int64_t count, std::int64_t t) const {
  Counts c(state, count);
  return divide_no_nan(c.tp[t], c.tp[t] + c.fn[t]);
}

namespace {

// A config's list of thresholds: numbers (the range is the metric's to check).
std::vector<double> threshold_list(keras_object::StrictConfig& c, const json& t) {
  std::vector<double> out;
  for (const json& v : t) {
    if (!v.is_number()) c.fail("thresholds " + t.dump() + " is not a list of numbers");
    out.push_back(v.get<double>());
  }
  return out;
}

// AUC's config: Keras's arguments, refusing what systolic does not compute (label_weights without multi_label).
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
  if (c.present("thresholds")) {
    const json& t = c.raw("thresholds");
    if (!t.is_null() && !t.is_array()) c.fail("thresholds " + t.dump() + " is not a list of numbers");
    if (t.is_array()) {
      o.thresholds = threshold_list(c, t);
      if (o.thresholds.empty()) c.fail("thresholds [] is not supported (give at least one, or null)");
    }
  }
  return c.checked([&]() -> std::unique_ptr<Metric> { return std::make_unique<AUC>(o); });
}

// Precision's and Recall's thresholds: null (0.5), a number or a list (of one or more).
ThresholdOptions threshold_options(keras_object::StrictConfig& c, const std::string& name) {
  ThresholdOptions o{.name = name};
  const json& t = c.raw("thresholds");
  if (t.is_number()) {
    o.threshold = t.get<double>();
  } else if (t.is_array() && !t.empty()) {
    o.thresholds = threshold_list(c, t);
  } else if (!t.is_null()) {
    c.fail("thresholds " + t.dump() + " is not a number, a list of numbers or null");
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
        const ThresholdOptions o = threshold_options(c, name);
        return c.checked([&]() -> std::unique_ptr<Metric> { return std::make_unique<Precision>(o); });
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
        const ThresholdOptions o = threshold_options(c, name);
        return c.checked([&]() -> std::unique_ptr<Metric> { return std::make_unique<Recall>(o); });
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
