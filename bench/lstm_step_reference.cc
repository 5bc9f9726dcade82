// Hand-written streaming inference of bench/keras_sequence.py's lstm_step model, the yardstick of issue 28's
// latency goal ("batch-1 single-step LSTM(64) latency within 2x of hand-written streaming code"): one step of an
// LSTM(64) over one feature, then Dense(2) and softmax, batch 1, the state kept between calls, as RTNeural and
// audio plug-ins run it. Sizes are compile-time constants, the loops vectorise (built with -O3 -march=native
// -ffast-math, so expf and tanhf go through glibc's vector math), and nothing is allocated or dispatched per
// step. Weights are random (the time does not depend on them).
//
//   bench/lstm_step_reference [STEPS]
//
// Prints one JSON line: {"framework": "hand-written", "model": "lstm_step", "us_median", "us_min"} over 25 runs of
// STEPS steps each (default 20000), the microseconds per step.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr int kUnits = 64, kFeatures = 1, kGates = 4 * kUnits, kClasses = 2;

struct LstmStep {
  alignas(64) float kernel[kFeatures][kGates];
  alignas(64) float recurrent[kUnits][kGates];
  alignas(64) float bias[kGates];
  alignas(64) float dense[kUnits][kClasses];
  alignas(64) float dense_bias[kClasses];
  alignas(64) float h[kUnits] = {}, c[kUnits] = {};

  // One step: the gates (Keras's order i, f, c, o), the new state, the head's probabilities.
  void step(const float* x, float* out) {
    alignas(64) float z[kGates];
    for (int g = 0; g < kGates; ++g) z[g] = bias[g];
    for (int f = 0; f < kFeatures; ++f)
      for (int g = 0; g < kGates; ++g) z[g] += x[f] * kernel[f][g];
    for (int k = 0; k < kUnits; ++k)
      for (int g = 0; g < kGates; ++g) z[g] += h[k] * recurrent[k][g];
    for (int j = 0; j < kUnits; ++j) {
      const float i = 1.0f / (1.0f + std::exp(-z[j])), fg = 1.0f / (1.0f + std::exp(-z[kUnits + j]));
      const float cc = std::tanh(z[2 * kUnits + j]), o = 1.0f / (1.0f + std::exp(-z[3 * kUnits + j]));
      c[j] = fg * c[j] + i * cc;
      h[j] = o * std::tanh(c[j]);
    }
    float logits[kClasses];
    for (int k = 0; k < kClasses; ++k) logits[k] = dense_bias[k];
    for (int j = 0; j < kUnits; ++j)
      for (int k = 0; k < kClasses; ++k) logits[k] += h[j] * dense[j][k];
    const float m = std::max(logits[0], logits[1]);
    float s = 0.0f;
    for (int k = 0; k < kClasses; ++k) s += (out[k] = std::exp(logits[k] - m));
    for (int k = 0; k < kClasses; ++k) out[k] /= s;
  }
};

}  // namespace

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::stoi(argv[1]) : 20000;
  std::mt19937 gen(1);
  std::uniform_real_distribution<float> w(-0.2f, 0.2f), in(0.0f, 255.0f);
  LstmStep m;
  for (auto& row : m.kernel)
    for (float& v : row) v = w(gen);
  for (auto& row : m.recurrent)
    for (float& v : row) v = w(gen);
  for (float& v : m.bias) v = w(gen);
  for (auto& row : m.dense)
    for (float& v : row) v = w(gen);
  for (float& v : m.dense_bias) v = w(gen);
  std::vector<float> xs(1024);
  for (float& v : xs) v = in(gen);
  float out[kClasses], sum = 0.0f;
  std::vector<double> us;
  for (int run = 0; run < 25; ++run) {
    auto t0 = std::chrono::steady_clock::now();
    for (int s = 0; s < steps; ++s) {
      m.step(&xs[static_cast<std::size_t>(s) % xs.size()], out);
      sum += out[0];
    }
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
                 steps);
  }
  std::sort(us.begin(), us.end());
  std::printf(
      "{\"framework\": \"hand-written\", \"model\": \"lstm_step\", \"us_median\": %.3f, \"us_min\": %.3f, "
      "\"checksum\": %.3f}\n",
      us[us.size() / 2], us.front(), sum);
  return 0;
}
