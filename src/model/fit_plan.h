// Fit's plan: what Keras's fit settles before its loop (the data adapter's checks, the validation split, the
// strategy's rules, what the callbacks are told), checked and decided once, before the first step, so that
// Model::fit (training.cc) only runs the loop.
#pragma once

#include <systolic/callbacks.h>
#include <systolic/model.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace systolic {

class ModelState;
namespace distribute {
class ReplicaGroup;
}

struct FitPlan {
  // The training samples: the first floor(n * (1 - validation_split)) of x and y (Keras splits before any
  // shuffling), and the validation data (validation_data, or the rest).
  Arrays x, y;
  // The training samples' weights (sample_weight's first rows, or class_weight's weights of y's classes) in the
  // model's weight dtype; undefined without either.
  Tensor w;
  std::optional<ValidationData> validation;
  std::int64_t validation_batch_size = 0;
  // The strategy's replicas (null: the model is one replica). Under replicas batches are built on the host, split
  // evenly, and a layer that asks for synchronised statistics gets them.
  distribute::ReplicaGroup* replicas = nullptr;
  // What the callbacks are told: progress from the chief only (every worker computes the same values), and the
  // History's keys (loss, metrics, then val_ ones).
  int verbose = 0;
  std::vector<std::string> history_keys;

  callbacks::Params callback_params(const FitOptions& o, std::int64_t steps) const {
    return {.verbose = verbose, .epochs = o.epochs, .steps = steps};
  }

  // Checks the model, the data and the options, naming what is wrong (an Error), and settles the rest.
  static FitPlan make(ModelState& s, const Arrays& x, const Arrays& y, const FitOptions& o);
};

// Keras's sample_weight of `samples` samples checked ([N] or [N, 1], numbers; or, when every output with a loss has
// the same rows, (T,) for outputs (T, C), one per row: [N, T]) and converted to the model's weight dtype on the host
// ([N], or [N, T]); undefined stays undefined. `what` names the caller in errors.
Tensor sample_weights(const ModelState& s, const Tensor& sample_weight, std::int64_t samples,
                      const char* what);
// Keras's class_weight_to_sample_weights: each sample's weight is class_weight[its label's class] (1 when not
// named); the class of a label of several values is its argmax, of one value its rounded value.
// With several outputs Keras refuses class_weight.
Tensor class_weights(const ModelState& s, const std::map<int, double>& class_weight, const Arrays& y);

}  // namespace systolic
