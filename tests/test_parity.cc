// PyTorch parity for the seed CNN (fixture written by tests/reference/seed_cnn_parity.py with Debian's PyTorch):
// the same weights and batch (from the formulas in that script), dropout off, BN in training mode. Checks the
// loss, every trainable weight's gradient, the losses of 10 Keras-Adam steps, the BN moving statistics, and the
// inference-mode loss afterwards.
#include <systolic/systolic.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "test_util.h"

using namespace systolic;
using systolic::testing::relative_l2_error;

namespace {

double formula_u(std::uint64_t i, std::uint64_t k) {
  std::uint64_t h = (i * 2654435761ull + k * 40503ull) % (1ull << 32);
  return double(h) / double(1ull << 32);
}

// Sets every weight (trainable or not) from the fixture's formulas; returns their sums for a sanity check.
std::vector<double> set_fixture_weights(Model& model) {
  std::vector<double> sums;
  std::uint64_t k = 0;
  for (auto& layer : model.layers())
    for (auto& w : layer->weights()) {
      Tensor host(w.value.shape(), DType::float32);
      float* p = host.data<float>();
      const Shape& s = w.value.shape();
      double fan_in = 0, fan_out = 0;
      if (s.rank() == 4) fan_in = double(s[0] * s[1] * s[2]), fan_out = double(s[0] * s[1] * s[3]);
      if (s.rank() == 2) fan_in = double(s[0]), fan_out = double(s[1]);
      double sum = 0;
      for (std::int64_t i = 0; i < host.numel(); ++i) {
        double v = 2 * formula_u(std::uint64_t(i), k + 1) - 1;
        if (w.name == "kernel")
          v *= std::sqrt(6.0 / (fan_in + fan_out));
        else if (w.name == "bias" || w.name == "beta")
          v *= 0.1;
        else if (w.name == "gamma")
          v = 1 + 0.1 * v;
        else if (w.name == "moving_mean")
          v = 0;
        else if (w.name == "moving_variance")
          v = 1;
        p[i] = float(v);
        sum += double(p[i]);
      }
      w.value.copy_from(host.to(w.value.dtype()));
      sums.push_back(sum);
      ++k;
    }
  return sums;
}

}  // namespace

TEST(PyTorchParity, SeedCnnLossGradientsAdamAndBatchNorm) {
  std::string dir = systolic::testing::source_dir() + "/tests/fixtures/seed_cnn_parity";
  std::ifstream mf(dir + "/manifest.json");
  ASSERT_TRUE(mf) << "missing fixture " << dir;
  auto m = nlohmann::json::parse(mf);

  clear_session();
  Model model = models::seed_cnn({32, 32, 3}, 10, {.dropout = false});
  model.compile(optimizers::Adam(0.001, 0.9, 0.999, 1e-7), "sparse_categorical_crossentropy");
  auto sums = set_fixture_weights(model);
  ASSERT_EQ(sums.size(), m["weight_sums"].size());
  for (std::size_t i = 0; i < sums.size(); ++i)
    EXPECT_NEAR(sums[i], m["weight_sums"][i]["sum"].get<double>(), 1e-6 * std::max(1.0, std::abs(sums[i])))
        << m["weight_sums"][i]["name"];

  Tensor x({8, 32, 32, 3}, DType::float32);
  double input_sum = 0;
  for (std::int64_t i = 0; i < x.numel(); ++i)
    input_sum += x.data<float>()[i] = float(std::floor(256 * formula_u(i, 1001)));
  EXPECT_EQ(input_sum, m["input_sum"].get<double>());
  std::vector<std::int32_t> labels;
  for (auto& l : m["labels"]) labels.push_back(l.get<std::int32_t>());
  Tensor y = Tensor::from_vector(labels, {8});

  // Step 1: loss and gradients at the initial weights (the update does not touch the gradient buffer).
  std::vector<double> losses{model.train_on_batch(x, y)[0]};
  EXPECT_NEAR(losses[0], m["loss"].get<double>(), 1e-4 * m["loss"].get<double>());

  std::ifstream gf(dir + "/grads.bin", std::ios::binary);
  std::vector<float> ref(static_cast<std::size_t>(model.gradients().numel()));
  gf.read(reinterpret_cast<char*>(ref.data()), static_cast<std::streamsize>(ref.size() * 4));
  ASSERT_EQ(gf.gcount(), static_cast<std::streamsize>(ref.size() * 4)) << "grads.bin is not the model's size";
  auto ours = model.gradients().to_doubles();
  double worst = 0;
  for (auto& g : m["grads"]) {
    auto off = g["offset"].get<std::size_t>(), count = g["count"].get<std::size_t>();
    std::vector<double> a(ours.begin() + off, ours.begin() + off + count),
        b(ref.begin() + off, ref.begin() + off + count);
    double err = relative_l2_error(a, b);
    worst = std::max(worst, err);
    EXPECT_LE(err, 1e-4) << g["name"].get<std::string>() << " gradient";
  }
  RecordProperty("worst_gradient_relative_error", std::to_string(worst));
  std::printf("worst per-tensor relative L2 gradient error: %.3g\n", worst);

  // Steps 2..10. Adam turns float32 rounding noise in tiny gradients into full-size steps, so the trajectory
  // drifts (the fixture's own float32 and float64 runs differ by 2.5e-3); the exact check of the trajectory is
  // the float64 test below. Here: within 0.01 absolute.
  for (int t = 1; t < 10; ++t) losses.push_back(model.train_on_batch(x, y)[0]);
  for (int t = 0; t < 10; ++t)
    EXPECT_NEAR(losses[t], m["adam_losses"][t].get<double>(), 1e-2) << "Adam step " << t + 1;
  EXPECT_LT(losses[9], losses[0] / 10);

  // BN moving statistics after 10 training forwards.
  for (auto& [name, stats] : m["moving"].items()) {
    auto& w = model.get_layer(name)->weights();
    auto mean = w[w.size() - 2].value.to_doubles(), var = w[w.size() - 1].value.to_doubles();
    std::vector<double> want_mean = stats["moving_mean"], want_var = stats["moving_variance"];
    // The first sees only the input (untouched by Adam): float32 variance of raw pixels, good to ~2e-5.
    double tol = name == "batch_normalization" ? 1e-4 : 1e-2;
    EXPECT_LE(relative_l2_error(mean, want_mean), tol) << name << " moving_mean";
    EXPECT_LE(relative_l2_error(var, want_var), tol) << name << " moving_variance";
  }

  // Inference mode with the moving statistics.
  double eval = model.evaluate(x, y, {.batch_size = 8, .verbose = 0})[0];
  EXPECT_NEAR(eval, m["final_loss_eval"].get<double>(), 2e-2 * m["final_loss_eval"].get<double>());
}

// The same run in float64 (CPU reference loops) against PyTorch's float64 run: no rounding noise to amplify,
// so the 10-step Adam trajectory and the inference loss must agree tightly.
TEST(PyTorchParity, SeedCnnFloat64AdamTrajectory) {
  std::ifstream mf(systolic::testing::source_dir() + "/tests/fixtures/seed_cnn_parity/manifest.json");
  ASSERT_TRUE(mf);
  auto m = nlohmann::json::parse(mf)["float64_reference"];
  set_floatx(DType::float64);
  clear_session();
  Model model = models::seed_cnn({32, 32, 3}, 10, {.dropout = false});
  set_floatx(DType::float32);
  model.compile(optimizers::Adam(0.001, 0.9, 0.999, 1e-7), "sparse_categorical_crossentropy");
  set_fixture_weights(model);
  Tensor x({8, 32, 32, 3}, DType::float32);
  for (std::int64_t i = 0; i < x.numel(); ++i)
    x.data<float>()[i] = float(std::floor(256 * formula_u(i, 1001)));
  Tensor y = Tensor::from_vector<std::int32_t>({0, 3, 6, 9, 2, 5, 8, 1}, {8});
  for (int t = 0; t < 10; ++t) {
    double want = m["adam_losses"][t].get<double>();
    EXPECT_NEAR(model.train_on_batch(x, y)[0], want, 1e-6 * want) << "Adam step " << t + 1;
  }
  double want = m["final_loss_eval"].get<double>();
  EXPECT_NEAR(model.evaluate(x, y, {.batch_size = 8, .verbose = 0})[0], want, 1e-6 * want);
}
