// What compile registers besides the compiled loss and the optimizer, as Keras's trainer and optimizer apply them:
// - loss terms (Keras's model.losses): each trainable weight's regularizer penalty and each layer call's activity
//   penalty. compute_loss adds every term to the batch's loss total; backward adds their gradients (a weight's
//   before the layers run backward, a node output's into that output's gradient before its layer does);
// - post-update hooks: each trainable weight's constraint, run by apply_gradients after the optimizer's update
//   (Keras 3's BaseOptimizer.apply).
// ModelState::collect_training_terms (loss_terms.cc) makes them from the layers when the weights are packed
// (compile, set_trainable).
#pragma once

#include <systolic/layer.h>

#include <cstdint>
#include <functional>
#include <vector>

namespace systolic {

struct LossTerm {
  // The node whose output it penalises, or -1 for a weight's penalty.
  int node = -1;
  // Adds the term to the batch's loss total, which holds n times the batch's loss: n times a weight's penalty; an
  // activity penalty (the sum over the batch's outputs, divided by the batch size in Keras) once.
  std::function<void(std::int64_t n, Tensor& total)> add_loss;
  // Adds the gradient of grad_scale times the term's part of the batch's summed loss: into its weight's gradient,
  // or into `call`'s output gradient (call.doutput; when the loss's gradient is w.r.t. the output layer's logits,
  // `preactivation`, through the activation's gradient first).
  std::function<void(std::int64_t n, double grad_scale, LayerCall& call, bool preactivation)> add_gradient;
};

struct TrainingTerms {
  std::vector<LossTerm> loss_terms;
  std::vector<std::function<void()>> post_update;
  // The gradient scale of the last compute_loss (0: none asked), which backward gives the loss terms' gradients.
  double grad_scale = 0;
};

}  // namespace systolic
