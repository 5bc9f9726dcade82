// MultiHeadAttention, GroupedQueryAttention and Attention against real Keras (tests/fixtures/attention, written by
// tests/reference/attention.py with Keras 3.15): keras-io's "Timeseries classification with a Transformer" model as
// the example builds it, trained by Keras on the real ItalyPowerDemand series, predicts and evaluates as Keras does
// and trains on from Keras's optimizer state; the call forms Keras allows (a key of its own, an attention_mask
// input, use_causal_mask with a sliding window, inputs of rank 4) predict as Keras does and are written back as
// Keras writes them, as do GroupedQueryAttention's (grouped and multi-query heads) and Attention's (a trained scale,
// Keras's masks); what systolic does not run is refused by name. The same layer trains on the XLA backend as on the
// CPU. (Training steps equal to Keras's, masks included: tests/test_keras_training.cc's transformer_series,
// masked_attention, grouped_attention and luong_attention; gradients: tests/test_gradients.cc; the op on every
// backend: tests/test_ops.cc.)
#include <gmock/gmock.h>
#include <systolic/systolic.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "json_fixture.h"
#include "keras_compare.h"
#include "saving/keras_zip.h"
#include "test_util.h"
#include "xla_test_util.h"

using namespace systolic;
using json = nlohmann::json;
using systolic::testing::error_of;
using systolic::testing::max_abs_diff;
using ::testing::HasSubstr;

namespace {

std::string fixture(const std::string& name) {
  return systolic::testing::source_dir() + "/tests/fixtures/attention/" + name;
}
const json& expected() {
  return systolic::testing::json_fixture("attention/expected.json");
}

}  // namespace

TEST(KerasIoSeriesTransformer, PredictsEvaluatesAndTrainsOnAsKeras) {
  const json& want = expected()["keras_io_series"];
  auto d =
      datasets::load("npz:" + systolic::testing::source_dir() + "/tests/fixtures/series/italy_power.npz");
  Model m = load_model(fixture("keras_io_series.keras"));
  ASSERT_TRUE(m.compiled());
  EXPECT_EQ(m.optimizer().iterations(), want["iterations"].get<std::int64_t>());
  int attention = 0;
  for (auto& l : m.layers()) attention += l->class_name() == "MultiHeadAttention";
  EXPECT_EQ(attention, 4);
  Tensor p = m.predict(d.test.x.slice(0, 32), {.batch_size = 32, .verbose = 0});
  EXPECT_LT(max_abs_diff(p, Tensor::from_vector(want["predict"].get<std::vector<double>>(), p.shape())),
            1e-4);
  systolic::testing::expect_scores_as_keras(m,
                                            m.evaluate(d.test.x, d.test.y, {.batch_size = 32, .verbose = 0}),
                                            want["evaluate"], 1e-4, /*relative=*/false);
  // One more epoch from Keras's Adam state, with the example's dropout: 3 steps of 32, 32 and 3 series.
  History h = m.fit(d.train.x, d.train.y, {.batch_size = 32, .epochs = 1, .verbose = 0, .shuffle = false});
  EXPECT_EQ(m.optimizer().iterations(), want["iterations"].get<std::int64_t>() + 3);
  EXPECT_TRUE(std::isfinite(h.history.at("loss")[0]));
  systolic::testing::TempDir tmp;
  m.save(tmp.file("m.keras"));
  Model back = load_model(tmp.file("m.keras"));
  EXPECT_EQ(back.predict(d.test.x.slice(0, 32), {.verbose = 0}).to_doubles(),
            m.predict(d.test.x.slice(0, 32), {.verbose = 0}).to_doubles());
}

TEST(MultiHeadAttentionCalls, PredictAsKerasAndAreWrittenAsKerasWritesThem) {
  Model m = load_model(fixture("call_forms.keras"));
  auto npz = npy::load_npz(fixture("call_forms.npz"));
  Arrays x;
  for (const char* name : {"query", "value", "key", "attention_mask", "image"}) x.push_back(npz.at(name));
  Tensor p = m.predict(x, {.verbose = 0});
  EXPECT_LT(max_abs_diff(p, Tensor::from_vector(
                                expected()["call_forms"]["predict"].get<std::vector<double>>(), p.shape())),
            1e-5);

  // The calls' keyword arguments as Keras wrote them: key by position, attention_mask and use_causal_mask by name.
  auto keras = keras_io::read_keras_archive_file(fixture("call_forms.keras")).config;
  auto ours = json::parse(m.to_json());
  auto calls = [](const json& config) {
    std::vector<json> kwargs;
    for (auto& l : config["config"]["layers"])
      if (l["class_name"] == "MultiHeadAttention") {
        json k = l["inbound_nodes"][0]["kwargs"];
        kwargs.push_back(
            {{"args", l["inbound_nodes"][0]["args"].size()}, {"kwargs", k.is_null() ? json::object() : k}});
      }
    return kwargs;
  };
  auto strip = [](std::vector<json> v) {  // tensors compared by the layer they come from
    for (auto& c : v)
      for (auto& [k, t] : c["kwargs"].items())
        if (t.is_object()) t = t["config"]["keras_history"][0];
    return v;
  };
  EXPECT_EQ(strip(calls(ours)), strip(calls(keras)));
  Model again = model_from_json(m.to_json());
  again.set_weights(m.get_weights());
  EXPECT_EQ(again.predict(x, {.verbose = 0}).to_doubles(), p.to_doubles());
}

// A causal mask and an attention mask input from the API. A query row that the attention mask leaves no key: as
// Keras, the average of every key's value without dropout (Keras's fused attention, the causal mask included) and
// zeros with it (its masked Softmax; the output is then the output projection's bias, zeros here).
TEST(MultiHeadAttentionCalls, ApiGraphWithAnAttentionMaskAndACausalMask) {
  for (double dropout : {0.0, 0.1}) {
    SCOPED_TRACE(dropout);
    clear_session();
    auto q = layers::Input({4, 3});
    auto mask = layers::Input({4, 4});
    auto y = layers::MultiHeadAttention(
        2, 2, {.dropout = dropout, .use_causal_mask = true, .attention_mask_input = true})({q, q, mask});
    Model m(std::vector<SymbolicTensor>{q, mask}, std::vector<SymbolicTensor>{y});
    const Tensor xq = systolic::testing::random_tensor({2, 4, 3}, 3);
    Tensor later = xq.clone();  // step 3 changed
    for (std::int64_t n = 0; n < 2; ++n)
      for (std::int64_t c = 0; c < 3; ++c) later.data<float>()[(n * 4 + 3) * 3 + c] += 1.0f;
    const Tensor ones = Tensor::full({2, 4, 4}, 1.0);
    Tensor hide = ones.clone();
    for (std::int64_t s = 0; s < 4; ++s) hide.data<float>()[1 * 4 + s] = 0.0f;  // sample 0, query step 1
    auto row = [&](const Tensor& x, const Tensor& am, std::int64_t n, std::int64_t t) {
      Tensor out = m.predict(Arrays{x, am}, {.verbose = 0});
      return std::vector<float>(out.data<float>() + (n * 4 + t) * 3, out.data<float>() + (n * 4 + t + 1) * 3);
    };
    // Causal: step 1 does not see step 3.
    EXPECT_EQ(row(xq, ones, 0, 1), row(later, ones, 0, 1));
    EXPECT_EQ(row(xq, ones, 1, 2), row(later, ones, 1, 2));
    if (dropout == 0) {
      EXPECT_NE(row(xq, hide, 0, 1), row(later, hide, 0, 1));  // the hidden row averages every step, 3 too
      EXPECT_EQ(row(xq, hide, 1, 1), row(later, hide, 1, 1));  // sample 1 is not hidden
    } else {
      EXPECT_EQ(row(xq, hide, 0, 1), std::vector<float>(3, 0.0f));
    }
  }
}

// GroupedQueryAttention as Keras 3 writes it (class GroupQueryAttention): 4 query heads over 2 key/value heads with a
// key of its own and an attention mask input (one query row left no key), multi-query attention with a sliding
// window, a causal mask and no bias. Predicts as Keras; its config and weights are written back as Keras's.
TEST(GroupedQueryAttention, PredictsAsKerasAndIsWrittenAsKerasWritesIt) {
  Model m = load_model(fixture("grouped.keras"));
  auto npz = npy::load_npz(fixture("grouped.npz"));
  Arrays x;
  for (const char* name : {"query", "value", "key", "attention_mask"}) x.push_back(npz.at(name));
  Tensor p = m.predict(x, {.verbose = 0});
  EXPECT_LT(max_abs_diff(p, Tensor::from_vector(expected()["grouped"]["predict"].get<std::vector<double>>(),
                                                p.shape())),
            1e-5);
  auto keras = keras_io::read_keras_archive_file(fixture("grouped.keras")).config;
  auto ours = json::parse(m.to_json());
  auto layer_configs = [](const json& config) {
    std::vector<json> out;
    for (auto& l : config["config"]["layers"])
      if (l["class_name"] == "GroupQueryAttention") {
        json c = l["config"];
        c.erase("dtype");
        // Keras 3.15's initializers add input_axes and output_axes (null); systolic leaves them out, so that
        // earlier Keras 3 versions, whose initializers do not take them, read its files.
        c["kernel_initializer"]["config"].erase("input_axes");
        c["kernel_initializer"]["config"].erase("output_axes");
        out.push_back({{"config", c}, {"kwargs", l["inbound_nodes"][0]["kwargs"].size()}});
      }
    return out;
  };
  EXPECT_EQ(layer_configs(ours), layer_configs(keras));
  ASSERT_EQ(layer_configs(ours).size(), 2u);
  systolic::testing::TempDir tmp;
  m.save(tmp.file("g.keras"));
  Model back = load_model(tmp.file("g.keras"));
  EXPECT_EQ(back.predict(x, {.verbose = 0}).to_doubles(), p.to_doubles());
  auto w = m.get_weights();
  ASSERT_EQ(w.size(), 12u);                    // 4 kernels and 4 biases, then 4 kernels without bias
  EXPECT_EQ(w[2].shape(), Shape({2, 2, 3}));   // key kernel (C, key/value heads, head_dim)
  EXPECT_EQ(w[6].shape(), Shape({4, 3, 4}));   // output kernel (query heads, head_dim, C)
  EXPECT_EQ(w[10].shape(), Shape({4, 1, 2}));  // multi-query value kernel
}

TEST(GroupedQueryAttention, RefusesWhatKerasRefusesAndWhatItDoesNotRun) {
  auto keras = keras_io::read_keras_archive_file(fixture("grouped.keras")).config;
  auto with = [&](auto change) {
    return systolic::testing::error_with_layer_changed(keras, "GroupQueryAttention", change);
  };
  EXPECT_THAT(with([](json& l) { l["config"]["use_gate"] = "yes"; }), HasSubstr("use_gate"));
  EXPECT_THAT(with([](json& l) { l["config"]["num_key_value_heads"] = 3; }),
              HasSubstr("must be divisible by num_key_value_heads"));
  EXPECT_THAT(with([](json& l) { l["config"]["num_key_value_heads"] = 0; }),
              HasSubstr("num_key_value_heads"));
  EXPECT_THAT(with([](json& l) { l["config"].erase("head_dim"); }), HasSubstr("head_dim"));
  EXPECT_THAT(with([](json& l) { l["inbound_nodes"][0]["kwargs"]["return_attention_scores"] = "yes"; }),
              HasSubstr("return_attention_scores"));
  clear_session();
  auto q = layers::Input({5, 4});
  auto v = layers::Input({6, 3});
  EXPECT_THAT(error_of([&] { layers::GroupedQueryAttention(2, 2, 1)({q, v}); }), HasSubstr("must be equal"));
  auto img = layers::Input({3, 4, 2});
  EXPECT_THAT(error_of([&] {
                layers::GroupedQueryAttention(2, 2, 1)({img, img});
              }),
              HasSubstr("(steps, features)"));
  // Keras's default names, and class name in configs.
  clear_session();
  auto first = layers::GroupedQueryAttention(2, 2, 1), second = layers::GroupedQueryAttention(2, 2, 1);
  EXPECT_EQ(first->name(), "grouped_query_attention");
  EXPECT_EQ(second->name(), "grouped_query_attention_1");
  EXPECT_EQ(first->class_name(), "GroupQueryAttention");
}

// Attention (Luong's dot product) as Keras 3 writes it: with a key of its own; use_scale (the scale set to 0.7 in
// Keras) with a causal mask; over Embedding(mask_zero) outputs, whose padding masks hide keys and zero padded query
// rows. Predicts as Keras, written back as Keras writes it (one list argument, use_causal_mask by name).
TEST(DotProductAttention, PredictsAsKerasAndIsWrittenAsKerasWritesIt) {
  Model m = load_model(fixture("luong.keras"));
  auto npz = npy::load_npz(fixture("luong.npz"));
  Arrays x;
  for (const char* name : {"query", "value", "key", "ids"}) x.push_back(npz.at(name));
  Tensor p = m.predict(x, {.verbose = 0});
  EXPECT_LT(max_abs_diff(
                p, Tensor::from_vector(expected()["luong"]["predict"].get<std::vector<double>>(), p.shape())),
            1e-5);
  auto keras = keras_io::read_keras_archive_file(fixture("luong.keras")).config;
  auto ours = json::parse(m.to_json());
  auto calls = [](const json& config) {
    std::vector<json> out;
    for (auto& l : config["config"]["layers"])
      if (l["class_name"] == "Attention") {
        json c = l["config"];
        c.erase("dtype");
        json node = l["inbound_nodes"][0];
        for (auto& t : node["args"][0]) t = t["config"]["keras_history"][0];
        out.push_back({{"config", c}, {"args", node["args"]}, {"kwargs", node["kwargs"]}});
      }
    return out;
  };
  EXPECT_EQ(calls(ours), calls(keras));
  ASSERT_EQ(calls(ours).size(), 3u);
  systolic::testing::TempDir tmp;
  m.save(tmp.file("a.keras"));
  EXPECT_EQ(load_model(tmp.file("a.keras")).predict(x, {.verbose = 0}).to_doubles(), p.to_doubles());
  EXPECT_THAT(error_of([&] { m.save(tmp.file("a.h5"), {.keras = KerasTarget::tf_keras}); }),
              HasSubstr("save the model as .keras"));  // the causal call
  ASSERT_EQ(m.get_weights().size(), 2u);               // the embeddings and the scale
  EXPECT_NEAR(m.get_weights()[1].to_doubles()[0], 0.7, 1e-7);
}

// Under mixed_bfloat16 (the data bfloat16, the weights float32): the layers `body` puts on an input (6, 3), under a
// softmax classifier, train 3 epochs from the float32 model's weights (the loss falls) and predict within 0.05 of
// the float32 model given the trained weights. Returns the weights before and after training.
std::pair<std::vector<Tensor>, std::vector<Tensor>> trains_under_mixed_bfloat16(
    const std::function<SymbolicTensor(const SymbolicTensor&)>& body, std::uint64_t seed) {
  auto build = [&](const char* policy) {
    set_random_seed(seed);
    clear_session();
    mixed_precision::set_global_policy(policy);
    auto x = layers::Input({6, 3});
    auto y = layers::Dense(2, {.activation = "softmax"})(layers::Flatten()(body(x)));
    mixed_precision::set_global_policy("float32");
    Model m(x, y);
    m.compile("adam", "sparse_categorical_crossentropy");
    return m;
  };
  Tensor x = systolic::testing::random_tensor({64, 6, 3}, seed + 1);
  std::vector<double> labels;
  const std::vector<double> xs = x.to_doubles();
  for (int i = 0; i < 64; ++i) labels.push_back(xs[static_cast<std::size_t>(i * 18)] > 0 ? 1 : 0);
  Tensor y = Tensor::from_vector(labels, {64});
  Model wide = build("float32"), mixed = build("mixed_bfloat16");
  mixed.set_weights(wide.get_weights());
  std::vector<Tensor> before = mixed.get_weights();
  History h = mixed.fit(x, y, {.batch_size = 16, .epochs = 3, .verbose = 0});
  EXPECT_LT(h.history.at("loss").back(), h.history.at("loss").front());
  std::vector<Tensor> after = mixed.get_weights();
  wide.set_weights(after);
  EXPECT_LT(max_abs_diff(mixed.predict(x, {.verbose = 0}), wide.predict(x, {.verbose = 0})), 0.05);
  return {std::move(before), std::move(after)};
}

// AdditiveAttention (use_scale with its glorot-drawn scale and a key of its own; no scale, causal; over
// Embedding(mask_zero) outputs, its scores a second output) and Attention(score_mode="concat") (a key of its own;
// use_scale and causal over the masked embeddings), with the scalar weights set away from 1 in Keras: predict as
// Keras, and are written back as Keras writes them (AdditiveAttention's config without score_mode).
TEST(AdditiveAttention, PredictsAsKerasAndIsWrittenAsKerasWritesIt) {
  Model m = load_model(fixture("additive.keras"));
  auto npz = npy::load_npz(fixture("additive.npz"));
  Arrays x;
  for (const char* name : {"query", "value", "key", "ids"}) x.push_back(npz.at(name));
  std::vector<Tensor> got = m.predict_outputs(x, {.verbose = 0});
  const json& want = expected()["additive"]["outputs"];
  ASSERT_EQ(got.size(), 2u);
  ASSERT_EQ(want.size(), 2u);
  EXPECT_EQ(got[1].shape(), Shape({3, 6, 6}));
  for (std::size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_LT(max_abs_diff(got[i], Tensor::from_vector(want[i].get<std::vector<double>>(), got[i].shape())),
              1e-5);
  }
  auto keras = keras_io::read_keras_archive_file(fixture("additive.keras")).config;
  auto ours = json::parse(m.to_json());
  auto calls = [](const json& config) {
    std::vector<json> out;
    for (auto& l : config["config"]["layers"])
      if (l["class_name"] == "Attention" || l["class_name"] == "AdditiveAttention") {
        json c = l["config"];
        c.erase("dtype");
        json node = l["inbound_nodes"][0];
        for (auto& t : node["args"][0]) t = t["config"]["keras_history"][0];
        out.push_back(
            {{"class", l["class_name"]}, {"config", c}, {"args", node["args"]}, {"kwargs", node["kwargs"]}});
      }
    return out;
  };
  EXPECT_EQ(calls(ours), calls(keras));
  ASSERT_EQ(calls(ours).size(), 5u);
  EXPECT_FALSE(calls(ours)[0]["config"].contains("score_mode"));
  EXPECT_EQ(calls(ours)[3]["config"]["score_mode"], "concat");
  // Keras's weights: the embeddings, AdditiveAttention's scales (one per feature), concat_score_weight, and the
  // scaled concat layer's scale and concat_score_weight (Keras's values).
  std::vector<std::string> shapes;
  for (const Tensor& w : m.get_weights()) shapes.push_back(w.shape().str());
  EXPECT_EQ(shapes, (std::vector<std::string>{"(10, 4)", "(4,)", "(4,)", "()", "()", "()"}));
  EXPECT_NEAR(m.get_weights()[3].to_doubles()[0], 0.8, 1e-7);
  EXPECT_NEAR(m.get_weights()[4].to_doubles()[0], 0.6, 1e-7);
  EXPECT_NEAR(m.get_weights()[5].to_doubles()[0], 1.3, 1e-7);
  systolic::testing::TempDir tmp;
  m.save(tmp.file("a.keras"));
  std::vector<Tensor> back = load_model(tmp.file("a.keras")).predict_outputs(x, {.verbose = 0});
  ASSERT_EQ(back.size(), got.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_EQ(back[i].to_doubles(), got[i].to_doubles());
}

// The API: AdditiveAttention's scale has the query's features; "concat" adds concat_score_weight after the scale.
TEST(AdditiveAttention, FromTheApi) {
  clear_session();
  auto q = layers::Input({5, 4});
  auto v = layers::Input({6, 3});
  auto k = layers::Input({6, 4});
  auto a = layers::AdditiveAttention()({q, v, k});
  EXPECT_EQ(a.shape(), Shape({5, 3}));
  auto b = layers::AdditiveAttention({.use_scale = false, .return_attention_scores = true}).call_all({q, k});
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[1].shape(), Shape({5, 6}));
  auto c = layers::Attention({.use_scale = true, .score_mode = "concat"})({q, v, k});
  Model m({q, v, k}, {a, b[0], c});
  std::vector<std::string> shapes;
  for (const Tensor& w : m.get_weights()) shapes.push_back(w.shape().str());
  EXPECT_EQ(shapes, (std::vector<std::string>{"(4,)", "()", "()"}));
  EXPECT_THAT(error_of([&] { layers::Attention({.score_mode = "cosine"}); }), HasSubstr("score_mode"));
  EXPECT_THAT(error_of([&] { layers::AdditiveAttention()({q, v}); }), HasSubstr("additive score"));
}

// Under mixed_bfloat16 (the data bfloat16, the weights float32): AdditiveAttention's scale, the concat score's
// weights and the dot product's scale get their gradients (summed in bfloat16, widened), train, and predict close to
// the float32 weights' predictions.
TEST(AdditiveAttention, TrainsUnderMixedBfloat16) {
  auto [before, after] = trains_under_mixed_bfloat16(
      [](const SymbolicTensor& x) {
        auto h = layers::Dense(4, {.activation = "tanh"})(x);
        auto a = layers::AdditiveAttention()({h, h});
        auto b = layers::Attention({.use_scale = true, .score_mode = "concat"})({a, h});
        return layers::Attention({.use_scale = true})({b, h});
      },
      5);
  ASSERT_EQ(after.size(),
            8u);  // dense (2), the additive scale, the concat scale and weight, the dot scale, dense (2)
  for (std::size_t i = 2; i < 6; ++i) EXPECT_NE(after[i].to_doubles(), before[i].to_doubles()) << i;
}

// return_attention_scores: MultiHeadAttention's scores over Embedding(mask_zero) outputs with an attention mask
// input (a padded query row and one the mask leaves no key: zeros, as Keras's masked Softmax gives them),
// GroupedQueryAttention's under a causal mask, MultiHeadAttention's over inputs of rank 4 ((heads, 3, 2, 3, 2)),
// Attention's with a trained scale and MultiHeadAttention's over the last middle axis alone (attention_axes=(2,):
// each row of the image attends within itself), each the model's output beside the layer's result: as Keras predicts
// them, and the calls written back as Keras writes them.
TEST(AttentionScores, PredictAsKerasAndAreWrittenAsKerasWritesThem) {
  Model m = load_model(fixture("scores.keras"));
  auto npz = npy::load_npz(fixture("scores.npz"));
  Arrays x;
  for (const char* name : {"ids", "attention_mask", "query", "image"}) x.push_back(npz.at(name));
  std::vector<Tensor> got = m.predict_outputs(x, {.verbose = 0});
  const json& want = expected()["scores"]["outputs"];
  ASSERT_EQ(got.size(), want.size());
  ASSERT_EQ(got.size(), 10u);
  EXPECT_EQ(got[1].shape(), Shape({3, 2, 6, 6}));
  EXPECT_EQ(got[3].shape(), Shape({3, 4, 5, 5}));
  EXPECT_EQ(got[5].shape(), Shape({3, 2, 3, 2, 3, 2}));
  EXPECT_EQ(got[7].shape(), Shape({3, 6, 6}));
  EXPECT_EQ(got[9].shape(), Shape({3, 3, 2, 2, 2}));  // attention_axes=(2,): (batch, 3 rows, heads, 2, 2)
  for (std::size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_LT(max_abs_diff(got[i], Tensor::from_vector(want[i].get<std::vector<double>>(), got[i].shape())),
              1e-5);
  }
  // The query row the attention mask leaves no key: zeros in every head, as in Keras.
  const std::vector<double> scores = got[1].to_doubles();
  for (int h = 0; h < 2; ++h)
    for (int s = 0; s < 6; ++s) EXPECT_EQ(scores[static_cast<std::size_t>((h * 6 + 2) * 6 + s)], 0.0);

  auto keras = keras_io::read_keras_archive_file(fixture("scores.keras")).config;
  auto ours = json::parse(m.to_json());
  auto calls = [](const json& config) {
    std::vector<json> out;
    for (auto& l : config["config"]["layers"])
      for (const char* cls : {"MultiHeadAttention", "GroupQueryAttention", "Attention"})
        if (l["class_name"] == cls) {
          json k = l["inbound_nodes"][0]["kwargs"];
          for (auto& [name, t] : k.items())
            if (t.is_object()) t = t["config"]["keras_history"][0];
          out.push_back({{"layer", l["name"]}, {"kwargs", k}});
        }
    return out;
  };
  EXPECT_EQ(calls(ours), calls(keras));
  ASSERT_EQ(calls(ours).size(), 5u);
  // attention_axes written as Keras's build writes them: the default's axes, or those given.
  auto axes = [](const json& config) {
    std::vector<json> out;
    for (auto& l : config["config"]["layers"])
      if (l["class_name"] == "MultiHeadAttention") out.push_back(l["config"]["attention_axes"]);
    return out;
  };
  EXPECT_EQ(axes(ours), axes(keras));
  EXPECT_EQ(axes(ours).back(), json::array({2}));
  auto outputs = [](const json& config) { return config["config"]["output_layers"]; };
  EXPECT_EQ(outputs(ours), outputs(keras));
  systolic::testing::TempDir tmp;
  m.save(tmp.file("s.keras"));
  std::vector<Tensor> back = load_model(tmp.file("s.keras")).predict_outputs(x, {.verbose = 0});
  ASSERT_EQ(back.size(), got.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_EQ(back[i].to_doubles(), got[i].to_doubles());
}

// attention_axes that are not the last middle axes: (1,) over an image (each column attends along the rows; the
// scores (batch, columns, heads, rows, rows) an output), (1, 3) over inputs of rank 5 with a value whose attended
// axes are longer, and (-3,): predict as Keras, and are written back as Keras writes them.
TEST(AttentionAxes, PredictAsKerasAndAreWrittenAsKerasWritesThem) {
  Model m = load_model(fixture("axes.keras"));
  auto npz = npy::load_npz(fixture("axes.npz"));
  Arrays x;
  for (const char* name : {"image", "volume", "other"}) x.push_back(npz.at(name));
  std::vector<Tensor> got = m.predict_outputs(x, {.verbose = 0});
  const json& want = expected()["axes"]["outputs"];
  ASSERT_EQ(got.size(), 2u);
  ASSERT_EQ(want.size(), 2u);
  EXPECT_EQ(got[1].shape(), Shape({3, 3, 2, 4, 4}));
  for (std::size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_LT(max_abs_diff(got[i], Tensor::from_vector(want[i].get<std::vector<double>>(), got[i].shape())),
              1e-5);
  }
  auto keras = keras_io::read_keras_archive_file(fixture("axes.keras")).config;
  auto ours = json::parse(m.to_json());
  auto configs = [](const json& config) {
    std::vector<json> out;
    for (auto& l : config["config"]["layers"])
      if (l["class_name"] == "MultiHeadAttention") {
        json c = l["config"];
        c.erase("dtype");
        c["kernel_initializer"]["config"].erase("input_axes");  // Keras 3.15's (null), left out as above
        c["kernel_initializer"]["config"].erase("output_axes");
        out.push_back(c);
      }
    return out;
  };
  EXPECT_EQ(configs(ours), configs(keras));
  ASSERT_EQ(configs(ours).size(), 3u);
  EXPECT_EQ(configs(ours)[2]["attention_axes"], json::array({2}));  // (-3,), as Keras's build writes it
  systolic::testing::TempDir tmp;
  m.save(tmp.file("a.keras"));
  std::vector<Tensor> back = load_model(tmp.file("a.keras")).predict_outputs(x, {.verbose = 0});
  ASSERT_EQ(back.size(), got.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_EQ(back[i].to_doubles(), got[i].to_doubles());
}

// attention_axes that are not distinct middle axes are refused by name, and so are Keras masks when the attended
// axes come before others.
TEST(AttentionAxes, RefusesWhatItDoesNotRunByName) {
  clear_session();
  auto img = layers::Input({4, 3, 2});
  EXPECT_THAT(error_of([&] {
                layers::MultiHeadAttention(2, 2, {.attention_axes = {{3}}})({img, img});
              }),
              HasSubstr("attention_axes [3]: expected distinct axes"));
  EXPECT_THAT(error_of([&] {
                layers::MultiHeadAttention(2, 2, {.attention_axes = {{1, 1}}})({img, img});
              }),
              HasSubstr("attention_axes [1, 1]"));
  auto other = layers::Input({5, 4, 2});
  EXPECT_THAT(error_of([&] {
                layers::MultiHeadAttention(2, 2, {.attention_axes = {{1}}})({img, other});
              }),
              HasSubstr("the axes not in attention_axes must be equal"));
  auto ids = layers::Input({4, 3});
  auto e = layers::Embedding(10, 2, {.mask_zero = true})(ids);
  auto y = layers::MultiHeadAttention(2, 2, {.attention_axes = {{1}}})({e, e});
  Model m(ids, y);
  EXPECT_THAT(error_of([&] {
                m.predict(Tensor::from_vector<double>(std::vector<double>(24, 1.0), {2, 4, 3}));
              }),
              HasSubstr("Keras masks with attention_axes [1]"));
}

// The API: call_all gives the result and the scores; every call of a layer asks for them alike.
TEST(AttentionScores, FromTheApi) {
  clear_session();
  auto q = layers::Input({5, 4});
  auto mha = layers::MultiHeadAttention(2, 3, {.return_attention_scores = true});
  auto outs = mha.call_all({q, q});
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_EQ(outs[1].shape(), Shape({2, 5, 5}));
  EXPECT_THAT(error_of([&] {
                mha->read_keras_call(2, {}, nlohmann::ordered_json{{"return_attention_scores", false}});
              }),
              HasSubstr("return_attention_scores"));
  auto att = layers::Attention({.return_attention_scores = true}).call_all({q, q});
  ASSERT_EQ(att.size(), 2u);
  EXPECT_EQ(att[1].shape(), Shape({5, 5}));
  auto gqa = layers::GroupedQueryAttention(2, 4, 2, {.return_attention_scores = true}).call_all({q, q});
  ASSERT_EQ(gqa.size(), 2u);
  EXPECT_EQ(gqa[1].shape(), Shape({4, 5, 5}));
  Model m({q}, {outs[0], outs[1], att[1], gqa[1]});
  auto y = m.predict_outputs({systolic::testing::random_tensor({3, 5, 4}, 5)}, {.verbose = 0});
  ASSERT_EQ(y.size(), 4u);
  for (std::size_t i = 1; i < 4; ++i) {  // probabilities: every row sums to 1
    const std::vector<double> v = y[i].to_doubles();
    for (std::size_t r = 0; r < v.size() / 5; ++r) {
      double sum = 0;
      for (std::size_t s = 0; s < 5; ++s) sum += v[r * 5 + s];
      EXPECT_NEAR(sum, 1.0, 1e-6);
    }
  }
}

// use_gate: a gated MultiHeadAttention (a key of its own, value_dim) and a gated, causal GroupedQueryAttention, with
// drawn biases: as Keras predicts, the gate's weights between the key's and the value's as in Keras, written back
// as Keras writes them.
TEST(AttentionGate, PredictsAsKerasAndIsWrittenAsKerasWritesIt) {
  Model m = load_model(fixture("gate.keras"));
  auto npz = npy::load_npz(fixture("gate.npz"));
  Arrays x;
  for (const char* name : {"query", "value", "key"}) x.push_back(npz.at(name));
  Tensor p = m.predict(x, {.verbose = 0});
  EXPECT_LT(max_abs_diff(
                p, Tensor::from_vector(expected()["gate"]["predict"].get<std::vector<double>>(), p.shape())),
            1e-5);
  std::vector<Shape> shapes;
  for (const Tensor& w : m.get_weights()) shapes.push_back(w.shape());
  EXPECT_EQ(
      shapes,
      (std::vector<Shape>{
          {4, 2, 3}, {2, 3},    {2, 2, 3}, {2, 3},    {4, 2, 2},  // the gate: (Cq, heads, value_dim)
          {2, 2},    {3, 2, 2}, {2, 2},    {2, 2, 4}, {4},       {4, 4, 2},
          {4, 2},    {4, 2, 2}, {2, 2},    {4, 4, 2},  // GroupedQueryAttention's gate: (C, query heads, head_dim)
          {4, 2},    {4, 2, 2}, {2, 2},    {4, 2, 4}, {4}}));
  auto keras = keras_io::read_keras_archive_file(fixture("gate.keras")).config;
  auto gates = [](const json& config) {
    std::vector<json> out;
    for (auto& l : config["config"]["layers"])
      if (l["config"].contains("use_gate")) out.push_back(l["config"]["use_gate"]);
    return out;
  };
  const json ours = json::parse(m.to_json());
  EXPECT_EQ(gates(ours), (std::vector<json>{true, true}));
  EXPECT_EQ(gates(ours), gates(keras));
  systolic::testing::TempDir tmp;
  m.save(tmp.file("g.keras"));
  EXPECT_EQ(load_model(tmp.file("g.keras")).predict(x, {.verbose = 0}).to_doubles(), p.to_doubles());
}

// EinsumDense in the equations Keras's attention layers use ("abc,cde->abde", "abcd,cde->abe") and the others Keras
// lets a user write (an ellipsis on either side, the kernel, the input and the output moved, biases over some axes
// with 1s between): as Keras predicts, the weights in Keras's shapes, the configs written back as Keras writes them;
// what systolic does not run is refused by name.
TEST(EinsumDense, PredictsAsKerasAndIsWrittenAsKerasWritesIt) {
  Model m = load_model(fixture("einsum.keras"));
  auto npz = npy::load_npz(fixture("einsum.npz"));
  Tensor p = m.predict({npz.at("x")}, {.verbose = 0});
  EXPECT_LT(max_abs_diff(p, Tensor::from_vector(expected()["einsum"]["predict"].get<std::vector<double>>(),
                                                p.shape())),
            1e-5);
  std::vector<Shape> shapes;
  for (const Tensor& w : m.get_weights()) shapes.push_back(w.shape());
  EXPECT_EQ(shapes, (std::vector<Shape>{
                        {4, 2, 3}, {2, 3}, {2, 3, 4}, {4}, {4, 6}, {5, 3}, {3, 1}, {2, 4}, {2, 5}, {5, 2}}));
  auto keras = keras_io::read_keras_archive_file(fixture("einsum.keras")).config;
  auto configs = [](const json& config) {
    std::vector<json> out;
    for (auto& l : config["config"]["layers"])
      if (l["class_name"] == "EinsumDense") {
        json c = l["config"];
        c.erase("dtype");
        // Keras 3.15 writes the variance-scaling initializers' input_axes and output_axes (null here: EinsumDense
        // sets them on its own copy); systolic leaves them out, as Keras before 3.15 and tf.keras, which refuse them,
        // need. Compared without them.
        c["kernel_initializer"]["config"].erase("input_axes");
        c["kernel_initializer"]["config"].erase("output_axes");
        out.push_back(c);
      }
    return out;
  };
  const json ours = json::parse(m.to_json());
  ASSERT_EQ(configs(keras).size(), 6u);
  EXPECT_EQ(configs(ours), configs(keras));
  systolic::testing::TempDir tmp;
  m.save(tmp.file("e.keras"));
  EXPECT_EQ(load_model(tmp.file("e.keras")).predict({npz.at("x")}, {.verbose = 0}).to_doubles(),
            p.to_doubles());

  auto with = [&](auto change) {
    return systolic::testing::error_with_layer_changed(keras, "EinsumDense",
                                                       [&](json& l) { change(l["config"]); });
  };
  EXPECT_THAT(with([](json& c) {
                c["equation"] = "abc,bcd->abd";
                c["output_shape"] = {nullptr, 7};
                c["bias_axes"] = nullptr;
              }),
              HasSubstr("a batched product"));
  EXPECT_THAT(with([](json& c) {
                c["equation"] = "abc,cd->ad";
                c["output_shape"] = {7};
                c["bias_axes"] = nullptr;
              }),
              HasSubstr("a sum over it"));
  EXPECT_THAT(with([](json& c) { c["equation"] = "ab->ac"; }), HasSubstr("invalid einsum equation"));
  EXPECT_THAT(with([](json& c) { c["equation"] = "abc,cce->abde"; }), HasSubstr("twice"));
  EXPECT_THAT(with([](json& c) { c["equation"] = "abcd,cde->abde"; }), HasSubstr("the input has 3 axes"));
  EXPECT_THAT(with([](json& c) { c["output_shape"] = {7, 2, 3}; }), HasSubstr("do not match at shared"));
  EXPECT_THAT(with([](json& c) {
                c["output_shape"] = {nullptr, nullptr, 3};
              }),
              HasSubstr("output_shape must give the size of 'd'"));
  EXPECT_THAT(with([](json& c) { c["output_shape"] = {2, 3}; }), HasSubstr("gives 2 axes"));
  EXPECT_THAT(with([](json& c) { c["bias_axes"] = "bx"; }), HasSubstr("bias dimension 'x'"));
  EXPECT_THAT(with([](json& c) { c["bias_axes"] = "b"; }), HasSubstr("output_shape leaves None"));
  EXPECT_THAT(with([](json& c) { c["lora_rank"] = 4; }), HasSubstr("lora_rank"));
  EXPECT_THAT(with([](json& c) { c.erase("equation"); }), HasSubstr("equation"));
}

// Under mixed_bfloat16 (the data bfloat16, the weights float32): every path of EinsumDense trains (the product's own
// bias, a bias added by broadcasting, moved layouts) and predicts close to float32 weights' predictions.
TEST(EinsumDense, TrainsUnderMixedBfloat16) {
  trains_under_mixed_bfloat16(
      [](const SymbolicTensor& x) {
        auto h =
            layers::EinsumDense("abc,cde->abde", {6, 2, 4}, {.activation = "tanh", .bias_axes = "de"})(x);
        h = layers::EinsumDense("abcd,cde->abe", {6, 3}, {.bias_axes = "e"})(h);
        return layers::EinsumDense("abc,dc->adb", {2, 6}, {.bias_axes = "db"})(h);
      },
      3);
}

// The API: an attention-style projection and a moved one, as Keras sizes them.
TEST(EinsumDense, FromTheApi) {
  clear_session();
  auto x = layers::Input({5, 4});
  auto y = layers::EinsumDense("abc,cde->abde", {std::nullopt, 2, 3}, {.bias_axes = "de"})(x);
  EXPECT_EQ(y.shape(), Shape({5, 2, 3}));
  auto z = layers::EinsumDense("abc,dc->adb", {6, std::nullopt})(x);
  EXPECT_EQ(z.shape(), Shape({6, 5}));
  auto e = layers::EinsumDense("...b,bc->...c", {7})(x);
  EXPECT_EQ(e.shape(), Shape({5, 7}));
  Model m(x, z);
  ASSERT_EQ(m.get_weights().size(), 1u);
  EXPECT_EQ(m.get_weights()[0].shape(), Shape({6, 4}));
}

TEST(DotProductAttention, RefusesWhatItDoesNotRunByName) {
  auto keras = keras_io::read_keras_archive_file(fixture("luong.keras")).config;
  auto with = [&](auto change) {
    return systolic::testing::error_with_layer_changed(keras, "Attention", change);
  };
  EXPECT_THAT(with([](json& l) { l["config"]["score_mode"] = "cosine"; }),
              HasSubstr("must be \"dot\" or \"concat\""));
  EXPECT_THAT(with([](json& l) { l["inbound_nodes"][0]["kwargs"]["return_attention_scores"] = "yes"; }),
              HasSubstr("return_attention_scores"));
  clear_session();
  auto q = layers::Input({5, 4});
  auto v = layers::Input({6, 3});
  EXPECT_THAT(error_of([&] { layers::Attention()({q, v}); }), HasSubstr("as many features"));
  auto img = layers::Input({3, 4, 2});
  EXPECT_THAT(error_of([&] { layers::Attention()({img, img}); }), HasSubstr("(steps, features)"));
}

TEST(MultiHeadAttentionConfig, RefusesWhatItDoesNotRunByName) {
  auto keras = keras_io::read_keras_archive_file(fixture("call_forms.keras")).config;
  auto with = [&](auto change) {
    return systolic::testing::error_with_layer_changed(keras, "MultiHeadAttention", change);
  };
  EXPECT_THAT(with([](json& l) { l["config"]["use_gate"] = "yes"; }), HasSubstr("use_gate"));
  EXPECT_THAT(with([](json& l) { l["config"]["attention_axes"] = {2}; }), HasSubstr("attention_axes"));
  EXPECT_THAT(with([](json& l) { l["config"].erase("num_heads"); }), HasSubstr("num_heads"));
  EXPECT_THAT(with([](json& l) { l["config"]["sliding_window"] = 0; }), HasSubstr("sliding_window"));
  EXPECT_THAT(with([](json& l) { l["inbound_nodes"][0]["kwargs"]["return_attention_scores"] = 1; }),
              HasSubstr("return_attention_scores"));
  EXPECT_THAT(with([](json& l) { l["inbound_nodes"][0]["kwargs"]["use_causal_mask"] = "yes"; }),
              HasSubstr("use_causal_mask"));
  EXPECT_THAT(with([](json& l) { l["config"]["output_shape"] = "wide"; }), HasSubstr("output_shape"));
  EXPECT_THAT(
      with([](json& l) { l["inbound_nodes"][0]["kwargs"]["key"] = l["inbound_nodes"][0]["args"][2]; }),
      HasSubstr("and a key by keyword"));
  EXPECT_THAT(
      with([](json& l) { l["inbound_nodes"][0]["kwargs"]["query_mask"] = l["inbound_nodes"][0]["args"][0]; }),
      HasSubstr("query_mask"));
  // A tf.keras config cannot say these calls; systolic writes them for Keras 3 only.
  Model m = load_model(fixture("call_forms.keras"));
  systolic::testing::TempDir tmp;
  EXPECT_THAT(error_of([&] { m.save(tmp.file("m.h5"), {.keras = KerasTarget::tf_keras}); }),
              HasSubstr("save the model as .keras"));
}

TEST(MultiHeadAttentionXla, TrainingStepsMatchTheCpu) {
  SYSTOLIC_REQUIRE_XLA();
  Tensor x = systolic::testing::random_tensor({16, 6, 3}, 7);
  Tensor y({16}, DType::int32);
  for (std::int64_t i = 0; i < 16; ++i) y.data<std::int32_t>()[i] = static_cast<std::int32_t>(i % 3);
  auto train = [&](Device device) {
    clear_session();
    set_random_seed(4);
    auto in = layers::Input({6, 3});
    auto h = layers::MultiHeadAttention(2, 4, {.dropout = 0.2, .use_causal_mask = true})({in, in});
    h = layers::LayerNormalization()(h);
    h = layers::GlobalAveragePooling1D()(h);
    Model cpu_model(in, layers::Dense(3, {.activation = "softmax"})(h));
    cpu_model.compile(optimizers::Adam(0.01), "sparse_categorical_crossentropy");
    Model m = to_accelerator(cpu_model, distribute::OneDeviceStrategy(device));
    m.fit(x, y, {.batch_size = 8, .epochs = 2, .verbose = 0, .shuffle = false});
    return m.get_weights();
  };
  auto w_cpu = train(Device::cpu()), w_xla = train(systolic::testing::xla_cpu());
  ASSERT_EQ(w_cpu.size(), w_xla.size());
  for (std::size_t i = 0; i < w_cpu.size(); ++i)
    EXPECT_LT(max_abs_diff(w_cpu[i], w_xla[i].to(Device::cpu())), 1e-4) << "weight " << i;
}

// keras-io's position embeddings in a functional graph: Keras writes the eagerly computed embedding as a constant
// array of the add (a "__tensor__" argument). Read and run on xla:cpu as on the CPU (the array on the device); refused
// by name when it is not an array that broadcasts into the tensor.
std::string text_transformer(const std::string& ext) {
  return systolic::testing::source_dir() + "/tests/fixtures/keras_training/text_transformer" + ext;
}

TEST(ConstantArrayOperands, TrainOnXlaAsOnTheCpu) {
  SYSTOLIC_REQUIRE_XLA();
  auto d = datasets::load("npz:" + text_transformer(".npz"));
  auto train = [&](Device device) {
    Model m = to_accelerator(load_model(text_transformer(".keras")), distribute::OneDeviceStrategy(device));
    m.fit(d.train.x, d.train.y, {.batch_size = 16, .epochs = 1, .verbose = 0, .shuffle = false});
    return m.get_weights();
  };
  auto w_cpu = train(Device::cpu()), w_xla = train(systolic::testing::xla_cpu());
  ASSERT_EQ(w_cpu.size(), w_xla.size());
  for (std::size_t i = 0; i < w_cpu.size(); ++i)
    EXPECT_LT(max_abs_diff(w_cpu[i], w_xla[i].to(Device::cpu())), 1e-4) << "weight " << i;
}

TEST(ConstantArrayOperands, BadArraysAreRefusedByName) {
  auto config = keras_io::read_keras_archive_file(text_transformer(".keras")).config;
  auto changed = [&](auto change) {
    json c = config;
    for (auto& l : c["config"]["layers"])
      if (l["class_name"] == "Add") {
        change(l["inbound_nodes"][0]["args"][1]["config"]["value"]);
        break;
      }
    return c.dump();
  };
  auto with = [&](auto change) { return error_of([&] { model_from_json(changed(change)); }); };
  EXPECT_THAT(with([](json& v) { v[1] = json::array({1.0}); }), HasSubstr("not rectangular"));
  EXPECT_THAT(with([](json& v) { v[0][0] = "x"; }), HasSubstr("not a number"));
  EXPECT_THAT(with([](json& v) {
                v = json::array({json::array({1.0, 2.0, 3.0})});
              }),
              HasSubstr("does not broadcast"));
  EXPECT_NO_THROW(model_from_json(changed([](json& v) { v = json::array({0.5}); })));  // one value broadcasts
}
