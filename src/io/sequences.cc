// keras.utils's sequence helpers (include/systolic/datasets.h): pad_sequences, timeseries_dataset_from_array,
// text_dataset_from_directory, and numpy's legacy RandomState shuffle that Keras's loaders order their samples by.
#include <fmt/format.h>
#include <systolic/datasets.h>
#include <systolic/random.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "io/files.h"
#include "io/numpy_random.h"

namespace systolic::datasets {

namespace fs = std::filesystem;

std::vector<std::int64_t> detail::NumpyRandomState::shuffled(std::int64_t n) {
  SYSTOLIC_CHECK(n >= 0, "numpy shuffle: n = {} is negative", n);
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) order[std::size_t(i)] = i;
  // `for i in reversed(range(1, n)): j = random_interval(i)`, random_interval drawing 32-bit words masked to the
  // smallest 2^k - 1 that covers i until one is <= i (numpy/random/src/distributions/distributions.c).
  for (std::int64_t i = n - 1; i >= 1; --i) {
    std::uint64_t max = std::uint64_t(i), mask = max;
    for (int s = 1; s <= 32; s *= 2) mask |= mask >> s;
    std::uint64_t j = 0;
    if (max <= 0xffffffffu) {
      do j = mt_() & mask;
      while (j > max);
    } else {
      do {
        const std::uint64_t hi = mt_();
        j = ((hi << 32) | mt_()) & mask;
      } while (j > max);
    }
    std::swap(order[std::size_t(i)], order[std::size_t(j)]);
  }
  return order;
}

std::vector<std::int64_t> numpy_permutation(std::int64_t n, std::uint32_t seed) {
  return detail::NumpyRandomState(seed).shuffled(n);
}

namespace {
// Keras's `seed if seed is not None else np.random.randint(1e6)`, drawn here from the global generator.
std::uint32_t seed_or_drawn(const std::optional<std::uint32_t>& seed) {
  return seed ? *seed : std::uint32_t(global_generator().next_u32() % 1000000);
}
}  // namespace

Tensor pad_sequences(const Sequences& sequences, const PadOptions& options) {
  SYSTOLIC_CHECK(options.padding == "pre" || options.padding == "post",
                 "pad_sequences: padding type \"{}\" not understood (\"pre\" or \"post\")", options.padding);
  SYSTOLIC_CHECK(options.truncating == "pre" || options.truncating == "post",
                 "pad_sequences: truncating type \"{}\" not understood (\"pre\" or \"post\")",
                 options.truncating);
  SYSTOLIC_CHECK(options.maxlen >= 0, "pad_sequences: maxlen = {} is negative", options.maxlen);
  std::int64_t maxlen = options.maxlen;
  if (maxlen == 0)
    for (const auto& s : sequences) maxlen = std::max(maxlen, std::int64_t(s.size()));
  const auto n = std::int64_t(sequences.size());
  Tensor out(Shape({n, maxlen}), DType::int32);
  std::int32_t* o = out.data<std::int32_t>();
  std::fill(o, o + n * maxlen, options.value);
  for (std::int64_t i = 0; i < n; ++i) {
    const auto& s = sequences[std::size_t(i)];
    const auto len = std::min<std::int64_t>(std::int64_t(s.size()), maxlen);
    const std::int32_t* from =
        options.truncating == "pre" ? s.data() + (std::int64_t(s.size()) - len) : s.data();
    std::int32_t* to = o + i * maxlen + (options.padding == "pre" ? maxlen - len : 0);
    std::copy(from, from + len, to);
  }
  return out;
}

Split timeseries_dataset_from_array(const Tensor& data, const std::optional<Tensor>& targets,
                                    const TimeseriesOptions& o) {
  SYSTOLIC_CHECK(data.rank() >= 1, "timeseries_dataset_from_array: data must have a time axis (rank >= 1)");
  const std::int64_t length = data.dim(0);
  const std::string what = "timeseries_dataset_from_array";
  SYSTOLIC_CHECK(o.sequence_length > 0, "{}: `sequence_length` must be higher than 0. Received: {}", what,
                 o.sequence_length);
  if (o.start_index) {
    SYSTOLIC_CHECK(*o.start_index >= 0, "{}: `start_index` must be 0 or greater. Received: start_index={}",
                   what, *o.start_index);
    SYSTOLIC_CHECK(
        *o.start_index < length,
        "{}: `start_index` must be lower than the length of the data. Received: start_index={}, for "
        "data of length {}",
        what, *o.start_index, length);
  }
  if (o.end_index) {
    SYSTOLIC_CHECK(
        !o.start_index || *o.end_index > *o.start_index,
        "{}: `end_index` must be higher than `start_index`. Received: start_index={}, and end_index={}", what,
        o.start_index.value_or(0), *o.end_index);
    SYSTOLIC_CHECK(
        *o.end_index < length,
        "{}: `end_index` must be lower than the length of the data. Received: end_index={}, for data "
        "of length {}",
        what, *o.end_index, length);
    SYSTOLIC_CHECK(*o.end_index > 0, "{}: `end_index` must be higher than 0. Received: end_index={}", what,
                   *o.end_index);
  }
  SYSTOLIC_CHECK(o.sampling_rate > 0, "{}: `sampling_rate` must be higher than 0. Received: sampling_rate={}",
                 what, o.sampling_rate);
  SYSTOLIC_CHECK(
      o.sampling_rate < length,
      "{}: `sampling_rate` must be lower than the length of the data. Received: sampling_rate={}, for "
      "data of length {}",
      what, o.sampling_rate, length);
  SYSTOLIC_CHECK(o.sequence_stride > 0,
                 "{}: `sequence_stride` must be higher than 0. Received: sequence_stride={}", what,
                 o.sequence_stride);
  SYSTOLIC_CHECK(
      o.sequence_stride < length,
      "{}: `sequence_stride` must be lower than the length of the data. Received: sequence_stride={}, "
      "for data of length {}",
      what, o.sequence_stride, length);
  if (targets) SYSTOLIC_CHECK(targets->rank() >= 1, "{}: targets must have a time axis (rank >= 1)", what);

  const std::int64_t start = o.start_index.value_or(0), end = o.end_index.value_or(length);
  std::int64_t num_seqs = end - start - (o.sequence_length - 1) * o.sampling_rate;
  if (targets) num_seqs = std::min(num_seqs, targets->dim(0));
  std::vector<std::int64_t> starts;
  for (std::int64_t s = 0; s < num_seqs; s += o.sequence_stride) starts.push_back(s);
  if (o.shuffle) {
    const std::uint32_t seed = seed_or_drawn(o.seed);
    std::vector<std::int64_t> order = numpy_permutation(std::int64_t(starts.size()), seed), shuffled;
    for (std::int64_t k : order) shuffled.push_back(starts[std::size_t(k)]);
    starts = std::move(shuffled);
  }

  Tensor src = data.to(Device::cpu());
  std::vector<std::int64_t> dims = {std::int64_t(starts.size()), o.sequence_length};
  const std::int64_t row = data.numel() / std::max<std::int64_t>(length, 1);
  for (int a = 1; a < data.rank(); ++a) dims.push_back(data.dim(a));
  Tensor x(Shape(dims), data.dtype());
  const std::size_t bytes = std::size_t(row) * dtype_size(data.dtype());
  const auto* in = static_cast<const char*>(src.raw_data());
  auto* out = static_cast<char*>(x.raw_data());
  for (std::size_t k = 0; k < starts.size(); ++k)
    for (std::int64_t t = 0; t < o.sequence_length; ++t) {
      const std::int64_t at = start + starts[k] + t * o.sampling_rate;
      SYSTOLIC_CHECK(at < end, "{}: internal: window step {} beyond end_index {}", what, at, end);
      std::memcpy(out + (std::int64_t(k) * o.sequence_length + t) * std::int64_t(bytes),
                  in + at * std::int64_t(bytes), bytes);
    }
  Split split{x, Tensor()};
  if (targets) {
    Tensor tsrc = targets->to(Device::cpu());
    std::vector<std::int64_t> tdims = {std::int64_t(starts.size())};
    for (int a = 1; a < tsrc.rank(); ++a) tdims.push_back(tsrc.dim(a));
    Tensor y(Shape(tdims), tsrc.dtype());
    const std::size_t tbytes =
        std::size_t(tsrc.numel() / std::max<std::int64_t>(tsrc.dim(0), 1)) * dtype_size(tsrc.dtype());
    for (std::size_t k = 0; k < starts.size(); ++k) {
      const std::int64_t at = start + starts[k];  // targets[start_index:][s]
      SYSTOLIC_CHECK(at < tsrc.dim(0), "{}: the window starting at {} has no target (targets hold {})", what,
                     at, tsrc.dim(0));
      std::memcpy(static_cast<char*>(y.raw_data()) + k * tbytes,
                  static_cast<const char*>(tsrc.raw_data()) + at * std::int64_t(tbytes), tbytes);
    }
    split.y = y;
  }
  return split;
}

namespace {

bool ends_with_txt(const std::string& name) {
  if (name.size() < 4) return false;
  std::string tail = name.substr(name.size() - 4);
  for (char& c : tail) c = char(std::tolower(static_cast<unsigned char>(c)));
  return tail == ".txt";
}

// The .txt files under `dir`, as Keras's iter_valid_files lists them: os.walk's folders sorted by path, each
// folder's files sorted.
std::vector<std::string> text_files(const fs::path& dir, bool follow_links) {
  std::vector<std::pair<std::string, std::vector<std::string>>> folders;  // (root, files)
  std::vector<fs::path> pending = {dir};
  while (!pending.empty()) {
    fs::path root = pending.back();
    pending.pop_back();
    std::vector<std::string> files;
    std::error_code ec;
    for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
      const fs::path p = it->path();
      const bool link = it->is_symlink(ec);
      if (it->is_directory(ec)) {
        if (!link || follow_links) pending.push_back(p);
      } else if (ends_with_txt(p.filename().string())) {
        files.push_back(p.filename().string());
      }
    }
    SYSTOLIC_CHECK(!ec, "text_dataset_from_directory: cannot list {}: {}", root.string(), ec.message());
    std::sort(files.begin(), files.end());
    folders.emplace_back(root.string(), std::move(files));
    SYSTOLIC_CHECK(folders.size() < 1000000,
                   "text_dataset_from_directory: more than a million folders under {}", dir.string());
  }
  std::sort(folders.begin(), folders.end());
  std::vector<std::string> out;
  for (auto& [root, files] : folders)
    for (auto& f : files) out.push_back((fs::path(root) / f).string());
  return out;
}

}  // namespace

TextSplit text_dataset_from_directory(const std::string& directory, const TextFolderOptions& o) {
  const std::string what = "text_dataset_from_directory(" + directory + ")";
  SYSTOLIC_CHECK(fs::is_directory(directory), "{}: not a folder", what);
  SYSTOLIC_CHECK(o.validation_split >= 0 && o.validation_split < 1,
                 "{}: `validation_split` must be between 0 and 1, received: {}", what, o.validation_split);
  SYSTOLIC_CHECK(o.subset.empty() || o.subset == "training" || o.subset == "validation",
                 "{}: `subset` must be \"training\" or \"validation\" (\"both\" is two calls), received: {}",
                 what, o.subset);
  SYSTOLIC_CHECK(
      o.subset.empty() == (o.validation_split == 0),
      "{}: `subset` and `validation_split` go together: received subset \"{}\" and validation_split {}", what,
      o.subset, o.validation_split);
  SYSTOLIC_CHECK(
      !(o.validation_split > 0 && o.shuffle && !o.seed),
      "{}: if using `validation_split` and shuffling the data, you must provide a `seed` argument, to "
      "make sure that there is no overlap between the training and validation subset.",
      what);
  SYSTOLIC_CHECK(o.max_length >= 0, "{}: max_length = {} is negative", what, o.max_length);

  std::vector<std::string> subdirs;
  std::error_code ec;
  for (fs::directory_iterator it(directory, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (it->is_directory(ec) && !name.starts_with(".")) subdirs.push_back(name);
  }
  SYSTOLIC_CHECK(!ec, "{}: cannot list the folder: {}", what, ec.message());
  std::sort(subdirs.begin(), subdirs.end());
  if (!o.class_names.empty()) {
    for (const auto& c : o.class_names)
      SYSTOLIC_CHECK(
          std::find(subdirs.begin(), subdirs.end(), c) != subdirs.end(),
          "{}: the class_names passed did not match the names of the subfolders: expected {} (or a "
          "subset of it), received {}",
          what, fmt::join(subdirs, ", "), fmt::join(o.class_names, ", "));
    subdirs = o.class_names;
  }
  SYSTOLIC_CHECK(!subdirs.empty(), "{}: no class subfolders (one folder of .txt files per class)", what);

  TextSplit all;
  all.class_names = subdirs;
  for (std::size_t c = 0; c < subdirs.size(); ++c)
    for (auto& f : text_files(fs::path(directory) / subdirs[c], o.follow_links)) {
      all.files.push_back(f);
      all.labels.push_back(std::int32_t(c));
    }
  SYSTOLIC_CHECK(!all.files.empty(), "{}: no .txt files in the class subfolders ({})", what,
                 fmt::join(subdirs, ", "));
  const auto n = std::int64_t(all.files.size());
  if (o.shuffle) {
    // Keras shuffles the paths and the labels with two RandomState(seed)s: one permutation for both.
    const std::uint32_t seed = seed_or_drawn(o.seed);
    std::vector<std::int64_t> order = numpy_permutation(n, seed);
    TextSplit s{.class_names = all.class_names};
    for (std::int64_t k : order) {
      s.files.push_back(all.files[std::size_t(k)]);
      s.labels.push_back(all.labels[std::size_t(k)]);
    }
    all = std::move(s);
  }
  if (!o.subset.empty()) {
    const auto val = std::int64_t(o.validation_split * double(n));
    const std::int64_t from = o.subset == "training" ? 0 : n - val, to = o.subset == "training" ? n - val : n;
    all.files = std::vector<std::string>(all.files.begin() + from, all.files.begin() + to);
    all.labels = std::vector<std::int32_t>(all.labels.begin() + from, all.labels.begin() + to);
  }
  for (const auto& f : all.files) {
    std::vector<char> bytes = io::read_file(f);
    std::size_t len = bytes.size();
    if (o.max_length > 0) len = std::min(len, std::size_t(o.max_length));
    all.texts.emplace_back(bytes.data(), len);
  }
  return all;
}

}  // namespace systolic::datasets
