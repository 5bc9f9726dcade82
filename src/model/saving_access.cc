#include "model/saving_access.h"

#include "model/model_state.h"

namespace systolic::saving_access {

std::vector<Layer*> weight_layers(const Model& model) {
  return ModelInternals::state(model)->weight_layers();
}

std::vector<const metrics::Metric*> metrics(const Model& model) {
  std::vector<const metrics::Metric*> out;
  for (auto& m : ModelInternals::state(model)->metrics) out.push_back(m.get());
  return out;
}

bool is_nested_model(const Layer& layer) {
  return as_model_layer(layer) != nullptr;
}

distribute::ReplicaGroup* replicas(const Model& model) {
  return ModelInternals::state(model)->replicas.get();
}

}  // namespace systolic::saving_access
