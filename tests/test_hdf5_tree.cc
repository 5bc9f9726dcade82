// Reading HDF5 files as plain data (src/io/hdf5_tree.h, hdf5.h read_file): the child hands back a record stream,
// this process parses it and never calls HDF5 on the file. Checks: values and strings come back as written, this
// process holds no HDF5 file afterwards, what HDF5 could not read is raised only when asked for, links are not
// followed, a dataset larger than its file is refused, and a damaged or truncated stream is refused cleanly.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/mman.h>
#include <systolic/error.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "io/hdf5.h"
#include "io/hdf5_tree.h"

namespace sy = systolic;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path dir = fs::temp_directory_path() / ("systolic-hdf5-tree-" + std::to_string(getpid()));
  TempDir() { fs::create_directories(dir); }
  ~TempDir() { fs::remove_all(dir); }
  std::string file(const std::string& name) const { return (dir / name).string(); }
};

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const sy::Error& e) {
    return e.what();
  }
  return "";
}

// What a TreeEncoder wrote, as bytes (`write` gets the encoder).
template <class F>
std::shared_ptr<std::vector<char>> encoded(F&& write) {
  int fd = memfd_create("test-hdf5-tree", MFD_CLOEXEC);
  EXPECT_GE(fd, 0);
  {
    sy::hdf5::TreeEncoder out(fd);
    write(out);
  }
  auto bytes = std::make_shared<std::vector<char>>(static_cast<std::size_t>(lseek(fd, 0, SEEK_END)));
  EXPECT_EQ(pread(fd, bytes->data(), bytes->size(), 0), static_cast<ssize_t>(bytes->size()));
  close(fd);
  return bytes;
}

sy::hdf5::ReadGroup decode(const std::shared_ptr<std::vector<char>>& bytes, std::size_t size) {
  return sy::hdf5::decode_tree(bytes, bytes->data(), size, "t.h5");
}

}  // namespace

TEST(Hdf5Tree, FileComesBackAsWrittenAndThisProcessHoldsNoHdf5File) {
  TempDir tmp;
  auto path = tmp.file("w.h5");
  sy::Tensor kernel(sy::Shape({2, 3}), sy::DType::float32);
  for (int i = 0; i < 6; ++i) kernel.data<float>()[i] = 0.5f * float(i) - 1;
  {
    sy::hdf5::Lock lock;
    auto root = sy::hdf5::create(path);
    root.set_string_list_attribute("names", {"a", "bc", ""});
    root.set_string_attribute("note", "d\xc3\xa9j\xc3\xa0");
    root.set_empty_list_attribute("empty");
    auto g = root.create_group("layer/vars");
    g.write_float32("0", kernel);
    g.write_int64_scalar("1", (std::int64_t(1) << 53) + 1);  // exact as a double, not as a float
    g.write_float32_scalar("2", 0.25f);
  }
  auto root = sy::hdf5::read_file(path);
  // Nothing of HDF5 is open here: the child read the file.
  EXPECT_EQ(H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL), 0);
  fs::remove(path);  // and everything is in memory
  EXPECT_EQ(root.string_list_attribute("names"), (std::vector<std::string>{"a", "bc", ""}));
  EXPECT_EQ(root.string_attribute("note"), "d\xc3\xa9j\xc3\xa0");
  EXPECT_TRUE(root.string_list_attribute("empty").empty());
  EXPECT_TRUE(root.has_group("layer"));
  EXPECT_TRUE(root.has_group("layer/vars"));
  EXPECT_TRUE(root.has_group("layer//vars/"));  // empty components are skipped, as HDF5 does
  EXPECT_FALSE(root.has(""));
  EXPECT_FALSE(root.has("/"));
  EXPECT_EQ(root.group("layer").children(), (std::vector<std::string>{"vars"}));
  auto vars = root.group("layer/vars");
  EXPECT_EQ(vars.path(), "/layer/vars");
  EXPECT_EQ(vars.children(), (std::vector<std::string>{"0", "1", "2"}));
  EXPECT_EQ(vars.dataset_shape("0"), (std::vector<std::int64_t>{2, 3}));
  auto back = vars.read_float32("0");
  ASSERT_EQ(back.shape(), kernel.shape());
  for (int i = 0; i < 6; ++i) EXPECT_EQ(back.data<float>()[i], kernel.data<float>()[i]);
  EXPECT_EQ(vars.read_scalar("1"), double((std::int64_t(1) << 53) + 1));
  EXPECT_TRUE(vars.dataset_is_integer("1"));                                   // int64
  EXPECT_FALSE(vars.dataset_is_integer("0") || vars.dataset_is_integer("2"));  // float32
  EXPECT_EQ(vars.read_scalar("2"), 0.25);
  EXPECT_NE(error_of([&] { vars.read_scalar("0"); }).find("expected one value, the dataset has shape (2, 3)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { vars.read_float32("3"); }).find("w.h5: /layer/vars/3: missing dataset"),
            std::string::npos)
      << error_of([&] { vars.read_float32("3"); });
  EXPECT_NE(error_of([&] { root.string_list_attribute("absent"); }).find("missing attribute 'absent'"),
            std::string::npos);
}

TEST(Hdf5Tree, LinksAreNotFollowedAndCyclesEnd) {
  TempDir tmp;
  auto other = tmp.file("other.h5");
  auto path = tmp.file("links.h5");
  {
    sy::hdf5::Lock lock;
    sy::hdf5::create(other).write_float32_scalar("secret", 42);
    auto root = sy::hdf5::create(path);
    root.create_group("g");
    ASSERT_GE(H5Lcreate_external(other.c_str(), "/secret", root.id(), "external", H5P_DEFAULT, H5P_DEFAULT),
              0);
    ASSERT_GE(H5Lcreate_soft("/g", root.id(), "soft", H5P_DEFAULT, H5P_DEFAULT), 0);
    ASSERT_GE(H5Lcreate_hard(root.id(), "/", root.id(), "g/up", H5P_DEFAULT, H5P_DEFAULT), 0);  // a cycle
  }
  auto root = sy::hdf5::read_file(path);
  EXPECT_TRUE(root.has("external"));
  EXPECT_FALSE(root.has_dataset("external"));  // another file of this machine is not read
  EXPECT_FALSE(root.has_group("soft"));
  EXPECT_NE(error_of([&] { root.group("soft"); }).find("no group 'soft'"), std::string::npos);
  // The hard-link cycle is walked 64 groups deep, then stops.
  std::string deep = "g";
  for (int i = 0; i < 31; ++i) deep += "/up/g";
  EXPECT_TRUE(root.has_group(deep + "/up"));  // 64 groups below the root
  EXPECT_TRUE(root.has(deep + "/up/g"));
  EXPECT_FALSE(root.has_group(deep + "/up/g"));
}

TEST(Hdf5Tree, DatasetLargerThanItsFileIsRefused) {
  // 2^36 float32 values (256 GiB) declared in a file of a few KiB, never written (chunked, allocated late):
  // HDF5 would hand back its fill value for all of them; the reader refuses instead of exhausting memory.
  TempDir tmp;
  auto path = tmp.file("huge.h5");
  {
    sy::hdf5::Lock lock;
    auto root = sy::hdf5::create(path);
    hsize_t dims[1] = {hsize_t(1) << 36}, chunk[1] = {1024};
    hid_t space = H5Screate_simple(1, dims, nullptr);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 1, chunk);
    hid_t ds = H5Dcreate2(root.id(), "huge", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    ASSERT_GE(ds, 0);
    H5Dclose(ds);
    H5Pclose(dcpl);
    H5Sclose(space);
  }
  auto root = sy::hdf5::read_file(path);
  EXPECT_EQ(root.dataset_shape("huge"), (std::vector<std::int64_t>{std::int64_t(1) << 36}));
  auto err = error_of([&] { root.read_float32("huge"); });
  EXPECT_NE(err.find("huge.h5: /huge: the dataset holds more values than the file can store; refused"),
            std::string::npos)
      << err;
}

TEST(Hdf5Tree, WhatCouldNotBeReadIsRaisedWhenAskedFor) {
  auto bytes = encoded([](sy::hdf5::TreeEncoder& out) {
    out.begin_group("");
    out.attribute_strings("layer_names0", {"a", "b"});
    out.attribute_strings("layer_names1", {"c"});
    out.attribute_error("broken", "cannot read attribute 'broken' (bad heap)");
    out.attribute_not_strings("numbers");
    out.begin_group("g\xff");
    out.children_error("cannot list the group (bad B-tree)");
    out.end_group();
    out.dataset_error("d0", "unreadable dataset shape (bad header)");
    float one = 7;
    out.dataset("d1", {1}, true, &one, "", std::nullopt, "cannot read dataset (bad conversion)");
    out.dataset("d2", {2, 2}, false, nullptr, "dataset is not numeric", std::nullopt, "");
    out.other("x", "neither a group nor a dataset");
    out.end_group();
    out.finish();
  });
  auto root = decode(bytes, bytes->size());
  EXPECT_EQ(root.string_list_attribute("layer_names"), (std::vector<std::string>{"a", "b", "c"}));  // chunked
  EXPECT_EQ(error_of([&] { root.string_list_attribute("broken"); }),
            "t.h5: /: cannot read attribute 'broken' (bad heap)");
  EXPECT_EQ(error_of([&] { root.string_list_attribute("numbers"); }),
            "t.h5: /: attribute 'numbers' is not a list of strings");
  EXPECT_EQ(root.children(), (std::vector<std::string>{"g\xff", "d0", "d1", "d2", "x"}));
  EXPECT_EQ(error_of([&] { root.group("g\xff").children(); }),
            "t.h5: /g\\xff: cannot list the group (bad B-tree)");  // names from the file escaped
  // Whether a child of a group HDF5 could not list exists is unknown: asking says why.
  EXPECT_EQ(error_of([&] { root.has_group("g\xff/layer"); }),
            "t.h5: /g\\xff: cannot list the group (bad B-tree)");
  EXPECT_TRUE(root.has_dataset("d0"));
  EXPECT_EQ(error_of([&] { root.dataset_shape("d0"); }), "t.h5: /d0: unreadable dataset shape (bad header)");
  EXPECT_EQ(root.read_float32("d1").data<float>()[0], 7.0f);
  EXPECT_EQ(error_of([&] { root.read_scalar("d1"); }), "t.h5: /d1: cannot read dataset (bad conversion)");
  EXPECT_EQ(root.dataset_shape("d2"), (std::vector<std::int64_t>{2, 2}));
  EXPECT_EQ(error_of([&] { root.read_float32("d2"); }), "t.h5: /d2: dataset is not numeric");
  EXPECT_TRUE(root.has("x"));
  EXPECT_FALSE(root.has_group("x") || root.has_dataset("x"));
}

TEST(Hdf5Tree, FailureOfTheWholeFileIsRaised) {
  auto bytes = encoded([](sy::hdf5::TreeEncoder& out) {
    out.begin_group("");
    out.begin_group("half");
    out.fail_file("corrupt HDF5 file: more than 1048576 objects; refused");
  });
  EXPECT_EQ(error_of([&] { decode(bytes, bytes->size()); }),
            "t.h5: corrupt HDF5 file: more than 1048576 objects; refused");
}

TEST(Hdf5Tree, DamagedStreamsAreRefusedCleanly) {
  // A real file's stream, cut at every length and with bytes changed: a clean one-line error or a tree,
  // never a crash (the stream comes from another process, and is parsed as untrusted).
  TempDir tmp;
  auto path = tmp.file("w.h5");
  {
    sy::hdf5::Lock lock;
    auto root = sy::hdf5::create(path);
    root.set_string_list_attribute("layer_names", {"dense"});
    sy::Tensor k(sy::Shape({3, 2}), sy::DType::float32);
    for (int i = 0; i < 6; ++i) k.data<float>()[i] = float(i);
    root.create_group("dense").write_float32("dense/kernel:0", k);
  }
  std::vector<char> file;
  {
    auto f = fopen(path.c_str(), "rb");
    ASSERT_TRUE(f);
    char buf[4096];
    for (std::size_t n; (n = fread(buf, 1, sizeof buf, f)) > 0;) file.insert(file.end(), buf, buf + n);
    fclose(f);
  }
  int fd = memfd_create("t", MFD_CLOEXEC);
  sy::hdf5::write_tree_of_image(file.data(), file.size(), "w.h5", fd);
  auto stream = std::make_shared<std::vector<char>>(static_cast<std::size_t>(lseek(fd, 0, SEEK_END)));
  ASSERT_EQ(pread(fd, stream->data(), stream->size(), 0), static_cast<ssize_t>(stream->size()));
  close(fd);
  ASSERT_NO_THROW(decode(stream, stream->size()));
  EXPECT_EQ(decode(stream, stream->size()).group("dense").read_float32("dense/kernel:0").numel(), 6);
  for (std::size_t n = 0; n < stream->size(); ++n) {
    auto err = error_of([&] { decode(stream, n); });
    ASSERT_NE(err.find("t.h5: the process that read the HDF5 file handed back malformed data"),
              std::string::npos)
        << n << ": " << err;
  }
  for (std::size_t i = 0; i < stream->size(); ++i)
    for (int flip : {0x01, 0x80, 0xff}) {
      auto copy = std::make_shared<std::vector<char>>(*stream);
      (*copy)[i] = static_cast<char>((*copy)[i] ^ flip);
      auto err = error_of([&] {
        auto root = decode(copy, copy->size());
        for (auto& c : root.children()) (void)root.has_group(c);
      });
      EXPECT_EQ(err.find('\n'), std::string::npos) << err;
      if (!err.empty()) EXPECT_EQ(err.rfind("t.h5: ", 0), 0u) << err;
    }
}
