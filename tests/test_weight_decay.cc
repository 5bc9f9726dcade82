// Keras 3's weight decay against real Keras (tests/fixtures/weight_decay, written by tests/reference/weight_decay.py
// with Keras 3.15): AdamW (its default 0.004 and a set one) and the weight_decay argument of Adam, SGD and RMSprop,
// each read from the optimizer Keras serialized, train a model Keras saved for 6 steps to Keras's weights; configs
// round-trip through both file forms; and the decay is the op's formula, before the update.
#include <gmock/gmock.h>
#include <systolic/systolic.h>

#include <nlohmann/json.hpp>

#include "json_fixture.h"
#include "optimizers/registry.h"
#include "test_util.h"

using namespace systolic;
using json = nlohmann::json;
using systolic::testing::error_of;
using ::testing::HasSubstr;

namespace {
const json& fixture() {
  return systolic::testing::json_fixture("weight_decay/weight_decay.json");
}
std::string model_path() {
  return systolic::testing::source_dir() + "/tests/fixtures/weight_decay/model.keras";
}
}  // namespace

TEST(WeightDecay, KerasFitsGiveKerasWeights) {
  const json& f = fixture();
  Tensor x = Tensor::from_vector(f["x"].get<std::vector<double>>(), {12, 3}).to(DType::float32);
  Tensor y = Tensor::from_vector(f["y"].get<std::vector<std::int32_t>>(), {12});
  ASSERT_EQ(f["cases"].size(), 5u);
  for (const json& c : f["cases"]) {
    SCOPED_TRACE(c["serialized"].dump());
    auto opt = optimizers::deserialize(c["serialized"]);
    EXPECT_EQ(opt->weight_decay(), c["serialized"]["config"]["weight_decay"].get<double>());
    Model m = load_model(model_path());
    m.compile(*opt, "sparse_categorical_crossentropy");
    m.fit(x, y, {.batch_size = 4, .epochs = 2, .verbose = 0, .shuffle = false});
    std::vector<double> got;
    for (const Tensor& w : m.get_weights())
      for (double v : w.to_doubles()) got.push_back(v);
    auto want = c["weights"].get<std::vector<double>>();
    ASSERT_EQ(got.size(), want.size());
    EXPECT_LT(systolic::testing::normalised_max_error(Tensor::from_vector(got, {std::int64_t(got.size())}),
                                                      Tensor::from_vector(want, {std::int64_t(want.size())})),
              2e-6);
  }
}

TEST(WeightDecay, ConfigsRoundTripAsKerasWritesThem) {
  optimizers::AdamW adamw(0.01);
  EXPECT_EQ(adamw.weight_decay(), 0.004);
  json k3 = optimizers::serialize(adamw, keras_object::Form::keras3);
  EXPECT_EQ(k3["class_name"], "AdamW");
  EXPECT_EQ(k3["config"]["name"], "adam_w");
  EXPECT_EQ(k3["config"]["weight_decay"], 0.004);
  json h5 = optimizers::serialize(adamw, keras_object::Form::h5);
  EXPECT_EQ(h5["config"]["weight_decay"], 0.004);
  for (const json& s : {k3, h5}) {
    auto back = optimizers::deserialize(s);
    EXPECT_EQ(back->name(), "AdamW");
    EXPECT_EQ(back->weight_decay(), 0.004);
  }
  // Keras's own serialized AdamW, with every field Keras writes.
  for (const json& c : fixture()["cases"]) {
    auto opt = optimizers::deserialize(c["serialized"]);
    json again = optimizers::serialize(*opt, keras_object::Form::keras3);
    EXPECT_EQ(again["class_name"], c["serialized"]["class_name"]);
    EXPECT_EQ(again["config"]["weight_decay"], c["serialized"]["config"]["weight_decay"]);
  }
  // No weight decay: Keras's None.
  optimizers::Adam adam;
  EXPECT_TRUE(optimizers::serialize(adam, keras_object::Form::keras3)["config"]["weight_decay"].is_null());
  EXPECT_FALSE(optimizers::serialize(adam, keras_object::Form::h5)["config"].contains("weight_decay"));
  EXPECT_EQ(optimizers::get("adamw")->name(), "AdamW");
  // A .keras file keeps it.
  systolic::testing::TempDir dir;
  Model m = load_model(model_path());
  m.compile(optimizers::SGD(0.1, 0.9), "sparse_categorical_crossentropy");
  {
    auto sgd = optimizers::SGD(0.1, 0.9);
    sgd.set_weight_decay(0.05);
    m.compile(sgd, "sparse_categorical_crossentropy");
  }
  m.save(dir.file("m.keras"));
  EXPECT_EQ(load_model(dir.file("m.keras")).optimizer().weight_decay(), 0.05);
}

TEST(WeightDecay, BadValuesAreNamed) {
  auto bad = [](const json& config) {
    return error_of([&] { optimizers::deserialize(json{{"class_name", "AdamW"}, {"config", config}}); });
  };
  EXPECT_THAT(bad({{"weight_decay", nullptr}}), HasSubstr("AdamW needs one"));
  EXPECT_THAT(bad({{"weight_decay", -0.1}}), HasSubstr("weight_decay"));
  EXPECT_THAT(bad({{"weight_decay", "big"}}), HasSubstr("weight_decay"));
}

TEST(WeightDecay, TheOpDecaysByTheLoadedRate) {
  Tensor w = Tensor::from_vector<float>({1.0f, -2.0f, 0.5f}, {3});
  Tensor lr = Tensor::full({1}, 0.1, DType::float64);
  ops::decay_weights(w, lr, 0.5);
  EXPECT_THAT(w.to_doubles(), ::testing::ElementsAre(0.95f, -1.9f, 0.475f));
  EXPECT_THAT(error_of([&] { ops::decay_weights(w, lr, -1); }), HasSubstr("decay"));
}
