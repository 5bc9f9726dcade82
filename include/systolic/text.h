// Keras's TextVectorization (output_mode "int"), usable outside a model: texts in, int32 ids out, with Keras's
// standardization, splitting and vocabulary:
//   standardize "lower_and_strip_punctuation" (default), "lower", "strip_punctuation" or "" (none): lower-cases
//     ASCII letters (tf.strings.lower) and removes ASCII punctuation (Keras's regex, Python's string.punctuation);
//   split "whitespace" (runs of ASCII whitespace; default), "character" (UTF-8 code points; invalid bytes become
//     U+FFFD as tf.strings.unicode_split does) or "" (the whole text is one token);
//   the vocabulary: id 0 is the padding token "", id 1 the out-of-vocabulary token "[UNK]", then the tokens. adapt
//     orders them as Keras does (most frequent first, ties by the token's bytes in descending order) and keeps
//     max_tokens - 2 of them; set_vocabulary and a vocabulary file take them in order (a leading "" and "[UNK]" are
//     recognised and dropped, as Keras does; a repeated token or a "" elsewhere is an Error).
//   output_sequence_length > 0: every row is cut or padded (with 0, at the end) to it; 0: the rows of one call are
//     padded to its longest.
// ngrams and the multi_hot/count/tf_idf output modes are not offered.
#pragma once

#include <systolic/tensor.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace systolic {

struct TextVectorizationOptions {
  std::int64_t max_tokens = 0;  // 0: no limit; counts "" and "[UNK]", as Keras does
  std::string standardize = "lower_and_strip_punctuation";
  std::string split = "whitespace";
  std::int64_t output_sequence_length = 0;
  std::vector<std::string> vocabulary;  // set at once (set_vocabulary) when not empty
  std::string vocabulary_file;          // one token per line (Keras's assets/vocabulary.txt)
};

class TextVectorization {
 public:
  explicit TextVectorization(TextVectorizationOptions options = {});

  // Learns the vocabulary from `texts` (replacing any).
  void adapt(const std::vector<std::string>& texts);
  void set_vocabulary(const std::vector<std::string>& vocabulary);
  // The lines of a text file, one token each ("\n"-separated, one final newline allowed): the file Keras's
  // TextVectorization(vocabulary=path) reads, or Keras's assets/vocabulary.txt (which starts with "" and "[UNK]").
  void load_vocabulary(const std::string& path);
  // The tokens after "" and "[UNK]", one per line, each ended by a newline: the file Keras's
  // TextVectorization(vocabulary=path) reads. Written atomically.
  void save_vocabulary(const std::string& path) const;
  // "" and "[UNK]" then the tokens, by id.
  std::vector<std::string> get_vocabulary() const;
  std::int64_t vocabulary_size() const;

  // The tokens of one text after standardization and splitting.
  std::vector<std::string> tokens(const std::string& text) const;
  // The ids of one text (no padding or cutting).
  std::vector<std::int32_t> ids(const std::string& text) const;
  // int32 (texts, L): L is output_sequence_length, or the longest row's length.
  Tensor operator()(const std::vector<std::string>& texts) const;

  const TextVectorizationOptions& options() const { return options_; }

 private:
  TextVectorizationOptions options_;
  std::vector<std::string> vocabulary_;  // the tokens after "" and "[UNK]"
  std::unordered_map<std::string, std::int32_t> index_;
};

}  // namespace systolic
