// Transfer learning: frozen layers (trainable=false on a layer and on a model), a frozen BatchNormalization in
// inference mode during training, optimizer slots for trainable weights only, configs and real Keras files with
// frozen layers (tests/reference/transfer_files.py, tests/fixtures/transfer).
#include <gmock/gmock.h>
#include <systolic/systolic.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "test_util.h"

using namespace systolic;
using systolic::testing::bit_identical;
using systolic::testing::error_of;
using systolic::testing::max_abs_diff;
using systolic::testing::random_tensor;
using systolic::testing::read_floats;
using systolic::testing::read_text;
using systolic::testing::source_dir;
using systolic::testing::TempDir;

namespace {

std::string fixtures() {
  return source_dir() + "/tests/fixtures/transfer";
}

std::vector<Tensor> copies(const Model& m, const std::vector<std::string>& names) {
  std::vector<Tensor> out;
  for (auto& n : names)
    for (auto& w : m.get_layer(n)->weights()) out.push_back(w.value.clone());
  return out;
}

// A base (conv, BN, conv) and a head (dense) on 6x6x2 images; the classes depend on the pixels.
struct Problem {
  Tensor x, y;
};
Problem problem(std::int64_t n) {
  Tensor x = random_tensor({n, 6, 6, 2}, 11, DType::float32, 0, 1);
  Tensor y({n}, DType::int32);
  auto xv = x.to_doubles();
  for (std::int64_t i = 0; i < n; ++i) y.data<std::int32_t>()[i] = xv[static_cast<std::size_t>(i * 72)] > 0.5;
  return {x, y};
}

Model base_and_head() {
  namespace L = layers;
  set_random_seed(3);
  auto in = L::Input({6, 6, 2});
  auto x = L::Conv2D(4, {3, 3}, {.padding = "same", .activation = "relu", .name = "base_conv"})(in);
  x = L::BatchNormalization({.name = "base_bn"})(x);
  x = L::Conv2D(4, {3, 3}, {.activation = "relu", .name = "top_conv"})(x);
  x = L::Flatten()(x);
  auto out = L::Dense(2, {.activation = "softmax", .name = "head"})(x);
  return Model(in, out);
}

}  // namespace

TEST(Trainable, FrozenLayersKeepTheirWeightsBitIdenticalAndTheRestLearns) {
  auto m = base_and_head();
  m.get_layer("base_conv")->set_trainable(false);
  m.get_layer("base_bn")->set_trainable(false);
  m.compile(optimizers::Adam(0.01), "sparse_categorical_crossentropy", {"accuracy"});
  // The flat buffer and the optimizer's slots hold the trainable weights only (Keras: no slots for frozen ones).
  std::int64_t trainable = m.get_layer("top_conv")->count_params() + m.get_layer("head")->count_params();
  EXPECT_EQ(m.trainable_parameters().numel(), trainable);
  for (auto& [name, slot] : m.optimizer().slots()) EXPECT_EQ(slot.numel(), trainable) << name;
  EXPECT_NE(m.summary_string().find("Trainable params: " + std::to_string(trainable) + "\n"),
            std::string::npos)
      << m.summary_string();

  auto frozen = copies(m, {"base_conv", "base_bn"});
  auto top = copies(m, {"top_conv", "head"});
  auto data = problem(64);
  auto before = m.evaluate(data.x, data.y, {.verbose = 0})[0];
  m.fit(data.x, data.y, {.batch_size = 16, .epochs = 5, .verbose = 0});
  auto after = m.evaluate(data.x, data.y, {.verbose = 0})[0];
  EXPECT_LT(after, before);
  auto now = copies(m, {"base_conv", "base_bn"});
  ASSERT_EQ(now.size(), frozen.size());
  // Kernel, bias, gamma, beta and the moving statistics: a frozen BN normalises with them and does not update them.
  for (std::size_t i = 0; i < now.size(); ++i) EXPECT_TRUE(bit_identical(now[i], frozen[i])) << i;
  auto moved = copies(m, {"top_conv", "head"});
  for (std::size_t i = 0; i < moved.size(); ++i) EXPECT_FALSE(bit_identical(moved[i], top[i])) << i;
}

TEST(Trainable, GradientsFlowThroughFrozenLayersToEarlierOnes) {
  // Only the first conv trains: its gradient passes through a frozen BN (inference mode) and a frozen conv.
  auto m = base_and_head();
  m.get_layer("base_bn")->set_trainable(false);
  m.get_layer("top_conv")->set_trainable(false);
  m.get_layer("head")->set_trainable(false);
  m.compile(optimizers::SGD(0.1), "sparse_categorical_crossentropy");
  EXPECT_EQ(m.trainable_parameters().numel(), m.get_layer("base_conv")->count_params());
  auto first = copies(m, {"base_conv"});
  auto rest = copies(m, {"base_bn", "top_conv", "head"});
  auto data = problem(32);
  m.fit(data.x, data.y, {.batch_size = 32, .epochs = 1, .verbose = 0});
  auto now = copies(m, {"base_conv"});
  for (std::size_t i = 0; i < now.size(); ++i) EXPECT_FALSE(bit_identical(now[i], first[i])) << i;
  auto still = copies(m, {"base_bn", "top_conv", "head"});
  for (std::size_t i = 0; i < still.size(); ++i) EXPECT_TRUE(bit_identical(still[i], rest[i])) << i;
}

TEST(Trainable, ModelTrainableFreezesEveryLayerAndRecompilingApplies) {
  auto m = base_and_head();
  m.compile(optimizers::Adam(0.01), "sparse_categorical_crossentropy");
  std::int64_t total = m.count_params();
  m.set_trainable(false);
  EXPECT_FALSE(m.trainable());
  EXPECT_EQ(m.trainable_parameters().numel(), 0);
  for (auto& l : m.layers())
    if (!l->is_input_layer()) EXPECT_FALSE(l->trainable()) << l->name();
  EXPECT_NE(
      m.summary_string().find("Trainable params: 0\nNon-trainable params: " + std::to_string(total) + "\n"),
      std::string::npos)
      << m.summary_string();
  m.set_trainable(true);
  // A layer frozen after compile: fit refuses until the model is compiled again (Keras needs the recompile).
  m.get_layer("head")->set_trainable(false);
  auto data = problem(8);
  auto err = error_of([&] { m.fit(data.x, data.y, {.epochs = 1, .verbose = 0}); });
  EXPECT_NE(err.find("layer 'head'"), std::string::npos) << err;
  EXPECT_NE(err.find("compile the model again"), std::string::npos) << err;
  m.compile(optimizers::Adam(1e-5), "sparse_categorical_crossentropy");
  EXPECT_EQ(m.trainable_parameters().numel(), total - m.get_layer("head")->count_params() - 8);  // BN stats
  auto head = copies(m, {"head"});
  m.fit(data.x, data.y, {.epochs = 1, .verbose = 0});
  auto now = copies(m, {"head"});
  for (std::size_t i = 0; i < now.size(); ++i) EXPECT_TRUE(bit_identical(now[i], head[i]));
}

TEST(Trainable, ConfigsAndFilesKeepFrozenLayers) {
  auto m = base_and_head();
  m.get_layer("base_conv")->set_trainable(false);
  m.get_layer("base_bn")->set_trainable(false);
  m.compile(optimizers::Adam(0.01), "sparse_categorical_crossentropy");
  auto data = problem(16);
  m.fit(data.x, data.y, {.batch_size = 8, .epochs = 1, .verbose = 0});
  auto j = nlohmann::json::parse(m.to_json());
  for (auto& l : j["config"]["layers"]) {
    std::string name = l["config"]["name"];
    if (l["class_name"] == "InputLayer") continue;
    EXPECT_EQ(l["config"]["trainable"], name != "base_conv" && name != "base_bn") << name;
  }
  auto back = model_from_json(m.to_json());
  EXPECT_FALSE(back.get_layer("base_conv")->trainable());
  EXPECT_FALSE(back.get_layer("base_bn")->trainable());
  EXPECT_TRUE(back.get_layer("head")->trainable());
  EXPECT_EQ(back.trainable_parameters().numel(), m.trainable_parameters().numel());
  TempDir dir;
  auto path = dir.path() / "frozen.h5";
  m.save(path.string());
  auto loaded = load_model(path.string());
  EXPECT_FALSE(loaded.get_layer("base_bn")->trainable());
  EXPECT_LT(max_abs_diff(loaded.predict(data.x), m.predict(data.x)), 1e-6);
  // The optimizer state of the trainable weights comes back: one more step gives the same weights.
  m.fit(data.x, data.y, {.batch_size = 16, .epochs = 1, .verbose = 0, .shuffle = false});
  loaded.fit(data.x, data.y, {.batch_size = 16, .epochs = 1, .verbose = 0, .shuffle = false});
  EXPECT_LT(max_abs_diff(loaded.trainable_parameters(), m.trainable_parameters()), 1e-6);
}

TEST(Trainable, RealKerasFilesWithFrozenLayers) {
  auto manifest = nlohmann::json::parse(read_text(fixtures() + "/manifest.json"));
  auto& want_counts = manifest["frozen"];
  Tensor x = read_floats(fixtures() + "/inputs.bin", {4, 8, 8, 3});
  Tensor want = read_floats(fixtures() + "/frozen.predictions.bin", {4, 3});
  auto check = [&](Model& model) {
    EXPECT_LT(max_abs_diff(model.predict(x), want), 1e-5);
    std::int64_t trainable = 0;
    for (auto& l : model.layers()) trainable += l->count_trainable_params();
    EXPECT_EQ(trainable, want_counts["trainable_params"].get<std::int64_t>());
    EXPECT_EQ(model.count_params() - trainable, want_counts["non_trainable_params"].get<std::int64_t>());
    EXPECT_FALSE(model.layers()[1]->trainable());
    EXPECT_FALSE(model.layers()[2]->trainable());
    EXPECT_EQ(model.trainable_parameters().numel(), trainable);
  };
  for (const char* tag : {"keras3", "tfkeras"}) {
    SCOPED_TRACE(tag);
    auto full = load_model(fixtures() + "/frozen." + std::string(tag) + ".h5");
    check(full);
    ASSERT_TRUE(full.compiled());
    EXPECT_EQ(full.optimizer().iterations(), want_counts["iterations"].get<int>());
    for (auto& [name, slot] : full.optimizer().slots())
      EXPECT_EQ(slot.numel(), want_counts["trainable_params"].get<std::int64_t>());
    auto from_json = model_from_json_file(fixtures() + "/frozen." + std::string(tag) + ".json");
    from_json.load_weights(fixtures() + "/frozen.keras3.weights.h5");
    check(from_json);
  }
}

// Finite differences in double precision: a BatchNormalization in inference mode (frozen, so in training too; or
// trainable under a training=false call) passes dx = gamma*dy/sqrt(var+eps) back and, when trainable, gives gamma
// and beta their gradients with the moving statistics.
TEST(Trainable, BatchNormalizationInferenceModeGradients) {
  set_floatx(DType::float64);
  for (bool frozen : {true, false}) {
    SCOPED_TRACE(frozen ? "frozen, training step" : "trainable, inference call");
    auto bn = layers::BatchNormalization();
    auto in = layers::Input({3, 2, 4}, {.dtype = DType::float64});
    auto out = bn(in);
    for (std::size_t k = 0; k < bn->weights().size(); ++k)
      bn->weights()[k].value.copy_from(random_tensor({4}, 20 + k, DType::float64, 0.5, 1.5));
    bn->set_trainable(!frozen);
    Tensor x = random_tensor({2, 3, 2, 4}, 5, DType::float64);
    Tensor r = random_tensor({2, 3, 2, 4}, 6, DType::float64);
    TrainingStep step;
    auto run = [&](LayerCall& c) {
      c.inputs = {x};
      c.output = Tensor(out.shape().with_batch(2), DType::float64);
      c.training = frozen ? &step : nullptr;
      bn->call_forward(c);
    };
    auto moving = bn->weights()[2].value.clone();
    auto loss = [&] {
      LayerCall c;
      run(c);
      auto y = c.output.to_doubles(), rv = r.to_doubles();
      double s = 0;
      for (std::size_t i = 0; i < y.size(); ++i) s += y[i] * rv[i];
      return s;
    };
    LayerCall c;
    run(c);
    EXPECT_TRUE(bit_identical(bn->weights()[2].value, moving));  // no moving-average update
    for (auto& w : bn->weights())
      if (w.trainable) w.grad.fill(0.0);
    c.doutput = r.clone();
    c.dinputs = {Tensor::full(x.shape(), 7.0, DType::float64)};
    bn->call_backward(c, false);
    auto numeric = [&](Tensor& t, const Tensor& analytic, const std::string& what) {
      double* p = t.data<double>();
      auto a = analytic.to_doubles();
      for (std::int64_t i = 0; i < t.numel(); ++i) {
        double keep = p[i];
        p[i] = keep + 1e-5;
        double up = loss();
        p[i] = keep - 1e-5;
        double down = loss();
        p[i] = keep;
        double num = (up - down) / 2e-5;
        EXPECT_LT(std::abs(a[i] - num) / std::max(1.0, std::abs(num)), 1e-6) << what << "[" << i << "]";
      }
    };
    numeric(x, c.dinputs[0], "dx");
    for (auto& w : bn->weights()) {
      if (frozen) {
        EXPECT_FALSE(w.grad.defined()) << w.name;  // no weight-gradient work for frozen weights
      }
      if (w.trainable) numeric(w.value, w.grad, "d" + w.name);
    }
  }
  set_floatx(DType::float32);
}

// ---- nested models ----------------------------------------------------------------------------------------------

namespace {

// base: conv, BN, relu and a nested Sequential stem (1x1 conv, BN); outer: base(x, training=false), GAP, dense.
struct Nested {
  Model base, outer;
};
Nested nested_model() {
  namespace L = layers;
  set_random_seed(5);
  auto bi = L::Input({6, 6, 2});
  auto x = L::Conv2D(4, {3, 3}, {.padding = "same"})(bi);
  x = L::BatchNormalization()(x);
  x = L::Activation("relu")(x);
  Sequential stem({L::Input({6, 6, 4}), L::Conv2D(4, {1, 1}), L::BatchNormalization()}, "stem");
  x = stem(x);
  Model base(bi, x, "base");
  auto in = L::Input({6, 6, 2});
  auto y = base(in, false);
  y = L::GlobalAveragePooling2D()(y);
  auto out = L::Dense(2, {.activation = "softmax", .name = "head"})(y);
  return {base, Model(in, out, "outer")};
}

std::vector<Tensor> base_weights(Model& base) {
  std::vector<Tensor> out;
  for (auto& l : base.layers())
    for (auto* w : all_weights(*l)) out.push_back(w->value.clone());
  return out;
}

}  // namespace

TEST(Nested, ModelCalledAsALayerIsOneLayerOfTheCaller) {
  auto [base, outer] = nested_model();
  auto layers = outer.layers();
  ASSERT_EQ(layers.size(), 4u);
  EXPECT_EQ(layers[1]->name(), "base");
  EXPECT_EQ(layers[1]->class_name(), "Functional");
  EXPECT_EQ(base.layers().back()->class_name(), "Sequential");
  EXPECT_EQ(layers[1]->count_params(), base.count_params());
  EXPECT_EQ(outer.count_params(), base.count_params() + 4 * 2 + 2);
  auto summary = outer.summary_string();
  EXPECT_NE(summary.find("base (Functional)"), std::string::npos) << summary;
  // Keras's weight order: the nested model's weights where it stands in model.layers.
  EXPECT_EQ(outer.trainable_parameters().numel(), base.count_params() - 16 + 10);  // 16 BN moving statistics
  // Predict runs the nested layers on the caller's input.
  Tensor x = random_tensor({3, 6, 6, 2}, 9);
  Tensor features = base.predict(x);
  EXPECT_EQ(outer.predict(x).shape(), Shape({3, 2}));
  EXPECT_EQ(features.shape(), Shape({3, 6, 6, 4}));
}

TEST(Nested, FrozenBaseThenFineTuneInInferenceMode) {
  auto [base, outer] = nested_model();
  base.set_trainable(false);
  outer.compile(optimizers::Adam(0.01), "sparse_categorical_crossentropy", {"accuracy"});
  EXPECT_EQ(outer.trainable_parameters().numel(), 10);
  for (auto& [name, slot] : outer.optimizer().slots()) EXPECT_EQ(slot.numel(), 10);
  auto frozen = base_weights(base);
  auto head = copies(outer, {"head"});
  auto data = problem(64);
  Tensor x = data.x.slice(0, 64);
  auto before = outer.evaluate(x, data.y, {.verbose = 0})[0];
  outer.fit(x, data.y, {.batch_size = 16, .epochs = 5, .verbose = 0});
  EXPECT_LT(outer.evaluate(x, data.y, {.verbose = 0})[0], before);
  auto now = base_weights(base);
  for (std::size_t i = 0; i < now.size(); ++i) EXPECT_TRUE(bit_identical(now[i], frozen[i])) << i;
  auto moved = copies(outer, {"head"});
  for (std::size_t i = 0; i < moved.size(); ++i) EXPECT_FALSE(bit_identical(moved[i], head[i])) << i;

  // Unfreeze and compile again (Keras's fine-tuning step): the base's kernels move, but its batch norms stay in
  // inference mode (the call said training=false), so their moving statistics do not.
  base.set_trainable(true);
  outer.compile(optimizers::Adam(1e-3), "sparse_categorical_crossentropy", {"accuracy"});
  EXPECT_EQ(outer.trainable_parameters().numel(), outer.count_params() - 16);
  outer.fit(x, data.y, {.batch_size = 16, .epochs = 1, .verbose = 0});
  auto tuned = base_weights(base);
  ASSERT_EQ(tuned.size(), 12u);
  EXPECT_FALSE(bit_identical(tuned[0], frozen[0]));  // conv kernel
  for (std::size_t i : {4u, 5u, 10u, 11u}) EXPECT_TRUE(bit_identical(tuned[i], frozen[i])) << i;
}

TEST(Nested, ConfigsAndFilesKeepTheNesting) {
  auto [base, outer] = nested_model();
  base.set_trainable(false);
  outer.compile(optimizers::Adam(0.01), "sparse_categorical_crossentropy");
  auto data = problem(16);
  outer.fit(data.x, data.y, {.batch_size = 8, .epochs = 1, .verbose = 0});
  auto j = nlohmann::json::parse(outer.to_json());
  auto& entry = j["config"]["layers"][1];
  EXPECT_EQ(entry["class_name"], "Functional");
  EXPECT_EQ(entry["config"]["trainable"], false);
  EXPECT_EQ(entry["inbound_nodes"][0][0][3]["training"], false);
  auto back = model_from_json(outer.to_json());
  ASSERT_EQ(back.layers().size(), 4u);
  EXPECT_EQ(back.layers()[1]->class_name(), "Functional");
  EXPECT_FALSE(back.layers()[1]->trainable());
  EXPECT_EQ(back.trainable_parameters().numel(), 10);
  TempDir dir;
  for (const char* file : {"n.h5", "n.weights.h5"}) {
    SCOPED_TRACE(file);
    auto path = (dir.path() / file).string();
    outer.save_weights(path);
    auto other = model_from_json(outer.to_json());
    other.load_weights(path);
    EXPECT_LT(max_abs_diff(other.predict(data.x), outer.predict(data.x)), 1e-6);
  }
  auto path = (dir.path() / "full.h5").string();
  outer.save(path);
  auto loaded = load_model(path);
  EXPECT_LT(max_abs_diff(loaded.predict(data.x), outer.predict(data.x)), 1e-6);
  outer.fit(data.x, data.y, {.batch_size = 16, .epochs = 1, .verbose = 0, .shuffle = false});
  loaded.fit(data.x, data.y, {.batch_size = 16, .epochs = 1, .verbose = 0, .shuffle = false});
  EXPECT_LT(max_abs_diff(loaded.predict(data.x), outer.predict(data.x)), 1e-6);
}

TEST(Nested, RealKerasFilesWithANestedFrozenBase) {
  auto manifest = nlohmann::json::parse(read_text(fixtures() + "/manifest.json"));
  auto& want_counts = manifest["nested"];
  Tensor x = read_floats(fixtures() + "/inputs.bin", {4, 8, 8, 3});
  Tensor want = read_floats(fixtures() + "/nested.predictions.bin", {4, 3});
  auto check = [&](Model& model) {
    EXPECT_LT(max_abs_diff(model.predict(x), want), 1e-5);
    ASSERT_EQ(model.layers().size(), 4u);
    EXPECT_EQ(model.layers()[1]->name(), "base");
    EXPECT_EQ(model.layers()[1]->class_name(), "Functional");
    EXPECT_FALSE(model.layers()[1]->trainable());
    EXPECT_EQ(model.trainable_parameters().numel(), want_counts["trainable_params"].get<std::int64_t>());
    EXPECT_EQ(model.count_params() - model.trainable_parameters().numel(),
              want_counts["non_trainable_params"].get<std::int64_t>());
  };
  for (const char* tag : {"keras3", "tfkeras"}) {
    SCOPED_TRACE(tag);
    auto full = load_model(fixtures() + "/nested." + std::string(tag) + ".h5");
    check(full);
    ASSERT_TRUE(full.compiled());
    EXPECT_EQ(full.optimizer().iterations(), want_counts["iterations"].get<int>());
    auto from_json = model_from_json_file(fixtures() + "/nested." + std::string(tag) + ".json");
    from_json.load_weights(fixtures() + "/nested.keras3.weights.h5");
    check(from_json);
  }
}

// ---- nested models of several outputs, called more than once; configs for Keras 3 and for tf.keras ------------

namespace {

// The node index and tensor index of every reference a layer's calls make to `to` in a config's layer list.
std::vector<std::pair<int, int>> refs_to(const nlohmann::json& config, const std::string& layer,
                                         const std::string& to) {
  std::vector<std::pair<int, int>> out;
  for (auto& l : config["config"]["layers"])
    if (l["name"] == layer)
      for (auto& call : l["inbound_nodes"])
        for (auto& ref : call)
          if (ref[0] == to) out.emplace_back(ref[1].get<int>(), ref[2].get<int>());
  return out;
}

void copy_weights(const Model& from, Model& to) {
  auto a = from.layers(), b = to.layers();
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    auto wa = all_weights(*a[i]), wb = all_weights(*b[i]);
    ASSERT_EQ(wa.size(), wb.size()) << a[i]->name();
    for (std::size_t k = 0; k < wa.size(); ++k) wb[k]->value.copy_from(wa[k]->value);
  }
}

}  // namespace

// Keras 3's model (tests/reference/nested_models.py): base with two outputs called with training=False, head (a
// Sequential) called twice. Loaded from .keras and from Keras 3's .h5, it predicts Keras's values; the configs
// systolic writes number the nested calls from 0 for Keras 3 and from 1 for tf.keras (whose node 0 is the model's
// own), take base's second output as tensor 1, and read back into the same model either way.
TEST(Nested, SeveralOutputsAndTwoCallsFromKeras) {
  const std::string dir = source_dir() + "/tests/fixtures/nested";
  Tensor x = read_floats(dir + "/multi.inputs.bin", {4, 6, 6, 2});
  Tensor want = read_floats(dir + "/multi.predictions.bin", {4, 3});
  for (const char* file : {"multi.keras", "multi.keras3.h5"}) {
    SCOPED_TRACE(file);
    auto model = load_model(dir + "/" + file, {.compile = false});
    EXPECT_LT(max_abs_diff(model.predict(x), want), 1e-6);
    auto summary = model.summary_string();
    // Both output shapes (cut at the column's width, as tf.keras's table cuts fields).
    EXPECT_NE(summary.find("base (Functional)               [(None, 4), (None, 2 171"), std::string::npos)
        << summary;
    for (auto target : {KerasTarget::keras3, KerasTarget::tf_keras}) {
      const int first = target == KerasTarget::tf_keras ? 1 : 0;
      auto text = model.to_json(-1, target);
      auto config = nlohmann::json::parse(text);
      using Refs = std::vector<std::pair<int, int>>;
      EXPECT_EQ(refs_to(config, "dense_3", "base"), (Refs{{first, 1}}));
      EXPECT_EQ(refs_to(config, "head", "base"), (Refs{{first, 0}}));
      EXPECT_EQ(refs_to(config, "concatenate", "head"), (Refs{{first, 0}, {first + 1, 0}}));
      auto again = model_from_json(text);
      copy_weights(model, again);
      EXPECT_LT(max_abs_diff(again.predict(x), want), 1e-6);
      TempDir tmp;
      model.save(tmp.file("m.h5"), {.keras = target});
      EXPECT_LT(max_abs_diff(load_model(tmp.file("m.h5")).predict(x), want), 1e-6);
    }
  }
}

// The same through the C++ API: a model of two outputs called as a layer gives both; training the caller trains
// the nested layers; each file kind reads back into the same predictions; what cannot be written for tf.keras,
// or called for one output, is refused by name.
TEST(Nested, SeveralOutputsInCpp) {
  namespace L = layers;
  set_random_seed(9);
  auto bi = L::Input({6, 6, 2});
  auto h = L::Conv2D(3, {3, 3}, {.activation = "relu"})(bi);
  auto a = L::Dense(4)(L::GlobalAveragePooling2D()(h));
  auto b = L::Dense(2)(L::Flatten()(h));
  Model base({bi}, {a, b}, "two");
  auto in = L::Input({6, 6, 2});
  auto outs = base.call({in});
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_EQ(outs[0].shape(), Shape({4}));
  EXPECT_EQ(outs[1].shape(), Shape({2}));
  auto y = L::Dense(2, {.activation = "softmax"})(L::Concatenate()({outs[0], outs[1]}));
  Model model(in, y, "outer");
  EXPECT_THAT(error_of([&] { base(in); }), ::testing::HasSubstr("has 2 outputs"));
  model.compile("adam", "sparse_categorical_crossentropy");
  auto data = problem(16);
  auto before = base_weights(base);
  model.fit(data.x, data.y, {.batch_size = 8, .epochs = 1, .verbose = 0});
  EXPECT_FALSE(bit_identical(base_weights(base)[0], before[0]));
  Tensor want = model.predict(data.x);
  TempDir tmp;
  for (auto target : {KerasTarget::keras3, KerasTarget::tf_keras})
    for (const char* file : {"m.h5", "m.keras"}) {
      SCOPED_TRACE(file);
      if (target == KerasTarget::tf_keras && std::string(file) == "m.keras") {
        EXPECT_THAT(error_of([&] { model.save(tmp.file(file), {.keras = target}); }),
                    ::testing::HasSubstr("tf.keras reads neither"));
        continue;
      }
      model.save(tmp.file(file), {.keras = target});
      auto back = load_model(tmp.file(file));
      EXPECT_LT(max_abs_diff(back.predict(data.x), want), 1e-6);
      EXPECT_EQ(back.layers()[1]->class_name(), "Functional");
    }
}
