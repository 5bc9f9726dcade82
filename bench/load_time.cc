// CPU time of loading a Keras file: bench/load_time REPEATS MODEL_FILE (load_model, not compiled) or
// bench/load_time REPEATS WEIGHTS_FILE CONFIG.json (load_weights into the model built once from CONFIG.json).
// One load to warm the page cache, then REPEATS loads; prints one JSON line {"file", "call", "repeats",
// "cpu_ms", "user_ms", "sys_ms", "wall_ms"}, each per load. CPU time is user + system time of this process and
// of the children it waited for (the HDF5 reading child), from getrusage: on a shared machine it moves far less
// than the wall time, which is printed for a quiet one. Only the public API: bench/load_time.sh builds this same
// file against an older build's library to compare.
#include <sys/resource.h>
#include <systolic/saving.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>

namespace {
// Adds the user and system milliseconds of `who` (RUSAGE_SELF, RUSAGE_CHILDREN) so far.
void add_cpu_ms(int who, double* user, double* sys) {
  rusage r{};
  getrusage(who, &r);
  *user += double(r.ru_utime.tv_sec) * 1e3 + double(r.ru_utime.tv_usec) * 1e-3;
  *sys += double(r.ru_stime.tv_sec) * 1e3 + double(r.ru_stime.tv_usec) * 1e-3;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) {
    std::fprintf(stderr, "usage: %s REPEATS MODEL_FILE | %s REPEATS WEIGHTS_FILE CONFIG.json\n", argv[0],
                 argv[0]);
    return 2;
  }
  try {
    namespace sy = systolic;
    const int repeats = std::stoi(argv[1]);
    const std::string file = argv[2];
    const bool weights = argc == 4;
    std::optional<sy::Model> model;
    if (weights) model = sy::model_from_json_file(argv[3]);
    auto load = [&] {
      if (weights)
        model->load_weights(file);
      else
        sy::load_model(file, {.compile = false});
    };
    load();
    double u0 = 0, s0 = 0, u1 = 0, s1 = 0;
    add_cpu_ms(RUSAGE_SELF, &u0, &s0);
    add_cpu_ms(RUSAGE_CHILDREN, &u0, &s0);
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < repeats; ++i) load();
    double wall = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    add_cpu_ms(RUSAGE_SELF, &u1, &s1);
    add_cpu_ms(RUSAGE_CHILDREN, &u1, &s1);
    double user = (u1 - u0) / repeats, sys = (s1 - s0) / repeats;
    std::printf(
        "{\"file\": \"%s\", \"call\": \"%s\", \"repeats\": %d, \"cpu_ms\": %.2f, \"user_ms\": %.2f, "
        "\"sys_ms\": "
        "%.2f, \"wall_ms\": %.2f}\n",
        file.c_str(), weights ? "load_weights" : "load_model", repeats, user + sys, user, sys,
        wall / repeats);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "load_time: %s\n", e.what());
    return 1;
  }
  return 0;
}
