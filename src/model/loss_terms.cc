// The loss terms and post-update hooks of a model (src/model/loss_terms.h): Keras 3's semantics of regularizers
// and constraints, registered once per compile so that the training step's calls only run them.
#include <systolic/ops.h>
#include <systolic/regularizers.h>

#include "model/model_state.h"

namespace systolic {

void ModelState::collect_training_terms() {
  terms = TrainingTerms{};
  for (auto* l : weight_layers())
    for (auto& w : l->weights()) {
      if (!w.trainable) continue;
      Weight* weight = &w;  // layers keep their weights in place once built
      if (Regularizer r = w.regularizer) {
        // Keras 3 adds the penalty to every batch's loss, once: n times it in the totals; its gradient is the
        // penalty's, n * grad_scale = 1 for one model (under replicas each adds its share).
        terms.loss_terms.push_back({.node = -1,
                                    .add_loss =
                                        [r, weight](std::int64_t n, Tensor& total) {
                                          Tensor none;
                                          regularizers::apply(r, weight->value, total, none, double(n), 0.0);
                                        },
                                    .add_gradient =
                                        [r, weight](std::int64_t n, double grad_scale, LayerCall&, bool) {
                                          Tensor none;
                                          regularizers::apply(r, weight->value, none, weight->grad, 0.0,
                                                              double(n) * grad_scale);
                                        }});
      }
      if (Constraint c = w.constraint)
        terms.post_update.push_back([c, weight] { constraints::apply(c, weight->value); });
    }
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const NodeExec& e = nodes[i];
    if (!e.runs_layer() || !e.node->layer->activity_regularizer()) continue;
    Regularizer r = e.node->layer->activity_regularizer();
    Activation activation = e.node->layer->activation();
    // Keras 3 adds regularizer(output) / batch_size to the batch's loss: the totals hold n times that, the penalty
    // of the batch's outputs.
    terms.loss_terms.push_back(
        {.node = static_cast<int>(i),
         .add_loss =
             [r, this, i](std::int64_t, Tensor& total) {
               Tensor none;
               regularizers::apply(r, nodes[i].call.output, total, none, 1.0, 0.0);
             },
         .add_gradient =
             [r, activation](std::int64_t, double grad_scale, LayerCall& c, bool preactivation) {
               Tensor none;
               if (!preactivation) {
                 regularizers::apply(r, c.output, none, c.doutput, 0.0, grad_scale);
                 return;
               }
               // The output gradient is w.r.t. the logits: the penalty's gradient (w.r.t. the activated output)
               // goes through the activation's gradient first.
               Tensor d = Tensor::zeros(c.output.shape(), c.output.dtype(), c.output.device());
               regularizers::apply(r, c.output, none, d, 0.0, grad_scale);
               ops::activation_backward(activation, c.preactivation, c.output, d, d);
               ops::accumulate(d, c.doutput);
             }});
  }
}

}  // namespace systolic
