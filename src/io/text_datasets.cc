// keras.datasets.imdb and keras.datasets.reuters (include/systolic/datasets.h): Keras's .npz of ragged word-id
// sequences (object arrays, read by npy::load_npz_with_sequences) and the word indexes (JSON), from the cache or
// Keras's address; the samples processed as keras/src/datasets/imdb.py and reuters.py do.
#include <fmt/format.h>
#include <systolic/datasets.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "io/dataset_cache.h"
#include "io/files.h"
#include "io/numpy_random.h"

namespace systolic::datasets {

namespace {

namespace fs = std::filesystem;

constexpr const char* kImdbSha256 = "69664113be75683a8fe16e3ed0ab59fda8886cb3cd7ada244f7d9544e4676b9f";
constexpr const char* kImdbWordIndexMd5 = "bfafd718b763782e994055a2d397834f";
constexpr const char* kReutersSha256 = "d6586e694ee56d7a4e65172e12b3e987c03096cb01eab99753921ef915959916";
constexpr const char* kReutersWordIndexMd5 = "4d44cc38712099c9e383dc6e5f11a921";

struct Raw {
  Sequences x;
  std::vector<std::int32_t> y;
};

// The sequences `xs` and labels `ys` of an .npz, checked: both present, as many labels as sequences.
Raw read_split(npy::NpzContents& f, const std::string& xs, const std::string& ys, const std::string& file) {
  auto list = [&] {
    std::vector<std::string> names;
    for (auto& [k, v] : f.sequences) names.push_back(k + " (sequences)");
    for (auto& [k, v] : f.arrays) names.push_back(k + " (" + v.shape().str() + ")");
    return fmt::format("{}", fmt::join(names, ", "));
  };
  SYSTOLIC_CHECK(f.sequences.count(xs), "{}: no object array of sequences {} inside (it holds: {})", file, xs,
                 list());
  SYSTOLIC_CHECK(f.arrays.count(ys), "{}: no array {} inside (it holds: {})", file, ys, list());
  const Tensor& y = f.arrays[ys];
  Raw r{std::move(f.sequences[xs]), {}};
  SYSTOLIC_CHECK(y.rank() == 1 && y.dim(0) == std::int64_t(r.x.size()),
                 "{}: {} has shape {}, expected ({},) as {} holds {} sequences", file, ys, y.shape().str(),
                 r.x.size(), xs, r.x.size());
  SYSTOLIC_CHECK(y.dtype() == DType::int32 || y.dtype() == DType::uint8,
                 "{}: {} holds {}, not integer labels", file, ys, dtype_name(y.dtype()));
  for (double v : y.to_doubles()) {
    SYSTOLIC_CHECK(v >= 0, "{}: {} holds the negative label {}", file, ys, v);
    r.y.push_back(std::int32_t(v));
  }
  return r;
}

void shuffle(Raw& r, detail::NumpyRandomState& rng) {
  std::vector<std::int64_t> order = rng.shuffled(std::int64_t(r.x.size()));
  Raw s;
  for (std::int64_t k : order) {
    s.x.push_back(std::move(r.x[std::size_t(k)]));
    s.y.push_back(r.y[std::size_t(k)]);
  }
  r = std::move(s);
}

std::int32_t offset(std::int64_t w, std::int32_t index_from, const std::string& file) {
  const std::int64_t v = w + index_from;
  SYSTOLIC_CHECK(
      v >= std::numeric_limits<std::int32_t>::min() && v <= std::numeric_limits<std::int32_t>::max(),
      "{}: the word id {} plus index_from {} does not fit int32", file, w, index_from);
  return std::int32_t(v);
}

// start_char and index_from, then maxlen (Keras's remove_long_seq: keeps sequences shorter than maxlen).
void prepare(Raw& r, const SequenceLoadOptions& o, const std::string& file) {
  for (auto& s : r.x) {
    std::vector<std::int32_t> t;
    t.reserve(s.size() + 1);
    if (o.start_char) t.push_back(*o.start_char);
    for (std::int32_t w : s) t.push_back(offset(w, o.index_from, file));
    s = std::move(t);
  }
  if (o.maxlen > 0) {
    Raw kept;
    for (std::size_t i = 0; i < r.x.size(); ++i)
      if (std::int64_t(r.x[i].size()) < o.maxlen)
        kept.x.push_back(std::move(r.x[i])), kept.y.push_back(r.y[i]);
    r = std::move(kept);
  }
}

// Keras's vocabulary cut over train and test together: num_words (0: the largest id of all), skip_top, oov_char.
void cut_vocabulary(std::vector<Raw*> parts, const SequenceLoadOptions& o, const std::string& file) {
  std::int64_t num_words = o.num_words;
  if (num_words == 0) {
    bool any = false;
    for (Raw* p : parts)
      for (auto& s : p->x) {
        // Keras's max(max(x) for x in xs) fails on an empty sequence: so does this.
        SYSTOLIC_CHECK(!s.empty(),
                       "{}: an empty sequence (with start_char unset) leaves num_words undefined; set "
                       "num_words",
                       file);
        num_words = any ? std::max<std::int64_t>(num_words, *std::max_element(s.begin(), s.end()))
                        : *std::max_element(s.begin(), s.end());
        any = true;
      }
  }
  for (Raw* p : parts)
    for (auto& s : p->x) {
      std::vector<std::int32_t> t;
      t.reserve(s.size());
      for (std::int32_t w : s) {
        const bool keep = o.skip_top <= w && w < num_words;
        if (keep)
          t.push_back(w);
        else if (o.oov_char)
          t.push_back(*o.oov_char);
      }
      s = std::move(t);
    }
}

void check_options(const SequenceLoadOptions& o, const std::string& what) {
  SYSTOLIC_CHECK(o.num_words >= 0 && o.skip_top >= 0 && o.maxlen >= 0,
                 "{}: num_words ({}), skip_top ({}) and maxlen ({}) must not be negative", what, o.num_words,
                 o.skip_top, o.maxlen);
}

std::map<std::string, std::int32_t> word_index(const fs::path& path) {
  std::vector<char> bytes = io::read_file(path.string());
  nlohmann::json j = nlohmann::json::parse(bytes.begin(), bytes.end(), nullptr, false);
  SYSTOLIC_CHECK(!j.is_discarded(), "{}: not a JSON file", path.string());
  SYSTOLIC_CHECK(j.is_object(), "{}: not a JSON object of word: index", path.string());
  std::map<std::string, std::int32_t> out;
  for (auto& [word, index] : j.items()) {
    SYSTOLIC_CHECK(index.is_number_integer() && index.get<std::int64_t>() >= 0 &&
                       index.get<std::int64_t>() <= std::numeric_limits<std::int32_t>::max(),
                   "{}: the index of \"{}\" is {}, not a word rank", path.string(), word, index.dump());
    out[word] = index.get<std::int32_t>();
  }
  return out;
}

}  // namespace

namespace imdb {

SequenceDataset load_data(const SequenceLoadOptions& o) {
  check_options(o, "imdb.load_data");
  const fs::path path = o.path.empty() ? detail::keras_file("imdb.npz", "sha256", kImdbSha256,
                                                            "SYSTOLIC_IMDB_SHA256", "IMDB (imdb.npz)")
                                       : fs::path(o.path);
  const std::string file = path.string();
  npy::NpzContents f = npy::load_npz_with_sequences(file);
  Raw train = read_split(f, "x_train", "y_train", file), test = read_split(f, "x_test", "y_test", file);
  // One RandomState shuffles the training split, then the test split.
  detail::NumpyRandomState rng(o.seed);
  shuffle(train, rng);
  shuffle(test, rng);
  prepare(train, o, file);
  prepare(test, o, file);
  SYSTOLIC_CHECK(
      !train.x.empty() && !test.x.empty(),
      "{}: after filtering for sequences shorter than maxlen={}, no sequence was kept. Increase maxlen.",
      file, o.maxlen);
  cut_vocabulary({&train, &test}, o, file);
  SequenceDataset d;
  d.train = {std::move(train.x), std::move(train.y)};
  d.test = {std::move(test.x), std::move(test.y)};
  d.class_names = {"negative", "positive"};
  return d;
}

std::map<std::string, std::int32_t> get_word_index(const std::string& path) {
  return word_index(path.empty() ? detail::keras_file("imdb_word_index.json", "md5", kImdbWordIndexMd5,
                                                      "SYSTOLIC_IMDB_WORD_INDEX_MD5", "IMDB's word index")
                                 : fs::path(path));
}

}  // namespace imdb

namespace reuters {

SequenceDataset load_data(const SequenceLoadOptions& o) {
  check_options(o, "reuters.load_data");
  SYSTOLIC_CHECK(o.test_split >= 0 && o.test_split <= 1, "reuters.load_data: test_split {} is not in [0, 1]",
                 o.test_split);
  const fs::path path = o.path.empty()
                            ? detail::keras_file("reuters.npz", "sha256", kReutersSha256,
                                                 "SYSTOLIC_REUTERS_SHA256", "Reuters (reuters.npz)")
                            : fs::path(o.path);
  const std::string file = path.string();
  npy::NpzContents f = npy::load_npz_with_sequences(file);
  Raw all = read_split(f, "x", "y", file);
  detail::NumpyRandomState rng(o.seed);
  shuffle(all, rng);
  prepare(all, o, file);
  cut_vocabulary({&all}, o, file);
  const auto idx = std::size_t(std::int64_t(double(all.x.size()) * (1 - o.test_split)));
  SequenceDataset d;
  d.train.x.assign(std::make_move_iterator(all.x.begin()), std::make_move_iterator(all.x.begin() + idx));
  d.test.x.assign(std::make_move_iterator(all.x.begin() + idx), std::make_move_iterator(all.x.end()));
  d.train.y.assign(all.y.begin(), all.y.begin() + idx);
  d.test.y.assign(all.y.begin() + idx, all.y.end());
  d.class_names = get_label_names();
  return d;
}

std::map<std::string, std::int32_t> get_word_index(const std::string& path) {
  return word_index(path.empty()
                        ? detail::keras_file("reuters_word_index.json", "md5", kReutersWordIndexMd5,
                                             "SYSTOLIC_REUTERS_WORD_INDEX_MD5", "Reuters's word index")
                        : fs::path(path));
}

std::vector<std::string> get_label_names() {
  return {"cocoa",     "grain",        "veg-oil", "earn",       "acq",      "wheat",    "copper",
          "housing",   "money-supply", "coffee",  "sugar",      "trade",    "reserves", "ship",
          "cotton",    "carcass",      "crude",   "nat-gas",    "cpi",      "money-fx", "interest",
          "gnp",       "meal-feed",    "alum",    "oilseed",    "gold",     "tin",      "strategic-metal",
          "livestock", "retail",       "ipi",     "iron-steel", "rubber",   "heat",     "jobs",
          "lei",       "bop",          "zinc",    "orange",     "pet-chem", "dlr",      "gas",
          "silver",    "wpi",          "hog",     "lead"};
}

}  // namespace reuters

}  // namespace systolic::datasets
