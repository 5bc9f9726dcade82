// NumPy's .npy and .npz files (include/systolic/npy.h): arrays numpy wrote (tests/fixtures/npy, by
// tests/reference/npy_arrays.py) read as numpy reads them, every dtype and order; what systolic refuses, each with
// an error naming the file and the fault; save() writes what numpy's format holds; npz:PATH data sets.
#include <gmock/gmock.h>
#include <systolic/systolic.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "json_fixture.h"
#include "local_http.h"
#include "test_util.h"

using namespace systolic;
using json = nlohmann::json;
using systolic::testing::error_of;
using ::testing::HasSubstr;

namespace {

std::string fixture(const std::string& name) {
  return systolic::testing::source_dir() + "/tests/fixtures/npy/" + name;
}

const json& arrays() {
  return systolic::testing::json_fixture("npy/arrays.json")["arrays"];
}

}  // namespace

TEST(Npy, ReadsWhatNumpyWrote) {
  const std::map<std::string, DType> dtypes = {{"float64", DType::float64},
                                               {"float32_fortran", DType::float32},
                                               {"float16", DType::float32},
                                               {"int64_labels", DType::int32},
                                               {"int8", DType::int32},
                                               {"uint16", DType::int32},
                                               {"uint32", DType::int32},
                                               {"bool", DType::uint8},
                                               {"uint8_image", DType::uint8},
                                               {"big_endian_int32", DType::int32},
                                               {"big_endian_float64", DType::float64},
                                               {"scalar", DType::float32},
                                               {"empty", DType::float32}};
  ASSERT_EQ(arrays().size(), dtypes.size());
  for (auto& [name, want] : arrays().items()) {
    SCOPED_TRACE(name);
    Tensor t = npy::load(fixture(name + ".npy"));
    EXPECT_EQ(t.dtype(), dtypes.at(name));
    EXPECT_EQ(t.shape().dims(), want["shape"].get<std::vector<std::int64_t>>());
    auto values = want["values"].get<std::vector<double>>();
    auto got = t.to_doubles();
    ASSERT_EQ(got.size(), values.size());
    for (std::size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], values[i]) << i;  // exact, C order
  }
}

TEST(Npy, RefusesWhatItCannotRead) {
  EXPECT_THAT(error_of([] { npy::load(fixture("bad_object.npy")); }), HasSubstr("pickled object array"));
  EXPECT_THAT(error_of([] { npy::load(fixture("bad_structured.npy")); }), HasSubstr("structured arrays"));
  EXPECT_THAT(error_of([] { npy::load(fixture("bad_int64_range.npy")); }), HasSubstr("does not fit"));
  EXPECT_THAT(error_of([] { npy::load(fixture("nosuch.npy")); }), HasSubstr("nosuch.npy"));
  std::string good = npy::serialize(Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}));
  auto err = [&](std::string bytes) {
    return error_of([&] { npy::read(bytes.data(), bytes.size(), "f.npy"); });
  };
  EXPECT_THAT(err("NUMPY" + good), HasSubstr("bad magic"));
  EXPECT_THAT(err(good.substr(0, good.size() - 1)), HasSubstr("truncated"));
  EXPECT_THAT(err(good + "x"), HasSubstr("truncated or corrupt"));
  EXPECT_THAT(err(good.substr(0, 40)), HasSubstr("f.npy"));
  auto edited = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    s.replace(s.find(from), from.size(), to);
    return s;
  };
  EXPECT_THAT(err(edited("<f4", "<c8")), HasSubstr("'<c8' is not supported"));
  EXPECT_THAT(err(edited("<f4", "<U3")), HasSubstr("not supported"));
  EXPECT_THAT(err(edited("'shape': (2, 3)", "'shape': (2, x)")), HasSubstr("malformed npy shape"));
  EXPECT_THAT(err(edited("'fortran_order': False", "'fortran_order': 0    ")), HasSubstr("fortran_order"));
  EXPECT_THAT(err(edited("'descr'", "'dtype'")), HasSubstr("unknown key 'dtype'"));
  std::string v9 = good;
  v9[6] = 9;
  EXPECT_THAT(err(v9), HasSubstr("version 9"));
}

TEST(Npy, SavedArraysReadBack) {
  systolic::testing::TempDir tmp;
  std::vector<Tensor> cases = {Tensor::from_vector(std::vector<float>{1.5f, -2, 3}, {3}),
                               Tensor::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {3, 2}),
                               Tensor::from_vector(std::vector<std::int32_t>{-7, 8}, {2, 1}),
                               Tensor::from_vector(std::vector<std::uint8_t>{0, 255}, {1, 2})};
  for (const Tensor& t : cases) {
    npy::save(tmp.file("a.npy"), t);
    Tensor back = npy::load(tmp.file("a.npy"));
    EXPECT_EQ(back.dtype(), t.dtype());
    EXPECT_EQ(back.shape(), t.shape());
    EXPECT_EQ(back.to_doubles(), t.to_doubles());
  }
  // numpy's layout: the header ends a 64-byte block with a newline; a 1-d shape keeps its comma.
  std::string s = npy::serialize(cases[0]);
  EXPECT_EQ((s.find('\n') + 1) % 64, 0u);
  EXPECT_THAT(s, HasSubstr("'descr': '<f4', 'fortran_order': False, 'shape': (3,), }"));
}

TEST(Npy, NpzDataSets) {
  auto d = datasets::load("npz:" + fixture("regression.npz"));
  EXPECT_EQ(d.train.x.shape(), Shape({8, 3}));
  EXPECT_EQ(d.train.x.dtype(), DType::float32);
  EXPECT_EQ(d.train.y.shape(), Shape({8}));
  EXPECT_EQ(d.train.y.dtype(), DType::float32);
  EXPECT_EQ(d.test.x.shape(), Shape({2, 3}));
  EXPECT_TRUE(d.class_names.empty());                   // float labels: a regression
  auto all = npy::load_npz(fixture("regression.npz"));  // numpy.savez_compressed: deflated members
  EXPECT_EQ(all.size(), 4u);
  EXPECT_EQ(all.at("y_test").dtype(), DType::float64);
  EXPECT_NEAR(all.at("y_test").to_doubles()[1], d.test.y.to_doubles()[1], 1e-6);

  EXPECT_THAT(
      error_of([] { datasets::load("npz:" + fixture("no_y_test.npz")); }),
      HasSubstr("no array 'y_test' (an npz data set holds x_train, y_train, x_test and y_test; this one "
                "holds x_test, x_train, y_train)"));
  EXPECT_THAT(error_of([] { datasets::load("npz:" + fixture("nosuch.npz")); }), HasSubstr("no such file"));
  EXPECT_THAT(error_of([] { datasets::load("npz:"); }), HasSubstr("PATH is missing"));
  EXPECT_THAT(error_of([] { datasets::load("npz:" + fixture("float64.npy")); }), HasSubstr("zip"));

  // Integer labels name their classes; bad labels and shapes are refused, naming the array.
  systolic::testing::TempDir tmp;
  auto write = [&](const std::string& name, std::vector<std::pair<std::string, Tensor>> members) {
    std::vector<systolic::testing::ArchiveEntry> files;
    for (auto& [k, t] : members) files.push_back({.path = k + ".npy", .data = npy::serialize(t)});
    std::string zip = systolic::testing::make_archive(files, systolic::testing::ArchiveFormat::zip);
    std::ofstream(tmp.file(name), std::ios::binary).write(zip.data(), std::streamsize(zip.size()));
    return "npz:" + tmp.file(name);
  };
  Tensor x = Tensor::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {3, 2});
  Tensor labels = Tensor::from_vector(std::vector<std::int32_t>{0, 2, 1}, {3});
  auto c = datasets::load(
      write("c.npz", {{"x_train", x}, {"y_train", labels}, {"x_test", x}, {"y_test", labels}}));
  EXPECT_EQ(c.class_names, (std::vector<std::string>{"0", "1", "2"}));
  EXPECT_EQ(c.train.y.dtype(), DType::int32);
  Tensor nan_y = Tensor::from_vector(std::vector<float>{0, NAN, 1}, {3});
  EXPECT_THAT(error_of([&] {
                datasets::load(
                    write("n.npz", {{"x_train", x}, {"y_train", nan_y}, {"x_test", x}, {"y_test", nan_y}}));
              }),
              HasSubstr("y_train holds nan (element 1)"));
  Tensor short_y = Tensor::from_vector(std::vector<std::int32_t>{0, 1}, {2});
  EXPECT_THAT(error_of([&] {
                datasets::load(write(
                    "s.npz", {{"x_train", x}, {"y_train", short_y}, {"x_test", x}, {"y_test", labels}}));
              }),
              HasSubstr("x_train has 3 samples but y_train has shape (2,)"));
  Tensor flat = Tensor::from_vector(std::vector<float>{1, 2, 3}, {3});
  EXPECT_THAT(error_of([&] {
                datasets::load(write(
                    "f.npz", {{"x_train", flat}, {"y_train", labels}, {"x_test", x}, {"y_test", labels}}));
              }),
              HasSubstr("x_train has shape (3,); it must be (samples, features...)"));
}
