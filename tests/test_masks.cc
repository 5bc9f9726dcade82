// Keras's masks beyond the Keras fixtures (the keras_training cases "masked_text", Embedding(mask_zero=True) into a
// Bidirectional LSTM and a GRU, and "masked_series", Masking through a Dense into LSTMs, train on from Keras's
// state): padded steps leave the recurrent layers' results and GlobalAveragePooling1D's as the unpadded sequence gives
// them, the layers that would read a mask systolic does not handle yet refuse it, and a masked model trains on XLA as
// on the CPU.
#include <gmock/gmock.h>
#include <systolic/systolic.h>

#include "test_util.h"
#include "xla_test_util.h"

using namespace systolic;
using systolic::testing::error_of;
using ::testing::HasSubstr;

namespace {

// Embedding(mask_zero) -> Bidirectional(LSTM, sequences) -> GRU -> Dense over `steps` ids.
Model text_model(std::int64_t steps) {
  set_random_seed(5);
  auto in = layers::Input({steps});
  auto x = layers::Embedding(20, 4, {.mask_zero = true})(in);
  x = layers::Bidirectional(layers::LSTM(3, {.return_sequences = true}))(x);
  x = layers::GRU(3)(x);
  return Model(in, layers::Dense(2)(x), "text");
}

}  // namespace

// Ids padded with zeros at the end give what the unpadded ids give: the masked steps keep every state (the
// backward run starts from the padding, whose steps keep its zero state).
TEST(Masks, PaddedIdsGiveWhatTheUnpaddedGive) {
  Model padded = text_model(7), short_one = text_model(4);
  short_one.set_weights(padded.get_weights());
  Tensor ids = Tensor::from_vector(std::vector<float>{3, 7, 1, 12, 0, 0, 0, 5, 5, 9, 2, 0, 0, 0}, {2, 7});
  Tensor cut = Tensor::from_vector(std::vector<float>{3, 7, 1, 12, 5, 5, 9, 2}, {2, 4});
  auto a = padded.predict(ids).to_doubles(), b = short_one.predict(cut).to_doubles();
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6) << i;
  // Without the mask the padding counts.
  set_random_seed(5);
  auto in = layers::Input({7});
  auto x = layers::Embedding(20, 4)(in);
  x = layers::Bidirectional(layers::LSTM(3, {.return_sequences = true}))(x);
  x = layers::GRU(3)(x);
  Model unmasked(in, layers::Dense(2)(x), "unmasked");
  unmasked.set_weights(padded.get_weights());
  auto c = unmasked.predict(ids).to_doubles();
  double differs = 0;
  for (std::size_t i = 0; i < a.size(); ++i) differs = std::max(differs, std::abs(a[i] - c[i]));
  EXPECT_GT(differs, 1e-3);
}

// Masking: steps of zeros are skipped by the LSTM (through a Dense, which passes the mask on) and zeroed in the
// output.
TEST(Masks, MaskingSkipsZeroSteps) {
  auto make = [](std::int64_t steps) {
    set_random_seed(6);
    auto in = layers::Input({steps, 2});
    auto x = layers::Masking()(in);
    x = layers::Dense(3, {.activation = "tanh"})(x);
    x = layers::LSTM(3)(x);
    return Model(in, x, "series");
  };
  Model padded = make(5), short_one = make(3);
  short_one.set_weights(padded.get_weights());
  Tensor x = Tensor::from_vector(std::vector<float>{0.5f, -1, 2, 0.25f, -0.5f, 0, 0, 0, 0, 0}, {1, 5, 2});
  Tensor cut = Tensor::from_vector(std::vector<float>{0.5f, -1, 2, 0.25f, -0.5f, 0}, {1, 3, 2});
  auto a = padded.predict(x).to_doubles(), b = short_one.predict(cut).to_doubles();
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6) << i;
  // Masking alone: the padded steps' values are zeroed (here they already are: a step of other values is kept).
  auto in = layers::Input({3, 2});
  Model alone(in, layers::Masking({.mask_value = 1.0})(in), "alone");
  Tensor y = alone.predict(Tensor::from_vector(std::vector<float>{1, 1, 1, 2, 3, 4}, {1, 3, 2}));
  EXPECT_EQ(y.to_doubles(), (std::vector<double>{0, 0, 1, 2, 3, 4}));
}

// GlobalAveragePooling1D averages the unmasked steps alone (Keras's): padded ids give what the unpadded give, and the
// padding would count without the mask. A fully padded row gives NaN, as Keras's 0 / 0.
TEST(Masks, GlobalAveragePooling1DAveragesTheUnmaskedSteps) {
  auto make = [](std::int64_t steps, bool mask_zero) {
    set_random_seed(8);
    auto in = layers::Input({steps});
    auto x = layers::Embedding(10, 4, {.mask_zero = mask_zero})(in);
    return Model(in, layers::Dense(2)(layers::GlobalAveragePooling1D()(x)), "gap");
  };
  Model padded = make(6, true), short_one = make(3, true), unmasked = make(6, false);
  Tensor ids = Tensor::from_vector(std::vector<float>{3, 7, 1, 0, 0, 0, 5, 0, 9, 0, 0, 0}, {2, 6});
  // Row 0 is (3, 7, 1) padded; row 1 (5, 9) with a masked step between them.
  auto a = padded.predict(ids).to_doubles();
  auto b = short_one.predict(Tensor::from_vector(std::vector<float>{3, 7, 1}, {1, 3})).to_doubles();
  auto c = make(2, true).predict(Tensor::from_vector(std::vector<float>{5, 9}, {1, 2})).to_doubles();
  for (int i = 0; i < 2; ++i) {
    EXPECT_NEAR(a[i], b[i], 1e-6) << i;
    EXPECT_NEAR(a[2 + i], c[i], 1e-6) << i;
  }
  EXPECT_NE(unmasked.predict(ids).to_doubles(), a);
  auto empty = padded.predict(Tensor::zeros({1, 6})).to_doubles();
  EXPECT_TRUE(std::isnan(empty[0]));
}

// The merges pass on their inputs' masks combined as Keras 3 combines them (the masked_merges fixture checks every
// combination against Keras): padded ids through Add, Subtract and Concatenate along the steps into an LSTM give what
// the unpadded ids give. (Maximum and Minimum: the masked_extrema fixture; GradientCheck.MergesOfMaskedInputs.)
TEST(Masks, MergesPassTheMasksOn) {
  auto make = [](std::int64_t steps) {
    set_random_seed(31);
    auto in = layers::Input({steps});
    auto a = layers::Embedding(10, 4, {.mask_zero = true})(in);
    auto s = layers::Add()({a, layers::Dense(4)(a)});
    auto v = layers::Subtract()({s, layers::Dense(4)(s)});
    auto t = layers::Concatenate({.axis = 1})({v, a});  // the steps of both, masked as they are
    return Model(in, layers::Dense(2)(layers::LSTM(3)(t)), "merged");
  };
  Model padded = make(6), short_one = make(3);
  auto a = padded.predict(Tensor::from_vector(std::vector<float>{3, 7, 1, 0, 0, 0}, {1, 6})).to_doubles();
  auto b = short_one.predict(Tensor::from_vector(std::vector<float>{3, 7, 1}, {1, 3})).to_doubles();
  for (int i = 0; i < 2; ++i) EXPECT_NEAR(a[i], b[i], 1e-6) << i;
}

TEST(Masks, LayersThatDropAMaskDropIt) {
  auto in = layers::Input({6});
  auto x = layers::Embedding(10, 4, {.mask_zero = true})(in);
  // A layer that Keras lets drop the mask drops it (Conv1D, GlobalMaxPooling1D).
  Model conv(in, layers::GlobalMaxPooling1D()(layers::Conv1D(3, 2)(x)), "conv");
  EXPECT_EQ(conv.predict(Tensor::from_vector(std::vector<float>{1, 2, 0, 0, 0, 0}, {1, 6})).shape(),
            (Shape{1, 3}));
}

// A masked output, as Keras weighs it (apply_mask): the loss and the accuracy of per-step labels mean over the
// unmasked steps alone, so that ids padded with 0 (whatever the padded steps' labels) evaluate and train as the
// unpadded ids do. Two sequences of 4 and 2 ids in a batch of 2 padded to 6, against each alone unpadded: the
// padded batch's loss is the mean over its 6 unmasked steps.
TEST(Masks, LossAndMetricsMeanOverTheUnmaskedSteps) {
  auto make = [](std::int64_t steps) {
    set_random_seed(32);
    auto in = layers::Input({steps});
    auto x = layers::Embedding(10, 4, {.mask_zero = true})(in);
    auto h = layers::LSTM(5, {.return_sequences = true})(x);
    Model m(in, layers::Dense(3, {.activation = "softmax"})(h), "tagger");
    m.compile(optimizers::SGD(0.5), "sparse_categorical_crossentropy", {"accuracy"});
    return m;
  };
  Model padded = make(6);
  const Tensor x = Tensor::from_vector(std::vector<float>{3, 7, 1, 4, 0, 0, 2, 9, 0, 0, 0, 0}, {2, 6});
  const Tensor y = Tensor::from_vector(std::vector<float>{0, 2, 1, 1, 2, 2, 1, 0, 1, 1, 1, 1}, {2, 6});
  auto both = padded.evaluate(x, y, {.batch_size = 2, .verbose = 0});
  // Each alone, unpadded: its loss sum and correct steps.
  double loss = 0, correct = 0;
  for (auto [ids, labels] : {std::pair{std::vector<float>{3, 7, 1, 4}, std::vector<float>{0, 2, 1, 1}},
                             std::pair{std::vector<float>{2, 9}, std::vector<float>{1, 0}}}) {
    const auto steps = std::int64_t(ids.size());
    Model one = make(steps);
    auto r = one.evaluate(Tensor::from_vector(ids, {1, steps}), Tensor::from_vector(labels, {1, steps}),
                          {.batch_size = 1, .verbose = 0});
    loss += r[0] * double(steps);  // [loss, accuracy]
    correct += r[1] * double(steps);
  }
  EXPECT_NEAR(both[0], loss / 6, 1e-6);
  EXPECT_NEAR(both[1], correct / 6, 1e-9);
  // Labels one per step: (N,) labels are refused by name.
  EXPECT_THAT(error_of([&] {
                padded.evaluate(x, Tensor::from_vector(std::vector<float>{0, 1}, {2}), {.verbose = 0});
              }),
              HasSubstr("takes one integer label per row of the output (6, 3): shape (N, 6)"));
  // Training: a step on the padded batch moves the weights as a step on the unpadded steps' mean does; the labels
  // of the padded steps change nothing.
  Tensor other = Tensor::from_vector(std::vector<float>{0, 2, 1, 1, 0, 0, 1, 0, 2, 0, 2, 0}, {2, 6});
  Model a = make(6), b = make(6);
  a.fit(x, y, {.batch_size = 2, .epochs = 1, .verbose = 0, .shuffle = false});
  b.fit(x, other, {.batch_size = 2, .epochs = 1, .verbose = 0, .shuffle = false});
  auto wa = a.get_weights(), wb = b.get_weights();
  ASSERT_EQ(wa.size(), wb.size());
  for (std::size_t i = 0; i < wa.size(); ++i) EXPECT_EQ(wa[i].to_doubles(), wb[i].to_doubles()) << i;
  auto before = make(6).get_weights();
  EXPECT_NE(wa[0].to_doubles(), before[0].to_doubles());
}

// The tagger fixture trained one epoch on xla:cpu as on the CPU, and evaluated: Embedding's gather and scatter-add,
// the mask, an LSTM and a Bidirectional GRU in one compiled step, the loss and metrics weighed by the output's mask
// (ops::mask_weights) over per-step labels. (It took the place of the masked_text fixture, whose Bidirectional LSTM
// and GRU it covers, to keep the test's XLA compilations to two.)
TEST(Masks, TrainsOnXlaAsOnTheCpu) {
  SYSTOLIC_REQUIRE_XLA();
  const std::string dir = systolic::testing::source_dir() + "/tests/fixtures/keras_training/";
  for (const std::string name : {"tagger"}) {
    SCOPED_TRACE(name);
    auto d = datasets::load("npz:" + dir + name + ".npz");
    FitOptions o{.batch_size = 16, .epochs = 1, .verbose = 0, .shuffle = false};
    Model cpu = load_model(dir + name + ".keras");
    cpu.fit(d.train.x, d.train.y, o);
    Model xla = to_accelerator(load_model(dir + name + ".keras"),
                               distribute::OneDeviceStrategy(systolic::testing::xla_cpu()));
    xla.fit(d.train.x, d.train.y, o);
    EXPECT_EQ(xla.step_mode(), "graph") << xla.step_mode_reason();
    auto a = cpu.get_weights(), b = xla.get_weights();
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t k = 0; k < a.size(); ++k)
      EXPECT_LT(systolic::testing::normalised_max_error(b[k].to(Device::cpu()), a[k]), 1e-5) << k;
    const auto ce = cpu.evaluate(d.test.x, d.test.y, {.batch_size = 16, .verbose = 0});
    const auto xe = xla.evaluate(d.test.x, d.test.y, {.batch_size = 16, .verbose = 0});
    ASSERT_EQ(ce.size(), xe.size());
    for (std::size_t k = 0; k < ce.size(); ++k) EXPECT_NEAR(xe[k], ce[k], 1e-5) << k;
  }
}
