// Input-pipeline throughput alone (no training): CIFAR-10-shaped uint8 data (50000, 32, 32, 3), batches of 128
// converted to float32, with and without augmentation, for a number of worker threads. One JSON line per setting.
// Compare with `systolic benchmark`'s train_images_per_sec (bench/RESULTS.md).
#include <systolic/systolic.h>

#include <chrono>
#include <cstdio>
#include <numeric>

namespace sy = systolic;

int main(int argc, char** argv) {
  std::int64_t n = argc > 1 ? std::atoll(argv[1]) : 50000;
  sy::Tensor x({n, 32, 32, 3}, sy::DType::uint8), y({n, 1}, sy::DType::uint8);
  sy::Generator g(1);
  for (std::int64_t i = 0; i < x.numel(); ++i) x.data<std::uint8_t>()[i] = std::uint8_t(g.next_u32());
  for (std::int64_t i = 0; i < n; ++i) y.data<std::uint8_t>()[i] = std::uint8_t(i % 10);
  struct Setting {
    const char* name;
    sy::Augmentation a;
    int workers;
  };
  sy::Augmentation aug{.width_shift_range = 0.1, .height_shift_range = 0.1, .horizontal_flip = true};
  for (Setting s : {Setting{"convert", {}, 1}, Setting{"convert", {}, 2}, Setting{"shift+flip", aug, 1},
                    Setting{"shift+flip", aug, 2}}) {
    auto order = sy::Generator(2).permutation(n);
    auto t0 = std::chrono::steady_clock::now();
    sy::BatchPipeline p(x, y, order,
                        {.batch_size = 128, .augmentation = s.a, .seed = 3, .workers = s.workers});
    double checksum = 0;
    for (sy::Tensor xb, yb; p.next(xb, yb);) checksum += xb.data<float>()[0];
    double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf(
        "{\"pipeline\": \"%s\", \"workers\": %d, \"batch_size\": 128, \"images\": %lld, \"images_per_sec\": "
        "%.0f, "
        "\"checksum\": %.0f}\n",
        s.name, s.workers, static_cast<long long>(n), double(n) / sec, checksum);
  }
  return 0;
}
