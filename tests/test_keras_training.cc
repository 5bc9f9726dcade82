// Keras 3 models compiled with the training surface beyond the seed's, against real Keras
// (tests/fixtures/keras_training, written by tests/reference/keras_training.py with Keras 3.15): a binary
// classifier (sigmoid, BinaryCrossentropy with label smoothing, Nadam with weight decay, integer labels from
// numpy), a regression (Huber, Adamax with clipnorm, MAE, RMSE and MSE metrics) and a three-column regression
// (MSE, Lion with global_clipnorm, MAE and LogCoshError), and a small CNN trained with Adafactor (its second
// moments factored over a conv kernel's and a dense kernel's last two axes; weight decay), each saved by Keras after
// two epochs with its optimizer state, and a dense classifier trained with Muon (its first kernel orthogonalised,
// the head excluded by name), and a sequence classifier of the 1-D layers (causal dilated and strided Conv1D,
// MaxPooling1D, GlobalAveragePooling1D) trained with Adam, and a text classifier (Embedding over int64 word ids,
// Conv1D, GlobalAveragePooling1D) trained with SGD, and a recurrent classifier (a Conv1D, an LSTM's sequences into
// a Bidirectional GRU, a SimpleRNN run backwards beside them) trained with Adam, and two with Keras's masks
// (Embedding(mask_zero=True) into a Bidirectional LSTM and a GRU, with SGD; Masking through a Dense into LSTMs, with
// Adam), and losses over sequences (per-step labels under a mask with accuracy and top-2 accuracy; per-step one-hot
// targets; a masked per-step regression with MAE and RootMeanSquaredError, which Keras does not mask), and Maximum
// and Minimum of masked inputs, and attention (keras-io's time-series transformer without dropout; Embedding(mask_zero)
// into causal self-attention and cross-attention with its own key; a text transformer whose position embeddings
// Keras wrote as a constant array of an add, its padding mask reaching the attention's keys). systolic loads
// each .keras and its .npz data (npz:PATH),
// evaluates as Keras did within 2e-3, and trains on from Keras's optimizer state to Keras's weights after one more
// epoch.
#include <gmock/gmock.h>
#include <systolic/systolic.h>

#include <nlohmann/json.hpp>

#include "json_fixture.h"
#include "keras_compare.h"
#include "optimizers/registry.h"
#include "saving/keras_zip.h"
#include "test_util.h"

using namespace systolic;
using json = nlohmann::json;

namespace {

std::string fixture(const std::string& name) {
  return systolic::testing::source_dir() + "/tests/fixtures/keras_training/" + name;
}

const json& expected() {
  return systolic::testing::json_fixture("keras_training/expected.json");
}

// Each metric systolic reports, by name, against Keras's evaluate(return_dict=True): the same names, values
// within 2e-3.
void expect_scores(Model& m, const std::vector<double>& scores, const json& keras) {
  systolic::testing::expect_scores_as_keras(m, scores, keras, 2e-3, /*relative=*/false);
}

class KerasTraining : public ::testing::TestWithParam<std::string> {};

}  // namespace

TEST_P(KerasTraining, EvaluatesAndTrainsOnAsKeras) {
  const std::string name = GetParam();
  const json& want = expected()[name];
  auto d = datasets::load("npz:" + fixture(name + ".npz"));
  Model m = load_model(fixture(name + ".keras"));
  ASSERT_TRUE(m.compiled());
  EXPECT_EQ(m.optimizer().iterations(), 8);  // two epochs of 4 batches
  expect_scores(m, m.evaluate(d.test.x, d.test.y, {.batch_size = 16, .verbose = 0}), want["evaluate"]);

  m.fit(d.train.x, d.train.y, {.batch_size = 16, .epochs = 1, .verbose = 0, .shuffle = false});
  EXPECT_EQ(m.optimizer().iterations(), want["iterations_after_fit"].get<std::int64_t>());
  std::vector<double> got;
  for (const Tensor& w : m.get_weights())
    for (double v : w.to_doubles()) got.push_back(v);
  auto keras = want["weights_after_fit"].get<std::vector<double>>();
  ASSERT_EQ(got.size(), keras.size());
  EXPECT_LT(systolic::testing::normalised_max_error(Tensor::from_vector(got, {std::int64_t(got.size())}),
                                                    Tensor::from_vector(keras, {std::int64_t(keras.size())})),
            1e-4);
  expect_scores(m, m.evaluate(d.test.x, d.test.y, {.batch_size = 16, .verbose = 0}),
                want["evaluate_after_fit"]);
}

INSTANTIATE_TEST_SUITE_P(Cases, KerasTraining,
                         ::testing::Values("binary", "regression", "columns", "factored", "orthogonal",
                                           "sequence", "text", "recurrent", "masked_text", "masked_series",
                                           "masked_average", "transpose_series", "gru_reset_before", "states",
                                           "stateful", "masked_merges", "stateful_bidirectional", "tagger",
                                           "steps_onehot", "masked_regression", "masked_extrema",
                                           "transformer_series", "masked_attention", "text_transformer",
                                           "grouped_attention", "luong_attention", "attention_scores",
                                           "softmax_axes", "einsum_dense", "gated_attention",
                                           "additive_attention", "axial_attention"));

// A model trained on here and saved comes back with the same optimizer (its class, clipping and weight decay) and
// evaluates the same.
TEST(KerasTrainingFiles, SavedAfterTrainingComesBackTheSame) {
  systolic::testing::TempDir tmp;
  for (const char* name : {"binary",
                           "regression",
                           "columns",
                           "factored",
                           "orthogonal",
                           "sequence",
                           "text",
                           "recurrent",
                           "masked_text",
                           "masked_series",
                           "masked_average",
                           "transpose_series",
                           "gru_reset_before",
                           "states",
                           "stateful",
                           "masked_merges",
                           "stateful_bidirectional",
                           "tagger",
                           "steps_onehot",
                           "masked_regression",
                           "masked_extrema",
                           "transformer_series",
                           "masked_attention",
                           "text_transformer",
                           "grouped_attention",
                           "luong_attention",
                           "attention_scores",
                           "softmax_axes",
                           "einsum_dense",
                           "gated_attention",
                           "additive_attention",
                           "axial_attention"}) {
    SCOPED_TRACE(name);
    auto d = datasets::load(std::string("npz:") + fixture(std::string(name) + ".npz"));
    Model m = load_model(fixture(std::string(name) + ".keras"));
    m.fit(d.train.x, d.train.y, {.batch_size = 16, .epochs = 1, .verbose = 0, .shuffle = false});
    m.save(tmp.file("m.keras"));
    Model back = load_model(tmp.file("m.keras"));
    m.reset_states();  // a stateful RNN's states are not in files: back starts from zeros
    EXPECT_EQ(optimizers::serialize(back.optimizer(), keras_object::Form::keras3),
              optimizers::serialize(m.optimizer(), keras_object::Form::keras3));
    EXPECT_EQ(back.optimizer().iterations(), m.optimizer().iterations());
    EXPECT_EQ(back.evaluate(d.test.x, d.test.y, {.batch_size = 16, .verbose = 0}),
              m.evaluate(d.test.x, d.test.y, {.batch_size = 16, .verbose = 0}));
    // The metrics as Keras reads them back: by name (RootMeanSquaredError, which Keras wrote as an object), but a
    // metric with arguments of its own (AUC, Precision) and LogCoshError ("logcosh", which keras.metrics.get does
    // not take) as the serialized object the file Keras wrote holds.
    auto written = keras_io::read_keras_archive_file(tmp.file("m.keras")).config["compile_config"]["metrics"];
    auto original = keras_io::read_keras_archive_file(fixture(std::string(name) + ".keras"))
                        .config["compile_config"]["metrics"];
    ASSERT_EQ(written.size(), original.size());
    for (std::size_t i = 0; i < written.size(); ++i)
      if (original[i].is_object() && original[i]["class_name"] != "RootMeanSquaredError") {
        EXPECT_EQ(written[i], original[i]);
      }
  }
}
