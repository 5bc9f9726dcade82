// A model's results against what Keras recorded in a fixture, shared by the tests of Keras fixtures
// (test_keras_training, test_sample_weights, test_multi_output).
#pragma once

#include <gtest/gtest.h>
#include <systolic/systolic.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_util.h"

namespace systolic::testing {

// model_from_json's error for a Keras model config whose first layer of class `class_name` is changed by
// `change(layer)` (the layer's whole JSON: config and inbound nodes): how tests check that a bad option is refused
// by name.
template <class Change>
std::string error_with_layer_changed(const nlohmann::json& config, const std::string& class_name,
                                     Change change) {
  nlohmann::json c = config;
  for (auto& l : c["config"]["layers"])
    if (l["class_name"] == class_name) {
      change(l);
      break;
    }
  return error_of([&] { model_from_json(c.dump()); });
}

// The model's weights (get_weights()) flattened in order, as the fixtures hold Keras's.
inline std::vector<double> flat_weights(const Model& m) {
  std::vector<double> got;
  for (const Tensor& w : m.get_weights())
    for (double v : w.to_doubles()) got.push_back(v);
  return got;
}

// Each score evaluate gave, by its name in metrics_names(), against Keras's evaluate(return_dict=True): the same
// names, each value within `tolerance` (relative: times max(1, |value|)).
inline void expect_scores_as_keras(Model& m, const std::vector<double>& scores, const nlohmann::json& keras,
                                   double tolerance, bool relative) {
  auto names = m.metrics_names();
  ASSERT_EQ(names.size(), scores.size());
  EXPECT_EQ(names.size(), keras.size()) << keras.dump();
  for (std::size_t i = 0; i < names.size(); ++i) {
    ASSERT_TRUE(keras.contains(names[i])) << names[i] << " is not among Keras's " << keras.dump();
    EXPECT_NEAR(scores[i], keras[names[i]].get<double>(),
                tolerance * (relative ? std::max(1.0, std::abs(scores[i])) : 1.0))
        << names[i];
  }
}

}  // namespace systolic::testing
