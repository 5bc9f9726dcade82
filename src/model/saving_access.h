// What saving (src/saving) reads of a model beyond its public API; model_state.h stays the model's own. The layers
// that own the weights, in Keras's weight order (model.layers with nested models opened up); the compiled metric
// objects; and the replicas of a model under a strategy, whose policy (distribute/replica_group.h) says who writes
// files and how weights loaded into the first replica reach the others.
#pragma once

#include <systolic/model.h>

#include <vector>

namespace systolic::distribute {
class ReplicaGroup;
}

namespace systolic::saving_access {

std::vector<Layer*> weight_layers(const Model& model);
std::vector<const metrics::Metric*> metrics(const Model& model);
// What compile was given, one entry per output in the model's order (output named; loss and metrics copies of the
// compiled ones; a loss weight only where one was given).
std::vector<OutputCompile> compile_settings(const Model& model);
// Whether a layer is a nested model (Keras's Functional or Sequential in model.layers).
bool is_nested_model(const Layer& layer);
// Null for a model of one replica.
distribute::ReplicaGroup* replicas(const Model& model);

}  // namespace systolic::saving_access
