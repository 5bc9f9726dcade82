// Keras's IoU metrics (IoUMetric in include/systolic/metrics.h): IoU, MeanIoU, OneHotIoU, OneHotMeanIoU and
// BinaryIoU. ops::class_confusion adds each batch's confusion matrix of true (rows) and predicted (columns) classes
// to the state; the value is Keras 3.15's result() of the matrix (keras/src/metrics/iou_metrics.py), in double.
#include <systolic/ops.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "metrics/registry.h"

namespace systolic::metrics {

using keras_object::json;

namespace {
const char* const kClasses[] = {"IoU", "MeanIoU", "OneHotIoU", "OneHotMeanIoU", "BinaryIoU"};
// Keras's default names: the classes in snake case, as its to_snake_case writes them.
const char* const kNames[] = {"io_u", "mean_io_u", "one_hot_io_u", "one_hot_mean_io_u", "binary_io_u"};

bool one_hot(IoUKind k) {
  return k == IoUKind::one_hot_iou || k == IoUKind::one_hot_mean_iou;
}
bool every_class(IoUKind k) {
  return k == IoUKind::mean_iou || k == IoUKind::one_hot_mean_iou;
}
}  // namespace

IoUMetric::IoUMetric(IoUKind kind, const IoUOptions& options) : kind_(kind), options_(options) {
  name_ = options_.name.empty() ? kNames[static_cast<int>(kind)] : options_.name;
  if (kind == IoUKind::binary_iou) {
    options_.num_classes = 2;
    if (options_.target_class_ids.empty()) options_.target_class_ids = {0, 1};
    SYSTOLIC_CHECK(!options_.ignore_class, "{}: BinaryIoU takes no ignore_class", name_);
    SYSTOLIC_CHECK(std::isfinite(options_.threshold), "{}: threshold {} is not finite", name_,
                   options_.threshold);
  }
  SYSTOLIC_CHECK(options_.num_classes >= 1, "{}: num_classes {} must be >= 1", name_, options_.num_classes);
  if (one_hot(kind)) options_.sparse_y_true = false;
  if (!options_.sparse_y_pred) options_.sparse_y_pred = !one_hot(kind);
  if (every_class(kind)) {
    options_.target_class_ids.clear();
    for (std::int64_t c = 0; c < options_.num_classes; ++c) options_.target_class_ids.push_back(c);
  }
  SYSTOLIC_CHECK(!options_.target_class_ids.empty(), "{}: target_class_ids is empty", name_);
  for (std::int64_t c : options_.target_class_ids)
    SYSTOLIC_CHECK(c >= 0 && c < options_.num_classes,
                   "{}: target class id {} is out of range, which is [0, {})", name_, c,
                   options_.num_classes);
}

std::string IoUMetric::class_name() const {
  return kClasses[static_cast<int>(kind_)];
}

void IoUMetric::update_weighted(const Tensor& output, const Tensor& labels, const Tensor& weights,
                                Tensor& state) const {
  ops::class_confusion(output, labels, weights, state,
                       {.classes = options_.num_classes,
                        .argmax_predictions = kind_ != IoUKind::binary_iou && !*options_.sparse_y_pred,
                        .argmax_labels = !options_.sparse_y_true && labels.dtype() != DType::int32,
                        .thresholded = kind_ == IoUKind::binary_iou,
                        .threshold = options_.threshold,
                        .has_ignore_class = options_.ignore_class.has_value(),
                        .ignore_class = options_.ignore_class.value_or(0),
                        .integer_weights = true});  // Keras casts them to the metric's int64
}

double IoUMetric::value(const double* cm, double) const {
  const std::int64_t C = options_.num_classes;
  double sum = 0, valid = 0;
  for (std::int64_t c : options_.target_class_ids) {
    double row = 0, column = 0;  // true c; predicted c
    for (std::int64_t k = 0; k < C; ++k) {
      row += cm[c * C + k];
      column += cm[k * C + c];
    }
    const double tp = cm[c * C + c], denominator = row + column - tp;
    if (denominator > 1e-9) {
      sum += tp / (denominator + 1e-7);  // Keras: backend.epsilon()
      valid += 1;
    }
  }
  return sum / (valid + 1e-7);
}

// Keras's IoU metrics keep their confusion matrix as int64, and write that dtype (the registry writes the rest).
nlohmann::ordered_json IoUMetric::get_config() const {
  using ojson = nlohmann::ordered_json;
  ojson config = own_config();
  config["dtype"] = "int64";
  return config;
}

nlohmann::ordered_json IoUMetric::own_config() const {
  using ojson = nlohmann::ordered_json;
  const IoUOptions& o = options_;
  const ojson ignore = o.ignore_class ? ojson(*o.ignore_class) : ojson(nullptr);
  switch (kind_) {
    case IoUKind::iou:
      return {{"num_classes", o.num_classes},
              {"target_class_ids", o.target_class_ids},
              {"ignore_class", ignore},
              {"sparse_y_true", o.sparse_y_true},
              {"sparse_y_pred", *o.sparse_y_pred},
              {"axis", -1}};
    case IoUKind::mean_iou:
      return {{"num_classes", o.num_classes},
              {"ignore_class", ignore},
              {"sparse_y_true", o.sparse_y_true},
              {"sparse_y_pred", *o.sparse_y_pred},
              {"axis", -1}};
    case IoUKind::one_hot_iou:
      return {{"num_classes", o.num_classes},
              {"target_class_ids", o.target_class_ids},
              {"ignore_class", ignore},
              {"sparse_y_pred", *o.sparse_y_pred},
              {"axis", -1}};
    case IoUKind::one_hot_mean_iou:
      return {{"num_classes", o.num_classes},
              {"ignore_class", ignore},
              {"sparse_y_pred", *o.sparse_y_pred},
              {"axis", -1}};
    case IoUKind::binary_iou:
      return {{"target_class_ids", o.target_class_ids}, {"threshold", o.threshold}};
  }
  return ojson::object();
}

namespace {

template <IoUKind kind>
std::unique_ptr<Metric> iou_from_config(keras_object::StrictConfig& c, const std::string& name) {
  IoUOptions o{.name = name};
  if (kind != IoUKind::binary_iou) {
    auto n = c.optional_integer("num_classes", 1);
    if (!n) c.fail("num_classes is required");
    o.num_classes = *n;
  }
  if (kind == IoUKind::iou || kind == IoUKind::one_hot_iou || kind == IoUKind::binary_iou) {
    const json ids = kind == IoUKind::binary_iou && !c.present("target_class_ids")
                         ? json::array({0, 1})
                         : c.raw("target_class_ids");
    if (!ids.is_array()) c.fail("target_class_ids " + ids.dump() + " must be a list of class ids");
    for (const json& id : ids) {
      if (!id.is_number_integer()) c.fail("target_class_ids " + ids.dump() + " must be a list of class ids");
      o.target_class_ids.push_back(id.get<std::int64_t>());
    }
  }
  if (kind == IoUKind::binary_iou) {
    o.threshold = c.number("threshold", 0.5);
  } else {
    o.ignore_class = c.optional_integer("ignore_class", std::numeric_limits<std::int64_t>::min());
    if (!one_hot(kind)) o.sparse_y_true = c.boolean("sparse_y_true", true);
    o.sparse_y_pred = c.boolean("sparse_y_pred", !one_hot(kind));
    c.off("axis", -1);
  }
  return c.checked([&]() -> std::unique_ptr<Metric> { return std::make_unique<IoUMetric>(kind, o); });
}

}  // namespace

SYSTOLIC_METRIC_NEEDING_ARGUMENTS(io_u, IoU, iou_from_config<IoUKind::iou>)
SYSTOLIC_METRIC_NEEDING_ARGUMENTS(mean_io_u, MeanIoU, iou_from_config<IoUKind::mean_iou>)
SYSTOLIC_METRIC_NEEDING_ARGUMENTS(one_hot_io_u, OneHotIoU, iou_from_config<IoUKind::one_hot_iou>)
SYSTOLIC_METRIC_NEEDING_ARGUMENTS(one_hot_mean_io_u, OneHotMeanIoU,
                                  iou_from_config<IoUKind::one_hot_mean_iou>)
SYSTOLIC_METRIC_NEEDING_ARGUMENTS(binary_io_u, BinaryIoU, iou_from_config<IoUKind::binary_iou>)

}  // namespace systolic::metrics
