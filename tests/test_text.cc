// The text and sequence data tools against what Keras 3 and numpy computed (tests/fixtures/text/keras_expected.json,
// written by tests/reference/text_data.py from real fortunes): numpy's RandomState order, keras.datasets.imdb and
// reuters (their .npz pickles read as data, their download path against a local HTTP server), pad_sequences,
// timeseries_dataset_from_array, text_dataset_from_directory and TextVectorization; and the pickle reader's refusals.
#include <gmock/gmock.h>
#include <systolic/systolic.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "io/fetch.h"
#include "io/files.h"
#include "io/numpy_random.h"
#include "json_fixture.h"
#include "local_http.h"
#include "test_util.h"

using namespace systolic;
using namespace std::string_literals;
using systolic::testing::error_of;
using systolic::testing::json_fixture;
using systolic::testing::TempDir;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

namespace {

const nlohmann::json& expected() {
  return json_fixture("text/keras_expected.json");
}
std::string fixture(const std::string& name) {
  return systolic::testing::source_dir() + "/tests/fixtures/text/" + name;
}

std::vector<std::vector<std::int32_t>> as_sequences(const nlohmann::json& j) {
  return j.get<std::vector<std::vector<std::int32_t>>>();
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<std::vector<std::int64_t>> rows_of(const Tensor& t) {
  std::vector<std::vector<std::int64_t>> out;
  auto v = t.to_doubles();
  const std::int64_t cols = t.rank() > 1 ? t.numel() / std::max<std::int64_t>(t.dim(0), 1) : 1;
  for (std::int64_t i = 0; i < t.dim(0); ++i)
    out.emplace_back(v.begin() + i * cols, v.begin() + (i + 1) * cols);
  return out;
}

}  // namespace

TEST(NumpyRandomState, PermutationsAsNumpy) {
  for (const auto& p : expected()["permutations"]) {
    const std::int64_t n = p["n"];
    auto got = datasets::numpy_permutation(n, p["seed"].get<std::uint32_t>());
    ASSERT_EQ(std::int64_t(got.size()), n);
    auto head = p["head"].get<std::vector<std::int64_t>>(), tail = p["tail"].get<std::vector<std::int64_t>>();
    EXPECT_EQ(std::vector<std::int64_t>(got.begin(), got.begin() + std::ptrdiff_t(head.size())), head) << n;
    EXPECT_EQ(std::vector<std::int64_t>(got.end() - std::ptrdiff_t(tail.size()), got.end()), tail) << n;
    std::int64_t sum = 0;
    for (std::int64_t i = 0; i < n; ++i) sum += i * got[std::size_t(i)];
    EXPECT_EQ(sum, p["sum_i_times_p"].get<std::int64_t>()) << n;
  }
  // One RandomState's draws go on from one shuffle to the next (imdb shuffles train, then test).
  const auto& two = expected()["two_shuffles"];
  datasets::detail::NumpyRandomState rng(two["seed"].get<std::uint32_t>());
  EXPECT_EQ(rng.shuffled(7), two["first"].get<std::vector<std::int64_t>>());
  EXPECT_EQ(rng.shuffled(5), two["second"].get<std::vector<std::int64_t>>());
}

namespace {

datasets::SequenceLoadOptions options_of(const nlohmann::json& kw, const std::string& path) {
  datasets::SequenceLoadOptions o;
  o.path = path;
  if (kw.contains("num_words")) o.num_words = kw["num_words"];
  if (kw.contains("skip_top")) o.skip_top = kw["skip_top"];
  if (kw.contains("maxlen")) o.maxlen = kw["maxlen"];
  if (kw.contains("seed")) o.seed = kw["seed"];
  if (kw.contains("test_split")) o.test_split = kw["test_split"];
  if (kw.contains("index_from")) o.index_from = kw["index_from"];
  if (kw.contains("oov_char"))
    o.oov_char = kw["oov_char"].is_null() ? std::nullopt : std::optional<std::int32_t>(kw["oov_char"]);
  if (kw.contains("start_char"))
    o.start_char = kw["start_char"].is_null() ? std::nullopt : std::optional<std::int32_t>(kw["start_char"]);
  return o;
}

void expect_same(const datasets::SequenceDataset& d, const nlohmann::json& e, const std::string& what) {
  EXPECT_EQ(d.train.x, as_sequences(e["x_train"])) << what;
  EXPECT_EQ(d.train.y, e["y_train"].get<std::vector<std::int32_t>>()) << what;
  EXPECT_EQ(d.test.x, as_sequences(e["x_test"])) << what;
  EXPECT_EQ(d.test.y, e["y_test"].get<std::vector<std::int32_t>>()) << what;
}

}  // namespace

TEST(Imdb, LoadDataAsKeras) {
  for (const auto& e : expected()["imdb"]) {
    auto d = datasets::imdb::load_data(options_of(e["options"], fixture("imdb_small.npz")));
    expect_same(d, e, e["options"].dump());
    EXPECT_EQ(d.class_names, (std::vector<std::string>{"negative", "positive"}));
  }
  // Sequences pickled as int32 arrays (protocol 3) read as the lists do.
  expect_same(datasets::imdb::load_data({.path = fixture("imdb_small_arrays.npz")}),
              expected()["imdb_arrays"], "arrays");
  auto index = datasets::imdb::get_word_index(fixture("imdb_small_word_index.json"));
  EXPECT_EQ(index.at("the"), 1);
  EXPECT_GT(index.size(), 3000u);
  // maxlen that keeps nothing: Keras's error.
  EXPECT_THAT(error_of([] { datasets::imdb::load_data({.path = fixture("imdb_small.npz"), .maxlen = 2}); }),
              HasSubstr("no sequence was kept. Increase maxlen"));
}

TEST(Reuters, LoadDataAsKeras) {
  for (const auto& e : expected()["reuters"]) {
    auto d = datasets::reuters::load_data(options_of(e["options"], fixture("reuters_small.npz")));
    expect_same(d, e, e["options"].dump());
  }
  EXPECT_EQ(datasets::reuters::get_label_names().size(), 46u);
  EXPECT_EQ(datasets::reuters::get_label_names()[3], "earn");
  // imdb's file has no x/y: the error lists what it holds.
  std::string msg = error_of([] { datasets::reuters::load_data({.path = fixture("imdb_small.npz")}); });
  EXPECT_THAT(msg, HasSubstr("no object array of sequences x inside"));
  EXPECT_THAT(msg, HasSubstr("x_train (sequences)"));
}

TEST(Imdb, DownloadCheckedAndCached) {
  TempDir home;
  systolic::testing::ScopedEnv env;
  env.set("SYSTOLIC_HOME", home.str());
  env.set("no_proxy", "127.0.0.1,localhost");
  const std::string npz = read_bytes(fixture("imdb_small.npz"));
  systolic::testing::LocalHttpServer server;
  server.serve("/mirror/imdb.npz", npz);
  server.serve("/mirror/imdb_word_index.json", read_bytes(fixture("imdb_small_word_index.json")));
  env.set("SYSTOLIC_DATASETS_URL", server.url("/mirror"));

  // Not Keras's file: its sha256 differs, so it is refused and deleted.
  std::string msg = error_of([] { datasets::imdb::load_data(); });
  EXPECT_THAT(msg, HasSubstr(server.url("/mirror/imdb.npz")));
  EXPECT_THAT(msg, HasSubstr("does not match"));
  EXPECT_THAT(msg, HasSubstr("deleted"));
  EXPECT_TRUE(fs::is_empty(home.str() + "/datasets")) << "nothing may stay in the cache";

  // With the mirror's digest it is downloaded, checked, cached and read as the fixture reads.
  env.set("SYSTOLIC_IMDB_SHA256", io::file_digest(fixture("imdb_small.npz"), "sha256"));
  expect_same(datasets::imdb::load_data(), expected()["imdb"][0], "downloaded");
  EXPECT_TRUE(fs::is_regular_file(home.file("datasets/imdb.npz")));
  const int requests = server.requests();
  expect_same(datasets::imdb::load_data(), expected()["imdb"][0], "cached");
  EXPECT_EQ(server.requests(), requests) << "the cached copy is read without the network";

  env.set("SYSTOLIC_IMDB_WORD_INDEX_MD5", io::file_digest(fixture("imdb_small_word_index.json"), "md5"));
  EXPECT_EQ(datasets::imdb::get_word_index().at("the"), 1);

  // No such file on the server: Unavailable, naming the place to put the file by hand.
  env.set("SYSTOLIC_HOME", home.str() + "/other");
  try {
    datasets::reuters::load_data();
    ADD_FAILURE() << "reuters.npz is not served";
  } catch (const datasets::Unavailable& e) {
    EXPECT_THAT(e.what(), HasSubstr("reuters.npz"));
    EXPECT_THAT(e.what(), HasSubstr("by hand"));
  }
}

namespace {

// A .npy header for a 1-D object array of `n` elements, then `pickle`.
std::string object_npy(std::size_t n, const std::string& pickle) {
  std::string header = "{'descr': '|O', 'fortran_order': False, 'shape': (" + std::to_string(n) + ",), }";
  while ((10 + header.size() + 1) % 64) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += char(1), out += char(0), out += char(header.size() & 255), out += char(header.size() >> 8);
  return out + header + pickle;
}

// What Python 2's pickle (protocol 2) writes for numpy.array([[1, 2], [300]], dtype=object) with numpy 1.x: GLOBAL
// and SHORT_BINSTRING, as Keras's imdb.npz was written.
// (Literals are split after a hex escape that a hex digit follows.)
std::string python2_pickle(const std::string& element_ops =
                               "]q\x05(K\x01K\x02"
                               "e]q\x06M,\x01"
                               "a"s) {
  std::string p = "\x80\x02"s;
  p += "cnumpy.core.multiarray\n_reconstruct\nq\x01"s;
  p += "cnumpy\nndarray\nq\x02K\x00\x85U\x01"
       "b\x87R"s;
  p += "(K\x01K\x02\x85"s;                                        // state: version, shape (2,)
  p += "cnumpy\ndtype\nq\x03U\x02O8K\x00K\x01\x87R"s;             // dtype('O8', 0, 1)
  p += "(K\x03U\x01|NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK?tb"s;  // its state
  p += "\x89]q\x04("s + element_ops + "etb."s;                    // fortran False, the elements
  return p;
}

}  // namespace

TEST(Pickle, ReadsPython2ProtocolAndRefusesCode) {
  std::string good = object_npy(2, python2_pickle());
  auto seqs = npy::read_sequences(good.data(), good.size(), "py2.npy");
  EXPECT_EQ(seqs, (npy::Sequences{{1, 2}, {300}}));

  auto err = [](const std::string& bytes) {
    return error_of([&] { npy::read_sequences(bytes.data(), bytes.size(), "bad.npy"); });
  };
  // Code: a pickle that names os.system is refused by name before anything else.
  std::string evil =
      "\x80\x02"
      "cos\nsystem\n"
      "X\x02\x00\x00\x00ls\x85R."s;
  EXPECT_THAT(err(object_npy(1, evil)), HasSubstr("names os.system"));
  EXPECT_THAT(err(object_npy(1,
                             "\x80\x04\x95\x00\x00\x00\x00\x00\x00\x00\x00\x8c\x08"
                             "builtins\x8c\x04"
                             "eval\x93."s)),
              HasSubstr("names builtins.eval"));
  // Damage.
  EXPECT_THAT(err(object_npy(2, python2_pickle().substr(0, 60))), HasSubstr("truncated pickle"));
  EXPECT_THAT(err(object_npy(1, "\x80\x02\xff."s)), HasSubstr("opcode 0xff"));
  EXPECT_THAT(err(object_npy(1,
                             "\x80\x02"
                             "a."s)),
              HasSubstr("stack underflow"));
  EXPECT_THAT(err(object_npy(1, "\x80\x02h\x07."s)), HasSubstr("memo key 7 was never stored"));
  EXPECT_THAT(err(object_npy(1, "\x80\x02K\x01K\x02."s)), HasSubstr("STOP with 2 values"));
  EXPECT_THAT(err(object_npy(1, "\x80\x02K\x01."s)), HasSubstr("not a numpy array"));
  // Elements that are not sequences of int32 integers.
  EXPECT_THAT(err(object_npy(2, python2_pickle("]q\x05(U\x01"
                                               "ae]q\x06M,\x01"
                                               "a"s))),
              HasSubstr("element 0: holds something that is not an integer"));
  EXPECT_THAT(err(object_npy(2, python2_pickle("]q\x05(K\x01"
                                               "e]q\x06\x8a\x05\x00\x00\x00\x00\x01"
                                               "a"s))),
              HasSubstr("element 1: the integer 4294967296 does not fit"));
  EXPECT_THAT(err(object_npy(2, python2_pickle("]q\x05(K\x01"
                                               "eN"s))),
              HasSubstr("element 1: is not a list"));
  // The header's shape and the pickle's disagree.
  EXPECT_THAT(err(object_npy(3, python2_pickle())), HasSubstr("the header says (3,)"));
  // A numeric .npy is not an object array.
  std::string numeric = object_npy(1, "");
  numeric.replace(numeric.find("|O"), 2, "|u1");
  EXPECT_THAT(err(numeric + "x"), HasSubstr("not an object array"));
  // A numeric reader on an object array points to read_sequences.
  EXPECT_THAT(error_of([&] { npy::read(good.data(), good.size(), "py2.npy"); }), HasSubstr("read_sequences"));
}

TEST(PadSequences, AsKeras) {
  const auto& e = expected()["pad_sequences"];
  auto seqs = as_sequences(e["sequences"]);
  for (const auto& c : e["cases"]) {
    datasets::PadOptions o;
    const auto& kw = c["options"];
    if (kw.contains("maxlen")) o.maxlen = kw["maxlen"];
    if (kw.contains("padding")) o.padding = kw["padding"];
    if (kw.contains("truncating")) o.truncating = kw["truncating"];
    if (kw.contains("value")) o.value = kw["value"];
    Tensor t = datasets::pad_sequences(seqs, o);
    EXPECT_EQ(t.dtype(), DType::int32);
    EXPECT_EQ(rows_of(t), c["out"].get<std::vector<std::vector<std::int64_t>>>()) << kw.dump();
  }
  EXPECT_THAT(error_of([&] { datasets::pad_sequences(seqs, {.padding = "middle"}); }),
              HasSubstr("padding type \"middle\" not understood"));
  EXPECT_THAT(error_of([&] { datasets::pad_sequences(seqs, {.truncating = "x"}); }),
              HasSubstr("truncating type \"x\""));
}

TEST(TimeseriesDataset, AsKeras) {
  const auto& e = expected()["timeseries"];
  std::vector<float> values(40);
  for (int i = 0; i < 40; ++i) values[std::size_t(i)] = float(i);
  Tensor data = Tensor::from_vector(values, {20, 2});
  Tensor targets(Shape({20}), DType::int32);
  for (int i = 0; i < 20; ++i) targets.data<std::int32_t>()[i] = 100 + i;
  for (const auto& c : e["cases"]) {
    const auto& kw = c["options"];
    datasets::TimeseriesOptions o{.sequence_length = kw["sequence_length"]};
    if (kw.contains("sequence_stride")) o.sequence_stride = kw["sequence_stride"];
    if (kw.contains("sampling_rate")) o.sampling_rate = kw["sampling_rate"];
    if (kw.contains("start_index")) o.start_index = kw["start_index"].get<std::int64_t>();
    if (kw.contains("end_index")) o.end_index = kw["end_index"].get<std::int64_t>();
    auto s = datasets::timeseries_dataset_from_array(data, targets, o);
    auto want = c["x"].get<std::vector<std::vector<std::vector<double>>>>();
    ASSERT_EQ(s.x.shape(), Shape({std::int64_t(want.size()), o.sequence_length, 2})) << kw.dump();
    std::vector<double> flat;
    for (auto& w : want)
      for (auto& r : w) flat.insert(flat.end(), r.begin(), r.end());
    EXPECT_EQ(s.x.to_doubles(), flat) << kw.dump();
    std::vector<double> y;
    for (auto v : c["y"]) y.push_back(v.get<double>());
    EXPECT_EQ(s.y.to_doubles(), y) << kw.dump();
    EXPECT_EQ(s.y.dtype(), DType::int32);
  }
  // Shuffled: the windows start in numpy's RandomState(seed).shuffle order.
  const auto& sh = e["shuffled"];
  auto s = datasets::timeseries_dataset_from_array(
      data, std::nullopt, {.sequence_length = sh["sequence_length"], .shuffle = true, .seed = sh["seed"]});
  auto starts = sh["starts"].get<std::vector<std::int64_t>>();
  ASSERT_EQ(s.x.dim(0), std::int64_t(starts.size()));
  EXPECT_FALSE(s.y.defined());
  auto x = s.x.to_doubles();
  for (std::size_t k = 0; k < starts.size(); ++k) EXPECT_EQ(x[k * 8], double(starts[k] * 2)) << k;
  // Keras's checks.
  auto err = [&](datasets::TimeseriesOptions o) {
    return error_of([&] { datasets::timeseries_dataset_from_array(data, targets, o); });
  };
  EXPECT_THAT(err({.sequence_length = 3, .sequence_stride = 20}),
              HasSubstr("`sequence_stride` must be lower"));
  EXPECT_THAT(err({.sequence_length = 3, .sampling_rate = 0}),
              HasSubstr("`sampling_rate` must be higher than 0"));
  EXPECT_THAT(err({.sequence_length = 3, .start_index = 5, .end_index = 5}),
              HasSubstr("`end_index` must be higher than `start_index`"));
  EXPECT_THAT(err({.sequence_length = 0}), HasSubstr("`sequence_length` must be higher than 0"));
}

TEST(TextDatasetFromDirectory, OrderAsKerasAndSplits) {
  const auto& e = expected()["text_directory"];
  const std::string dir = fixture("fortunes/train");
  auto d = datasets::text_dataset_from_directory(dir, {.seed = e["seed"].get<std::uint32_t>()});
  EXPECT_EQ(d.class_names, e["class_names"].get<std::vector<std::string>>());
  std::vector<std::string> files;
  for (auto& f : d.files) files.push_back(fs::relative(f, dir).string());
  EXPECT_EQ(files, e["files"].get<std::vector<std::string>>());
  EXPECT_EQ(d.labels, e["labels"].get<std::vector<std::int32_t>>());
  ASSERT_EQ(d.texts.size(), 400u);
  EXPECT_EQ(d.texts[0], read_bytes(d.files[0]));

  // Unshuffled: class by class, files sorted; max_length cuts bytes.
  auto plain = datasets::text_dataset_from_directory(dir, {.max_length = 10, .shuffle = false});
  EXPECT_EQ(fs::relative(plain.files[0], dir).string(), "computers/000.txt");
  EXPECT_EQ(plain.labels[399], 3);
  EXPECT_EQ(plain.texts[0], read_bytes(plain.files[0]).substr(0, 10));
  // class_names chooses and orders classes.
  auto two =
      datasets::text_dataset_from_directory(dir, {.class_names = {"politics", "food"}, .shuffle = false});
  EXPECT_EQ(two.texts.size(), 200u);
  EXPECT_EQ(fs::relative(two.files[0], dir).string(), "politics/000.txt");

  // validation_split: the two subsets split Keras's shuffled order.
  auto train = datasets::text_dataset_from_directory(
      dir, {.seed = 1337, .validation_split = 0.25, .subset = "training"});
  auto val = datasets::text_dataset_from_directory(
      dir, {.seed = 1337, .validation_split = 0.25, .subset = "validation"});
  EXPECT_EQ(train.files.size(), 300u);
  EXPECT_EQ(val.files.size(), 100u);
  EXPECT_EQ(train.files.front(), d.files.front());
  EXPECT_EQ(val.files.back(), d.files.back());

  EXPECT_THAT(error_of([&] {
                datasets::text_dataset_from_directory(dir, {.validation_split = 0.2, .subset = "training"});
              }),
              HasSubstr("you must provide a `seed`"));
  EXPECT_THAT(error_of([&] { datasets::text_dataset_from_directory(dir, {.class_names = {"sports"}}); }),
              HasSubstr("did not match"));
  EXPECT_THAT(error_of([&] { datasets::text_dataset_from_directory(dir + "/nosuch"); }),
              HasSubstr("not a folder"));
  TempDir empty;
  fs::create_directories(empty.path() / "a");
  EXPECT_THAT(error_of([&] { datasets::text_dataset_from_directory(empty.str()); }),
              HasSubstr("no .txt files"));
}

namespace {

std::vector<std::string> fortunes(const std::string& split) {
  auto d = datasets::text_dataset_from_directory(fixture("fortunes/" + split), {.shuffle = false});
  return d.texts;
}

}  // namespace

TEST(TextVectorization, AdaptAndCallAsKeras) {
  const auto& e = expected()["text_vectorization"];
  auto train = fortunes("train"), test = fortunes("test");

  TextVectorization words({.max_tokens = e["words"]["max_tokens"],
                           .output_sequence_length = e["words"]["output_sequence_length"]});
  words.adapt(train);
  EXPECT_EQ(words.get_vocabulary(), e["words"]["vocabulary"].get<std::vector<std::string>>());
  EXPECT_EQ(words.vocabulary_size(), 1000);
  Tensor ids = words(test);
  EXPECT_EQ(ids.dtype(), DType::int32);
  EXPECT_EQ(rows_of(ids), e["words"]["test_ids"].get<std::vector<std::vector<std::int64_t>>>());

  TextVectorization chars(
      {.max_tokens = e["characters"]["max_tokens"], .standardize = "lower", .split = "character"});
  chars.adapt(train);
  EXPECT_EQ(chars.get_vocabulary(), e["characters"]["vocabulary"].get<std::vector<std::string>>());
  auto want = e["characters"]["test_ids"].get<std::vector<std::vector<std::int32_t>>>();
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_EQ(chars.ids(test[i]), want[i]) << i;
}

TEST(TextVectorization, VocabularyFilesAndErrors) {
  TextVectorization a({.max_tokens = 50});
  a.adapt(fortunes("train"));
  TempDir tmp;
  a.save_vocabulary(tmp.file("vocabulary.txt"));
  // What TextVectorization(vocabulary=path) reads: the tokens, one per line.
  EXPECT_EQ(read_bytes(tmp.file("vocabulary.txt")).substr(0, 9), "the\na\nto\n");
  // Keras's assets/vocabulary.txt: "" and "[UNK]" first, no final newline.
  std::string assets = "\n[UNK]\nthe\na";
  io::write_file_atomic(tmp.file("assets.txt"), assets.data(), assets.size());
  TextVectorization from_assets({.vocabulary_file = tmp.file("assets.txt")});
  EXPECT_EQ(from_assets.get_vocabulary(), (std::vector<std::string>{"", "[UNK]", "the", "a"}));
  TextVectorization b({.output_sequence_length = 4, .vocabulary_file = tmp.file("vocabulary.txt")});
  EXPECT_EQ(b.get_vocabulary(), a.get_vocabulary());
  EXPECT_EQ(rows_of(b({"The the, zebra!", ""})),
            (std::vector<std::vector<std::int64_t>>{{2, 2, 1, 0}, {0, 0, 0, 0}}));
  // Without the specials, a list starts at id 2; standardization and splitting.
  TextVectorization c({.vocabulary = {"hello", "world"}});
  EXPECT_EQ(c.ids("  Hello,\tWORLD!\n hello?  new "), (std::vector<std::int32_t>{2, 3, 2, 1}));
  EXPECT_EQ(c.tokens("It's 3.5% — ok"), (std::vector<std::string>{"its", "35", "—", "ok"}));
  EXPECT_EQ(rows_of(c({"hello", "world hello world"})),
            (std::vector<std::vector<std::int64_t>>{{2, 0, 0}, {3, 2, 3}}));

  EXPECT_THAT(error_of([] {
                TextVectorization({.vocabulary = {"a", "b", "a"}});
              }),
              HasSubstr("repeats the term \"a\""));
  EXPECT_THAT(error_of([] {
                TextVectorization({.vocabulary = {"a", "", "b"}});
              }),
              HasSubstr("reserved mask token"));
  EXPECT_THAT(error_of([] {
                TextVectorization({.max_tokens = 3, .vocabulary = {"a", "b"}});
              }),
              HasSubstr("larger than the maximum vocab size"));
  EXPECT_THAT(error_of([] { TextVectorization({.split = "comma"}); }), HasSubstr("split \"comma\""));
  EXPECT_THAT(error_of([] { TextVectorization({.vocabulary_file = "/nonexistent/vocab.txt"}); }),
              HasSubstr("/nonexistent/vocab.txt"));
  // Characters: invalid UTF-8 bytes become U+FFFD.
  TextVectorization d({.standardize = "", .split = "character"});
  EXPECT_EQ(d.tokens("a\xffé"), (std::vector<std::string>{"a", "\xef\xbf\xbd", "é"}));
}

// --dataset imdb[:WORDS[:LENGTH]] (datasets::load): Keras's loader, then pad_sequences; and the command trains on it.
TEST(LoadByName, ImdbAndReutersAsPaddedIds) {
  TempDir home;
  systolic::testing::ScopedEnv env;
  env.set("SYSTOLIC_HOME", home.str());
  fs::create_directories(home.path() / "datasets");
  fs::copy_file(fixture("imdb_small.npz"), home.path() / "datasets/imdb.npz");
  fs::copy_file(fixture("reuters_small.npz"), home.path() / "datasets/reuters.npz");

  auto d = datasets::load("imdb:100:30", {.limit = 50});
  EXPECT_EQ(d.train.x.shape(), Shape({50, 30}));
  EXPECT_EQ(d.train.x.dtype(), DType::float32);
  EXPECT_EQ(d.train.y.dtype(), DType::int32);
  EXPECT_EQ(d.test.x.shape(), Shape({50, 30}));
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"negative", "positive"}));
  auto want = datasets::imdb::load_data({.path = fixture("imdb_small.npz"), .num_words = 100});
  Tensor padded = datasets::pad_sequences(want.train.x, {.maxlen = 30});
  auto got = d.train.x.to_doubles(), expect = padded.to_doubles();
  EXPECT_EQ(std::vector<double>(got.begin(), got.end()),
            std::vector<double>(expect.begin(), expect.begin() + 1500));
  EXPECT_EQ(d.train.y.to_doubles()[7], double(want.train.y[7]));

  auto r = datasets::load("reuters");  // 10000 words, 200 ids
  EXPECT_EQ(r.train.x.dim(1), 200);
  EXPECT_EQ(r.class_names.size(), 46u);
  EXPECT_EQ(datasets::class_names("reuters:50")[1], "grain");

  for (const char* bad : {"imdb:", "imdb:0", "imdb:12x", "imdb:100:", "reuters:5:-1"})
    EXPECT_THAT(error_of([&] { datasets::load(bad); }), HasSubstr("expected")) << bad;

  // The command: an Embedding model trained on imdb:100:30 from the cache.
  auto in = layers::Input({30});
  auto x = layers::Embedding(100, 8)(in);
  x = layers::GlobalAveragePooling1D()(x);
  Model m(in, layers::Dense(2, {.activation = "softmax"})(x), "bag");
  m.save(home.file("bag.keras"));
  const std::string out = home.file("train.txt");
  const std::string cmd = std::string(SYSTOLIC_CLI) + " train --model " + home.file("bag.keras") +
                          " --dataset imdb:100:30 --epochs 2 --batch-size 16 --verbose 2 --save " +
                          home.file("trained.keras") + " > " + out + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << read_bytes(out);
  EXPECT_THAT(read_bytes(out), HasSubstr("Test accuracy"));
  EXPECT_TRUE(fs::is_regular_file(home.file("trained.keras")));
}
