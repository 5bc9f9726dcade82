// The fixtures of tests/fixtures/multi_output (tests/reference/multi_output.py): a case's arrays by their npz names,
// and its fit as Keras ran it. Shared by tests/test_multi_output.cc and tests/keras_export.cc (--multi-output).
#pragma once

#include <systolic/systolic.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace systolic::testing {

using NpzArrays = std::map<std::string, Tensor>;

// The arrays named in `names` (a JSON list of npz names); Error naming one the npz lacks.
inline Arrays npz_arrays(const NpzArrays& a, const nlohmann::json& names) {
  Arrays out;
  for (auto& n : names) {
    const std::string name = n.get<std::string>();
    auto it = a.find(name);
    SYSTOLIC_CHECK(it != a.end(), "the fixture's npz has no array '{}'", name);
    out.push_back(it->second);
  }
  return out;
}

// The fixture's fit `record` (batch_size, epochs, the npz names of x, y, validation data and sample weights,
// validation_split; shuffle off) run on m.
inline History fit_as_keras(Model& m, const NpzArrays& a, const nlohmann::json& record) {
  FitOptions o{.batch_size = record["batch_size"].get<std::int64_t>(),
               .epochs = record["epochs"].get<int>(),
               .verbose = 0,
               .validation_split = record.value("validation_split", 0.0),
               .shuffle = false};
  if (record.contains("validation_data"))
    o.validation_data = ValidationData{npz_arrays(a, record["validation_data"]["x"]),
                                       npz_arrays(a, record["validation_data"]["y"])};
  if (record.contains("sample_weight"))
    o.sample_weight = npz_arrays(a, nlohmann::json::array({record["sample_weight"]}))[0];
  return m.fit(npz_arrays(a, record["x"]), npz_arrays(a, record["y"]), o);
}

}  // namespace systolic::testing
