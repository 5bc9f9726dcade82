// Inference speed of a Keras model file on the CPU: bench/predict_latency MODEL.h5 BATCH [REPEATS]. Loads the
// model (architecture and weights), predicts a batch of random pixels (0-255) once to warm up, then REPEATS times,
// and prints one JSON line: {"model", "batch", "repeats", "ms_median", "ms_min", "images_per_sec"} (images per
// second from the median). bench/applications_inference.sh runs it beside Keras and PyTorch.
#include <systolic/systolic.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL.h5 BATCH [REPEATS]\n", argv[0]);
    return 2;
  }
  try {
    namespace sy = systolic;
    const std::string path = argv[1];
    const std::int64_t batch = std::stoll(argv[2]);
    const int repeats = argc > 3 ? std::stoi(argv[3]) : 10;
    sy::Model model = sy::load_model(path, {.compile = false});
    sy::Shape shape = model.inputs().at(0).shape();
    std::vector<std::int64_t> dims{batch};
    for (int i = 0; i < shape.rank(); ++i) dims.push_back(shape[i]);
    sy::Tensor x{sy::Shape(dims)};
    sy::Generator g(1);
    float* p = x.data<float>();
    for (std::int64_t i = 0; i < x.numel(); ++i) p[i] = float(g.uniform() * 255.0);
    model.predict(x, {.batch_size = batch});
    std::vector<double> ms;
    for (int r = 0; r < repeats; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      model.predict(x, {.batch_size = batch});
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    double median = ms.size() % 2 ? ms[ms.size() / 2] : (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]) / 2;
    std::printf(
        "{\"framework\": \"systolic\", \"model\": \"%s\", \"batch\": %lld, \"repeats\": %d, \"ms_median\": "
        "%.4f, \"ms_min\": %.4f, \"images_per_sec\": %.1f}\n",
        path.c_str(), static_cast<long long>(batch), repeats, median, ms.front(),
        double(batch) * 1000.0 / median);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "predict_latency: %s\n", e.what());
    return 1;
  }
}
