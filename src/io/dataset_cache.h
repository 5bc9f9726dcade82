// The data-set cache ($SYSTOLIC_HOME/datasets) shared by the loaders: environment lookups and the atomic
// install of a folder prepared in a temporary place.
#pragma once

#include <filesystem>
#include <string>

namespace systolic::datasets::detail {

// The environment variable's value, or `fallback` when it is unset or empty.
std::string env_or(const char* name, const std::string& fallback);
// Renames the prepared folder `from` to `to` (same file system: both under the cache). When another process
// installed `to` meanwhile, keeps theirs.
void install_folder(const std::filesystem::path& from, const std::filesystem::path& to);
// Keras's base address for Fashion-MNIST and mnist.npz, or $SYSTOLIC_DATASETS_URL; always ends in '/'.
std::string datasets_base_url();

// A file of Keras's data-set address, as Keras's get_file fetches it: cache/`fname` when it is there, else
// downloaded from datasets_base_url() + fname into a temporary file of the cache, its digest (`algorithm` "md5" or
// "sha256") checked against $`digest_variable` (null: no variable) or `digest`, then renamed into the cache.
// Unavailable when the download fails: "<what> is not in <cache> and <why>; " then `remedy`, or (empty) where to put
// the file by hand. Error on a digest mismatch (the file deleted).
std::filesystem::path keras_file(const std::string& fname, const std::string& algorithm,
                                 const std::string& digest, const char* digest_variable,
                                 const std::string& what, const std::string& remedy = "");

}  // namespace systolic::datasets::detail
