// A main() for the harnesses in builds without libFuzzer (gcc, CI): runs every file of the corpus folders
// given, then random byte-flip mutants of them until --seconds have passed, through LLVMFuzzerTestOneInput.
// A crash, a sanitizer report or an exception other than systolic::Error fails the run. No coverage
// guidance: this is the short CI run; scripts/fuzz runs the real libFuzzer harnesses.
//   fuzz_NAME_standalone [--seconds S | --runs N] CORPUS_DIR...
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

int main(int argc, char** argv) {
  double seconds = 5;
  std::int64_t max_runs = 0;  // > 0: stop after this many executions instead
  std::vector<std::vector<std::uint8_t>> seeds;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--seconds" && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
      continue;
    }
    if (a == "--runs" && i + 1 < argc) {
      max_runs = std::atoll(argv[++i]);
      continue;
    }
    for (const auto& e : std::filesystem::directory_iterator(a)) {
      if (!e.is_regular_file()) continue;
      std::ifstream f(e.path(), std::ios::binary);
      seeds.emplace_back(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    }
  }
  if (seeds.empty()) {
    std::fprintf(stderr, "usage: %s [--seconds S | --runs N] CORPUS_DIR... (no seed files found)\n", argv[0]);
    return 2;
  }
  for (const auto& s : seeds) LLVMFuzzerTestOneInput(s.data(), s.size());
  std::mt19937_64 rng(1);
  auto start = std::chrono::steady_clock::now();
  std::int64_t runs = static_cast<std::int64_t>(seeds.size());
  while (max_runs > 0
             ? runs < max_runs
             : std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < seconds) {
    auto input = seeds[rng() % seeds.size()];
    if (input.empty()) input.push_back(0);
    // 1 to 8 flips; half of them in the first or last 4 KiB, where headers and metadata usually are.
    for (int n = 1 + static_cast<int>(rng() % 8); n > 0; --n) {
      std::size_t window = std::min<std::size_t>(input.size(), 4096);
      std::size_t pos = rng() % 4 == 0   ? rng() % window
                        : rng() % 4 == 0 ? input.size() - 1 - rng() % window
                                         : rng() % input.size();
      input[pos] ^= static_cast<std::uint8_t>(1 + rng() % 255);
    }
    if (rng() % 16 == 0) input.resize(rng() % input.size());  // truncated files too
    auto t0 = std::chrono::steady_clock::now();
    LLVMFuzzerTestOneInput(input.data(), input.size());
    ++runs;
    double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (took > 2) {  // kept for a look: a slow input is a finding too (libFuzzer's -timeout)
      auto kept = std::filesystem::temp_directory_path() / ("systolic-fuzz-slow-" + std::to_string(runs));
      std::ofstream(kept, std::ios::binary)
          .write(reinterpret_cast<const char*>(input.data()), static_cast<std::streamsize>(input.size()));
      std::fprintf(stderr, "slow input (%.1f s): %s\n", took, kept.c_str());
    }
  }
  std::printf("%lld executions in %.1f s, no crash\n", static_cast<long long>(runs),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return 0;
}
