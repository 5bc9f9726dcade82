// The XLA backend end to end on the CPU plugin (xla:cpu through PJRT; label cpu, skips visibly without the
// plugin, which scripts/setup fetches): fit's step traced into one XLA program, compiled once and run for every full
// batch, gives the CPU backend's weights and losses; the last, partial batch of an epoch runs op by op.
#include <gtest/gtest.h>
#include <systolic/systolic.h>

#include <cmath>
#include <cstdio>

#include "core/xla/trace.h"
#include "small_model.h"
#include "test_util.h"
#include "xla_test_util.h"

using namespace systolic;
using systolic::testing::xla_cpu;

namespace {

struct Data {
  Tensor x, y;
};

// n samples of small_model's input, with integer labels of its 4 classes.
Data small_data(std::int64_t n) {
  Data d{systolic::testing::random_tensor({n, 6, 6, 2}, 11), Tensor({n}, DType::int32)};
  auto* y = d.y.data<std::int32_t>();
  for (std::int64_t i = 0; i < n; ++i) y[i] = static_cast<std::int32_t>((i * 7 + 3) % 4);
  return d;
}

double largest_difference(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

}  // namespace

TEST(XlaTraining, SgdStepsOfASmallModelMatchTheCpu) {
  SYSTOLIC_REQUIRE_XLA();
  Data d = small_data(28);  // 3 full batches of 8 and a last one of 4, per epoch
  auto train = [&](Device device, History* history) {
    clear_session();
    Model cpu_model = systolic::testing::small_model(1);
    cpu_model.compile(optimizers::SGD(0.1, 0.9), "sparse_categorical_crossentropy", {"accuracy"});
    Model m = to_accelerator(cpu_model, distribute::OneDeviceStrategy(device));
    FitOptions o{.batch_size = 8, .epochs = 2, .verbose = 0, .shuffle = false};
    *history = m.fit(d.x, d.y, o);
    EXPECT_EQ(m.optimizer().iterations(), 8);
    if (device.is_xla()) EXPECT_EQ(m.step_mode(), "graph") << m.step_mode_reason();
    return m.get_weights();
  };
  History on_cpu, on_xla;
  auto before = xla::compile_stats();
  auto w_cpu = train(Device::cpu(), &on_cpu);
  auto w_xla = train(xla_cpu(), &on_xla);
  auto after = xla::compile_stats();
  std::printf("XLA programs compiled: %lld in %.2f s (%lld from the cache)\n",
              static_cast<long long>(after.compiles - before.compiles), after.seconds - before.seconds,
              static_cast<long long>(after.hits - before.hits));
  ASSERT_EQ(w_cpu.size(), w_xla.size());
  for (std::size_t i = 0; i < w_cpu.size(); ++i) {
    double worst = largest_difference(w_cpu[i].to_doubles(), w_xla[i].to(Device::cpu()).to_doubles());
    EXPECT_LT(worst, 1e-4) << "weight " << i;
  }
  for (const char* key : {"loss", "accuracy"}) {
    ASSERT_EQ(on_cpu.history.at(key).size(), 2u);
    for (int e = 0; e < 2; ++e)
      EXPECT_NEAR(on_cpu.history.at(key)[e], on_xla.history.at(key)[e], 1e-5) << key << " epoch " << e;
  }
}
