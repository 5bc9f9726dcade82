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

}  // namespace systolic::datasets::detail
