// Keras's optimizers against real Keras (tests/fixtures/optimizers/trajectories.json, written by
// tests/reference/optimizers.py with Keras 3.15 in float64): each optimizer, read from the config Keras serialized,
// takes Keras's ten steps on two variables to Keras's values within 1e-6, ends with Keras's slots, and writes
// Keras's config back; the rule optimizers' state survives .keras and .h5 files so that training resumes exactly.
#include <gmock/gmock.h>
#include <systolic/systolic.h>

#include <nlohmann/json.hpp>

#include "json_fixture.h"
#include "optimizers/registry.h"
#include "small_model.h"
#include "test_util.h"

using namespace systolic;
using json = nlohmann::json;
using systolic::testing::error_of;
using ::testing::HasSubstr;

namespace {

const json& fixture() {
  return systolic::testing::json_fixture("optimizers/trajectories.json");
}

Tensor vector_of(const json& values) {
  auto v = values.get<std::vector<double>>();
  return Tensor::from_vector(v, {std::int64_t(v.size())});
}

double max_abs_error(const std::vector<double>& got, const std::vector<double>& want) {
  EXPECT_EQ(got.size(), want.size());
  double e = 0;
  for (std::size_t i = 0; i < got.size() && i < want.size(); ++i) e = std::max(e, std::abs(got[i] - want[i]));
  return e;
}

const json* keras_variable(const json& variables, const std::string& suffix) {
  for (auto& [path, values] : variables.items())
    if (path.ends_with("/" + suffix)) return &values;
  return nullptr;
}

}  // namespace

TEST(Optimizers, KerasTrajectoriesInFloat64) {
  const json& f = fixture();
  std::vector<double> initial = f["k"].get<std::vector<double>>();
  for (double v : f["b"].get<std::vector<double>>()) initial.push_back(v);
  ASSERT_EQ(f["cases"].size(), 43u);
  for (const json& c : f["cases"]) {
    SCOPED_TRACE(c["serialized"].dump());
    auto opt = optimizers::deserialize(c["serialized"]);
    Tensor params = Tensor::from_vector(initial, {std::int64_t(initial.size())});
    for (std::size_t step = 0; step < f["grads"].size(); ++step) {
      opt->apply(params, vector_of(f["grads"][step]),
                 {{.shape = {3, 2}, .path = "k"}, {.shape = {4}, .path = "b"}});
      EXPECT_LT(max_abs_error(params.to_doubles(), c["steps"][step].get<std::vector<double>>()), 1e-6)
          << "step " << step + 1;
    }
    // The state Keras ends with: the step count, each slot, and the variables after them (Nadam's u_product).
    const json& vars = c["variables"];
    ASSERT_NE(keras_variable(vars, "iteration"), nullptr);
    EXPECT_EQ(opt->iterations(), (*keras_variable(vars, "iteration"))[0].get<double>());
    // The slots in Keras's order (optimizer.variables after iteration and learning_rate), each of Keras's shape and
    // values: the order .keras files hold.
    const json& list = c["variable_list"];
    const std::size_t head = opt->learning_rate_schedule() ? 1 : 2;
    auto order = opt->keras3_slot_order();
    ASSERT_EQ(list.size(), head + order.size() + opt->keras3_scalar_variables().size());
    for (std::size_t j = 0; j < order.size(); ++j) {
      auto [variable, slot] = order[j];
      const json& keras = list[head + j];
      SCOPED_TRACE(keras["path"].get<std::string>() + " as " + opt->slots()[slot].first);
      Tensor view = opt->slot_view(slot, variable);
      EXPECT_EQ(view.shape(), Shape(keras["shape"].get<std::vector<std::int64_t>>()));
      EXPECT_LT(max_abs_error(view.to_doubles(), keras["values"].get<std::vector<double>>()), 1e-6);
    }
    auto scalars = opt->keras3_scalar_variables();
    const json* extra =
        nullptr;  // Keras names it "variable", "variable_1", ... (an unnamed backend.Variable)
    for (auto& [path, values] : vars.items())
      if (path.substr(path.rfind('/') + 1).starts_with("variable")) extra = &values;
    ASSERT_EQ(scalars.size(), extra ? 1u : 0u);
    if (extra) {
      EXPECT_NEAR(scalars[0], (*extra)[0].get<double>(), 1e-12);
    }
  }
}

TEST(Optimizers, WriteKerasConfigsBack) {
  for (const json& c : fixture()["cases"]) {
    SCOPED_TRACE(c["serialized"].dump());
    auto opt = optimizers::deserialize(c["serialized"]);
    json again = optimizers::serialize(*opt, keras_object::Form::keras3);
    EXPECT_EQ(again["class_name"], c["serialized"]["class_name"]);
    json want = c["serialized"]["config"], got = again["config"];
    want.erase("name");  // Keras numbers the names of the optimizers it made ("adam_1")
    got.erase("name");
    EXPECT_EQ(got, want);
    // And back: the same optimizer.
    auto back = optimizers::deserialize(again);
    EXPECT_EQ(back->name(), opt->name());
    json round = optimizers::serialize(*back, keras_object::Form::keras3);
    EXPECT_EQ(round, again);
  }
}

TEST(Optimizers, EveryKerasNameAndDefault) {
  for (const char* n : {"adam", "adamw", "sgd", "rmsprop", "adamax", "nadam", "adagrad", "adadelta", "lion",
                        "ftrl", "lamb", "adafactor", "muon"}) {
    SCOPED_TRACE(n);
    auto opt = optimizers::get(n);
    EXPECT_EQ(opt->learning_rate(), n == std::string("sgd") ? 0.01 : 0.001);
    EXPECT_THAT(optimizers::names(), ::testing::Contains(n));
  }
  EXPECT_EQ(optimizers::get("Nadam")->name(), "Nadam");
  auto adagrad = optimizers::get("adagrad");
  Tensor p = Tensor::zeros({3}, DType::float64);
  adagrad->build(p);
  EXPECT_EQ(adagrad->slots()[0].second.to_doubles(),
            std::vector<double>(3, 0.1));  // initial_accumulator_value
}

// Muon steps a matrix by its orthogonalised momentum unless Keras's _should_use_adamw says AdamW: any other rank, an
// embedding's path (any case) unless exclude_embeddings is false, a path a regular expression of exclude_layers finds
// (re.search: anywhere in it).
TEST(Optimizers, MuonChoosesAdamWAsKerasDoes) {
  optimizers::Muon muon;
  using V = optimizers::TrainableVariable;
  EXPECT_FALSE(muon.uses_adamw(V{.shape = {4, 3}, .path = "dense/kernel"}));
  EXPECT_TRUE(muon.uses_adamw(V{.shape = {3}, .path = "dense/bias"}));
  EXPECT_TRUE(muon.uses_adamw(V{.shape = {3, 3, 2, 4}, .path = "conv2d/kernel"}));
  EXPECT_TRUE(muon.uses_adamw(V{.shape = {100, 8}, .path = "token_Embedding/embeddings"}));
  optimizers::Muon::Options o;
  o.exclude_embeddings = false;
  o.exclude_layers = {"dense_[0-9]+"};
  optimizers::Muon other(0.01, o);
  EXPECT_FALSE(other.uses_adamw(V{.shape = {100, 8}, .path = "embedding/embeddings"}));
  EXPECT_TRUE(other.uses_adamw(V{.shape = {4, 3}, .path = "block/dense_12/kernel"}));
  EXPECT_FALSE(other.uses_adamw(V{.shape = {4, 3}, .path = "dense/kernel"}));
  // The velocity slot only for the AdamW variables, as Keras makes it.
  Tensor p = Tensor::zeros({12 + 3});
  muon.build(p, {V{.shape = {4, 3}, .path = "dense/kernel"}, V{.shape = {3}, .path = "dense/bias"}});
  EXPECT_FALSE(muon.slot_view(1, 0).defined());
  EXPECT_EQ(muon.slot_view(1, 1).shape(), Shape{3});
  EXPECT_EQ(muon.slots()[1].second.numel(), 3);
  EXPECT_EQ(muon.keras3_slot_order(),
            (std::vector<std::pair<std::size_t, std::size_t>>{{0, 0}, {1, 0}, {1, 1}}));
  json bad = {{"class_name", "Muon"}, {"config", {{"exclude_layers", {"dense_("}}}}};
  EXPECT_THAT(error_of([&] { optimizers::deserialize(bad); }), HasSubstr("not a regular expression"));
}

TEST(Optimizers, RefuseWhatKerasRefuses) {
  EXPECT_THAT(error_of([] { optimizers::Ftrl(0.1, 0.5); }), HasSubstr("learning_rate_power"));
  EXPECT_THAT(error_of([] { optimizers::Ftrl(0.1, -0.5, -1.0); }), HasSubstr("initial_accumulator_value"));
  EXPECT_THAT(error_of([] { optimizers::Ftrl(0.1, -0.5, 0.1, -1.0); }), HasSubstr("l1"));
  json lion = {{"class_name", "Lion"}, {"config", {{"learning_rate", 0.1}, {"beta_1", 0.0}}}};
  EXPECT_THAT(error_of([&] { optimizers::deserialize(lion); }), HasSubstr("beta_1"));
  json typo = {{"class_name", "Nadam"}, {"config", {{"learning_rate", 0.1}, {"beta1", 0.5}}}};
  EXPECT_THAT(error_of([&] { optimizers::deserialize(typo); }), HasSubstr("beta1"));
}

// A model trained with each rule optimizer, saved after 3 steps and loaded, takes the same 2 further steps as the
// model that was never saved: the slots (with Adagrad's and Ftrl's initial accumulators), the step count and Nadam's
// u_product come back from .keras and from .h5.
TEST(Optimizers, RuleOptimizersResumeExactlyFromKerasFiles) {
  systolic::testing::TempDir tmp;
  auto x = systolic::testing::random_tensor({8, 6, 6, 2}, 5);
  auto y = Tensor::from_vector(std::vector<float>{0, 1, 2, 3, 0, 1, 2, 3}, {8});
  std::vector<std::unique_ptr<optimizers::Optimizer>> opts;
  opts.push_back(std::make_unique<optimizers::Adam>(0.01, 0.9, 0.999, 1e-7, /*amsgrad=*/true));
  opts.push_back(std::make_unique<optimizers::Adamax>(0.01));
  opts.push_back(std::make_unique<optimizers::Nadam>(0.01));
  opts.push_back(std::make_unique<optimizers::Adagrad>(0.05, 0.2));
  opts.push_back(std::make_unique<optimizers::Adadelta>(1.0));
  opts.push_back(std::make_unique<optimizers::Lion>(0.001));
  opts.push_back(std::make_unique<optimizers::Ftrl>(0.05, -0.5, 0.1, 0.001, 0.001));
  opts.push_back(std::make_unique<optimizers::SGD>(0.05, 0.5));
  opts.back()->set_ema(true, 0.9, 4);  // the moving average is a slot, saved and restored as the others
  opts.push_back(std::make_unique<optimizers::Lamb>(0.01));
  opts.back()->set_loss_scale_factor(4.0);  // written to both forms and read back
  // Gradients accumulated when the file is written (3 steps of 2): the sum is a slot, saved and restored.
  opts.push_back(std::make_unique<optimizers::Adam>(0.01));
  opts.back()->set_gradient_accumulation_steps(2);
  opts.push_back(std::make_unique<optimizers::RMSprop>(0.01, 0.9, 0.5));
  opts.back()->set_gradient_accumulation_steps(2);
  opts.back()->set_ema(true, 0.9);
  // Adafactor's factors, shaped unlike the weights (a conv kernel's and a dense kernel's), and the scalars Keras
  // keeps for a bias.
  opts.push_back(std::make_unique<optimizers::Adafactor>(0.01));
  // Muon: the dense kernel orthogonalised, the rest by AdamW (velocity slots for those alone).
  opts.push_back(std::make_unique<optimizers::Muon>(0.01));
  for (auto& opt : opts)
    for (const char* file : {"m.keras", "m.h5"}) {
      SCOPED_TRACE(opt->name() + " " + file);
      auto a = systolic::testing::small_model(1);
      a.compile(*opt, "sparse_categorical_crossentropy");
      for (int i = 0; i < 3; ++i) a.train_on_batch(x, y);
      a.save(tmp.file(file));
      auto b = load_model(tmp.file(file));
      EXPECT_EQ(b.optimizer().name(), opt->name());
      EXPECT_EQ(b.optimizer().iterations(), 3);
      EXPECT_EQ(optimizers::serialize(b.optimizer(), keras_object::Form::keras3),
                optimizers::serialize(a.optimizer(), keras_object::Form::keras3));
      for (int i = 0; i < 2; ++i) EXPECT_EQ(a.train_on_batch(x, y)[0], b.train_on_batch(x, y)[0]);
      EXPECT_EQ(systolic::testing::normalised_max_error(a.trainable_parameters(), b.trainable_parameters()),
                0.0);
      // A fresh optimizer lands elsewhere (so the check above can fail); not Lion's, whose step is the sign of
      // momentum and gradient together, the same here with a fresh momentum.
      if (opt->name() == "Lion") continue;
      auto c = load_model(tmp.file(file), {.compile = false});
      c.compile(*opt, "sparse_categorical_crossentropy");
      for (int i = 0; i < 2; ++i) c.train_on_batch(x, y);
      EXPECT_GT(systolic::testing::normalised_max_error(a.trainable_parameters(), c.trainable_parameters()),
                1e-7);
    }
}

// Keras's fit ends with optimizer.finalize_variable_values: with use_ema the weights take their moving average
// (the optimizer's "average" slot); without, they are the last update's.
TEST(Optimizers, FitEndsWithTheMovingAverageOfTheWeights) {
  auto x = systolic::testing::random_tensor({8, 6, 6, 2}, 5);
  auto y = Tensor::from_vector(std::vector<float>{0, 1, 2, 3, 0, 1, 2, 3}, {8});
  for (bool ema : {true, false}) {
    SCOPED_TRACE(ema);
    auto m = systolic::testing::small_model(1);
    optimizers::Adam opt(0.01);
    opt.set_ema(ema, 0.9);
    m.compile(opt, "sparse_categorical_crossentropy");
    m.fit(x, y, {.batch_size = 4, .epochs = 2, .verbose = 0, .shuffle = false});
    if (ema) {
      EXPECT_EQ(systolic::testing::max_abs_diff(m.trainable_parameters(), m.optimizer().slot("average")),
                0.0);
    } else {
      EXPECT_THAT(error_of([&] { m.optimizer().slot("average"); }), HasSubstr("no slot 'average'"));
    }
  }
  // The average's momentum is 0 at the first update: after one step the average is the weights.
  auto m = systolic::testing::small_model(2);
  optimizers::SGD opt(0.1);
  opt.set_ema(true, 0.5);
  m.compile(opt, "sparse_categorical_crossentropy");
  m.train_on_batch(x, y);
  EXPECT_EQ(systolic::testing::max_abs_diff(m.trainable_parameters(), m.optimizer().slot("average")), 0.0);
  m.train_on_batch(x, y);
  EXPECT_GT(systolic::testing::max_abs_diff(m.trainable_parameters(), m.optimizer().slot("average")), 0.0);
  EXPECT_THAT(error_of([] { optimizers::SGD(0.1).set_ema(true, 1.5); }),
              HasSubstr("ema_momentum must be in"));
  EXPECT_THAT(error_of([] { optimizers::SGD(0.1).set_ema(true, 0.9, 0); }),
              HasSubstr("ema_overwrite_frequency must be an integer >= 1"));
}

// loss_scale_factor: the loss's gradient is scaled by it and the gradients unscaled before the update, so a fit
// takes the steps of the same fit without it (to rounding) and logs the same, unscaled, loss; Lamb trains the small
// model (its trust ratio per variable). A factor that is no number > 0 is refused.
TEST(Optimizers, LossScaleFactorLeavesTheStepsAndTheLoggedLoss) {
  auto x = systolic::testing::random_tensor({8, 6, 6, 2}, 5);
  auto y = Tensor::from_vector(std::vector<float>{0, 1, 2, 3, 0, 1, 2, 3}, {8});
  auto fit = [&](std::optional<double> factor) {
    auto m = systolic::testing::small_model(3);
    optimizers::SGD opt(0.1, 0.9);
    opt.set_loss_scale_factor(factor);
    m.compile(opt, "sparse_categorical_crossentropy");
    auto h = m.fit(x, y, {.batch_size = 4, .epochs = 2, .verbose = 0, .shuffle = false});
    return std::pair{m.trainable_parameters().to_doubles(), h.history.at("loss")};
  };
  auto [plain_w, plain_loss] = fit(std::nullopt);
  for (double factor : {1024.0, 1.0 / 64}) {
    SCOPED_TRACE(factor);
    auto [w, loss] = fit(factor);
    double diff = 0;
    for (std::size_t i = 0; i < w.size(); ++i) diff = std::max(diff, std::abs(w[i] - plain_w[i]));
    EXPECT_LT(diff, 1e-5);
    ASSERT_EQ(loss.size(), plain_loss.size());
    for (std::size_t e = 0; e < loss.size(); ++e) EXPECT_NEAR(loss[e], plain_loss[e], 1e-5);
  }
  auto m = systolic::testing::small_model(4);
  m.compile(optimizers::Lamb(0.01), "sparse_categorical_crossentropy");
  auto h = m.fit(x, y, {.batch_size = 8, .epochs = 20, .verbose = 0, .shuffle = false});
  EXPECT_LT(h.history.at("loss").back(), h.history.at("loss").front());
  EXPECT_THAT(error_of([] { optimizers::SGD(0.1).set_loss_scale_factor(0.0); }),
              HasSubstr("loss_scale_factor 0 must be a number > 0"));
}

// gradient_accumulation_steps in a fit: SGD updating every 2 batches of 4 with their mean gradient takes the steps
// of batches of 8 (the same samples, in order); iterations counts the batches, updates() the updates.
TEST(Optimizers, GradientAccumulationUpdatesWithTheMeanOfTheBatches) {
  auto x = systolic::testing::random_tensor({16, 6, 6, 2}, 9);
  std::vector<float> labels(16);
  for (int i = 0; i < 16; ++i) labels[i] = float((i * 5 + 1) % 4);
  auto y = Tensor::from_vector(labels, {16});
  // No batch normalisation: a batch's gradient is the mean of its halves'.
  auto model = [] {
    auto in = layers::Input({6, 6, 2});
    auto h = layers::Dense(5, {.activation = "tanh"})(layers::Flatten()(in));
    return Model(in, layers::Dense(4, {.activation = "softmax"})(h));
  };
  auto a = model();
  const auto initial = a.get_weights();
  auto b = model(), c = model();
  b.set_weights(initial);
  c.set_weights(initial);
  optimizers::SGD accumulating(0.1);
  accumulating.set_gradient_accumulation_steps(2);
  a.compile(accumulating, "sparse_categorical_crossentropy");
  b.compile(optimizers::SGD(0.1), "sparse_categorical_crossentropy");
  c.compile(optimizers::SGD(0.1), "sparse_categorical_crossentropy");
  a.fit(x, y, {.batch_size = 4, .epochs = 2, .verbose = 0, .shuffle = false});
  b.fit(x, y, {.batch_size = 8, .epochs = 2, .verbose = 0, .shuffle = false});
  c.fit(x, y, {.batch_size = 4, .epochs = 2, .verbose = 0, .shuffle = false});
  EXPECT_EQ(a.optimizer().iterations(), 8);
  EXPECT_EQ(a.optimizer().updates(), 4);
  EXPECT_EQ(b.optimizer().iterations(), 4);
  EXPECT_LT(systolic::testing::normalised_max_error(a.trainable_parameters(), b.trainable_parameters()),
            1e-5);
  // Without accumulation the batches of 4 land elsewhere (so the check above can fail).
  EXPECT_GT(systolic::testing::normalised_max_error(a.trainable_parameters(), c.trainable_parameters()),
            1e-3);
  EXPECT_THAT(error_of([] { optimizers::SGD(0.1).set_gradient_accumulation_steps(1); }),
              HasSubstr("gradient_accumulation_steps must be an integer >= 2"));
}
