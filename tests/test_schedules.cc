// keras.optimizers.schedules (include/systolic/schedules.h) against Keras 3.15 (tests/reference/lr_schedules.py):
// every schedule's values and serialized config, a .keras file Keras saved mid-schedule that systolic loads and
// trains on, the round trip through systolic's files, training under a schedule, bad configs, the command's flags.
#include <gmock/gmock.h>
#include <systolic/systolic.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "test_util.h"

using namespace systolic;
using nlohmann::json;
namespace sch = systolic::optimizers::schedules;

namespace {
std::string fixture(const std::string& name) {
  return systolic::testing::source_dir() + "/tests/fixtures/lr_schedules/" + name;
}
json fixture_json(const std::string& name) {
  return json::parse(systolic::testing::read_text(fixture(name)));
}
}  // namespace

TEST(Schedules, ValuesAndConfigsMatchKeras) {
  json f = fixture_json("schedules.json");
  auto steps = f["steps"].get<std::vector<std::int64_t>>();
  ASSERT_EQ(f["cases"].size(), 12u);
  for (auto& [name, c] : f["cases"].items()) {
    SCOPED_TRACE(name);
    optimizers::Schedule s = sch::from_config(c["serialized"], "fixture");
    auto values = c["values"].get<std::vector<double>>();
    for (std::size_t i = 0; i < steps.size(); ++i)
      EXPECT_NEAR((*s)(steps[i]), values[i], 1e-6 * std::abs(values[i]) + 1e-8) << "step " << steps[i];
    EXPECT_EQ(json(s->get_config()), c["config"]);
    EXPECT_EQ(json(sch::serialize(*s)), c["serialized"]);
  }
}

// The C++ constructors make the schedules Keras's configs describe.
TEST(Schedules, ConstructorsAreKerasClasses) {
  json f = fixture_json("schedules.json")["cases"];
  auto same = [&](const optimizers::Schedule& s, const char* name) {
    EXPECT_EQ(json(sch::serialize(*s)), f[name]["serialized"]) << name;
  };
  same(sch::ExponentialDecay(0.1, 10, 0.5, true), "exponential_staircase");
  same(sch::PiecewiseConstantDecay({10, 100}, {0.1, 0.01, 0.001}), "piecewise");
  same(sch::PolynomialDecay(0.1, 100, 0.01, 2.0, true), "polynomial_cycle");
  same(sch::InverseTimeDecay(0.1, 10, 0.5), "inverse_time");
  same(sch::CosineDecay(0.0, 100, 0.05, 0.1, 10), "cosine_warmup");
  same(sch::CosineDecayRestarts(0.1, 10, 1.0, 0.5, 0.1), "cosine_restarts_flat");
}

TEST(Schedules, BadConfigsAreNamed) {
  using systolic::testing::error_of;
  auto err = [](const std::string& text) {
    return error_of([&] { sch::from_config(json::parse(text), "m.keras"); });
  };
  EXPECT_THAT(err(R"({"class_name": "CosineDecay", "config": {"decay_steps": 10}})"),
              ::testing::HasSubstr("m.keras: CosineDecay: option 'initial_learning_rate' is missing"));
  EXPECT_THAT(err(R"({"class_name": "CosineDecay", "config": {"initial_learning_rate": 0.1, "decay_steps": 10,
                     "bogus": 1}})"),
              ::testing::HasSubstr("unsupported option 'bogus'"));
  EXPECT_THAT(err(R"({"class_name": "ExponentialDecay", "config": {"initial_learning_rate": "x",
                     "decay_steps": 10, "decay_rate": 0.5}})"),
              ::testing::HasSubstr("'initial_learning_rate' must be a number"));
  EXPECT_THAT(err(R"({"class_name": "ExponentialDecay", "config": {"initial_learning_rate": 0.1,
                     "decay_steps": 0, "decay_rate": 0.5}})"),
              ::testing::HasSubstr("decay_steps must be a positive number"));
  EXPECT_THAT(
      err(R"({"class_name": "PiecewiseConstantDecay", "config": {"boundaries": [1, 2], "values": [1]}})"),
      ::testing::HasSubstr("one more entry than boundaries"));
  EXPECT_THAT(err(R"({"class_name": "PiecewiseConstantDecay", "config": {"boundaries": [5, 2],
                     "values": [1, 2, 3]}})"),
              ::testing::HasSubstr("boundaries must increase"));
  EXPECT_THAT(err(R"({"class_name": "WarmupThing", "config": {}})"),
              ::testing::HasSubstr("schedule 'WarmupThing' is not supported"));
  EXPECT_THAT(err(R"({"class_name": "CosineDecay"})"), ::testing::HasSubstr("must be {\"class_name\""));
  EXPECT_THAT(err(R"([1, 2])"), ::testing::HasSubstr("must be {\"class_name\""));
}

// An optimizer with a schedule uses schedule(iterations) for each update: the same as a constant rate set to
// that value before each step, bit for bit. Setting a number then is refused, as Keras refuses it.
TEST(Schedules, EachUpdateUsesTheRateAtItsStep) {
  auto make = [] {
    clear_session();
    set_random_seed(3);
    auto in = layers::Input({4});
    Model m(in, layers::Dense(3, {.activation = "softmax"})(layers::Dense(6, {.activation = "relu"})(in)));
    return m;
  };
  Tensor x = systolic::testing::random_tensor({8, 4}, 1, DType::float32, -1, 1);
  Tensor y = systolic::testing::random_tensor({8}, 2, DType::int32, 0, 2);
  auto schedule = sch::ExponentialDecay(0.5, 2, 0.1);
  Model a = make(), b = make();
  optimizers::SGD sgd(0.5, 0.9);
  sgd.set_learning_rate_schedule(schedule);
  a.compile(sgd, "sparse_categorical_crossentropy");
  b.compile(optimizers::SGD(0.5, 0.9), "sparse_categorical_crossentropy");
  for (int step = 0; step < 5; ++step) {
    EXPECT_DOUBLE_EQ(a.optimizer().learning_rate(), (*schedule)(step));
    b.optimizer().set_learning_rate((*schedule)(step));
    a.train_on_batch(x, y);
    b.train_on_batch(x, y);
  }
  EXPECT_EQ(a.trainable_parameters().to_doubles(), b.trainable_parameters().to_doubles());
  EXPECT_THAT(systolic::testing::error_of([&] { a.optimizer().set_learning_rate(0.1); }),
              ::testing::HasSubstr("ExponentialDecay schedule and cannot be set to a number"));
}

// Keras trained 3 steps of Adam(CosineDecay) and saved: systolic loads the schedule and the step, and its next
// step gives Keras's predictions; saved again by systolic (.keras and .h5), the schedule comes back the same.
TEST(Schedules, KerasFileMidScheduleLoadsTrainsAndRoundTrips) {
  json f = fixture_json("adam_cosine.json");
  Model m = load_model(fixture("adam_cosine.keras"));
  ASSERT_TRUE(m.optimizer().learning_rate_schedule());
  EXPECT_EQ(m.optimizer().learning_rate_schedule()->class_name(), "CosineDecay");
  EXPECT_EQ(m.optimizer().iterations(), f["iterations"].get<std::int64_t>());
  EXPECT_NEAR(m.optimizer().learning_rate(), f["learning_rate"].get<double>(), 1e-7);
  auto xs = f["x"].get<std::vector<std::vector<float>>>();
  Tensor x({std::int64_t(xs.size()), 4}, DType::float32);
  for (std::size_t i = 0; i < xs.size(); ++i)
    for (int j = 0; j < 4; ++j) x.data<float>()[i * 4 + j] = xs[i][j];
  auto ys = f["y"].get<std::vector<std::int32_t>>();
  Tensor y = Tensor::from_vector(std::vector<std::int32_t>(ys.begin(), ys.end()), {std::int64_t(ys.size())});
  systolic::testing::TempDir dir;
  json written = sch::serialize(*m.optimizer().learning_rate_schedule());
  for (const char* file : {"back.keras", "back.h5"}) {
    m.save(dir.file(file));
    Model back = load_model(dir.file(file));
    ASSERT_TRUE(back.optimizer().learning_rate_schedule()) << file;
    EXPECT_EQ(json(sch::serialize(*back.optimizer().learning_rate_schedule())), written) << file;
    EXPECT_EQ(back.optimizer().iterations(), 3) << file;
  }
  m.train_on_batch(x, y);
  auto want = f["after_step"].get<std::vector<std::vector<double>>>();
  auto got = m.predict(x).to_doubles();
  for (std::size_t i = 0; i < want.size(); ++i)
    for (std::size_t j = 0; j < 3; ++j) EXPECT_NEAR(got[i * 3 + j], want[i][j], 1e-5) << i << "," << j;
}
