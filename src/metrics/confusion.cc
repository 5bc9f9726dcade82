// Keras's metrics of confusion counts: AUC (ROC or PR, Keras's three summation methods) and Precision and Recall
// at one threshold. ops::confusion_counts adds each batch's true/false positives/negatives per threshold to the
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

void AUC::update(const Tensor& output, const Tensor& labels, Tensor& state) const {
  // num_thresholds = 2 is Keras's [-epsilon, 1 + epsilon]: what ConfusionParams spaces evenly for 2 too.
  ops::confusion_counts(
      output, labels, state,
      {.thresholds = options_.num_thresholds, .from_logits = options_.from_logits, .clip = true});
}

double AUC::value(const double* state, double) const {
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
  return {{"num_thresholds", options_.num_thresholds},
          {"curve", options_.curve},
          {"summation_method", options_.summation_method},
          {"multi_label", false},
          {"num_labels", nullptr},
          {"label_weights", nullptr},
          {"from_logits", options_.from_logits}};
}

ThresholdMetric::ThresholdMetric(const ThresholdOptions& options, const char* default_name)
    : options_(options), name_(options.name.empty() ? default_name : options.name) {
  SYSTOLIC_CHECK(std::isfinite(options_.threshold), "{}: threshold {} is not finite", name_,
                 options_.threshold);
  SYSTOLIC_CHECK(options_.class_id >= -1, "{}: class_id {} is negative", name_, options_.class_id);
}

void ThresholdMetric::update(const Tensor& output, const Tensor& labels, Tensor& state) const {
  ops::confusion_counts(output, labels, state,
                        {.threshold = options_.threshold, .class_id = options_.class_id});
}

nlohmann::ordered_json ThresholdMetric::get_config() const {
  // Keras writes null for its default, 0.5.
  return {{"thresholds", options_.threshold == 0.5 ? nlohmann::ordered_json(nullptr)
                                                   : nlohmann::ordered_json(options_.threshold)},
          {"top_k", nullptr},
          {"class_id", options_.class_id < 0 ? nlohmann::ordered_json(nullptr)
                                             : nlohmann::ordered_json(options_.class_id)}};
}

double Precision::value(const double* state, double) const {
  return divide_no_nan(state[0], state[0] + state[1]);
}

double Recall::value(const double* state, double) const {
  return divide_no_nan(state[0], state[0] + state[3]);
}

namespace {

// AUC's config: Keras's arguments, refusing what systolic does not compute (multi_label, label_weights, thresholds
// of its own).
std::unique_ptr<Metric> auc_from_config(keras_object::StrictConfig& c, const std::string& name) {
  AUCOptions o{.name = name};
  const double n = c.number("num_thresholds", 200);
  if (n != std::floor(n) || n <= 1) c.fail("num_thresholds must be an integer > 1");
  o.num_thresholds = static_cast<std::int64_t>(n);
  o.curve = c.string("curve", "ROC");
  o.summation_method = c.string("summation_method", "interpolation");
  o.from_logits = c.boolean("from_logits", false);
  c.off("multi_label", false);
  c.off("num_labels");
  c.off("label_weights");
  c.off("thresholds");
  try {
    return std::make_unique<AUC>(o);
  } catch (const Error& e) {
    c.fail(e.what());
  }
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
  c.off("top_k");
  const json& k = c.raw("class_id");
  if (k.is_number_integer() && k.get<std::int64_t>() >= 0) {
    o.class_id = k.get<std::int64_t>();
  } else if (!k.is_null()) {
    c.fail("class_id " + k.dump() + " must be a non-negative integer or null");
  }
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

}  // namespace systolic::metrics
