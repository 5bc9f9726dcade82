// Metrics: each adds what it counts of a batch to float64 sums (its state, summed over batches and replicas); the
// value shown is made from the state: total / samples for the per-sample means, or Keras's result() of the
// confusion counts (AUC, Precision, Recall, F1Score, FBetaScore). Each class is listed once, in
// src/metrics/registry.cc.
#pragma once

#include <systolic/tensor.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace systolic::metrics {

class Metric {
 public:
  virtual ~Metric() = default;
  // The key in logs and History: the name the user gave ("accuracy" or "sparse_categorical_accuracy").
  virtual std::string name() const = 0;
  // Keras's class ("SparseCategoricalAccuracy").
  virtual std::string class_name() const = 0;
  virtual std::unique_ptr<Metric> clone() const = 0;
  // Whether it reads integer labels (true), one-hot labels (false).
  virtual bool sparse_labels() const = 0;
  // Whether it reads the labels of a loss that takes integer labels (sparse) or not: by default, when
  // sparse_labels() says so; a metric of class ids (IoU) reads either.
  virtual bool takes_labels(bool sparse) const { return sparse_labels() == sparse; }
  // Called by compile with the model's output shape (no batch axis), before state_size(): a metric whose state
  // has a sum per output column (R2Score) sizes it here, or refuses the output.
  virtual void build(const Shape& output) { (void)output; }
  // How many float64 sums update() adds to: 1 for a per-sample mean, 4 per threshold for the confusion counts.
  virtual std::int64_t state_size() const { return 1; }
  // Adds the batch's counts to `state` (float64 [state_size()], on the output's device).
  virtual void update(const Tensor& output, const Tensor& labels, Tensor& state) const = 0;
  // Whether it reads the output layer's logits when the layer ends in softmax (Keras's TensorFlow backend computes a
  // crossentropy from them): the model then calls update_from_logits with the pre-softmax values instead of update
  // (which a metric that reads them overrides; by default, update on them).
  virtual bool reads_logits() const { return false; }
  virtual void update_from_logits(const Tensor& logits, const Tensor& labels, Tensor& state) const {
    update(logits, labels, state);
  }
  // Keras's weighted_metrics: whether the metric takes sample weights (WeighableMetric's do), and update() with
  // them: each sample's value counts its weight (`weights` [N], float32; float64 for float64 outputs), and the model
  // shows value(state, the weights' sum). update_weighted raises an Error for a metric that takes none.
  virtual bool takes_sample_weights() const { return false; }
  virtual void update_weighted(const Tensor& output, const Tensor& labels, const Tensor& weights,
                               Tensor& state) const;
  virtual void update_weighted_from_logits(const Tensor& logits, const Tensor& labels, const Tensor& weights,
                                           Tensor& state) const {
    update_weighted(logits, labels, weights, state);
  }
  // Whether a mask on the output weighs its values, as Keras's MeanMetricWrapper applies one (the accuracies, the
  // crossentropies, the means of element and row functions): the model then calls update_weighted with each row's
  // weight (ops::mask_weights: the mask, or the mask times the sample weights) and shows value() over their sum
  // (in samples). Keras's others (the confusion counts, IoU, R2Score, RootMeanSquaredError) count every row.
  virtual bool weighs_by_mask() const { return false; }
  // The value shown from the state summed over `samples` samples: by default result() of the per-sample mean
  // state[0] / samples.
  virtual double value(const double* state, double samples) const { return result(state[0] / samples); }
  // The value shown from the mean of what update() added per sample: that mean, or for RootMeanSquaredError its
  // square root.
  virtual double result(double mean) const { return mean; }
  // Keras 3's get_config() of the class's own arguments, in Keras's order, for a metric that has some (AUC's
  // num_thresholds, curve, ...); the registry writes name and dtype before them.
  virtual nlohmann::ordered_json get_config() const { return nlohmann::ordered_json::object(); }
};

// A metric whose state adds up each sample's part, which Keras's sample weights scale (the per-sample means, the
// confusion counts, the F-scores' counts): it takes weighted_metrics' weights; update is update_weighted without.
class WeighableMetric : public Metric {
 public:
  void update(const Tensor& output, const Tensor& labels, Tensor& state) const final {
    update_weighted(output, labels, Tensor(), state);
  }
  bool takes_sample_weights() const final { return true; }
};

// Keras's AUC: the area under the ROC or precision-recall curve from the confusion counts at num_thresholds
// thresholds spaced evenly over [0, 1] (predictions clipped to it), or at the thresholds given (sorted, with
// -epsilon and 1 + epsilon at the ends; predictions as they are unless the thresholds are evenly spaced, as Keras's
// is_evenly_distributed_thresholds finds them), accumulated over the batches. multi_label: an area per label (a
// column of the (batch, labels) output), and their mean (weighted by label_weights when given).
struct AUCOptions {
  std::int64_t num_thresholds = 200;  // with `thresholds`: their count + 2
  std::vector<double> thresholds;     // Keras's thresholds=[...], each in [0, 1]; empty: num_thresholds
  std::string curve = "ROC";          // or "PR"
  std::string summation_method = "interpolation";  // or "minoring", "majoring"
  bool from_logits = false;                        // predictions are logits (sigmoid first)
  std::string name = "auc";
  bool multi_label = false;
  std::vector<double> label_weights;  // multi_label: one per label, or empty (each weighs 1)
};
class AUC final : public WeighableMetric {
 public:
  explicit AUC(const AUCOptions& options = {});
  std::string name() const override { return options_.name; }
  std::string class_name() const override { return "AUC"; }
  std::unique_ptr<Metric> clone() const override { return std::make_unique<AUC>(*this); }
  bool sparse_labels() const override { return false; }
  void build(const Shape& output) override;
  std::int64_t state_size() const override { return 4 * options_.num_thresholds * labels_; }
  void update_weighted(const Tensor& output, const Tensor& labels, const Tensor& weights,
                       Tensor& state) const override;
  double value(const double* state, double samples) const override;
  nlohmann::ordered_json get_config() const override;

 private:
  AUCOptions options_;
  std::int64_t labels_ = 1;     // multi_label: the output's labels; else 1
  std::vector<double> values_;  // the thresholds given, with their ends, when not evenly spaced; else empty
  double area(const double* counts) const;
};

// Keras's Precision (tp / (tp + fp)) and Recall (tp / (tp + fn)) at one threshold or several, accumulated over the
// batches; with class_id, of that column of the predictions and labels only; with top_k, of each row's top_k
// predictions only (the others count as negative). Logs hold one number per metric: with several thresholds the
// value logged is the mean of the thresholds' values, which Keras's progress bar shows (Keras's logs, History and
// evaluate hold the list of them, which values() gives).
struct ThresholdOptions {
  std::optional<double> threshold;  // none: 0.5, or with top_k any prediction in the top k
  std::int64_t class_id = -1;       // -1: every prediction
  std::string name;                 // empty: "precision" / "recall"
  std::int64_t top_k = 0;           // 0: none
  // Keras's thresholds=[...] (a list, of one or more, each in [0, 1], in the order given), instead of threshold.
  std::vector<double> thresholds;
};
class ThresholdMetric : public WeighableMetric {
 public:
  std::string name() const override { return name_; }
  bool sparse_labels() const override { return false; }
  std::int64_t state_size() const override { return 4 * count_; }
  void update_weighted(const Tensor& output, const Tensor& labels, const Tensor& weights,
                       Tensor& state) const override;
  double value(const double* state, double samples) const override;
  nlohmann::ordered_json get_config() const override;
  // Keras's result() of the state: the value at each threshold, in the order given.
  std::vector<double> values(const double* state) const;

 protected:
  ThresholdMetric(const ThresholdOptions& options, const char* default_name);
  // The value at threshold t of `count` from the state's tp, fp, tn and fn rows.
  virtual double rate(const double* state, std::int64_t count, std::int64_t t) const = 0;
  ThresholdOptions options_;
  std::string name_;
  std::int64_t count_ = 1;  // the thresholds
  bool even_ = false;       // a list spaced evenly over [0, 1] (Keras's is_evenly_distributed_thresholds)
};
class Precision final : public ThresholdMetric {
 public:
  explicit Precision(const ThresholdOptions& options = {}) : ThresholdMetric(options, "precision") {}
  std::string class_name() const override { return "Precision"; }
  std::unique_ptr<Metric> clone() const override { return std::make_unique<Precision>(*this); }

 private:
  double rate(const double* state, std::int64_t count, std::int64_t t) const override;
};
class Recall final : public ThresholdMetric {
 public:
  explicit Recall(const ThresholdOptions& options = {}) : ThresholdMetric(options, "recall") {}
  std::string class_name() const override { return "Recall"; }
  std::unique_ptr<Metric> clone() const override { return std::make_unique<Recall>(*this); }

 private:
  double rate(const double* state, std::int64_t count, std::int64_t t) const override;
};

// Keras's PrecisionAtRecall, RecallAtPrecision, SensitivityAtSpecificity and SpecificityAtSensitivity: over
// num_thresholds thresholds spaced evenly over [0, 1], the best of one rate among the thresholds where the other
// reaches `value` (0 where none does), from the confusion counts accumulated over the batches; with class_id, of
// that column of the predictions and labels only.
enum class RateAt {
  precision_at_recall,
  recall_at_precision,
  sensitivity_at_specificity,
  specificity_at_sensitivity
};
struct RateAtOptions {
  double value = 0.5;  // in [0, 1]: the recall, precision, specificity or sensitivity to reach
  std::int64_t num_thresholds = 200;
  std::int64_t class_id = -1;  // -1: every prediction
  std::string name;            // empty: Keras's ("precision_at_recall", ...)
};
class RateAtMetric final : public WeighableMetric {
 public:
  RateAtMetric(RateAt kind, const RateAtOptions& options);
  std::string name() const override { return name_; }
  std::string class_name() const override;
  std::unique_ptr<Metric> clone() const override { return std::make_unique<RateAtMetric>(*this); }
  bool sparse_labels() const override { return false; }
  std::int64_t state_size() const override { return 4 * options_.num_thresholds; }
  void update_weighted(const Tensor& output, const Tensor& labels, const Tensor& weights,
                       Tensor& state) const override;
  double value(const double* state, double samples) const override;
  nlohmann::ordered_json get_config() const override;

 private:
  RateAt kind_;
  RateAtOptions options_;
  std::string name_;
};

// Keras's IoU metrics: per class c, IoU_c = tp_c / (tp_c + fp_c + fn_c + epsilon) from the confusion matrix of
// predicted and true classes accumulated over the batches (ops::class_confusion), averaged over the target classes
// whose denominator is not 0 (Keras 3.15's result()). IoU (target_class_ids), MeanIoU (every class), OneHotIoU and
// OneHotMeanIoU (one-hot labels: their argmax), BinaryIoU (two classes; a prediction >= threshold is class 1).
// Class ids are the values of the labels and predictions (sparse_y_true, sparse_y_pred), or their argmax.
enum class IoUKind { iou, mean_iou, one_hot_iou, one_hot_mean_iou, binary_iou };
struct IoUOptions {
  std::int64_t num_classes = 2;  // BinaryIoU: 2
  std::vector<std::int64_t>
      target_class_ids;  // IoU, OneHotIoU, BinaryIoU ({0, 1} when empty); MeanIoU: every class
  std::optional<std::int64_t> ignore_class;  // not BinaryIoU
  bool sparse_y_true = true;                 // IoU, MeanIoU (the one-hot kinds: false)
  std::optional<bool> sparse_y_pred;         // none: true for IoU and MeanIoU, false for the one-hot kinds
  double threshold = 0.5;                    // BinaryIoU
  std::string name;                          // empty: Keras's ("io_u", "mean_io_u", ...)
};
class IoUMetric final : public WeighableMetric {
 public:
  IoUMetric(IoUKind kind, const IoUOptions& options);
  std::string name() const override { return name_; }
  std::string class_name() const override;
  std::unique_ptr<Metric> clone() const override { return std::make_unique<IoUMetric>(*this); }
  bool sparse_labels() const override { return options_.sparse_y_true; }
  bool takes_labels(bool sparse) const override { return options_.sparse_y_true || !sparse; }
  std::int64_t state_size() const override { return options_.num_classes * options_.num_classes; }
  void update_weighted(const Tensor& output, const Tensor& labels, const Tensor& weights,
                       Tensor& state) const override;
  double value(const double* state, double samples) const override;
  nlohmann::ordered_json get_config() const override;

 private:
  IoUKind kind_;
  IoUOptions options_;
  std::string name_;
  nlohmann::ordered_json own_config() const;
};

// Keras's R2Score (coefficient of determination) per output column, from the columns' sums of targets, squared
// targets and squared residuals (each row's times its sample's weight in weighted_metrics) accumulated over the
// batches, averaged over the columns uniformly or weighted by their variance; adjusted for num_regressors when it
// is not 0 (by the count of values, unweighted, as Keras's num_samples). The output must be (batch, columns).
struct R2ScoreOptions {
  std::string class_aggregation = "uniform_average";  // or "variance_weighted_average"
  std::int64_t num_regressors = 0;
  std::string name = "r2_score";
};
class R2Score final : public WeighableMetric {
 public:
  explicit R2Score(const R2ScoreOptions& options = {});
  std::string name() const override { return options_.name; }
  std::string class_name() const override { return "R2Score"; }
  std::unique_ptr<Metric> clone() const override { return std::make_unique<R2Score>(*this); }
  bool sparse_labels() const override { return false; }
  void build(const Shape& output) override;
  std::int64_t state_size() const override { return 4 * columns_; }
  void update_weighted(const Tensor& output, const Tensor& labels, const Tensor& weights,
                       Tensor& state) const override;
  double value(const double* state, double samples) const override;
  nlohmann::ordered_json get_config() const override;

 private:
  R2ScoreOptions options_;
  std::int64_t columns_ = 1;
};

// Keras's FBetaScore: (1 + beta^2) * precision * recall / (beta^2 * precision + recall) of each class (a column
// of the (batch, classes) output), from the classes' true positives, false positives, false negatives and label
// sums accumulated over the batches (ops::f_score_counts), as Keras 3.15's result() computes it (epsilon 1e-7).
// A prediction is positive above `threshold`, or without one when it is a maximum of its row (every tied maximum;
// not 0). average: none, a score per class; "micro", one score of the counts summed over the classes; "macro",
// the classes' mean; "weighted", their mean weighted by the label sums. Logs hold one number per metric: with
// average none the value logged is the mean of the classes' scores, which Keras's progress bar shows (Keras's
// logs, History and evaluate hold the list of them, which scores() gives).
struct FBetaScoreOptions {
  std::optional<std::string> average;  // none, "micro", "macro" or "weighted"
  double beta = 1.0;                   // > 0
  std::optional<double> threshold;     // in (0, 1]; none: each row's maximum
  std::string name = "fbeta_score";
};
class FBetaScore : public WeighableMetric {
 public:
  explicit FBetaScore(const FBetaScoreOptions& options = {}) : FBetaScore(options, "FBetaScore") {}
  std::string name() const override { return options_.name; }
  std::string class_name() const override { return "FBetaScore"; }
  std::unique_ptr<Metric> clone() const override { return std::make_unique<FBetaScore>(*this); }
  bool sparse_labels() const override { return false; }
  void build(const Shape& output) override;
  std::int64_t state_size() const override { return 4 * classes_; }
  void update_weighted(const Tensor& output, const Tensor& labels, const Tensor& weights,
                       Tensor& state) const override;
  double value(const double* state, double samples) const override;
  nlohmann::ordered_json get_config() const override;
  // Keras's result() of the state: the score of each class (average none), else the one average.
  std::vector<double> scores(const double* state) const;

 protected:
  FBetaScoreOptions options_;
  std::int64_t classes_ = 1;
  FBetaScore(const FBetaScoreOptions& options, const char* class_name);
};

// Keras's F1Score: FBetaScore with beta 1.
struct F1ScoreOptions {
  std::optional<std::string> average;  // none, "micro", "macro" or "weighted"
  std::optional<double> threshold;     // in (0, 1]; none: each row's maximum
  std::string name = "f1_score";
};
class F1Score final : public FBetaScore {
 public:
  explicit F1Score(const F1ScoreOptions& options = {});
  std::string class_name() const override { return "F1Score"; }
  std::unique_ptr<Metric> clone() const override { return std::make_unique<F1Score>(*this); }
  nlohmann::ordered_json get_config() const override;
};

// Keras's Mean and Sum, for use outside compile (a custom loop's running loss): update_state(values, sample_weight)
// reduces the values to one per sample as Keras's reduce_to_samplewise_values does (the weights squeezed or
// expanded to the values' rank, the values averaged (Mean) or summed (Sum) down to the weights' rank and multiplied
// by the weights broadcast to them, then reduced per sample) and adds them to Keras's total, in float64; Mean also
// counts the weights (the samples without weights). Error on weights that do not broadcast to the values.
class Mean {
 public:
  explicit Mean(std::string name = "mean") : name_(std::move(name)) {}
  const std::string& name() const { return name_; }
  void update_state(const Tensor& values, const Tensor& sample_weight = Tensor());
  // total / count (0 when the count is 0, Keras's divide_no_nan).
  double result() const { return count_ == 0 ? 0.0 : total_ / count_; }
  void reset_state() { total_ = count_ = 0; }

 private:
  std::string name_;
  double total_ = 0, count_ = 0;
};
class Sum {
 public:
  explicit Sum(std::string name = "sum") : name_(std::move(name)) {}
  const std::string& name() const { return name_; }
  void update_state(const Tensor& values, const Tensor& sample_weight = Tensor());
  double result() const { return total_; }
  void reset_state() { total_ = 0; }

 private:
  std::string name_;
  double total_ = 0;
};

// A metric as compile takes it: a name ("accuracy", "auc") or a metric made with options
// (metrics::AUC({.curve = "PR"})).
class MetricArg {
 public:
  MetricArg(const char* name) : name_(name) {}
  MetricArg(std::string name) : name_(std::move(name)) {}
  MetricArg(const Metric& metric) : metric_(metric.clone()) {}
  // The name, or the metric's name.
  std::string name() const { return metric_ ? metric_->name() : name_; }
  // The metric given, or null for a name.
  const Metric* metric() const { return metric_.get(); }

 private:
  std::string name_;
  std::shared_ptr<const Metric> metric_;
};

// The metric compile makes of a name: a class or function name of Keras's ("sparse_categorical_accuracy",
// "CategoricalAccuracy", "mae", "binary_accuracy"), or "accuracy"/"acc", which means, as Keras's compile resolves
// it, binary_accuracy on an output of one unit (binary_output), else the one that fits the loss's labels (sparse
// labels -> sparse_categorical_accuracy). Error when it is unknown or reads other labels than the loss. The
// elementwise metrics (binary_accuracy with threshold 0.5, and the mean of a loss function: mean_squared_error,
// mean_absolute_error, ..., binary_crossentropy from probabilities) are ops::elementwise_loss without a gradient.
std::unique_ptr<Metric> get(const std::string& name, bool loss_has_sparse_labels, bool binary_output = false);
// The metric of a MetricArg: get() of its name, or a copy of its metric (which must read the loss's labels).
std::unique_ptr<Metric> make(const MetricArg& metric, bool loss_has_sparse_labels,
                             bool binary_output = false);
// The names get() takes, one per entry.
std::vector<std::string> names();

}  // namespace systolic::metrics
