// The record stream the HDF5 reading child hands back (src/io/hdf5_tree.h), as the process loading a file parses
// it: every read a loader can make, then the weights of the zoo models (tf.keras and Keras 3 layouts) and a
// full model from it. Seeds: the streams of the other HDF5 harnesses' seeds (tests/fuzz/hdf5_tree_seeds.cc).
#include <systolic/saving.h>

#include <memory>
#include <vector>

#include "fuzz_util.h"
#include "saving/keras_io.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace sy = systolic;
  static sy::Model tfkeras =
      sy::model_from_json_file(SYSTOLIC_SOURCE_DIR "/tests/fixtures/keras/zoo.tfkeras.json");
  static sy::Model keras3 =
      sy::model_from_json_file(SYSTOLIC_SOURCE_DIR "/tests/fixtures/keras/zoo.keras3.json");
  auto bytes = std::make_shared<std::vector<char>>(data, data + size);
  sy::fuzz::expect_clean([&] {
    auto root = sy::hdf5::decode_tree(bytes, bytes->data(), bytes->size(), "fuzz.h5");
    sy::fuzz::exercise(root);
    sy::fuzz::expect_clean([&] { sy::keras_io::load_weights(tfkeras, root, {}); });
    sy::fuzz::expect_clean([&] { sy::keras_io::load_weights(keras3, root, {}); });
    sy::fuzz::expect_clean([&] { sy::keras_io::load_model_h5(root, {.compile = true}); });
  });
  return 0;
}
