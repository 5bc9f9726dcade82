// FitPlan::make: every check fit makes before its first step (fit_plan.h).
#include "model/fit_plan.h"

#include <fmt/ranges.h>

#include <cmath>
#include <map>
#include <optional>

#include "distribute/replica_group.h"
#include "model/model_state.h"

namespace systolic {

namespace {

void check_options(const FitOptions& o) {
  SYSTOLIC_CHECK(o.batch_size > 0, "fit: batch_size must be positive, got {}", o.batch_size);
  SYSTOLIC_CHECK(o.validation_split >= 0 && o.validation_split < 1,
                 "fit: validation_split must be in [0, 1), got {}", o.validation_split);
  SYSTOLIC_CHECK(o.verbose >= 0 && o.verbose <= 2, "fit: verbose must be 0, 1 or 2, got {}", o.verbose);
  SYSTOLIC_CHECK(o.validation_freq >= 1, "fit: validation_freq must be a positive number of epochs, got {}",
                 o.validation_freq);
  SYSTOLIC_CHECK(o.validation_batch_size >= 0,
                 "fit: validation_batch_size must be positive (or 0: batch_size), got {}",
                 o.validation_batch_size);
  o.augmentation.check();
  SYSTOLIC_CHECK(o.workers >= 0 && o.workers <= 64, "fit: workers must be 0 to 64, got {}", o.workers);
  SYSTOLIC_CHECK(o.max_queue_size >= 1, "fit: max_queue_size must be at least 1, got {}", o.max_queue_size);
}

// Keras: the validation set is the last fraction of the samples, taken before any shuffling; the training set is
// the first floor(n * (1 - validation_split)) samples, and a split that leaves either side empty is an error.
std::int64_t training_samples(std::int64_t n, const FitOptions& o) {
  if (o.validation_data || o.validation_split == 0) return n;
  auto n_train = static_cast<std::int64_t>(std::floor(double(n) * (1.0 - o.validation_split)));
  SYSTOLIC_CHECK(
      n_train > 0 && n_train < n,
      "fit: the training data has {} samples, which is not sufficient to split it into a validation "
      "and training set as specified by validation_split={}: give more data or another "
      "validation_split",
      n, o.validation_split);
  return n_train;
}

// What a strategy of several replicas asks of fit: batches that divide among them, built on the host, and
// synchronised batch norm wherever a layer asks for it (and then samples for every replica in every batch).
void check_replicas(const ModelState& s, const distribute::ReplicaGroup& group, std::int64_t n_train,
                    const FitOptions& o) {
  const int replicas = group.size();
  const auto& strategy = group.strategy();
  SYSTOLIC_CHECK(
      o.batch_size % replicas == 0,
      "fit: batch_size {} does not divide among the {} replicas of strategy {}: use a multiple of {} (each "
      "replica takes batch_size / {} samples of every batch)",
      o.batch_size, replicas, strategy.name(), replicas, replicas);
  SYSTOLIC_CHECK(
      o.batches != FitOptions::Batches::on_device,
      "fit: on-device batches are not supported with {} replicas (strategy {}); batches are built on "
      "the host and split",
      replicas, strategy.name());
  // Keras's BatchNormalization(synchronized=True) takes the global batch's statistics under a strategy; here a
  // strategy's sync_batch_norm does that for every batch-norm layer, and replicas without it would not.
  if (!strategy.options().sync_batch_norm)
    for (auto* l : s.weight_layers())
      SYSTOLIC_CHECK(
          !l->synchronized(),
          "fit: layer '{}' has synchronized=True, which needs synchronised batch norm across the {} "
          "replicas: use a strategy with sync_batch_norm (train --sync-batch-norm)",
          l->name(), replicas);
  std::int64_t last = n_train % o.batch_size;
  SYSTOLIC_CHECK(!strategy.options().sync_batch_norm || last == 0 || last >= replicas,
                 "fit: with synchronised batch norm every replica needs samples in every batch, but the last "
                 "batch of {} training samples in batches of {} has {} samples for {} replicas; use another "
                 "batch size or sample count",
                 n_train, o.batch_size, last, replicas);
}

}  // namespace

Tensor sample_weights(const ModelState& s, const Tensor& w, std::int64_t samples, const char* what) {
  if (!w.defined()) return w;
  // Keras's temporal sample weights: one per row of every output with a loss, when they all have the same rows
  // (outputs (T, C): weights (N, T)).
  std::optional<Shape> rows;
  bool same = true;
  for (const auto& h : s.heads)
    if (h.loss) {
      const Shape r = mask_shape(s.nodes[std::size_t(h.node)]);
      same = same && (!rows || *rows == r);
      rows = r;
    }
  const bool temporal = same && rows && rows->rank() > 0 && rows->numel() > 1;
  if (temporal && w.rank() >= 2 && w.dim(0) == samples && w.shape().without_batch() == *rows)
    return w.to(s.weight_dtype());
  SYSTOLIC_CHECK((w.rank() == 1 || (w.rank() == 2 && w.dim(1) == 1)) && w.dim(0) == samples,
                 "{}: sample_weight has shape {}; it takes one weight per sample: ({},){}", what,
                 w.shape().str(), samples,
                 temporal ? fmt::format(", or one per row of the outputs: ({}, {})", samples,
                                        fmt::join(rows->dims(), ", "))
                          : "");
  return w.reshape({samples}).to(s.weight_dtype());
}

Tensor class_weights(const ModelState& s, const std::map<int, double>& class_weight, const Arrays& ys) {
  SYSTOLIC_CHECK(
      ys.size() == 1,
      "fit: class_weight is not supported for models with several outputs ({}); give sample_weight "
      "(Keras: \"`class_weight` is only supported for Models with a single output.\")",
      ys.size());
  const Tensor& y = ys[0];
  const std::int64_t n = y.dim(0), per_sample = n ? y.numel() / n : 0;
  SYSTOLIC_CHECK(y.rank() <= 2, "fit: class_weight needs labels of one class per sample; y has shape {}",
                 y.shape().str());
  const std::vector<double> labels = y.to_doubles();
  std::vector<double> w(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const double* row = labels.data() + i * per_sample;
    std::int64_t cls = 0;
    if (per_sample == 1) {
      cls = static_cast<std::int64_t>(std::nearbyint(row[0]));  // numpy's round: half to even
    } else {
      for (std::int64_t c = 1; c < per_sample; ++c)
        if (row[c] > row[cls]) cls = c;  // np.argmax: the first maximum
    }
    auto it = class_weight.find(static_cast<int>(cls));
    w[static_cast<std::size_t>(i)] = it == class_weight.end() ? 1.0 : it->second;
  }
  return Tensor::from_vector(w, {n}).to(s.weight_dtype());
}

FitPlan FitPlan::make(ModelState& s, const Arrays& x, const Arrays& y, const FitOptions& o) {
  SYSTOLIC_CHECK(s.compiled(), "fit: compile model '{}' first", s.name);
  s.check_trainable("fit");
  s.check_xy(x, &y, "fit");
  check_options(o);
  FitPlan plan;
  const std::int64_t n = x.samples(), n_train = training_samples(n, o);
  SYSTOLIC_CHECK(n_train > 0, "fit: no training samples");
  plan.x = x.slice(0, n_train);
  plan.y = y.slice(0, n_train);
  SYSTOLIC_CHECK(
      !o.sample_weight.defined() || o.class_weight.empty(),
      "fit: sample_weight and class_weight cannot be given together (Keras: \"You cannot `class_weight` "
      "and `sample_weight` at the same time.\")");
  const Tensor w = sample_weights(s, o.sample_weight, n, "fit");
  if (w.defined()) plan.w = w.slice(0, n_train);
  if (!o.class_weight.empty()) plan.w = class_weights(s, o.class_weight, plan.y);
  plan.validation = o.validation_data;
  if (n_train < n)
    plan.validation = ValidationData{x.slice(n_train, n), y.slice(n_train, n),
                                     w.defined() ? w.slice(n_train, n) : Tensor()};
  if (plan.validation) {
    s.check_xy(plan.validation->x, &plan.validation->y, "fit (validation data)");
    plan.validation->sample_weight = sample_weights(s, plan.validation->sample_weight,
                                                    plan.validation->x.samples(), "fit (validation data)");
  }
  plan.validation_batch_size = o.validation_batch_size > 0 ? o.validation_batch_size : o.batch_size;
  if (o.augmentation.enabled())
    SYSTOLIC_CHECK(x.size() == 1 && (x[0].rank() == 3 || x[0].rank() == 4),
                   "fit: augmentation needs one input of images (N, H, W, C); x has {}",
                   x.size() == 1 ? "shape " + x[0].shape().str() : std::to_string(x.size()) + " arrays");
  plan.replicas = s.replicas.get();
  if (plan.replicas) check_replicas(s, *plan.replicas, n_train, o);
  plan.verbose = s.chief ? o.verbose : 0;
  const std::vector<std::string> names = s.log_names();
  for (const char* prefix : {"", "val_"})
    if (*prefix == 0 || plan.validation)
      for (auto& k : names) plan.history_keys.push_back(prefix + k);
  return plan;
}

}  // namespace systolic
