// Text classification on real text, as keras-io's two text examples do it:
//
//   text_classifier [--dir DIR] [--epochs N] [--save MODEL.keras]
//       "Text classification from scratch": text_dataset_from_directory over DIR/train (80% to train, 20% to
//       validate, seed 1337) and DIR/test, one subfolder of .txt files per class (the aclImdb layout); a
//       TextVectorization adapted on the training texts turns them into word ids outside the model; an Embedding,
//       two strided Conv1D, global max pooling and a softmax classify them. Without --dir it reads the real
//       fortunes committed in tests/fixtures/text/fortunes (four classes: computers, food, law, politics).
//   text_classifier --imdb [PATH] [--epochs N] [--save MODEL.keras]
//       "Bidirectional LSTM on IMDB": keras.datasets.imdb (the 20000 most frequent words; from the cache, PATH or
//       Keras's address), pad_sequences to 200, an Embedding and two Bidirectional LSTM(64), a sigmoid.
//
// Both print Keras's progress, the test accuracy and the prediction for one test text. --save writes the model
// (.keras) and, in the folder mode, the vocabulary beside it (MODEL.vocabulary.txt, Keras's assets format).
#include <systolic/systolic.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace sy = systolic;

namespace {

struct Args {
  std::string dir = std::string(SYSTOLIC_SOURCE_DIR) + "/tests/fixtures/text/fortunes";
  std::string imdb_path;
  bool imdb = false;
  int epochs = 0;
  std::string model = "bag";
  std::string save;
};

// The ids as the model takes them: float32 ids (exact below 2^24), as Keras's Input defaults to float32.
sy::Tensor ids_as_input(const sy::Tensor& ids) {
  return ids.to(sy::DType::float32);
}

sy::Tensor labels(const std::vector<std::int32_t>& y) {
  sy::Tensor t(sy::Shape({std::int64_t(y.size())}), sy::DType::int32);
  std::copy(y.begin(), y.end(), t.data<std::int32_t>());
  return t;
}

int folder_mode(const Args& a) {
  const std::int64_t max_tokens = 20000, sequence_length = 100;
  auto train = sy::datasets::text_dataset_from_directory(
      a.dir + "/train", {.seed = 1337, .validation_split = 0.2, .subset = "training"});
  auto val = sy::datasets::text_dataset_from_directory(
      a.dir + "/train", {.seed = 1337, .validation_split = 0.2, .subset = "validation"});
  auto test = sy::datasets::text_dataset_from_directory(a.dir + "/test", {.shuffle = false});
  std::printf("Found %zu files belonging to %zu classes: %zu to train, %zu to validate; %zu to test.\n",
              train.files.size() + val.files.size(), train.class_names.size(), train.files.size(),
              val.files.size(), test.files.size());

  sy::TextVectorization vectorize({.max_tokens = max_tokens, .output_sequence_length = sequence_length});
  vectorize.adapt(train.texts);
  std::printf("Vocabulary: %lld tokens\n", static_cast<long long>(vectorize.vocabulary_size()));

  const auto classes = int(train.class_names.size());
  auto input = sy::layers::Input({sequence_length}, {.name = "ids"});
  auto x = sy::layers::Embedding(int(vectorize.vocabulary_size()), a.model == "cnn" ? 128 : 32)(input);
  if (a.model == "cnn") {  // keras-io's text_classification_from_scratch
    x = sy::layers::Dropout(0.5)(x);
    x = sy::layers::Conv1D(128, 7, {.strides = 3, .padding = "valid", .activation = "relu"})(x);
    x = sy::layers::Conv1D(128, 7, {.strides = 3, .padding = "valid", .activation = "relu"})(x);
    x = sy::layers::GlobalMaxPooling1D()(x);
    x = sy::layers::Dense(128, {.activation = "relu"})(x);
    x = sy::layers::Dropout(0.5)(x);
  } else {  // a bag of embeddings: the average of the words' vectors, for a few hundred texts
    x = sy::layers::GlobalAveragePooling1D()(x);
    x = sy::layers::Dropout(0.3)(x);
  }
  auto output = sy::layers::Dense(classes, {.activation = "softmax", .name = "predictions"})(x);
  sy::Model model(input, output, "text_classifier");
  model.compile(sy::optimizers::Adam(a.model == "cnn" ? 0.001 : 0.01), "sparse_categorical_crossentropy",
                {"accuracy"});
  model.summary();

  sy::Tensor x_train = ids_as_input(vectorize(train.texts)), x_val = ids_as_input(vectorize(val.texts));
  model.fit(x_train, labels(train.labels),
            {.batch_size = 32,
             .epochs = a.epochs ? a.epochs : 30,
             .verbose = 2,
             .validation_data = sy::ValidationData{x_val, labels(val.labels)}});
  auto scores = model.evaluate(ids_as_input(vectorize(test.texts)), labels(test.labels), {.verbose = 0});
  std::printf("Test loss: %.4f\nTest accuracy: %.2f%%\n", scores[0], scores[1] * 100);

  const std::string& text = test.texts.front();
  sy::Tensor p = model.predict(ids_as_input(vectorize({text})));
  auto probs = p.to_doubles();
  const auto best = std::max_element(probs.begin(), probs.end()) - probs.begin();
  std::printf("\n%s-> %s (%.1f%%; the file is in %s/)\n", text.c_str(),
              train.class_names[std::size_t(best)].c_str(), probs[std::size_t(best)] * 100,
              test.class_names[std::size_t(test.labels.front())].c_str());
  if (!a.save.empty()) {
    model.save(a.save);
    vectorize.save_vocabulary(a.save + ".vocabulary.txt");
    std::printf("Saved %s and %s.vocabulary.txt\n", a.save.c_str(), a.save.c_str());
  }
  return 0;
}

int imdb_mode(const Args& a) {
  const std::int64_t max_features = 20000, maxlen = 200;
  auto data = sy::datasets::imdb::load_data({.path = a.imdb_path, .num_words = max_features});
  std::printf("%zu training sequences, %zu test sequences\n", data.train.x.size(), data.test.x.size());
  sy::Tensor x_train = ids_as_input(sy::datasets::pad_sequences(data.train.x, {.maxlen = maxlen}));
  sy::Tensor x_test = ids_as_input(sy::datasets::pad_sequences(data.test.x, {.maxlen = maxlen}));

  auto input = sy::layers::Input({maxlen}, {.name = "ids"});
  auto x = sy::layers::Embedding(int(max_features), 128)(input);
  x = sy::layers::Bidirectional(sy::layers::LSTM(64, {.return_sequences = true}))(x);
  x = sy::layers::Bidirectional(sy::layers::LSTM(64))(x);
  auto output = sy::layers::Dense(1, {.activation = "sigmoid"})(x);
  sy::Model model(input, output, "bidirectional_lstm_imdb");
  model.compile(sy::optimizers::Adam(), "binary_crossentropy", {"accuracy"});
  model.summary();
  model.fit(x_train, labels(data.train.y),
            {.batch_size = 32,
             .epochs = a.epochs ? a.epochs : 2,
             .verbose = 2,
             .validation_data = sy::ValidationData{x_test, labels(data.test.y)}});
  sy::Tensor p = model.predict(x_test.slice(0, 1));
  std::printf("The first test review: p(positive) = %.3f, its label %d\n", p.to_doubles()[0], data.test.y[0]);
  if (!a.save.empty()) model.save(a.save);
  return 0;
}

}  // namespace

int main(int argc, char** argv) try {
  Args a;
  CLI::App app{
      "Text classification on real text (keras-io's text_classification_from_scratch and "
      "bidirectional_lstm_imdb)"};
  app.add_option("--dir", a.dir, "a folder with train/ and test/, one subfolder of .txt files per class");
  auto* imdb = app.add_option("--imdb", a.imdb_path, "Keras's IMDB instead (an imdb.npz, or the cache's)")
                   ->expected(0, 1);
  app.add_option("--epochs", a.epochs, "epochs (30 for folders, 2 for IMDB)");
  app.add_option("--model", a.model, "for folders: bag (the average of word vectors) or cnn (keras-io's)")
      ->check(CLI::IsMember({"bag", "cnn"}));
  app.add_option("--save", a.save, "write the trained model (.keras)");
  CLI11_PARSE(app, argc, argv);
  a.imdb = imdb->count() > 0;
  sy::set_random_seed(1337);
  return a.imdb ? imdb_mode(a) : folder_mode(a);
} catch (const std::exception& e) {
  std::fprintf(stderr, "text_classifier: error: %s\n", e.what());
  return 1;
}
