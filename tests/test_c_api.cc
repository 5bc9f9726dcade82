// The C API (include/systolic/c_api.h): Keras's predictions through it, shapes, every error as a status and a
// message (never an exception), per-thread errors, and concurrent predicts on one handle.
#include <gtest/gtest.h>
#include <systolic/c_api.h>
#include <systolic/systolic.h>

#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

using systolic::testing::source_dir;

namespace {

std::string fixture(const std::string& name) {
  return source_dir() + "/tests/fixtures/keras/" + name;
}

std::vector<float> read_floats(const std::string& path, std::int64_t n) {
  systolic::Tensor t = systolic::testing::read_floats(path, systolic::Shape{n});
  return std::vector<float>(t.data<float>(), t.data<float>() + n);
}

struct Handle {
  systolic_model* m = nullptr;
  ~Handle() { systolic_model_free(m); }
};

std::vector<float> predict(systolic_model* m, const std::vector<float>& x, int64_t batch, size_t outputs) {
  std::vector<float> y(outputs, NAN);
  EXPECT_EQ(systolic_model_predict(m, x.data(), batch, y.data(), y.size()), SYSTOLIC_OK)
      << systolic_last_error();
  return y;
}

}  // namespace

TEST(CApi, PredictsAsKerasFromFullModelAndJsonWithWeights) {
  EXPECT_STREQ(systolic_version(), SYSTOLIC_VERSION_STRING);
  std::vector<float> x = read_floats(fixture("seed.inputs.bin"), 4 * 8 * 8 * 3);
  for (const char* kind : {"keras3", "tfkeras"}) {
    Handle full;
    ASSERT_EQ(systolic_model_load(fixture(std::string("seed.") + kind + ".full.h5").c_str(), &full.m),
              SYSTOLIC_OK)
        << systolic_last_error();
    int64_t dims[4] = {0, 0, 0, 0};
    size_t rank = 0;
    ASSERT_EQ(systolic_model_input_shape(full.m, dims, 4, &rank), SYSTOLIC_OK);
    EXPECT_EQ(rank, 3u);
    EXPECT_EQ(dims[0], 8);
    EXPECT_EQ(dims[1], 8);
    EXPECT_EQ(dims[2], 3);
    ASSERT_EQ(systolic_model_output_shape(full.m, dims, 4, &rank), SYSTOLIC_OK);
    EXPECT_EQ(rank, 1u);
    EXPECT_EQ(dims[0], 10);
    std::vector<float> want = read_floats(fixture(std::string("seed.") + kind + ".full.predictions.bin"), 40);
    std::vector<float> got = predict(full.m, x, 4, 40);
    for (int i = 0; i < 40; ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << kind << " value " << i;
  }
  // The C API gives the C++ API's predictions, bit for bit.
  {
    Handle h;
    ASSERT_EQ(systolic_model_load(fixture("seed.keras3.full.h5").c_str(), &h.m), SYSTOLIC_OK);
    systolic::Model cpp = systolic::load_model(fixture("seed.keras3.full.h5"));
    systolic::Tensor xt =
        systolic::testing::read_floats(fixture("seed.inputs.bin"), systolic::Shape{4, 8, 8, 3});
    systolic::Tensor yt = cpp.predict(xt);
    std::vector<float> c = predict(h.m, x, 4, 40);
    EXPECT_EQ(c, std::vector<float>(yt.data<float>(), yt.data<float>() + 40));
  }
  Handle split;
  ASSERT_EQ(systolic_model_load_json(fixture("seed.keras3.json").c_str(),
                                     fixture("seed.keras3.weights.h5").c_str(), &split.m),
            SYSTOLIC_OK)
      << systolic_last_error();
  std::vector<float> want = read_floats(fixture("seed.predictions.bin"), 40);
  std::vector<float> got = predict(split.m, x, 4, 40);
  for (int i = 0; i < 40; ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << "json + weights, value " << i;
}

TEST(CApi, ErrorsAreStatusesWithMessages) {
  systolic_model* m = reinterpret_cast<systolic_model*>(0x1);
  EXPECT_EQ(systolic_model_load("/no/such/model.h5", &m), SYSTOLIC_FAILED);
  EXPECT_EQ(m, nullptr);
  EXPECT_NE(std::string(systolic_last_error()).find("/no/such/model.h5"), std::string::npos)
      << systolic_last_error();
  EXPECT_EQ(systolic_model_load(nullptr, &m), SYSTOLIC_INVALID_ARGUMENT);
  EXPECT_EQ(systolic_model_load(fixture("seed.keras3.json").c_str(), nullptr), SYSTOLIC_INVALID_ARGUMENT);
  // Not an HDF5 file: a clean refusal.
  EXPECT_EQ(systolic_model_load(fixture("seed.inputs.bin").c_str(), &m), SYSTOLIC_FAILED);
  EXPECT_NE(std::string(systolic_last_error()).find("seed.inputs.bin"), std::string::npos)
      << systolic_last_error();
  EXPECT_EQ(systolic_model_load_json(fixture("seed.keras3.json").c_str(),
                                     fixture("zoo.keras3.weights.h5").c_str(), &m),
            SYSTOLIC_FAILED);
  EXPECT_EQ(m, nullptr);

  Handle h;
  ASSERT_EQ(systolic_model_load(fixture("seed.keras3.full.h5").c_str(), &h.m), SYSTOLIC_OK);
  int64_t dims[2];
  size_t rank = 0;
  EXPECT_EQ(systolic_model_input_shape(h.m, dims, 2, &rank), SYSTOLIC_INVALID_ARGUMENT);
  EXPECT_EQ(rank, 3u) << "the rank is given even when dims has too little room";
  EXPECT_EQ(systolic_model_input_shape(nullptr, dims, 2, &rank), SYSTOLIC_INVALID_ARGUMENT);
  std::vector<float> x(8 * 8 * 3, 0.5f), y(10);
  EXPECT_EQ(systolic_model_predict(h.m, x.data(), 1, y.data(), 9), SYSTOLIC_INVALID_ARGUMENT);
  EXPECT_NE(std::string(systolic_last_error()).find("room for 9"), std::string::npos)
      << systolic_last_error();
  EXPECT_EQ(systolic_model_predict(h.m, x.data(), 0, y.data(), 10), SYSTOLIC_INVALID_ARGUMENT);
  EXPECT_EQ(systolic_model_predict(h.m, nullptr, 1, y.data(), 10), SYSTOLIC_INVALID_ARGUMENT);
  EXPECT_EQ(systolic_model_predict(h.m, x.data(), 1, y.data(), 10), SYSTOLIC_OK);
  systolic_model_free(nullptr);
}

// The message is the calling thread's: another thread's failure does not overwrite it.
TEST(CApi, LastErrorIsPerThread) {
  systolic_model* m = nullptr;
  ASSERT_EQ(systolic_model_load("/no/such/a.h5", &m), SYSTOLIC_FAILED);
  std::thread([] {
    systolic_model* other = nullptr;
    EXPECT_STREQ(systolic_last_error(), "");
    EXPECT_EQ(systolic_model_load("/no/such/b.h5", &other), SYSTOLIC_FAILED);
  }).join();
  EXPECT_NE(std::string(systolic_last_error()).find("a.h5"), std::string::npos) << systolic_last_error();
}

// Four threads predicting different inputs on one handle get what serial predicts give.
TEST(CApi, ConcurrentPredictsOnOneModel) {
  Handle h;
  ASSERT_EQ(systolic_model_load(fixture("seed.tfkeras.full.h5").c_str(), &h.m), SYSTOLIC_OK);
  std::vector<float> x = read_floats(fixture("seed.inputs.bin"), 4 * 8 * 8 * 3);
  std::vector<std::vector<float>> serial;
  for (int s = 0; s < 4; ++s)
    serial.push_back(predict(h.m, std::vector<float>(x.begin() + s * 192, x.begin() + (s + 1) * 192), 1, 10));
  std::vector<std::vector<float>> got(4);
  std::vector<std::thread> threads;
  for (int s = 0; s < 4; ++s)
    threads.emplace_back([&, s] {
      std::vector<float> in(x.begin() + s * 192, x.begin() + (s + 1) * 192), y(10);
      for (int r = 0; r < 25; ++r) {
        if (systolic_model_predict(h.m, in.data(), 1, y.data(), 10) != SYSTOLIC_OK) return;
        if (r == 0 || y == got[s])
          got[s] = y;
        else
          return got[s].clear();
      }
    });
  for (auto& t : threads) t.join();
  for (int s = 0; s < 4; ++s) EXPECT_EQ(got[s], serial[s]) << "thread " << s;
}

// A model of several inputs (Keras's two_inputs: a(4), b(3) -> prob(1)) and one of several outputs (two_outputs:
// features(6) -> label(3), value(1)): counts, names and shapes by index, and predict_many as Model::predict_outputs.
TEST(CApi, SeveralInputsAndOutputs) {
  const std::string dir = source_dir() + "/tests/fixtures/multi_output/";
  Handle two_in, two_out;
  ASSERT_EQ(systolic_model_load((dir + "two_inputs.keras").c_str(), &two_in.m), SYSTOLIC_OK)
      << systolic_last_error();
  ASSERT_EQ(systolic_model_load((dir + "two_outputs.keras").c_str(), &two_out.m), SYSTOLIC_OK)
      << systolic_last_error();
  EXPECT_EQ(systolic_model_input_count(two_in.m), 2u);
  EXPECT_EQ(systolic_model_output_count(two_in.m), 1u);
  EXPECT_STREQ(systolic_model_input_name(two_in.m, 0), "a");
  EXPECT_STREQ(systolic_model_input_name(two_in.m, 1), "b");
  EXPECT_EQ(systolic_model_input_name(two_in.m, 2), nullptr);
  EXPECT_STREQ(systolic_model_output_name(two_out.m, 1), "value");
  EXPECT_EQ(systolic_model_input_count(nullptr), 0u);
  int64_t dims[4];
  size_t rank = 0;
  ASSERT_EQ(systolic_model_input_shape_at(two_in.m, 1, dims, 4, &rank), SYSTOLIC_OK);
  EXPECT_EQ(rank, 1u);
  EXPECT_EQ(dims[0], 3);
  ASSERT_EQ(systolic_model_output_shape_at(two_out.m, 0, dims, 4, &rank), SYSTOLIC_OK);
  EXPECT_EQ(dims[0], 3);
  EXPECT_EQ(systolic_model_output_shape_at(two_out.m, 2, dims, 4, &rank), SYSTOLIC_INVALID_ARGUMENT);
  EXPECT_NE(std::string(systolic_last_error()).find("the model has 2 outputs, no 2"), std::string::npos)
      << systolic_last_error();

  // Two inputs, batch 5.
  std::vector<float> a(5 * 4), b(5 * 3), prob(5, NAN);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = std::sin(float(i));
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = std::cos(float(i));
  const float* inputs[] = {a.data(), b.data()};
  float* outputs[] = {prob.data()};
  size_t counts[] = {prob.size()};
  ASSERT_EQ(systolic_model_predict_many(two_in.m, inputs, 2, 5, outputs, counts, 1), SYSTOLIC_OK)
      << systolic_last_error();
  systolic::Model model = systolic::load_model(dir + "two_inputs.keras", {.compile = false});
  systolic::Tensor want =
      model.predict({systolic::Tensor::from_vector(a, {5, 4}), systolic::Tensor::from_vector(b, {5, 3})});
  EXPECT_EQ(std::vector<double>(prob.begin(), prob.end()), want.to_doubles());
  // The one-input entry point refuses it, naming the other.
  EXPECT_EQ(systolic_model_predict(two_in.m, a.data(), 5, prob.data(), prob.size()),
            SYSTOLIC_INVALID_ARGUMENT);
  EXPECT_NE(std::string(systolic_last_error()).find("use systolic_model_predict_many"), std::string::npos)
      << systolic_last_error();
  EXPECT_EQ(systolic_model_predict_many(two_in.m, inputs, 1, 5, outputs, counts, 1),
            SYSTOLIC_INVALID_ARGUMENT);
  EXPECT_NE(std::string(systolic_last_error()).find("the call gives 1 and 1"), std::string::npos)
      << systolic_last_error();
  const float* missing[] = {a.data(), nullptr};
  EXPECT_EQ(systolic_model_predict_many(two_in.m, missing, 2, 5, outputs, counts, 1),
            SYSTOLIC_INVALID_ARGUMENT);
  EXPECT_NE(std::string(systolic_last_error()).find("input 'b' is NULL"), std::string::npos)
      << systolic_last_error();

  // Two outputs, batch 3; too little room for one of them is named.
  std::vector<float> x(3 * 6), label(3 * 3, NAN), value(3, NAN);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = 0.1f * float(i) - 0.5f;
  const float* xs[] = {x.data()};
  float* ys[] = {label.data(), value.data()};
  size_t room[] = {label.size(), value.size() - 1};
  EXPECT_EQ(systolic_model_predict_many(two_out.m, xs, 1, 3, ys, room, 2), SYSTOLIC_INVALID_ARGUMENT);
  EXPECT_NE(std::string(systolic_last_error()).find("output 'value' has room for 2 floats"),
            std::string::npos)
      << systolic_last_error();
  room[1] = value.size();
  ASSERT_EQ(systolic_model_predict_many(two_out.m, xs, 1, 3, ys, room, 2), SYSTOLIC_OK)
      << systolic_last_error();
  systolic::Model two = systolic::load_model(dir + "two_outputs.keras", {.compile = false});
  auto both = two.predict_outputs(systolic::Tensor::from_vector(x, {3, 6}));
  EXPECT_EQ(std::vector<double>(label.begin(), label.end()), both[0].to_doubles());
  EXPECT_EQ(std::vector<double>(value.begin(), value.end()), both[1].to_doubles());
}
