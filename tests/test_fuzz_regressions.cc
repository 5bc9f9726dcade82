// Inputs that crashed or hung systolic (found by scripts/mutants and the fuzz harnesses), each now expected to
// end in a clean, one-line systolic::Error. tests/fuzz/regressions/KIND-WHAT.EXT: KIND says how it is read
// (weights_tfkeras: weights into tests/fixtures/keras/zoo.tfkeras.json's model; full_model_h5: load_model;
// image: image::read; idx: datasets::read_idx; model_json: model_from_json_file).
#include <gtest/gtest.h>
#include <systolic/datasets.h>
#include <systolic/image.h>
#include <systolic/saving.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

const std::string kDir = SYSTOLIC_SOURCE_DIR "/tests/fuzz/regressions";

// The message of the Error reading `file` as `kind` raises, or "" when it loads.
std::string error_of(const std::string& file, const std::string& kind) {
  try {
    if (kind == "weights_tfkeras") {
      auto model =
          systolic::model_from_json_file(SYSTOLIC_SOURCE_DIR "/tests/fixtures/keras/zoo.tfkeras.json");
      model.load_weights(file);
    } else if (kind == "full_model_h5") {
      systolic::load_model(file);
    } else if (kind == "image") {
      systolic::image::read(file, 3);
    } else if (kind == "idx") {
      systolic::datasets::read_idx(file);
    } else if (kind == "model_json") {
      systolic::model_from_json_file(file);
    } else {
      return "unknown kind " + kind;
    }
  } catch (const systolic::Error& e) {
    return e.what();
  }
  return "";
}

// A fixture of tests/fixtures/keras with one byte XORed, written to a temporary file; returns its path.
std::string mutant(const std::string& fixture, std::size_t offset, int xor_with) {
  std::ifstream in(SYSTOLIC_SOURCE_DIR "/tests/fixtures/keras/" + fixture, std::ios::binary);
  std::vector<char> bytes(std::istreambuf_iterator<char>(in), {});
  EXPECT_GT(bytes.size(), offset);
  if (bytes.size() > offset) bytes[offset] = static_cast<char>(bytes[offset] ^ xor_with);
  auto path = (std::filesystem::temp_directory_path() /
               ("systolic-regression-" + std::to_string(getpid()) + "-" + fixture))
                  .string();
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

// SYSTOLIC_HDF5_CHECK_SECONDS for one test.
struct CheckSeconds {
  explicit CheckSeconds(const char* seconds) { setenv("SYSTOLIC_HDF5_CHECK_SECONDS", seconds, 1); }
  ~CheckSeconds() { unsetenv("SYSTOLIC_HDF5_CHECK_SECONDS"); }
};

TEST(FuzzRegressions, EveryInputEndsInACleanError) {
  CheckSeconds limit("1");  // the hanging input ends at 1 s
  int seen = 0;
  for (const auto& e : std::filesystem::directory_iterator(kDir)) {
    auto file = e.path().string();
    auto start = std::chrono::steady_clock::now();
    std::string kind = e.path().filename().string();
    std::string message = error_of(file, kind.substr(0, kind.find('-')));
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    SCOPED_TRACE(file);
    EXPECT_NE(message.find(file), std::string::npos) << message;  // names the file
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;  // one line
    EXPECT_LT(seconds, 10);
    ++seen;
  }
  EXPECT_GE(seen, 5);
}

TEST(FuzzRegressions, CrashInHdf5IsReportedAsSuch) {
  auto message = error_of(kDir + "/weights_tfkeras-segv-H5HG_read.h5", "weights_tfkeras");
  EXPECT_NE(message.find("crashed the HDF5 library"), std::string::npos) << message;
}

// One byte of seed.keras3.full.h5 changed (offset 25437 XOR 0x11, from scripts/mutants): a variable-length string
// attribute whose global-heap entry is damaged. The checking child of the previous design read it without crashing,
// then the parent segfaulted reading it again (H5Aread -> H5T__conv_vlen -> H5HG_read, an out-of-bounds memcpy
// whose outcome depends on the heap's layout). Now only the child calls HDF5; this process gets plain data.
TEST(FuzzRegressions, AttributeThatCrashedTheParentEndsInACleanError) {
  auto path = mutant("seed.keras3.full.h5", 25437, 0x11);
  auto message = error_of(path, "full_model_h5");
  std::filesystem::remove(path);
  EXPECT_EQ(message.rfind(path + ": ", 0), 0u) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

// One byte of seed.tfkeras.h5 changed (offset 450632 XOR 0xb3, from scripts/mutants): the root group's local heap
// has a damaged free list, and HDF5 1.10 cannot list the root's links (h5py with HDF5 1.14 cannot either). The
// previous design loaded it, looking the groups up by name; the reader needs the listing, so the file is refused,
// naming the cause.
TEST(FuzzRegressions, GroupHdf5CannotListIsRefusedCleanly) {
  auto path = mutant("seed.tfkeras.h5", 450632, 0xb3);
  std::string message;
  try {
    systolic::model_from_json_file(SYSTOLIC_SOURCE_DIR "/tests/fixtures/keras/seed.tfkeras.json")
        .load_weights(path);
  } catch (const systolic::Error& e) {
    message = e.what();
  }
  std::filesystem::remove(path);
  EXPECT_EQ(message, path + ": /: cannot list the group (bad heap free list)");
}

TEST(FuzzRegressions, ModelJsonOfTheWrongTypesIsAMalformedConfig) {
  // fuzz_model_json: a layer entry whose "config" is a string (the mutation swapped two keys' names). The message
  // for its unknown key read the config's name with nlohmann's value(), which threw its own type_error: not a
  // systolic::Error, and a message naming neither the file nor the layer.
  auto file = kDir + "/model_json-config-not-an-object.json";
  EXPECT_EQ(error_of(file, "model_json"), file + ": layer entry for '?': unsupported key 'fcniog'");
  // Any other value of the wrong type that the reader meets through value() or get(): a malformed config.
  auto path = (std::filesystem::temp_directory_path() /
               ("systolic-regression-" + std::to_string(getpid()) + "-name.json"))
                  .string();
  std::ofstream(path) << R"({"class_name": "Sequential", "config": {"name": 5, "layers": []}})";
  auto message = error_of(path, "model_json");
  std::filesystem::remove(path);
  EXPECT_EQ(message,
            path + ": malformed config: [json.exception.type_error.302] type must be string, but is number");
  // fuzz_model_json: a number too large for a double is nlohmann's out_of_range, not its parse_error.
  auto overflow = kDir + "/model_json-number-overflow.json";
  auto parsed = error_of(overflow, "model_json");
  EXPECT_EQ(parsed.rfind(
                overflow + ": not valid JSON: [json.exception.out_of_range.406] number overflow parsing", 0),
            0u)
      << parsed;
}

TEST(FuzzRegressions, IdxDimensionsWhoseProductOverflowsAreRefused) {
  // Three dimensions under 2^28 each whose product overflows an int64 (UBSan, scripts/fuzz idx).
  auto message = error_of(kDir + "/idx-overflowing-dimensions.idx", "idx");
  EXPECT_NE(message.find("IDX data of more than 4294967296 bytes is too large"), std::string::npos)
      << message;
}

TEST(FuzzRegressions, TruncatedBmpIsRefusedBeforeDecoding) {
  // 3 KiB claiming 32x2097184 pixels: stb decoded 200 MB of nothing for 5 s before.
  auto message = error_of(kDir + "/image-bmp-huge-height.bmp", "image");
  EXPECT_NE(
      message.find("truncated BMP: 32x2097184 pixels at 24 bits need 201329664 bytes, the file has 3126"),
      std::string::npos)
      << message;
}

// HDF5 loops in its metadata cache reading an attribute of this file (over 20 s, found by fuzz_hdf5_reader): the
// child is stopped at the limit.
TEST(FuzzRegressions, HangInHdf5EndsAtTheTimeLimit) {
  CheckSeconds limit("1");
  auto start = std::chrono::steady_clock::now();
  auto message = error_of(kDir + "/full_model_h5-hang-H5HG_read.h5", "full_model_h5");
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(message.find("corrupt HDF5 file: reading it did not finish in 1.0 s; refused"), std::string::npos)
      << message;
  EXPECT_LT(seconds, 3);
}

// On this 29 KB file HDF5 asks for gigabytes (2.6 GB and 5 s before the reading child had a memory limit, then it
// loaded): the child's limit makes the allocation fail, which HDF5 reports.
TEST(FuzzRegressions, HugeAllocationInHdf5IsRefused) {
  auto start = std::chrono::steady_clock::now();
  auto message = error_of(kDir + "/weights_tfkeras-slow.h5", "weights_tfkeras");
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(message.find("memory allocation failed"), std::string::npos) << message;
  EXPECT_LT(seconds, 10);
}

TEST(FuzzRegressions, BadCheckLimitIsRefused) {
  setenv("SYSTOLIC_HDF5_CHECK_SECONDS", "soon", 1);
  auto message = error_of(SYSTOLIC_SOURCE_DIR "/tests/fixtures/keras/zoo.tfkeras.h5", "weights_tfkeras");
  unsetenv("SYSTOLIC_HDF5_CHECK_SECONDS");
  EXPECT_NE(message.find("SYSTOLIC_HDF5_CHECK_SECONDS=soon"), std::string::npos) << message;
}

TEST(FuzzRegressions, IntactFileStillLoads) {
  EXPECT_EQ(error_of(SYSTOLIC_SOURCE_DIR "/tests/fixtures/keras/zoo.tfkeras.h5", "weights_tfkeras"), "");
}

}  // namespace
