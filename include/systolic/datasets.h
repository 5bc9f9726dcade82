// Data sets, returned as Keras returns them: x uint8 (N, H, W) or (N, H, W, C), y uint8 (N,)
// (CIFAR-10: (N, 1)).
//
// Where they come from (no network is touched when a copy is found):
//   cache:  $SYSTOLIC_HOME/datasets (default ~/.systolic/datasets), see cache_dir()
//   cifar10:       cache/cifar-10-batches-bin, else cache/cifar-10-binary.tar.gz placed by hand, else
//                  downloaded from $SYSTOLIC_CIFAR10_URL (default the CIFAR page), md5 checked
//                  ($SYSTOLIC_CIFAR10_MD5) before extraction; extracted and verified in a temporary folder,
//                  then renamed into the cache.
//   fashion_mnist: cache/fashion-mnist, /usr/share/datasets/fashion-mnist (Debian), else the four IDX files
//                  downloaded from $SYSTOLIC_DATASETS_URL (default Keras's base address).
//   mnist:         cache/mnist (the four IDX files, placed by hand), cache/mnist.npz, else Keras's mnist.npz
//                  downloaded from $SYSTOLIC_DATASETS_URL (sha256 checked as Keras does).
//   image folders: image_dataset_from_directory(path, ...).
//   npz:PATH:      arrays in an .npz file (numpy.savez), as Keras's mnist.npz holds them (see load()).
//   imdb, reuters: Keras's imdb.npz and reuters.npz (ragged word-id sequences) and their word indexes, from the
//                  cache or downloaded from $SYSTOLIC_DATASETS_URL (digests checked as Keras's get_file does).
// load(name) picks one by the name the command's --dataset takes.
// For sequences: pad_sequences, timeseries_dataset_from_array and text_dataset_from_directory, as keras.utils has
// them; TextVectorization (systolic/text.h) turns texts into ids.
#pragma once

#include <systolic/error.h>
#include <systolic/npy.h>
#include <systolic/shape.h>
#include <systolic/tensor.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace systolic::datasets {

struct Split {
  Tensor x, y;
};
struct Dataset {
  Split train, test;
  std::vector<std::string> class_names;
};

// $SYSTOLIC_HOME/datasets, or ~/.systolic/datasets.
std::string cache_dir();

// Raised by load_data() when no copy of the data set is found and the download fails (no network, a mirror
// that does not answer, an HTTP error): the one failure a program may answer by using another data set, as
// the cifar10_tpu example falls back to Fashion-MNIST. A copy that is found but corrupt, or a download whose
// checksum does not match, is a plain Error: that needs a person, not a fallback.
class Unavailable : public Error {
 public:
  using Error::Error;
};

namespace cifar10 {
// x uint8 (50000, 32, 32, 3) channels_last, y uint8 (50000, 1); test 10000. With `directory`, reads the six
// .bin batch files from there and touches neither the cache nor the network.
Dataset load_data(const std::string& directory = "");
std::vector<std::string> class_names();  // airplane, automobile, ..., truck
// The download address and md5 in effect (environment or defaults).
std::string url();
std::string md5();
// One batch file: `records` records of 1 label + 3072 pixel bytes; errors name `display_name`.
Split read_batch(const std::string& path, std::int64_t records, const std::string& display_name = "");
}  // namespace cifar10

namespace fashion_mnist {
// Reads the four IDX gzip files from `directory`, or when it is empty from the first of
// $SYSTOLIC_HOME/datasets/fashion-mnist and /usr/share/datasets/fashion-mnist (Debian's
// dataset-fashion-mnist) that holds them, else downloads them into the cache. x uint8 (60000, 28, 28), y
// uint8 (60000,); test 10000.
Dataset load_data(const std::string& directory = "");
std::vector<std::string> class_names();
}  // namespace fashion_mnist

namespace mnist {
// x uint8 (60000, 28, 28), y uint8 (60000,); test 10000. `directory`: a folder holding the four IDX files.
Dataset load_data(const std::string& directory = "");
std::vector<std::string> class_names();  // "0" .. "9"
}  // namespace mnist

// Keras's image_dataset_from_directory (labels "inferred", label_mode "int"): one subfolder per class, class
// names sorted; images (.png .jpg .jpeg .bmp .gif) decoded to `channels` (3 rgb, 1 grayscale) and resized
// bilinearly to image_size (height, width); {0, 0} keeps the size of the first image found (Keras's default
// is 256x256). Samples come class by class, files in sorted order (fit shuffles). x uint8 (N, H, W, C), y
// uint8 (N,). Errors name the folder or the file at fault.
struct ImageFolderOptions {
  std::int64_t height = 0, width = 0;
  int channels = 3;
  std::int64_t limit = 0;  // > 0: stop after this many images (in the order above)
};
Split image_dataset_from_directory(const std::string& directory, const ImageFolderOptions& options,
                                   std::vector<std::string>* class_names = nullptr);

// A data set by name: "cifar10", "fashion_mnist", "mnist", or "dir:PATH", image folders: PATH/train and
// PATH/test with one subfolder per class each, or PATH with one subfolder per class, which is then both
// splits (image_dataset_from_directory). The images of both splits get a channel axis: x uint8 (N, H, W, C).
// "imdb[:WORDS[:LENGTH]]", "reuters[:WORDS[:LENGTH]]": imdb::load_data / reuters::load_data with num_words WORDS
// (default 20000 for IMDB, 10000 for Reuters), the sequences made LENGTH ids long (default 200) by pad_sequences;
// x float32 ids (N, LENGTH), y int32 classes.
// "npz:PATH": the arrays x_train, y_train, x_test and y_test of an .npz file (any numeric dtype, npy.h), x of
// rank >= 2: uint8 x stays uint8 ((N, H, W) gets a channel axis), any other becomes float32; integer labels of
// one column stay integers (int32) and name their classes "0" .. max, others (float targets, one-hot or
// multi-label columns) become float32 and name none. Errors name the array at fault: a missing one, sample
// counts that differ, NaN or infinite labels, negative class labels.
struct LoadOptions {
  std::int64_t limit = 0;  // > 0: the first `limit` samples of each split
  // The images at this shape (H, W, C), C 1 or 3: dir:PATH decodes them to C channels and resizes them (by
  // default: the first image's size, 3 channels); cifar10, fashion_mnist and mnist convert channels (grey
  // replicated to RGB, RGB to luma) and resize bilinearly (image::resize_batch), after `limit`.
  std::optional<Shape> image_shape;
};
Dataset load(const std::string& name, const LoadOptions& options = {});
// The names load() takes, for help texts: "cifar10, fashion_mnist, mnist, imdb[:WORDS[:LENGTH]], ...".
std::string names();
// The class names of a data set known by name ("cifar10", "fashion_mnist", "mnist"); empty for any other
// name (image folders name their classes when loaded).
std::vector<std::string> class_names(const std::string& name);

// Raised by load() when the name denotes no data set: an unknown name, dir: without a PATH, a PATH that is
// not a folder, or train/ and test/ folders with different classes. The message starts with the name, so a
// command can put the flag that gave it in front ("--dataset nosuch: unknown data set ...").
class InvalidName : public Error {
 public:
  using Error::Error;
};

// npz:PATH for a model of several inputs or outputs, as Keras's fit takes their arrays (a dict by name, or a list):
// per input of `inputs` (the model's input names, in order) the array x_train_<name>, else x_train_<i> (its
// position), else, for a model of one input, x_train; per output of `outputs` y_train_<name>, y_train_<i> or
// y_train; and the same with _test. Each x and y is converted as load() converts npz:PATH's (uint8 x stays uint8
// with a channel axis for (N, H, W), others float32; integer labels of one column int32, others float32), then cut
// to its first `limit` samples (> 0). Errors name the array at fault: a missing one (with what the file holds),
// sample counts that differ within a split, NaN or infinite labels, negative class labels.
struct ArraySplit {
  Arrays x, y;
};
struct ArrayDataset {
  ArraySplit train, test;
};
ArrayDataset load_arrays(const std::string& path, const std::vector<std::string>& inputs,
                         const std::vector<std::string>& outputs, std::int64_t limit = 0);

// What `systolic datasets` lists: each known data set, where its copy is (or would be cached), and whether a
// load works without the network.
struct DatasetInfo {
  std::string name, description, location, source;
  bool available = false;
};
std::vector<DatasetInfo> known();

// Reads an npy array (uint8 only, C order) from bytes; errors name `name`.
Tensor read_npy(const void* data, std::size_t size, const std::string& name);

// One IDX file (gzip or plain): checks magic, dtype (unsigned byte), rank and sizes; errors name the file.
Tensor read_idx(const std::string& path);

// ---- Sequences ------------------------------------------------------------------------------------------------

// Ragged integer sequences (word ids), as Keras's IMDB and Reuters loaders return them.
using Sequences = npy::Sequences;

// keras.utils.pad_sequences: int32 (N, maxlen), `value` where a sequence is shorter. maxlen 0: the longest
// sequence's length. padding "pre" puts the values at the end (the padding before), "post" at the start;
// truncating "pre" keeps a long sequence's last maxlen values, "post" its first. Errors name a bad option.
struct PadOptions {
  std::int64_t maxlen = 0;
  std::string padding = "pre", truncating = "pre";
  std::int32_t value = 0;
};
Tensor pad_sequences(const Sequences& sequences, const PadOptions& options = {});

// keras.utils.timeseries_dataset_from_array, as arrays: x (windows, sequence_length, data's other axes) of data's
// dtype, window k holding data[s], data[s + sampling_rate], ... for its start s = start_index + k *
// sequence_stride; y the targets[s - start_index] of each window (targets sliced from start_index, as Keras does)
// when targets is given, else empty. shuffle orders the windows by numpy.random.RandomState(seed).shuffle, as
// Keras does before batching (its further in-buffer shuffle of tf.data is not reproduced: fit shuffles anyway);
// no seed: one drawn from the global generator. Keras's checks, with its messages: sequence_length, strides and
// rates above 0 and below the data's length, start_index/end_index in range.
struct TimeseriesOptions {
  std::int64_t sequence_length = 0;
  std::int64_t sequence_stride = 1, sampling_rate = 1;
  std::optional<std::int64_t> start_index, end_index;
  bool shuffle = false;
  std::optional<std::uint32_t> seed;
};
Split timeseries_dataset_from_array(const Tensor& data, const std::optional<Tensor>& targets,
                                    const TimeseriesOptions& options);

// keras.utils.text_dataset_from_directory (labels "inferred"): one subfolder per class (class names sorted, or
// those of `class_names` in their order), each searched recursively for .txt files (folders and files sorted, as
// os.walk and Keras's sort give them). The texts are the files' bytes; max_length > 0 cuts each to its first
// max_length bytes (tf.strings.substr). shuffle (Keras's default) orders the files by
// numpy.random.RandomState(seed).shuffle as Keras does (no seed: one from the global generator);
// validation_split with subset "training" or "validation" takes Keras's split (the last int(split * N) files are
// the validation ones), and needs a seed when shuffling, as in Keras. Errors name the folder or file at fault.
struct TextFolderOptions {
  std::vector<std::string> class_names;
  std::int64_t max_length = 0;
  bool shuffle = true;
  std::optional<std::uint32_t> seed;
  double validation_split = 0;
  std::string subset;  // "", "training" or "validation"
  bool follow_links = false;
};
struct TextSplit {
  std::vector<std::string> texts;
  std::vector<std::int32_t> labels;
  std::vector<std::string> class_names, files;
};
TextSplit text_dataset_from_directory(const std::string& directory, const TextFolderOptions& options = {});

// numpy.random.RandomState(seed).permutation(n): the order Keras's loaders shuffle by (MT19937, numpy's legacy
// bounded integers), so that systolic's IMDB, Reuters and text folders come in Keras's order.
std::vector<std::int64_t> numpy_permutation(std::int64_t n, std::uint32_t seed);

struct SequenceSplit {
  Sequences x;
  std::vector<std::int32_t> y;
};
struct SequenceDataset {
  SequenceSplit train, test;
  std::vector<std::string> class_names;
};

// keras.datasets.imdb and keras.datasets.reuters: the same options, the same results (word ids offset by
// index_from, start_char in front, ids outside [skip_top, num_words) replaced by oov_char or dropped, sequences
// of maxlen or more ids dropped, Keras's seeded shuffle). `path`: an imdb.npz / reuters.npz to read instead of
// the cache's (which is downloaded when missing: sha256 checked, $SYSTOLIC_IMDB_SHA256 / $SYSTOLIC_REUTERS_SHA256
// replace Keras's digests for a mirror of other files). Errors name the file and what is wrong.
struct SequenceLoadOptions {
  std::string path;
  std::int64_t num_words = 0;  // 0: all
  std::int64_t skip_top = 0;
  std::int64_t maxlen = 0;  // 0: no limit
  std::uint32_t seed = 113;
  std::optional<std::int32_t> start_char = 1;
  std::optional<std::int32_t> oov_char = 2;
  std::int32_t index_from = 3;
  double test_split = 0.2;  // reuters only
};
namespace imdb {
// 25000 + 25000 movie reviews, y 0 (negative) or 1 (positive).
SequenceDataset load_data(const SequenceLoadOptions& options = {});
// imdb_word_index.json: word -> rank (1 = most frequent), before index_from. `path`: a file to read instead of
// the cache's (downloaded when missing, md5 checked; $SYSTOLIC_IMDB_WORD_INDEX_MD5 replaces the digest).
std::map<std::string, std::int32_t> get_word_index(const std::string& path = "");
}  // namespace imdb
namespace reuters {
// 11228 newswires, 46 topics, split by test_split after the shuffle.
SequenceDataset load_data(const SequenceLoadOptions& options = {});
std::map<std::string, std::int32_t> get_word_index(const std::string& path = "");
std::vector<std::string> get_label_names();  // cocoa, grain, veg-oil, ... (Keras's list)
}  // namespace reuters

}  // namespace systolic::datasets
