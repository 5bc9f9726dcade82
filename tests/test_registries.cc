// The registries of Keras objects (src/optimizers, src/losses, src/metrics, src/regularizers registry.cc): every
// registered class by every name Keras takes for it, its config written as Keras writes it and read back, strict
// reading, and the optimizers' slots in Keras 3's order in files. Each check runs over the whole registry, so a
// class added to a registry is checked here without a line of this file changing.
#include <gmock/gmock.h>
#include <systolic/systolic.h>

#include <nlohmann/json.hpp>

#include "io/hdf5.h"
#include "losses/registry.h"
#include "metrics/registry.h"
#include "optimizers/registry.h"
#include "saving/keras_zip.h"
#include "small_model.h"
#include "test_util.h"

namespace sy = systolic;
using json = nlohmann::ordered_json;
using sy::keras_object::Form;
using sy::testing::error_of;
using sy::testing::max_abs_diff;
using sy::testing::TempDir;
using ::testing::HasSubstr;

namespace {

// Each optimizer with non-default arguments (momentum, so SGD and RMSprop keep slots), by name.
std::unique_ptr<sy::optimizers::Optimizer> configured(const std::string& name) {
  auto opt = sy::optimizers::get(name);
  json c = sy::optimizers::serialize(*opt, Form::keras3);
  c["config"]["learning_rate"] = 0.02;
  if (c["config"].contains("momentum")) c["config"]["momentum"] = 0.5;
  return sy::optimizers::deserialize(c);
}

}  // namespace

TEST(OptimizerRegistry, EveryNameKerasTakesGivesItsClass) {
  ASSERT_FALSE(sy::optimizers::names().empty());
  for (auto& name : sy::optimizers::names()) {
    auto opt = sy::optimizers::get(name);
    // keras.optimizers.get matches names in any case, and the class name too.
    std::string upper = name;
    for (auto& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    EXPECT_EQ(sy::optimizers::get(upper)->name(), opt->name()) << name;
    EXPECT_EQ(sy::optimizers::get(opt->name())->name(), opt->name()) << name;
  }
  EXPECT_THAT(error_of([] { sy::optimizers::get("yogi"); }),
              HasSubstr("unknown optimizer 'yogi' (known: adam"));
}

TEST(OptimizerRegistry, ConfigsRoundTripInBothForms) {
  for (auto& name : sy::optimizers::names()) {
    auto opt = configured(name);
    for (Form form : {Form::keras3, Form::h5}) {
      json c = sy::optimizers::serialize(*opt, form);
      auto back = sy::optimizers::deserialize(c);
      EXPECT_EQ(sy::optimizers::serialize(*back, form), c) << name;
      EXPECT_EQ(back->learning_rate(), 0.02) << name;
      EXPECT_EQ(back->slot_specs().size(), opt->slot_specs().size()) << name;
      // Strict: an argument no reader takes is refused by name; one systolic does not implement, when on.
      json bad = c;
      bad["config"]["bogus"] = 1;
      EXPECT_THAT(error_of([&] { sy::optimizers::deserialize(bad); }),
                  HasSubstr("unsupported argument 'bogus'"))
          << name;
      bad = c;
      bad["config"]["decay"] = 0.5;  // Keras 2's decay, off in Keras 3
      EXPECT_THAT(error_of([&] { sy::optimizers::deserialize(bad); }),
                  HasSubstr("'decay'=0.5 is not supported"))
          << name;
      // gradient_accumulation_steps is every optimizer's: it round-trips, and Keras's least is 2.
      bad = c;
      bad["config"]["gradient_accumulation_steps"] = 2;
      EXPECT_EQ(sy::optimizers::deserialize(bad)->gradient_accumulation_steps(), 2) << name;
      EXPECT_EQ(sy::optimizers::serialize(*sy::optimizers::deserialize(bad),
                                          form)["config"]["gradient_accumulation_steps"],
                2)
          << name;
      bad["config"]["gradient_accumulation_steps"] = 1;
      EXPECT_THAT(error_of([&] { sy::optimizers::deserialize(bad); }),
                  HasSubstr("gradient_accumulation_steps"))
          << name;
      // Gradient clipping is every optimizer's: it round-trips.
      bad = c;
      bad["config"]["clipnorm"] = 1.0;
      EXPECT_EQ(sy::optimizers::deserialize(bad)->clipnorm(), 1.0) << name;
      EXPECT_EQ(sy::optimizers::serialize(*sy::optimizers::deserialize(bad), form)["config"]["clipnorm"], 1.0)
          << name;
    }
    // A name alone takes the class's defaults (Keras's SGD: 0.01).
    EXPECT_EQ(sy::optimizers::deserialize(json(name))->learning_rate(),
              sy::optimizers::get(name)->learning_rate());
  }
  EXPECT_EQ(sy::optimizers::deserialize(json("sgd"))->learning_rate(), 0.01);
  // tf.keras 2.11+ and Keras 2.0 forms.
  auto tf = sy::optimizers::deserialize(
      json{{"class_name", "Custom>Adam"},
           {"config", {{"name", "Adam"}, {"is_legacy_optimizer", false}, {"lr", 0.5}}}});
  EXPECT_EQ(tf->name(), "Adam");
  EXPECT_EQ(tf->learning_rate(), 0.5);
}

// Keras 3's get_config, key for key, as Keras 3.15 wrote it in tests/fixtures/keras_zip/adam.keras.
TEST(OptimizerRegistry, Keras3FormIsKeras3s) {
  auto k = sy::keras_io::read_keras_archive_file(sy::testing::source_dir() +
                                                 "/tests/fixtures/keras_zip/adam.keras");
  json keras = k.config["compile_config"]["optimizer"];
  json ours = sy::optimizers::serialize(sy::optimizers::Adam(0.01), Form::keras3);
  keras["config"]["name"] = "adam";         // Keras numbers a second optimizer adam_1
  keras["config"]["learning_rate"] = 0.01;  // a float32 variable there
  EXPECT_EQ(ours.dump(), keras.dump());
  EXPECT_EQ(sy::optimizers::serialize(sy::optimizers::SGD(), Form::keras3)["config"]["name"], "SGD");
  EXPECT_EQ(sy::optimizers::serialize(sy::optimizers::RMSprop(), Form::keras3)["config"]["name"], "rmsprop");
}

// Every optimizer's state (slots and step count) survives each file kind, so the next step is the same.
TEST(OptimizerRegistry, StateRoundTripsThroughEveryFileKind) {
  TempDir tmp;
  auto x = sy::testing::random_tensor({4, 6, 6, 2}, 6);
  auto y = sy::Tensor::from_vector(std::vector<float>{0, 1, 2, 3}, {4});
  for (auto& name : sy::optimizers::names())
    for (std::string file : {"m.h5", "m.keras"}) {
      auto a = sy::testing::small_model(1);
      a.compile(*configured(name), "sparse_categorical_crossentropy");
      a.train_on_batch(x, y);
      a.train_on_batch(x, y);
      a.save(tmp.file(file));
      auto b = sy::load_model(tmp.file(file));
      EXPECT_EQ(b.optimizer().name(), a.optimizer().name());
      EXPECT_EQ(b.optimizer().iterations(), 2) << name << " " << file;
      a.train_on_batch(x, y);
      b.train_on_batch(x, y);
      EXPECT_EQ(max_abs_diff(a.trainable_parameters(), b.trainable_parameters()), 0.0) << name << " " << file;
    }
}

// Keras 3 orders optimizer/vars by its build's calls: Adam's momentum and velocity interleaved per variable,
// RMSprop's velocities, then its momentums.
TEST(OptimizerRegistry, Keras3VariablesFollowEachOptimizersBuild) {
  TempDir tmp;
  auto x = sy::testing::random_tensor({4, 6, 6, 2}, 6);
  auto y = sy::Tensor::from_vector(std::vector<float>{0, 1, 2, 3}, {4});
  for (const char* name : {"adam", "rmsprop"}) {
    auto m = sy::testing::small_model(1);
    m.compile(*configured(name), "sparse_categorical_crossentropy");
    m.train_on_batch(x, y);
    m.save_weights(tmp.file("w.weights.h5"));
    auto vars = sy::hdf5::read_file(tmp.file("w.weights.h5")).group("optimizer/vars");
    auto& opt = m.optimizer();
    // The trainable weights' sizes, in the flat buffers' order.
    std::vector<std::int64_t> sizes;
    for (auto& l : m.layers())
      for (auto& w : l->weights())
        if (w.trainable) sizes.push_back(w.value.numel());
    std::vector<std::pair<std::size_t, std::size_t>> want;  // (variable, slot)
    if (std::string(name) == "adam")
      for (std::size_t v = 0; v < sizes.size(); ++v) want.insert(want.end(), {{v, 0}, {v, 1}});
    else
      for (std::size_t s = 0; s < 2; ++s)
        for (std::size_t v = 0; v < sizes.size(); ++v) want.emplace_back(v, s);
    ASSERT_EQ(vars.children().size(), 2 + want.size()) << name;
    for (std::size_t i = 0; i < want.size(); ++i) {
      auto [v, s] = want[i];
      std::int64_t at = 0;
      for (std::size_t j = 0; j < v; ++j) at += sizes[j];
      auto slot = opt.slots()[s].second.slice(at, at + sizes[v]).to_doubles();
      auto file = vars.read_float32(std::to_string(2 + i)).to_doubles();
      ASSERT_EQ(file.size(), slot.size()) << name << " variable " << 2 + i;
      for (std::size_t e = 0; e < slot.size(); ++e) ASSERT_FLOAT_EQ(file[e], slot[e]) << name << " " << i;
    }
  }
}

TEST(LossRegistry, EveryNameAndConfig) {
  ASSERT_FALSE(sy::losses::names().empty());
  for (auto& name : sy::losses::names()) {
    auto loss = sy::losses::get(name);
    EXPECT_EQ(sy::losses::get(loss->class_name())->name(), loss->name());
    // Keras's defaults: the function's name, in both forms.
    for (Form form : {Form::keras3, Form::h5})
      EXPECT_EQ(sy::losses::serialize(*loss, form), json(loss->name()));
    // The class's config, read back.
    json keras3 = sy::keras_object::serialized(
        "keras.losses", loss->class_name(), {{"name", loss->name()}, {"reduction", "sum_over_batch_size"}});
    keras3["config"].update(loss->get_config());
    EXPECT_EQ(sy::losses::deserialize(keras3)->get_config(), loss->get_config()) << name;
    keras3["config"]["bogus"] = 1;
    EXPECT_THAT(error_of([&] { sy::losses::deserialize(keras3); }),
                HasSubstr("unsupported argument 'bogus'"));
    keras3["config"].erase("bogus");
    keras3["config"]["reduction"] = "sum";
    EXPECT_THAT(error_of([&] { sy::losses::deserialize(keras3); }),
                HasSubstr("reduction \"sum\" is not supported"));
  }
  EXPECT_EQ(sy::losses::get("mse")->class_name(), "MeanSquaredError");
  EXPECT_EQ(sy::losses::get("MSE")->class_name(), "MeanSquaredError");
  EXPECT_THAT(error_of([] { sy::losses::get("dice"); }), HasSubstr("unknown loss 'dice'"));
  // A loss with other arguments: Keras 3's whole get_config in a .keras, the changed ones in a .h5.
  sy::losses::SparseCategoricalCrossentropy logits({.from_logits = true});
  EXPECT_EQ(sy::losses::serialize(logits, Form::keras3).dump(),
            R"({"module":"keras.losses","class_name":"SparseCategoricalCrossentropy","config":{"name":)"
            R"("sparse_categorical_crossentropy","reduction":"sum_over_batch_size","from_logits":true,)"
            R"("ignore_class":null},"registered_name":null})");
  EXPECT_EQ(sy::losses::serialize(logits, Form::h5).dump(),
            R"({"class_name":"SparseCategoricalCrossentropy","config":{"from_logits":true}})");
  for (Form form : {Form::keras3, Form::h5})
    EXPECT_TRUE(sy::losses::deserialize(sy::losses::serialize(logits, form))->from_logits());
}

TEST(MetricRegistry, EveryNameAndConfig) {
  ASSERT_FALSE(sy::metrics::names().empty());
  for (auto& name : sy::metrics::names())
    for (bool sparse : {true, false}) {
      std::unique_ptr<sy::metrics::Metric> m;
      try {
        m = sy::metrics::get(name, sparse);
      } catch (const sy::Error&) {
        continue;  // reads the other labels
      }
      // A class with arguments of its own (AUC) is named as Keras names it ("auc" for "AUC") and written as its
      // serialized object in both forms.
      const bool own_config = !m->get_config().empty();
      if (!own_config) {
        EXPECT_EQ(m->name(), name);
      }
      json h5 = sy::metrics::serialize(*m, Form::h5);
      EXPECT_EQ(h5["class_name"], m->class_name());
      EXPECT_EQ(sy::metrics::from_config(h5).name(), m->name());
      json keras3 = sy::metrics::serialize(*m, Form::keras3);
      EXPECT_EQ(keras3, own_config ? json(sy::keras_object::serialized("keras.metrics", m->class_name(),
                                                                       h5["config"]))
                                   : json(name));
    }
  EXPECT_EQ(sy::metrics::get("acc", true)->class_name(), "SparseCategoricalAccuracy");
  EXPECT_EQ(sy::metrics::get("accuracy", false)->class_name(), "CategoricalAccuracy");
  EXPECT_THAT(error_of([] { sy::metrics::get("sparse_categorical_accuracy", false); }),
              HasSubstr("reads integer labels but the loss takes dense labels"));
  // "accuracy" on an output of one unit is Keras's BinaryAccuracy.
  EXPECT_EQ(sy::metrics::get("accuracy", false, true)->class_name(), "BinaryAccuracy");
  EXPECT_EQ(sy::metrics::get("acc", true, true)->class_name(), "SparseCategoricalAccuracy");
  // tf.keras 2.11+'s wrapper names the function.
  EXPECT_EQ(
      sy::metrics::from_config(
          json{{"class_name", "MeanMetricWrapper"},
               {"config", {{"name", "acc"}, {"dtype", "float32"}, {"fn", "sparse_categorical_accuracy"}}}})
          .name(),
      "acc");
  EXPECT_THAT(error_of([] {
                sy::metrics::from_config(
                    json{{"class_name", "PearsonCorrelation"}, {"config", {{"name", "accuracy"}}}});
              }),
              HasSubstr("metric class 'PearsonCorrelation' is not supported"));
  // A class that needs its arguments names what is missing.
  EXPECT_THAT(error_of([] {
                sy::metrics::from_config(json{{"class_name", "MeanIoU"}, {"config", {{"name", "miou"}}}});
              }),
              HasSubstr("num_classes is required"));
}

TEST(RegularizerRegistry, EveryClassByEveryName) {
  for (auto& cls : sy::regularizers::names()) {
    auto r = sy::regularizers::deserialize(json(cls));
    ASSERT_TRUE(r) << cls;
    EXPECT_EQ(r->class_name(), cls);
    EXPECT_EQ(sy::regularizers::deserialize(sy::regularizers::serialize(r)), r) << cls;
  }
  for (auto& cls : sy::constraints::names()) {
    auto c = sy::constraints::deserialize(json(cls));
    ASSERT_TRUE(c) << cls;
    EXPECT_EQ(c->class_name(), cls);
    EXPECT_EQ(sy::constraints::deserialize(sy::constraints::serialize(c)), c) << cls;
  }
  // Keras 3's snake_case names.
  EXPECT_EQ(sy::regularizers::deserialize("orthogonal_regularizer")->class_name(), "OrthogonalRegularizer");
  EXPECT_EQ(sy::regularizers::deserialize("l1l2"), sy::regularizers::L1L2());
  EXPECT_EQ(sy::constraints::deserialize("min_max_norm"), sy::constraints::MinMaxNorm());
  EXPECT_FALSE(sy::regularizers::deserialize(nullptr));
  EXPECT_NE(sy::regularizers::L1(0.1), sy::regularizers::L1(0.2));
  EXPECT_NE(sy::regularizers::L1(0.1), sy::regularizers::L1L2(0.1, 0.0));
}
