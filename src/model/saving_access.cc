#include "model/saving_access.h"

#include "model/model_state.h"

namespace systolic::saving_access {

std::vector<Layer*> weight_layers(const Model& model) {
  return ModelInternals::state(model)->weight_layers();
}

std::vector<const metrics::Metric*> metrics(const Model& model) {
  return ModelInternals::state(model)->all_metrics();
}

std::vector<OutputCompile> compile_settings(const Model& model) {
  std::vector<OutputCompile> out;
  for (auto& h : ModelInternals::state(model)->heads) {
    OutputCompile c{.output = h.name, .loss_weight = h.loss_weight};
    if (h.loss) c.loss = *h.loss;
    for (auto& m : h.metrics) c.metrics.emplace_back(*m);
    for (auto& m : h.weighted_metrics) c.weighted_metrics.emplace_back(*m);
    out.push_back(std::move(c));
  }
  return out;
}

bool is_nested_model(const Layer& layer) {
  return as_model_layer(layer) != nullptr;
}

distribute::ReplicaGroup* replicas(const Model& model) {
  return ModelInternals::state(model)->replicas.get();
}

}  // namespace systolic::saving_access
